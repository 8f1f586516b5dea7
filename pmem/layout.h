// On-PMEM format of a FlintKV pool. Treat as a file format: any change bumps
// kFormatVersion and docs/nvm_layout.md.
//
// The pool is a libpmemobj pool (layout kLayoutName). Inside it:
//  - one PoolRoot (the pmemobj root object) identifies the pool;
//  - one ListRoot object (type kTypeList) per durable skiplist: a standalone
//    store or one RocksDB memtable;
//  - Chunk objects (type kTypeChunk), each owned by one list, from which
//    writer threads bump-allocate NvmNodes.
// Every persistent pointer is a byte offset from the pool base (0 = null), so
// a pool may map at a different address next time.
//
// Invariants: every id cited in code (P1-P17, R1, G1-G4, V1, W1-W3) is
// defined, with the code that protects it and the test or mutant that
// checks it, in docs/invariants.md. Those of the format:
//  - P8 a pool object (list, chunk, root) is enumerable only once fully
//    initialised: built in a libpmemobj constructor and published
//    atomically, or (root) completed by persisting its magic last.
//  - P9 list ids are never reused: next_list_id is durable before a list
//    with the old value exists.
//  - P10 (RocksDB wrapper) the watermark W of published sequence numbers is
//    durable before Write returns; recovery replays only entries <= W, and
//    the wrapper's reads return only entries <= W.
//  - P11 (RocksDB recovery) the sequence range a recovery gives its copies
//    of a list is durable before the first copy is written, so a later
//    recovery recognises copies that reached SST (flushed or ingested) and
//    never replays twice.
//  - P12 (version GC, standalone store) a node's bytes are reused only
//    after the pointer that unlinked it is durable (flush + fence before
//    the node is retired): no durable pointer reachable from the head ever
//    leads to reused bytes. The unlink is one 8-byte store, so a crash
//    shows the list before or after it, both valid.
//  - P13 (version GC) the GC unlinks only a key's versions older than the
//    newest one at or below its horizon (<= the durable version), and that
//    one only if it is a tombstone: every acknowledged latest value stays
//    reachable; no node is linked after an unlinked one (marked pointers).
//  - P14 free space is never persisted: recovery derives it as the bytes of
//    the list's chunks that no reachable node occupies, so no crash leaves
//    free-space metadata that disagrees with the list.
//  Details: memtable/version_gc.h, docs/gc.md.
//  - P15 (group commit) one fence per combining pass covers every version
//    and predecessor pointer the pass wrote; visible_version and the
//    waiters' release come after it (memtable/durable_skiplist.h).
//  - P16 (weak durability) before the durable cut moves past a weak write,
//    the thread moving it re-flushes the write's words and fences.
//  - P17 ListRoot::durable_cut != 0: recovery drops every node whose
//    version >= durable_cut (a prefix of the commit order survives). Set
//    durably before an epoch's first weak link, cleared only after P16.
//  - The list reachable from ListRoot::head.next is sorted by (key ascending,
//    version descending) and acyclic; after a crash with weak writes a node
//    whose version is still MAX (dropped by recovery, P4) may sit anywhere
//    in its key's run (two unfenced versions of one key, P16).
//  - A node reachable from the head has a valid header (HeaderCheck) and lies
//    inside a chunk of its own list (W1; P1 makes this true after any
//    crash). Recovery checks all of it before it repairs anything (W3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace flintkv {
namespace pmem {

constexpr char kLayoutName[] = "flintkv";
constexpr uint64_t kPoolMagic = 0x314c4f4f50544e46ull;   // "FNTPOOL1"
constexpr uint64_t kListMagic = 0x3154534c54544e46ull;   // "FNTTLST1"
constexpr uint64_t kChunkMagic = 0x314b4e4843544e46ull;  // "FNTCHNK1"
// Version 2: state words carry a check (CheckedWord), list and chunk
// identities an IdentityCheck. Version 1 pools are read (bare words and
// zero checks are accepted unchecked) and marked 2 before the first checked
// word is written (Pool::UseCurrentFormat), so a build that reads only
// version 1 then refuses them by version instead of misreading them.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kOldestFormatVersion = 1;

constexpr uint64_t kTypeList = 1;
constexpr uint64_t kTypeChunk = 2;

constexpr uint64_t kUncommittedVersion = UINT64_MAX;  // "MAX_UINT" (§4.1)
constexpr size_t kCacheLine = 64;
constexpr size_t kNodeAlign = 16;  // keeps {next, version} inside one line

struct PoolRoot {
  uint64_t magic;
  uint32_t format_version;
  uint32_t reserved0;
  uint64_t pool_size;     // size given at creation
  uint64_t next_list_id;  // monotonically increasing list ids
  // Owned by the pool's user, zero at creation (formerly reserved, so format
  // version 1 is unchanged). The RocksDB adapter keeps its published-
  // sequence watermark here (docs/nvm_layout.md, "Pool root user words").
  uint64_t user[4];
};
constexpr int kPoolRootUserWords = 4;

enum NodeFlags : uint32_t {
  kNodeTombstone = 1u << 0,  // standalone Delete
};

// A persistent key/value node. 16-byte aligned; `next` and `version` share a
// cache line, so the combiner's two writes touch one line per node.
struct NvmNode {
  uint64_t next;       // offset of the successor, 0 = end of list
  uint64_t version;    // kUncommittedVersion until the combiner commits it
  uint32_t data_size;  // bytes in data[]
  uint32_t key_size;   // data[0, key_size) is the varint32-length-prefixed key
  uint32_t flags;      // NodeFlags
  uint32_t check;      // HeaderCheck(data_size, key_size, flags)
  // Followed by data_size bytes: the key (length-prefixed), then the value
  // (standalone) or the rest of the RocksDB entry (memtable).
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }

  static uint32_t HeaderCheck(uint32_t data_size, uint32_t key_size,
                              uint32_t flags) {
    uint64_t h = (uint64_t{data_size} << 32 | key_size) ^
                 (uint64_t{flags} * 0x9e3779b97f4a7c15ull) ^ kListMagic;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return static_cast<uint32_t>(h);
  }
  bool HeaderValid() const {
    return check == HeaderCheck(data_size, key_size, flags) &&
           key_size <= data_size;
  }
  static size_t AllocSize(size_t data_size) {
    return (sizeof(NvmNode) + data_size + kNodeAlign - 1) & ~(kNodeAlign - 1);
  }
};
static_assert(sizeof(NvmNode) == 32, "NvmNode header is part of the format");

// A small enumerated value (0-255) stored in a 32-bit word with a 16-bit
// check of the value in the upper half, so that a flipped bit is found and
// corrected instead of read as another value (a list that reads "retired"
// is freed at open). A word whose upper 24 bits are zero is a bare value
// written by format version 1: accepted, unchecked. `salt` keeps the words
// of different fields apart. The whole word is one aligned store, so a
// crash leaves the old word or the new one.
inline uint32_t WordCheck(uint32_t value, uint32_t salt) {
  uint64_t h = (uint64_t{value} << 32 | salt) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return (static_cast<uint32_t>(h) & 0xffffu) | 0x8001u;
}
inline uint32_t CheckedWord(uint32_t value, uint32_t salt) {
  return (value & 0xffu) | WordCheck(value & 0xffu, salt) << 16;
}
// Reads a checked word whose value must lie in [lo, hi]. The valid words of
// each field used here differ in at least five bits
// (PoolTest.CheckedWordsCorrectOneFlippedBit), so a word one bit away from
// one of them is that one, with *corrected set (the caller rewrites it),
// and a word two to three bits away from any is never taken for another:
// false (damaged beyond correction). Correcting two bits would take three
// flips for another state (sealed read as retired, and freed).
inline bool DecodeCheckedWord(uint32_t word, uint32_t salt, uint32_t lo,
                              uint32_t hi, uint32_t* value, bool* corrected) {
  *corrected = false;
  if ((word >> 8) == 0) {  // bare (format 1), or a checked word whose check
    if (word < lo || word > hi) return false;  // bits all flipped: value
    *value = word;                             // bits are then intact
    return true;
  }
  int best = 33;
  uint32_t best_v = 0;
  for (uint32_t v = lo; v <= hi; v++) {
    const int d = __builtin_popcount(word ^ CheckedWord(v, salt));
    if (d < best) {
      best = d;
      best_v = v;
    }
  }
  if (best > 1) return false;
  *value = best_v;
  *corrected = best != 0;
  return true;
}

// Check of fields fixed at creation, stored beside them (0 in objects of
// format 1): never 0, nor 0 after one flip. `seed` keeps the checks of
// different records apart.
inline uint64_t FieldsCheck(uint64_t seed, std::initializer_list<uint64_t> ws) {
  uint64_t h = seed;
  for (uint64_t w : ws) {
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
  }
  return h | 0x8000000000000001ull;
}
// A list's or chunk's identity.
inline uint64_t IdentityCheck(uint64_t a, uint64_t b, uint64_t c) {
  return FieldsCheck(0x49444e54434b3031ull, {a, b, c});  // "IDNTCK01"
}

enum ListKind : uint32_t { kListStandalone = 1, kListMemtable = 2 };
enum ListState : uint32_t {
  kListActive = 1,   // may take writes
  kListSealed = 2,   // read-only (RocksDB immutable memtable)
  kListRetired = 3,  // contents are in SST files; space is being freed
};

// Root of one durable skiplist. Fields that change at run time sit on their
// own cache lines so that their flushes do not drag unrelated state along.
struct alignas(kCacheLine) ListRoot {
  // Line 0: identity (written once at creation, then state transitions).
  uint64_t magic;
  uint64_t list_id;
  uint32_t kind;        // ListKind
  uint32_t state_word;  // ListState as CheckedWord(state, kStateSalt)
  // IdentityCheck(magic, list_id, kind) (format 2; 0 in format 1): a
  // flipped list id would make the list's chunks look orphaned, and the
  // open frees orphans.
  uint64_t id_check;
  uint64_t reserved0[4];
  // Line 1: WRITEBATCH commit record (Algorithm 4, P3).
  alignas(kCacheLine) uint64_t commit_version;
  uint64_t batch_mode;
  // Weak durability (P17): 0, or the first version that may not be durable.
  // Formerly reserved (zero), so format version 1 is unchanged.
  uint64_t durable_cut;
  uint64_t reserved1[5];
  // Line 2: head sentinel; head.next is the first node.
  alignas(kCacheLine) NvmNode head;
  uint64_t reserved2[4];
  // Lines 3-4: owned by the user of the list (e.g. the RocksDB adapter:
  // column family, sequence watermark). Opaque to pmem/ and memtable/.
  alignas(kCacheLine) uint8_t user[2 * kCacheLine];
};
static_assert(sizeof(ListRoot) == 5 * kCacheLine, "ListRoot is a format");
static_assert(offsetof(ListRoot, durable_cut) ==
                  offsetof(ListRoot, commit_version) + 16,
              "durable_cut shares the batch record line (sim labels)");

constexpr uint32_t kStateSalt = 0x45544154;  // "TATE"

// The list's state (*corrected: its word had one flipped bit), or
// false if the word is damaged beyond correction. Pool::Open rewrites a
// corrected word and refuses an uncorrectable one (Pool::CheckObjects).
inline bool DecodeListState(const ListRoot& l, ListState* state,
                            bool* corrected) {
  uint32_t v = 0;
  if (!DecodeCheckedWord(l.state_word, kStateSalt, kListActive, kListRetired,
                         &v, corrected)) {
    return false;
  }
  *state = static_cast<ListState>(v);
  return true;
}
// After Pool::Open: every list's word decodes.
inline ListState StateOf(const ListRoot& l) {
  ListState s = kListSealed;  // unreachable after Pool::Open's check
  bool corrected;
  DecodeListState(l, &s, &corrected);
  return s;
}
inline bool IdentityIntact(const ListRoot& l) {
  return l.id_check == 0 ||
         l.id_check == IdentityCheck(l.magic, l.list_id, l.kind);
}

struct alignas(kCacheLine) ChunkHeader {
  uint64_t magic;
  uint64_t list_id;  // owner
  uint64_t size;     // usable bytes after the header
  // IdentityCheck(magic, list_id, size) (format 2; 0 in format 1): a flipped
  // owner id would make the chunk look orphaned, and the open frees orphans.
  uint64_t check;
  uint64_t reserved[4];
};
inline bool IdentityIntact(const ChunkHeader& h) {
  return h.check == 0 || h.check == IdentityCheck(h.magic, h.list_id, h.size);
}
static_assert(sizeof(ChunkHeader) == kCacheLine, "ChunkHeader is a format");

}  // namespace pmem
}  // namespace flintkv
