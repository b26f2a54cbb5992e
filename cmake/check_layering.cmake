# Fails when a source file under DIR includes a header of a folder it must not depend on (FORBIDDEN:
# a regular expression of include paths). Run by ctest (layering.*): src/lower/ is target-neutral
# (cpu -> lower -> ir), so it includes no backend header and nothing above the IR.
file(GLOB_RECURSE files ${DIR}/*.h ${DIR}/*.cpp)
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^#include \"(${FORBIDDEN})")
  if(lines)
    message(SEND_ERROR "${f}: ${lines}")
  endif()
endforeach()
