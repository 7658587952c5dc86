# The manuals in docs/ are generated from the tables; fails when the committed copy is stale.
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${GENERATED} ${COMMITTED} RESULT_VARIABLE different)
if(different)
  message(FATAL_ERROR "${COMMITTED} is out of date with its table; refresh it: cp ${GENERATED} ${COMMITTED}")
endif()
