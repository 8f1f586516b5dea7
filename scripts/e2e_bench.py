#!/usr/bin/env python3
"""Stock db_bench side by side: the flintkv memtable (WAL off) against
RocksDB's skiplist with no WAL (volatile), with the WAL synced (sync=1) and
with the WAL unsynced, all on tmpfs, interleaved, with ratios taken within a
round.

  scripts/e2e_bench.py [--db_bench auto|release|debian|PATH]
                       [--workload fill|reads] [--threads 1,2,4,8,16]
                       [--num N] [--rounds R] [--configs flintkv,nowal,...]
                       [--plugin SO | --plugin NAME=SO ...] [--out FILE.md]
                       [--csv FILE]

--db_bench: "release" is scripts/build_release_rocksdb.sh's build (RocksDB
7.8.3, NDEBUG), "debian" is /usr/bin/db_bench (the same sources, assertions
on), "auto" (default) the release build when it is in the cache, else
Debian's. Any other value is a db_bench path (e.g. a ROCKSDB_PLUGINS build of
scripts/build_rocksdb.sh, which has flintkv built in: then give no --plugin).

--plugin: libflintkv_rocksdb.so, LD_PRELOADed into every run (so that all
configurations share one binary and allocator). Several NAME=SO give
flintkv@NAME configurations: an A/B of two plugin builds.

fill: fillrandom, --num writes in total split across the threads, 128-byte
values, 16-byte keys, compression off (the README main job's workload).
reads: one db_bench run per configuration and thread count that fills --num
keys (fillrandom) into a memtable big enough to hold them all (no flush: the
reads hit the memtable), then readrandom, seekrandom (--seek_nexts=10),
readrandomwriterandom (50% reads) and readwhilewriting.

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def resolve_db_bench(choice):
    """(description, path, extra env)."""
    rel = os.path.join(CACHE, "rocksdb-release")
    rel_bin = os.path.join(rel, "bin", "db_bench")
    if choice == "auto":
        choice = "release" if os.path.exists(rel_bin) else "debian"
    if choice == "release":
        if not os.path.exists(rel_bin):
            sys.exit("e2e_bench: no release build in %s: run "
                     "scripts/build_release_rocksdb.sh" % rel)
        return ("RocksDB 7.8.3 release build (NDEBUG, "
                "scripts/build_release_rocksdb.sh)", rel_bin,
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
            "walsync": ["--disable_wal=0", "--sync=1"]}[cfg]


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
    """One db_bench process; returns {bench: (ops/s, p99 us)}."""
    work = tempfile.mkdtemp(prefix="flintkv_e2e_", dir="/dev/shm")
    try:
        common = ["--key_size=16", "--value_size=%d" % a.value_size,
                  "--db=%s/db" % work, "--wal_dir=%s/wal" % work,
                  "--compression_type=none", "--stats_interval=0",
                  "--histogram=1", "--threads=%d" % threads, "--seed=42"]
        if a.workload == "fill":
            benches = ["fillrandom"]
            common += ["--num=%d" % (a.num // threads)]
            pool = ("%s/pool" % work, "2G")
        else:
            benches = ["fillrandom"] + READ_BENCHES
            # Every key stays in the (one) memtable: no flush, no SST.
            common += ["--num=%d" % a.num, "--reads=%d" % (a.reads // threads),
                       "--writes=%d" % (a.reads // threads),
                       "--write_buffer_size=%d" % (2 << 30),
                       "--max_write_buffer_number=2", "--seek_nexts=10",
                       "--readwritepercent=50"]
            pool = ("%s/pool" % work, "8G")
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
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
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
    a = ap.parse_args()
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
                res = run_once(a, db_bench, env_extra, plugin, cfg, t)
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
        "- command: scripts/e2e_bench.py " + " ".join(sys.argv[1:]),
        "- db_bench: " + desc,
        "- machine: %s, %d cores; data, WAL and pool on tmpfs" %
        (cpu, os.cpu_count()),
        "- %d interleaved rounds; ops/s are medians; a ratio is the median of "
        "the same-round ratios flintkv / baseline" % a.rounds,
        ""]
    csv = [["bench", "threads", "config", "ops_median", "p99_us_median",
            "runs"]]

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
        lines += ["| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)]
        for t in threads:
            row = [str(t)] + ["%.0f" % med(n, t, b, 0) for n in flint + bases]
            row += ["**%.2f**" % ratio(f, n, t, b) for f in flint
                    for n in bases]
            if len(flint) > 1:
                row += ["%.3f" % ratio(f, flint[0], t, b) for f in flint[1:]]
            row += ["%.1f" % med(n, t, b, 1) for n in flint + bases]
            lines.append("| " + " | ".join(row) + " |")
            for n in flint + bases:
                csv.append([b, t, n, "%.0f" % med(n, t, b, 0),
                            "%.2f" % med(n, t, b, 1), len(runs[(n, t, b)])])
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
