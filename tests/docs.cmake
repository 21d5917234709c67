# README.md and docs/*.md: every relative link names a file (and heading)
# that exists (scripts/check-doc-links.py; a second, standard library only).
find_program(WD_PYTHON3 python3)
if(WD_PYTHON3)
  add_test(NAME docs_links COMMAND ${WD_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/check-doc-links.py
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_links PROPERTIES LABELS "unit" TIMEOUT 60)
endif()
