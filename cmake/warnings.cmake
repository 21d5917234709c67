# Strict warnings for our own targets (wd_apply_warnings), sanitizers for all.
set(WD_WARNINGS
  -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Wshadow
  -Wconversion -Wno-sign-conversion -Wpointer-arith -Wformat=2
  -Wundef -Wvla -Wcast-qual)

function(wd_apply_warnings target)
  target_compile_options(${target} PRIVATE ${WD_WARNINGS})
  if(WD_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(WD_TSAN AND (WD_ASAN OR WD_UBSAN))
  message(FATAL_ERROR "WD_TSAN cannot be combined with WD_ASAN/WD_UBSAN")
endif()
set(WD_SAN_FLAGS "")
if(WD_ASAN)
  list(APPEND WD_SAN_FLAGS -fsanitize=address)
endif()
if(WD_UBSAN)
  list(APPEND WD_SAN_FLAGS -fsanitize=undefined -fno-sanitize-recover=undefined)
endif()
if(WD_TSAN)
  list(APPEND WD_SAN_FLAGS -fsanitize=thread)
endif()
if(WD_SAN_FLAGS)
  add_compile_options(${WD_SAN_FLAGS} -fno-omit-frame-pointer)
  add_link_options(${WD_SAN_FLAGS})
endif()
