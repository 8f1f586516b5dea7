// The RocksDB versions whose internals FlintKV has been checked against.
//
// FlintKV uses RocksDB's public plugin API, except for a few internals that
// the API exposes without describing (each in its own file, which
// static_asserts FLINTKV_ROCKSDB_CHECKED with what to re-check):
//   memtable/rocksdb/lookup_key_layout.h  rocksdb::LookupKey's layout
//   memtable/rocksdb/memtable_comparator_layout.h
//                                         MemTable::KeyComparator's layout
//   recovery/rocksdb_entry_checksum.h     the per-key memtable checksum
//   rocksdb_common/memtable_entry.h       the memtable entry value types
// A RocksDB outside this list fails to compile (tests/CMakeLists.txt
// checks that with a fake version.h) instead of misreading memory; to add
// one, re-check each file against its sources and extend the list.
#pragma once

#include "rocksdb/version.h"

#define FLINTKV_ROCKSDB_CHECKED                  \
  ((ROCKSDB_MAJOR == 7 && ROCKSDB_MINOR == 8) || \
   (ROCKSDB_MAJOR == 9 && (ROCKSDB_MINOR == 10 || ROCKSDB_MINOR == 11)))
