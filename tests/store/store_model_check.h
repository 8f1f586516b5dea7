// Checks a flintkv::Store's reads (Get, full scans, seeks and walks) against
// a std::map model; shared by the model tests and the error tests.
#pragma once

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flintkv/store.h"
#include "tests/util/test_util.h"

namespace flintkv {
namespace test {

using Model = std::map<std::string, std::string>;

inline void ExpectIterAt(Iterator* it, const Model& m,
                         Model::const_iterator mit, const std::string& where) {
  if (mit == m.end()) {
    EXPECT_FALSE(it->Valid())
        << where << ": expected end, got key " << Printable(it->key());
    return;
  }
  ASSERT_TRUE(it->Valid()) << where << ": expected key "
                           << Printable(mit->first) << ", got end";
  EXPECT_EQ(it->key(), mit->first) << where;
  EXPECT_EQ(it->value(), mit->second)
      << where << " key " << Printable(mit->first);
}

// Full forward and backward scans must reproduce the model exactly.
inline void CheckScans(Store* store, const Snapshot* snap, const Model& m,
                       const std::string& where) {
  std::unique_ptr<Iterator> it = store->NewIterator(ReadOptions{snap});
  it->SeekToFirst();
  for (auto mit = m.begin(); mit != m.end(); ++mit) {
    ASSERT_TRUE(it->Valid())
        << where << " forward: missing key " << Printable(mit->first);
    ASSERT_EQ(it->key(), mit->first) << where << " forward";
    ASSERT_EQ(it->value(), mit->second) << where << " forward";
    it->Next();
  }
  ASSERT_FALSE(it->Valid())
      << where << " forward: extra key " << Printable(it->key());
  it->SeekToLast();
  for (auto mit = m.rbegin(); mit != m.rend(); ++mit) {
    ASSERT_TRUE(it->Valid())
        << where << " backward: missing key " << Printable(mit->first);
    ASSERT_EQ(it->key(), mit->first) << where << " backward";
    ASSERT_EQ(it->value(), mit->second) << where << " backward";
    it->Prev();
  }
  ASSERT_FALSE(it->Valid())
      << where << " backward: extra key " << Printable(it->key());
}

// Random seeks followed by random walks in both directions.
inline void CheckSeeks(Store* store, const Snapshot* snap, const Model& m,
                       const std::vector<std::string>& targets,
                       std::mt19937_64* rng, const std::string& where) {
  std::unique_ptr<Iterator> it = store->NewIterator(ReadOptions{snap});
  for (int round = 0; round < 8; round++) {
    const std::string& t = targets[(*rng)() % targets.size()];
    Model::const_iterator mit;
    std::string what;
    switch ((*rng)() % 4) {
      case 0:
        it->Seek(t);
        mit = m.lower_bound(t);
        what = "Seek(" + Printable(t) + ")";
        break;
      case 1:
        it->SeekForPrev(t);
        mit = m.upper_bound(t);
        mit = mit == m.begin() ? m.end() : std::prev(mit);
        what = "SeekForPrev(" + Printable(t) + ")";
        break;
      case 2:
        it->SeekToLast();
        mit = m.empty() ? m.end() : std::prev(m.end());
        what = "SeekToLast";
        break;
      default:
        it->SeekToFirst();
        mit = m.begin();
        what = "SeekToFirst";
        break;
    }
    ExpectIterAt(it.get(), m, mit, where + " " + what);
    if (::testing::Test::HasFatalFailure()) return;
    // Walk: change direction at random, from wherever we are.
    for (int step = 0; step < 12 && mit != m.end(); step++) {
      if ((*rng)() % 2) {
        it->Next();
        ++mit;
        what += " Next";
      } else {
        it->Prev();
        mit = mit == m.begin() ? m.end() : std::prev(mit);
        what += " Prev";
      }
      ExpectIterAt(it.get(), m, mit, where + " " + what);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

inline void CheckGets(Store* store, const Snapshot* snap, const Model& m,
                      const std::vector<std::string>& keys,
                      const std::string& where) {
  std::string v;
  for (const std::string& k : keys) {
    Status s = store->Get(ReadOptions{snap}, k, &v);
    auto mit = m.find(k);
    if (mit == m.end()) {
      EXPECT_TRUE(s.IsNotFound())
          << where << " Get(" << Printable(k) << "): " << s.ToString()
          << " value " << Printable(v);
    } else {
      ASSERT_TRUE(s.ok()) << where << " Get(" << Printable(k)
                          << "): " << s.ToString();
      EXPECT_EQ(v, mit->second) << where << " Get(" << Printable(k) << ")";
    }
  }
}

}  // namespace test
}  // namespace flintkv
