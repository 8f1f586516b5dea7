// The merge operator of the RocksDB tests: "a" then "b" merge to "a,b".
#pragma once

#include <string>

#include "rocksdb/merge_operator.h"

namespace flintkv {
namespace test {

class AppendOperator : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice&, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* out,
             rocksdb::Logger*) const override {
    out->clear();
    if (existing) out->assign(existing->data(), existing->size()).append(",");
    out->append(value.data(), value.size());
    return true;
  }
  const char* Name() const override { return "FlintTestAppend"; }
};

}  // namespace test
}  // namespace flintkv
