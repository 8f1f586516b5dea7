// FlintKV compiled into librocksdb itself (ROCKSDB_PLUGINS=flintkv, see
// db_bench_patches/README.md). RocksDB's plugin build only compiles sources
// under plugin/flintkv/, so this one translation unit pulls in the adapter,
// the durable skiplist and the pool from the FlintKV tree (found through
// flintkv_CXXFLAGS / flintkv_INCLUDE_PATHS = the FlintKV source root).
// Registration: RocksDB calls flintkv_register (flintkv_FUNC) for its
// builtin plugin library; FLINTKV_NO_STATIC_REGISTRAR drops the load-time
// registration that the LD_PRELOAD build uses.
#include "memtable/free_extents.cc"
#include "memtable/index_alloc.cc"
#include "memtable/node_arena.cc"
#include "memtable/rocksdb/db_binding.cc"
#include "memtable/rocksdb/db_location.cc"
#include "memtable/rocksdb/flintkv_factory.cc"
#include "memtable/rocksdb/flintkv_rep.cc"
#include "memtable/rocksdb/iterator_cache.cc"
#include "memtable/rocksdb/option_checks.cc"
#include "memtable/rocksdb/pool_session.cc"
#include "memtable/rocksdb/recovery_port.cc"
#include "memtable/rocksdb/wal_coverage.cc"
#include "memtable/thread_id.cc"
#include "pmem/persist.cc"
#include "pmem/pool.cc"
#include "pmem/status.cc"
