#!/usr/bin/env python3
"""Stock db_bench side by side: the flintkv memtable (WAL off) against
RocksDB's skiplist with no WAL (volatile), with the WAL synced (sync=1) and
with the WAL unsynced, all on tmpfs (or the DB and WAL in --db_dir),
interleaved, with ratios taken within a round.

  scripts/bench/e2e_bench.py [--db_bench auto|release|debian|PATH]
                       [--workload fill|reads] [--threads 1,2,4,8,16]
                       [--num N] [--rounds R] [--configs flintkv,nowal,...]
                       [--plugin SO | --plugin NAME=SO ...] [--out FILE.md]
                       [--csv FILE] [--db_dir DIR]

--db_bench: "release" is scripts/setup/build_release_rocksdb.sh's build (RocksDB
7.8.3, NDEBUG), "debian" is /usr/bin/db_bench (the same sources, assertions
on), "auto" (default) the release build when it is in the cache, else
Debian's. Any other value is a db_bench path (e.g. a ROCKSDB_PLUGINS build of
scripts/setup/build_rocksdb.sh, which has flintkv built in: then give no --plugin).

--plugin: libflintkv_rocksdb.so, LD_PRELOADed into every run (so that all
configurations share one binary and allocator). Several NAME=SO give
flintkv@NAME configurations: an A/B of two plugin builds.

--configs: walsync (sync=1) sets enable_pipelined_write=1, db_bench's
default, explicitly: it is the PMemRocksDB-like baseline of the paper's
Fig 8/9 (scripts/paper/paper_figures.py).

--db_dir: where the DB and the WAL go (default /dev/shm; e.g. a directory
on the real disk); the flintkv pool stays on /dev/shm.

fill: fillrandom, --num writes in total split across the threads, 128-byte
values, 16-byte keys, compression off (the README main job's workload).
reads: one db_bench run per configuration and thread count that fills --num
keys (fillrandom) into a memtable big enough to hold them all (no flush: the
reads hit the memtable), then readrandom, seekrandom (--seek_nexts=10),
readrandomwriterandom (50% reads) and readwhilewriting.

Read model (reads workload): on tmpfs a PMEM read costs a DRAM read. The
flintkv index (keys, prefixes, links) is in DRAM, so an operation touches
PMEM only in the entries it returns: one per Get, 1 + seek_nexts per
seekrandom op. PmemTouches() gives, from the node layout, the 64-byte lines
and 256-byte Optane XPLines one entry spans (mean over its alignments); the
model charges each entry one random Optane read (305 ns vs 81 ns for DRAM)
and each further XPLine a sequential one (169 ns): Izraelevitz et al., "Basic
Performance Measurements of the Intel Optane DC Persistent Memory Module",
arXiv:1903.05714, 2019 (idle read latency, Fig. 2). The modeled column adds
that time to every flintkv operation of a thread (the skiplist is all DRAM,
unchanged): what the same run would cost on a first-generation Optane DIMM.

Every round runs every (threads, configuration) once; rounds alternate the
order of the configurations (ABBA). Each printed ops/s is the median over
rounds; each ratio is the median over rounds of the ratio of two runs of the
same round (the machines are shared and noisy: same-round ratios cancel the
load of the moment). p99 latencies (us) come from db_bench's histogram.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("FLINTKV_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
    "flintkv")

LABELS = {
    "flintkv": "flintkv (no WAL, durable)",
    "walsync": "skiplist + WAL sync",
    "wal": "skiplist + WAL",
    "nowal": "skiplist, no WAL (volatile)",
}
READ_BENCHES = ["readrandom", "seekrandom", "readrandomwriterandom",
                "readwhilewriting"]
SEEK_NEXTS = 10
# PMEM entries read per operation (see the read model above).
ENTRIES_PER_OP = {"readrandom": 1, "seekrandom": 1 + SEEK_NEXTS,
                  "readrandomwriterandom": 0.5, "readwhilewriting": 1}
OPTANE_RANDOM_NS, OPTANE_SEQ_NS, DRAM_NS = 305, 169, 81
NODE_HEADER, NODE_ALIGN = 32, 16  # pmem/layout.h NvmNode


def varint_len(v):
    n = 1
    while v >= 128:
        v >>= 7
        n += 1
    return n


def pmem_touches(key_size, value_size):
    """(64-byte lines, 256-byte XPLines) one RocksDB entry spans in PMEM,
    mean over the node's possible alignments: the entry (varint key length,
    internal key, varint value length, value) starts after the node's
    32-byte header; nodes are 16-byte aligned."""
    ikey = key_size + 8
    size = varint_len(ikey) + ikey + varint_len(value_size) + value_size

    def spans(block):
        n = [((a + NODE_HEADER + size - 1) // block) -
             ((a + NODE_HEADER) // block) + 1
             for a in range(0, block, NODE_ALIGN)]
        return sum(n) / len(n)
    return spans(64), spans(256)


def modeled_extra_ns(bench, key_size, value_size):
    _, xplines = pmem_touches(key_size, value_size)
    per_entry = (OPTANE_RANDOM_NS - DRAM_NS) + (xplines - 1) * (
        OPTANE_SEQ_NS - DRAM_NS)
    return ENTRIES_PER_OP.get(bench, 0) * per_entry


def resolve_db_bench(choice):
    """(description, path, extra env)."""
    rel = os.path.join(CACHE, "rocksdb-release")
    rel_bin = os.path.join(rel, "bin", "db_bench")
    if choice == "auto":
        choice = "release" if os.path.exists(rel_bin) else "debian"
        if choice == "debian":
            print("e2e_bench: no release RocksDB in %s: measuring Debian's "
                  "db_bench (assertions on, which flatters flintkv); for the "
                  "fair baseline run scripts/setup/build_release_rocksdb.sh once "
                  "(~15 min on 2 cores)" % CACHE, file=sys.stderr)
    if choice == "release":
        if not os.path.exists(rel_bin):
            sys.exit("e2e_bench: no release build in %s: run "
                     "scripts/setup/build_release_rocksdb.sh" % rel)
        return ("RocksDB 7.8.3 release build (NDEBUG, "
                "scripts/setup/build_release_rocksdb.sh)", rel_bin,
                {"LD_LIBRARY_PATH": os.path.join(rel, "lib")})
    if choice == "debian":
        ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}",
                              "rocksdb-tools"], capture_output=True,
                             text=True).stdout.strip()
        return ("Debian's db_bench %s (RocksDB 7.8.3, assertions on)" % ver,
                "/usr/bin/db_bench", {})
    if not os.access(choice, os.X_OK):
        sys.exit("e2e_bench: %s is not an executable db_bench" % choice)
    return ("db_bench at %s" % choice, choice, {})


def config_args(cfg, pool):
    if cfg == "flintkv":
        return ["--disable_wal=1",
                "--memtablerep=id=flintkv;pool_dir=%s;pool_size=%s" % pool]
    return {"nowal": ["--disable_wal=1"],
            "wal": ["--disable_wal=0", "--sync=0"],
            "walsync": ["--disable_wal=0", "--sync=1",
                        "--enable_pipelined_write=1"]}[cfg]


def parse(out, bench):
    """ops/s and P99 (us) of one benchmark's report in db_bench's output."""
    m = re.search(r"^%s +:.* ([\d.]+) ops/sec" % re.escape(bench), out, re.M)
    if not m:
        return None, None
    ops = float(m.group(1))
    tail = out[m.end():]
    p = re.search(r"P99: ([\d.]+)", tail)
    return ops, (float(p.group(1)) if p else None)


def run_once(a, db_bench, env_extra, plugin, cfg, threads):
    """One db_bench process; returns ({bench: (ops/s, p99 us)}, its output)."""
    work = tempfile.mkdtemp(prefix="flintkv_e2e_", dir=a.db_dir)
    shm = tempfile.mkdtemp(prefix="flintkv_e2e_pool_", dir="/dev/shm")
    try:
        common = ["--key_size=16", "--value_size=%d" % a.value_size,
                  "--db=%s/db" % work, "--wal_dir=%s/wal" % work,
                  "--compression_type=none", "--stats_interval=0",
                  "--histogram=1", "--threads=%d" % threads, "--seed=42"]
        if a.workload == "fill":
            benches = ["fillrandom"]
            common += ["--num=%d" % (a.num // threads)]
            pool = ("%s/pool" % shm, "2G")
        else:
            benches = ["fillrandom"] + READ_BENCHES
            # Every key stays in the (one) memtable: no flush, no SST.
            common += ["--num=%d" % a.num, "--reads=%d" % (a.reads // threads),
                       "--writes=%d" % (a.reads // threads),
                       "--write_buffer_size=%d" % (2 << 30),
                       "--max_write_buffer_number=2",
                       "--seek_nexts=%d" % SEEK_NEXTS,
                       "--readwritepercent=50"]
            pool = ("%s/pool" % shm, "8G")
        args = [db_bench, "--benchmarks=" + ",".join(benches)] + common
        args += config_args(cfg, pool)
        env = dict(os.environ, **env_extra)
        if plugin:
            env["LD_PRELOAD"] = plugin
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        out = p.stdout + p.stderr
        if p.returncode != 0:
            sys.exit("e2e_bench: db_bench failed (%s, %d threads):\n%s" %
                     (cfg, threads, out[-2000:]))
        if cfg == "flintkv" and not re.search(r"Memtablerep: *FlintKV", out):
            sys.exit("e2e_bench: db_bench did not use the flintkv memtable:\n" +
                     out[-2000:])
        res = {}
        for b in benches:
            ops, p99 = parse(out, b)
            if ops is None:
                sys.exit("e2e_bench: no %s line in:\n%s" % (b, out[-2000:]))
            res[b] = (ops, p99)
        return res, out
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db_bench", default="auto")
    ap.add_argument("--workload", choices=["fill", "reads"], default="fill")
    ap.add_argument("--threads", default="1,2,4,8")
    ap.add_argument("--num", type=int, default=1000000)
    ap.add_argument("--reads", type=int, default=1000000,
                    help="reads workload: operations per read benchmark")
    ap.add_argument("--value_size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="flintkv,walsync,wal,nowal")
    ap.add_argument("--plugin", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--csv")
    ap.add_argument("--db_dir", default="/dev/shm")
    return ap.parse_args(argv)


def main():
    a = parse_args()
    threads = [int(t) for t in a.threads.replace(" ", ",").split(",") if t]
    desc, db_bench, env_extra = resolve_db_bench(a.db_bench)

    plugins = {}
    for p in a.plugin:
        name, _, path = p.rpartition("=")
        plugins[name] = os.path.abspath(path)
    if not plugins and a.db_bench in ("auto", "release", "debian"):
        plugins[""] = os.path.join(ROOT, "build", "memtable", "rocksdb",
                                   "libflintkv_rocksdb.so")
    for path in plugins.values():
        if not os.path.exists(path):
            sys.exit("e2e_bench: no plugin at %s (build it first)" % path)
    default_plugin = next(iter(plugins.values()), None)

    cfgs = []  # (column name, config, plugin)
    for c in a.configs.split(","):
        if c not in LABELS:
            sys.exit("e2e_bench: unknown configuration %s" % c)
        if c == "flintkv" and len(plugins) > 1:
            cfgs += [("flintkv@" + n, c, p) for n, p in plugins.items()]
        else:
            cfgs.append((c, c, default_plugin))
    flint = [n for n, c, _ in cfgs if c == "flintkv"]
    bases = [n for n, c, _ in cfgs if c != "flintkv"]

    runs = {}  # (name, threads, bench) -> [(ops, p99)] per round
    for r in range(a.rounds):
        order = cfgs if r % 2 == 0 else list(reversed(cfgs))
        for t in threads:
            for name, cfg, plugin in order:
                res, _ = run_once(a, db_bench, env_extra, plugin, cfg, t)
                for b, v in res.items():
                    runs.setdefault((name, t, b), []).append(v)
                print("round %d, %d threads, %s: %s" % (
                    r + 1, t, name, ", ".join("%s %.0f" % (b, v[0])
                                              for b, v in res.items())),
                      file=sys.stderr, flush=True)

    benches = ["fillrandom"] + (READ_BENCHES if a.workload == "reads" else [])
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    lines = [
        "# db_bench %s: flintkv memtable (WAL off) vs RocksDB's skiplist" %
        ("fillrandom" if a.workload == "fill" else "reads from the memtable"),
        "",
        "- command: scripts/bench/e2e_bench.py " + " ".join(sys.argv[1:]),
        "- db_bench: " + desc,
        "- machine: %s, %d cores; data and WAL in %s, pool in /dev/shm" %
        (cpu, os.cpu_count(), a.db_dir),
        "- %d interleaved rounds; ops/s are medians; a ratio is the median of "
        "the same-round ratios flintkv / baseline" % a.rounds,
        ""]
    if a.workload == "reads":
        lines64, xpl = pmem_touches(16, a.value_size)
        lines += [
            "- PMEM per entry read (16-byte keys, %d-byte values): %.2f "
            "64-byte lines, %.2f 256-byte XPLines; entries per operation: %s; "
            "the index holds keys and prefixes in DRAM, so nothing else of a "
            "lookup touches PMEM" % (a.value_size, lines64, xpl, ", ".join(
                "%s %g" % kv for kv in ENTRIES_PER_OP.items())),
            "- modeled = flintkv on a first-generation Optane DIMM: each "
            "entry read +%d ns (random read %d ns vs DRAM %d ns; further "
            "XPLines +%d ns; Izraelevitz et al. 2019, arXiv:1903.05714)" %
            (OPTANE_RANDOM_NS - DRAM_NS, OPTANE_RANDOM_NS, DRAM_NS,
             OPTANE_SEQ_NS - DRAM_NS), ""]
    csv = [["bench", "threads", "config", "ops_median", "p99_us_median",
            "runs", "modeled_ops"]]

    def med(name, t, b, i):
        vals = [v[i] for v in runs[(name, t, b)] if v[i] is not None]
        return statistics.median(vals) if vals else float("nan")

    def ratio(f, base, t, b):
        rs = [x[0] / y[0] for x, y in zip(runs[(f, t, b)], runs[(base, t, b)])]
        return statistics.median(rs)

    for b in benches:
        if len(benches) > 1:
            lines += ["## " + b, ""]
        head = ["threads"] + [LABELS.get(n, n) for n in flint + bases]
        head += ["%s vs %s" % (f, n) for f in flint for n in bases]
        if len(flint) > 1:
            head += ["%s vs %s" % (f, flint[0]) for f in flint[1:]]
        head += ["p99 us " + n for n in flint + bases]
        extra = modeled_extra_ns(b, 16, a.value_size) \
            if a.workload == "reads" else 0
        if extra:
            head += ["%s modeled (Optane)" % f for f in flint]
            head += ["modeled %s vs %s" % (f, n) for f in flint for n in bases]
        lines += ["| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)]
        for t in threads:
            row = [str(t)] + ["%.0f" % med(n, t, b, 0) for n in flint + bases]
            row += ["**%.2f**" % ratio(f, n, t, b) for f in flint
                    for n in bases]
            if len(flint) > 1:
                row += ["%.3f" % ratio(f, flint[0], t, b) for f in flint[1:]]
            row += ["%.1f" % med(n, t, b, 1) for n in flint + bases]
            # A thread's op takes t / ops seconds; the model adds `extra`.
            # (readwhilewriting's ops/s counts the t readers only.)
            def model(ops):
                return t / (t / ops + extra * 1e-9) if extra else ops
            if extra:
                row += ["%.0f" % model(med(f, t, b, 0)) for f in flint]
                row += ["%.2f" % statistics.median(
                    model(x[0]) / y[0] for x, y in
                    zip(runs[(f, t, b)], runs[(n, t, b)]))
                        for f in flint for n in bases]
            lines.append("| " + " | ".join(row) + " |")
            for n in flint + bases:
                ops = med(n, t, b, 0)
                csv.append([b, t, n, "%.0f" % ops, "%.2f" % med(n, t, b, 1),
                            len(runs[(n, t, b)]),
                            "%.0f" % (model(ops) if n in flint else ops)])
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("\n".join(",".join(str(x) for x in r) for r in csv) + "\n")


if __name__ == "__main__":
    main()
