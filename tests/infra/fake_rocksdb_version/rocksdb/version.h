// A RocksDB version FlintKV has not been checked against, for the
// rocksdb_version_gate tests (tests/CMakeLists.txt): the files that rely on
// RocksDB internals must refuse to compile with it.
#pragma once
#define ROCKSDB_MAJOR 9
#define ROCKSDB_MINOR 99
#define ROCKSDB_PATCH 0
#include "rocksdb/rocksdb_namespace.h"
