// FLINTKV_EXPORT marks FlintKV's public API (the declarations in
// include/flintkv/). FlintKV's libraries are compiled with hidden
// visibility (CMakeLists.txt), so libflintkv_rocksdb.so exports these
// declarations, the ones its objects define, and nothing else: its
// internals cannot clash with a host's symbols or be bound to by
// accident. The attribute is the same whether FlintKV is being built or
// used, and harmless in the static libraries and in a RocksDB built with
// FlintKV inside (ROCKSDB_PLUGINS=flintkv).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FLINTKV_EXPORT __attribute__((visibility("default")))
#else
#define FLINTKV_EXPORT
#endif
