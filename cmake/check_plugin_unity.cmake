# The RocksDB in-tree plugin compiles one translation unit,
# memtable/rocksdb/plugin/flintkv_plugin.cc, that #includes the sources of
# the libraries it needs. Checks that it includes exactly the CMake sources
# of those libraries, less the ones the memtable never reaches (LEAVE_OUT),
# so a source added to a CMake list cannot be forgotten there.
#   cmake -DUNITY=<file> -DSOURCES=<a,b> -DLEAVE_OUT=<c,d> \
#         -P check_plugin_unity.cmake
# SOURCES and LEAVE_OUT: comma-separated paths relative to the source
# root, as the unity file's #include lines name them.
file(STRINGS "${UNITY}" _lines REGEX "^#include \"[^\"]+\\.cc\"")
set(_included "")
foreach(_l IN LISTS _lines)
  string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" _f "${_l}")
  list(APPEND _included "${_f}")
endforeach()
string(REPLACE "," ";" _expected "${SOURCES}")
string(REPLACE "," ";" _leave_out "${LEAVE_OUT}")
if(_leave_out)
  list(REMOVE_ITEM _expected ${_leave_out})
endif()
set(_missing ${_expected})
if(_included)
  list(REMOVE_ITEM _missing ${_included})
endif()
set(_extra ${_included})
if(_expected)
  list(REMOVE_ITEM _extra ${_expected})
endif()
if(_missing OR _extra)
  message(FATAL_ERROR "${UNITY} does not match the CMake source lists: "
                      "missing [${_missing}], not in them [${_extra}]. "
                      "Add or remove the #include lines (or, for a source "
                      "the memtable never reaches, extend the leave-out "
                      "list in tests/CMakeLists.txt).")
endif()
list(LENGTH _included _n)
message(STATUS "${UNITY}: the ${_n} sources of the CMake lists")
