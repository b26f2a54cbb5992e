# Install rules: liblazuli.so and liblazuli_jit.so side by side in the library directory (the
# runtime dlopens the code generator from the directory liblazuli.so was loaded from), the public
# headers, the CMake package `lazuli` with its target lazuli::lazuli, and lazuli.pc.
#
# What a consumer gets: the include directory, C++20, and Threads::Threads (linked publicly: the
# runtime runs programs on its own threads). xxhash, oneDNN, OpenMP and LLVM are private to the
# shared libraries and never appear on a consumer's compile or link line.
option(LAZULI_INSTALL "Generate the install rules (also when used as a subproject)" ON)
if(NOT LAZULI_INSTALL)
  return()
endif()
include(CMakePackageConfigHelpers)

set(LAZULI_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lazuli)
set_target_properties(lazuli PROPERTIES EXPORT_NAME lazuli)
install(TARGETS lazuli EXPORT lazuliTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lazuli)
# Not exported: nothing links it, liblazuli.so loads it at the first kernel compile.
install(TARGETS lazuli_jit LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lazuli)
if(TARGET lazuli_mpi)  # the MPI engine, beside liblazuli.so (dist/process_group.cpp finds it there)
  install(TARGETS lazuli_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lazuli)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/lazuli DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT lazuli FILES_MATCHING PATTERN "*.h" PATTERN "*.def")

install(EXPORT lazuliTargets NAMESPACE lazuli:: DESTINATION ${LAZULI_CMAKE_DIR} COMPONENT lazuli)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lazuliConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/lazuliConfig.cmake
                              INSTALL_DESTINATION ${LAZULI_CMAKE_DIR})
# 0.x: a minor release may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lazuliConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lazuliConfig.cmake ${PROJECT_BINARY_DIR}/lazuliConfigVersion.cmake
        DESTINATION ${LAZULI_CMAKE_DIR} COMPONENT lazuli)

# lazuli.pc finds its prefix from its own location (${pcfiledir}), so an install moved or made
# with `cmake --install build --prefix DIR` stays correct.
file(RELATIVE_PATH LAZULI_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" LAZULI_PC_TO_PREFIX "${LAZULI_PC_TO_PREFIX}")
foreach(dir INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(LAZULI_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(LAZULI_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/lazuli.pc.in ${PROJECT_BINARY_DIR}/lazuli.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/lazuli.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT lazuli)
