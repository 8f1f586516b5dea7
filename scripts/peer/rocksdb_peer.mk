# Builds RocksDB 7.8.3's db_stress and selected unit-test binaries from
# Debian's source package against Debian's own librocksdb.so (which is built
# without NDEBUG, so it exports the TEST_/SyncPoint symbols the tests need).
# Nothing of RocksDB itself is rebuilt. Called by scripts/peer/rocksdb_peer_tests.sh:
#
#   make -f scripts/peer/rocksdb_peer.mk SRC=<rocksdb-7.8.3 tree> OUT=<dir> \
#        db_stress <name>_test ...
#
# Flags mirror Debian's build (debian/rules: cmake, build type None, so no
# NDEBUG, RTTI on, PORTABLE=ON, snappy/zlib/bz2/lz4/zstd, gflags) and the
# defines RocksDB's CMakeLists.txt adds on Linux, so that class layouts in
# the headers match the shared library.

SRC ?= $(error SRC=rocksdb source tree required)
OUT ?= $(error OUT=build directory required)

CXX ?= g++
DEFS := -DROCKSDB_PLATFORM_POSIX -DROCKSDB_LIB_IO_POSIX -DOS_LINUX \
  -DROCKSDB_FALLOCATE_PRESENT -DROCKSDB_RANGESYNC_PRESENT \
  -DROCKSDB_PTHREAD_ADAPTIVE_MUTEX -DROCKSDB_MALLOC_USABLE_SIZE \
  -DROCKSDB_SCHED_GETCPU_PRESENT -DROCKSDB_AUXV_GETAUXVAL_PRESENT \
  -DGFLAGS=1 -DSNAPPY -DZLIB -DBZIP2 -DLZ4 -DZSTD \
  -DGTEST_HAS_STD_WSTRING=1
CXXFLAGS := -std=c++17 -O1 -g0 -fPIC -w $(DEFS) \
  -I$(SRC) -I$(SRC)/include -I$(SRC)/third-party/gtest-1.8.1/fused-src
LDLIBS := -lrocksdb -lgflags -lsnappy -lz -lbz2 -llz4 -lzstd -lpthread -ldl

STRESS_SRCS := $(addprefix db_stress_tool/, batched_ops_stress.cc \
  cf_consistency_stress.cc db_stress.cc db_stress_common.cc \
  db_stress_driver.cc db_stress_gflags.cc db_stress_listener.cc \
  db_stress_shared_state.cc db_stress_stat.cc db_stress_test_base.cc \
  db_stress_tool.cc expected_state.cc multi_ops_txns_stress.cc \
  no_batched_ops_stress.cc)
# RocksDB's testutillib + testharness + gtest (CMakeLists.txt TESTUTIL_SOURCE;
# test_util/testutil.cc is already inside Debian's librocksdb).
TESTLIB_SRCS := db/db_test_util.cc db/db_with_timestamp_test_util.cc \
  monitoring/thread_status_updater_debug.cc table/mock_table.cc \
  utilities/agg_merge/test_agg_merge.cc utilities/cassandra/test_utils.cc \
  test_util/mock_time_env.cc test_util/testharness.cc \
  third-party/gtest-1.8.1/fused-src/gtest/gtest-all.cc

obj = $(patsubst %.cc,$(OUT)/obj/%.o,$(1))

$(OUT)/obj/%.o: $(SRC)/%.cc
	@mkdir -p $(dir $@)
	@echo "  CXX $*.cc"
	@$(CXX) $(CXXFLAGS) -c $< -o $@

$(OUT)/bin/db_stress: $(call obj,$(STRESS_SRCS))
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $^ $(LDLIBS)

$(OUT)/lib/libpeertest.a: $(call obj,$(TESTLIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# One binary per test source: TESTS="db/db_flush_test.cc ..." (relative to SRC).
define test_rule
$(OUT)/bin/$(basename $(notdir $(1))): $(call obj,$(1)) $(OUT)/lib/libpeertest.a
	@mkdir -p $$(dir $$@)
	@echo "  LD  $$@"
	@$$(CXX) -o $$@ $$^ $$(LDLIBS)
$(basename $(notdir $(1))): $(OUT)/bin/$(basename $(notdir $(1)))
.PHONY: $(basename $(notdir $(1)))
endef
$(foreach t,$(TESTS),$(eval $(call test_rule,$(t))))

db_stress: $(OUT)/bin/db_stress
testlib: $(OUT)/lib/libpeertest.a

.PHONY: db_stress testlib
