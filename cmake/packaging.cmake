# Installation layout and the Debian package (CPack DEB).
#
#   bin/whisperd
#   lib/systemd/system/whisperd.service, whisperd.socket
#   share/man/man8/whisperd.8             generated from daemon/config.c's table
#   share/doc/whisperd/whisperd.conf.example
#   <sysconfdir>/whisperd/whisperd.conf   /etc when the prefix is /usr
#
# The prefix defaults to /usr, not /usr/local: the daemon reads
# /etc/whisperd/whisperd.conf by default and the unit names the binary's
# path, so the package and `cmake --install` agree. Stage an install with
# DESTDIR (`DESTDIR=/tmp/stage cmake --install build`); --prefix at install
# time does not move the unit's ExecStart or the /etc file.
# scripts/check-package.sh builds the .deb and tests it.
include(GNUInstallDirs)

# --- the man page, from the same table as --help ---------------------------------
# whisperd-man is a build tool, not installed. The date honours
# SOURCE_DATE_EPOCH so that a rebuild makes the same page.
add_executable(whisperd-man ${PROJECT_SOURCE_DIR}/daemon/whisperd_man.c)
target_link_libraries(whisperd-man PRIVATE wd_daemon_lib)
wd_apply_warnings(whisperd-man)
string(TIMESTAMP WD_MAN_DATE "%Y-%m-%d" UTC)
set(WD_MAN_PAGE ${PROJECT_BINARY_DIR}/whisperd.8)
add_custom_command(OUTPUT ${WD_MAN_PAGE}
  COMMAND whisperd-man ${WD_MAN_PAGE} ${PROJECT_VERSION} ${WD_MAN_DATE}
  DEPENDS whisperd-man
  COMMENT "Generating whisperd(8) from the configuration table")
add_custom_target(whisperd_man ALL DEPENDS ${WD_MAN_PAGE})

# --- unit files: paths follow the install prefix ---------------------------------
# systemd/*.service names /usr/bin and /etc; the installed copies name where
# this build installs (the same for the default /usr prefix).
set(WD_CONF_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/whisperd)
file(READ ${PROJECT_SOURCE_DIR}/systemd/whisperd.service WD_UNIT)
string(REPLACE "/usr/bin/whisperd" "${CMAKE_INSTALL_FULL_BINDIR}/whisperd" WD_UNIT "${WD_UNIT}")
string(REPLACE "/etc/whisperd/whisperd.conf" "${WD_CONF_DIR}/whisperd.conf" WD_UNIT "${WD_UNIT}")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/systemd/whisperd.service CONTENT "${WD_UNIT}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/systemd/whisperd.service)

install(TARGETS whisperd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_BINARY_DIR}/systemd/whisperd.service
              ${PROJECT_SOURCE_DIR}/systemd/whisperd.socket
        DESTINATION lib/systemd/system)
install(FILES ${WD_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/systemd/whisperd.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME whisperd.conf.example)
# Absolute (/etc for the /usr prefix, GNUInstallDirs' rule), so DESTDIR
# stages it and the package carries it as /etc/whisperd/whisperd.conf.
install(FILES ${PROJECT_SOURCE_DIR}/systemd/whisperd.conf DESTINATION ${WD_CONF_DIR})

# --- the .deb ------------------------------------------------------------------
# Runtime library dependencies come from dpkg-shlibdeps (Debian's own
# shlibs files), so they follow whatever the build linked. mesa-vulkan-drivers
# is only recommended: a GPU driver's ICD or the CPU engine also works.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME whisperd)
set(CPACK_PACKAGE_VENDOR "whisperd")
set(CPACK_PACKAGE_CONTACT "whisperd maintainers <whisperd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Whisper speech-to-text daemon with an OpenAI-compatible HTTP API")
set(CPACK_PACKAGE_DESCRIPTION
  "whisperd transcribes and translates speech with OpenAI's Whisper models,
on a Vulkan GPU or the CPU, behind /v1/audio/transcriptions. It ships
systemd units (Type=notify, socket activation) and whisperd(8).
Models are not included: put one at /var/lib/whisperd/models and point
/etc/whisperd/whisperd.conf at it.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION sound)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "mesa-vulkan-drivers")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# conffiles keeps local edits of the config over upgrades; postinst only
# reloads systemd (the unit is not enabled: it needs a model first).
configure_file(${PROJECT_SOURCE_DIR}/cmake/deb/conffiles.in
  ${PROJECT_BINARY_DIR}/deb/conffiles @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/deb/postinst
  ${PROJECT_BINARY_DIR}/deb/postinst COPYONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_BINARY_DIR}/deb/conffiles ${PROJECT_BINARY_DIR}/deb/postinst)
include(CPack)
