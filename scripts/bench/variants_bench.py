#!/usr/bin/env python3
"""Interleaved rounds of several flintkv_bench impls, same-round comparisons.

Each round runs, per thread count, one flintkv_bench (or
flintkv_probe_bench) process with every impl given, one run each, the impl
order rotated from round to round so that no impl always runs first. Prints
per thread count and impl: the median ns per put (wall: 1e9 / ops/s, the
whole process's throughput; CPU: CPU-ns per put), and the median over rounds
of the same-round ratio ops/s(impl) / ops/s(ref). --pairs A:B,... adds, for
each pair, the median over rounds of the same-round difference
ns/put(A) - ns/put(B): what A's extra part costs per put.

Example (docs/results/performance.md, "Where a put's time goes"):
  scripts/bench/variants_bench.py --bin build/tools/flintkv_probe_bench \\
      --impls flintkv,flintkv~nolink,volatile,listdb,listdb-volatile \\
      --ref flintkv --pairs flintkv:flintkv~nolink --threads 1,2,4 \\
      --num 200000 --rounds 5
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_bench import run_bench  # noqa: E402


def run_round(binary, impls, threads, num, pool_dir, extra):
    got = {}
    for impl, (ops, cpus) in run_bench(binary, threads, num, pool_dir, impls,
                                       extra).items():
        cpus = max(cpus, 0.01)
        got[impl] = {"ops": ops, "ns": 1e9 / ops, "cpu_ns": 1e9 * cpus / ops}
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--impls", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--pairs", default="")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--num", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pool_dir", default="/dev/shm/flintkv_variants")
    ap.add_argument("--extra", default="", help="more bench flags")
    a = ap.parse_args()
    impls = a.impls.split(",")
    if a.ref not in impls:
        sys.exit("--ref must be one of --impls")
    pairs = [p.split(":") for p in a.pairs.split(",") if p]
    threads = [int(t) for t in a.threads.split(",")]
    os.makedirs(a.pool_dir, exist_ok=True)
    res = {t: [] for t in threads}
    print(f"load average at start: {open('/proc/loadavg').read().strip()}")
    for r in range(a.rounds):
        k = r % len(impls)
        order = impls[k:] + impls[:k]
        for t in threads:
            got = run_round(a.bin, order, t, a.num, a.pool_dir,
                            a.extra.split())
            res[t].append(got)
            print(f"round {r + 1} threads={t}: " + " ".join(
                f"{i}={got[i]['ops'] / 1e3:.0f}k" for i in order), flush=True)
    print(f"load average at end: {open('/proc/loadavg').read().strip()}")
    med = statistics.median
    print(f"\n| threads | impl | kops/s | ns/put | CPU-ns/put | vs {a.ref} "
          f"| per CPU-s vs {a.ref} |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for t in threads:
        rounds = res[t]
        for i in impls:
            print(f"| {t} | {i} | {med(x[i]['ops'] for x in rounds) / 1e3:.0f}"
                  f" | {med(x[i]['ns'] for x in rounds):.0f}"
                  f" | {med(x[i]['cpu_ns'] for x in rounds):.0f}"
                  f" | {med(x[i]['ops'] / x[a.ref]['ops'] for x in rounds):.3f}"
                  f" | {med(x[a.ref]['cpu_ns'] / x[i]['cpu_ns'] for x in rounds):.3f} |")
    if pairs:
        print("\n| threads | A - B | ns/put (median of same-round "
              "differences) | CPU-ns/put | rounds A faster |")
        print("|---:|---|---:|---:|---:|")
        for t in threads:
            rounds = res[t]
            for x, y in pairs:
                d = [r[x]["ns"] - r[y]["ns"] for r in rounds]
                dc = [r[x]["cpu_ns"] - r[y]["cpu_ns"] for r in rounds]
                faster = sum(1 for v in d if v < 0)
                print(f"| {t} | {x} - {y} | {med(d):.0f} | {med(dc):.0f} | "
                      f"{faster}/{len(d)} |")


if __name__ == "__main__":
    main()
