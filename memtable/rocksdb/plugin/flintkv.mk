# RocksDB (7.8, 9.x) plugin fragment for FlintKV (ROCKSDB_PLUGINS=flintkv).
# Symlink this directory to <rocksdb>/plugin/flintkv (see
# db_bench_patches/README.md). RocksDB's make includes this file; its cmake
# reads the lines below with regexes: keep the exact "NAME = value" form,
# and do not repeat those names in comments.
#
# The FlintKV source root: found through the symlink, or set it when the
# directory was copied: make FLINTKV_ROOT=/path/to/flintkv ...
FLINTKV_PLUGIN_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
FLINTKV_ROOT ?= $(realpath $(FLINTKV_PLUGIN_DIR)../../..)

flintkv_SOURCES = flintkv_plugin.cc
flintkv_HEADERS =
flintkv_FUNC = flintkv_register
flintkv_CXXFLAGS = -DFLINTKV_NO_STATIC_REGISTRAR -I$(FLINTKV_ROOT) -I$(FLINTKV_ROOT)/include
flintkv_LDFLAGS = -lpmemobj -lpmem
flintkv_LIBS = pmemobj pmem
flintkv_PKGCONFIG_REQUIRES = libpmem libpmemobj
