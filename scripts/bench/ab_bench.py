#!/usr/bin/env python3
"""A/B comparison of flintkv_bench binaries against ListDB(sync), interleaved.

Runs every binary given (label=path) once per round and thread count, in
ABBA order (odd rounds reversed), each invocation measuring flintkv and the
listdb baseline side by side (their order also alternates), then prints per
thread count the medians of flintkv kops/s, listdb kops/s, the per-run ratio
flintkv/listdb, and the median over rounds of each binary's flintkv (and
volatile) result over the first binary's in the same round.
Ratios, not absolute numbers, are the result on a shared noisy machine.
--volatile adds the volatile skiplist (FlintKV's index and list on DRAM, no
persistence) to every invocation, and the ratio flintkv/volatile.

Example (docs/results/archive/listdb_gap.md):
  scripts/bench/ab_bench.py --rounds=6 --threads=1,2 --num=300000 \
      base=build-ab/base new=build/tools/flintkv_bench
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

RUN_RE = re.compile(r"^run \d+/\d+ (\S+)\s+threads=(\d+)\s+num=(\d+)\s+"
                    r"(\d+) ops/s.*cpus\s+([0-9.]+)")


def run_bench(path, threads, num, pool_dir, impls, extra):
    """One flintkv_bench process, one run of each impl (in that order):
    {impl: (ops/s, CPUs used)}. Exits if an impl reported nothing."""
    cmd = [path, f"--num={num}", f"--threads={threads}",
           f"--impl={','.join(impls)}", "--repeats=1", "--verify=sample",
           f"--pool_dir={pool_dir}"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    got = {}
    for line in (out.stdout + out.stderr).splitlines():
        m = RUN_RE.match(line)
        if m:
            got[m.group(1)] = (float(m.group(4)), float(m.group(5)))
    missing = [i for i in impls if i not in got]
    if missing:
        sys.exit(f"{os.path.basename(sys.argv[0])}: no result for {missing} "
                 f"from {' '.join(cmd)}:\n{out.stdout}{out.stderr}")
    return got


def run_one(path, threads, num, pool_dir, impl_order, extra):
    got = {}
    for impl, (ops, cpus) in run_bench(path, threads, num, pool_dir,
                                       impl_order.split(","), extra).items():
        got[impl] = ops / 1000.0
        # Per CPU-second: less sensitive to preemption by other jobs (but
        # spinning waiters count).
        got[impl + "/cpu"] = got[impl] / max(cpus, 0.01)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("binaries", nargs="+", help="label=path/to/flintkv_bench")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--num", default="300000",
                    help="puts per run; 'T:N,...' gives N per thread count T")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pool_dir", default="/dev/shm/flintkv_ab")
    ap.add_argument("--extra", default="", help="more flintkv_bench flags")
    ap.add_argument("--volatile", action="store_true",
                    help="also run the volatile skiplist")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.binaries]
    threads = [int(t) for t in a.threads.split(",")]
    nums = {}
    for item in a.num.split(","):
        if ":" in item:
            t, n = item.split(":")
            nums[int(t)] = int(n)
        else:
            nums.update({t: int(item) for t in threads if t not in nums})
    os.makedirs(a.pool_dir, exist_ok=True)
    res = {(label, t): [] for label, _ in bins for t in threads}
    print(f"load average at start: {open('/proc/loadavg').read().strip()}")
    for r in range(a.rounds):
        order = bins if r % 2 == 0 else list(reversed(bins))
        impls = ["flintkv", "listdb"] + (["volatile"] if a.volatile else [])
        k = (r // 2) % len(impls)  # every impl goes first in turn
        impl = ",".join(impls[k:] + impls[:k])
        for t in threads:
            for label, path in order:
                got = run_one(path, t, nums[t], a.pool_dir, impl,
                              a.extra.split())
                res[(label, t)].append(got)
                print(f"round {r + 1} threads={t} {label}: flintkv "
                      f"{got['flintkv']:.0f} listdb {got['listdb']:.0f} "
                      f"ratio {got['flintkv'] / got['listdb']:.3f} "
                      f"per CPU-s ratio "
                      f"{got['flintkv/cpu'] / got['listdb/cpu']:.3f}",
                      flush=True)
    print(f"load average at end: {open('/proc/loadavg').read().strip()}")
    base = bins[0][0]
    print(f"\n| binary | threads | num | flintkv kops/s | listdb kops/s | "
          f"flintkv/listdb | flintkv vs {base} | per CPU-s: flintkv/listdb "
          f"| per CPU-s: flintkv vs {base} |" +
          (f" flintkv/volatile | per CPU-s: flintkv/volatile | "
           f"volatile vs {base} |" if a.volatile else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" +
          ("---:|---:|---:|" if a.volatile else ""))
    med = statistics.median

    def vs_base(label, t, key):
        # Median over rounds of this binary's result over the first
        # binary's in the same round (not a ratio of medians).
        return med(x[key] / y[key]
                   for x, y in zip(res[(label, t)], res[(base, t)]))

    for t in threads:
        for label, _ in bins:
            runs = res[(label, t)]
            f = med(x["flintkv"] for x in runs)
            l = med(x["listdb"] for x in runs)
            # Ratios: median of the per-run ratios (same time window).
            ratio = med(x["flintkv"] / x["listdb"] for x in runs)
            ratio_c = med(x["flintkv/cpu"] / x["listdb/cpu"] for x in runs)
            vol = ""
            if a.volatile:
                vr = med(x["flintkv"] / x["volatile"] for x in runs)
                vc = med(x["flintkv/cpu"] / x["volatile/cpu"] for x in runs)
                vol = (f" {vr:.3f} | {vc:.3f} | "
                       f"{vs_base(label, t, 'volatile'):.3f} |")
            print(f"| {label} | {t} | {nums[t]} | {f:.0f} | {l:.0f} | "
                  f"{ratio:.3f} | {vs_base(label, t, 'flintkv'):.3f} | "
                  f"{ratio_c:.3f} | {vs_base(label, t, 'flintkv/cpu'):.3f} |"
                  + vol)


if __name__ == "__main__":
    main()
