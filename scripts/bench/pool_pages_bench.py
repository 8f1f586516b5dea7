#!/usr/bin/env python3
"""flintkv_bench with the pool on 4 KiB and on 2 MiB pages, interleaved.

Usage: pool_pages_bench.py BIN ROUNDS THREADS NUM [flintkv_bench flags...]

Each round runs, per thread count, one flintkv_bench process per pool
directory (their order alternates from round to round), each measuring
flintkv, listdb, volatile and listdb-volatile (order alternating too). It
prints per thread count and directory the median kops/s of each impl, the
median of same-round ratios flintkv/listdb and volatile/listdb-volatile,
and per impl the median of same-round ratios 2 MiB / 4 KiB.

The directories: $POOL_PAGES_SMALL (default /dev/shm, a tmpfs with
huge=never) and $POOL_PAGES_HUGE (default /tmp/hugetest), a tmpfs mounted
with 2 MiB pages, as root:
  mkdir -p /tmp/hugetest && mount -t tmpfs -o huge=always,size=4G tmpfs /tmp/hugetest
flintkv_bench prints the page size each directory gives in its header.
Results: docs/results/performance.md, "Pool page size".
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_bench import run_bench  # noqa: E402


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    binary, rounds, threads, num = (sys.argv[1], int(sys.argv[2]),
                                    sys.argv[3].split(","), sys.argv[4])
    extra = sys.argv[5:]
    dirs = {"4k": os.environ.get("POOL_PAGES_SMALL", "/dev/shm"),
            "2m": os.environ.get("POOL_PAGES_HUGE", "/tmp/hugetest")}
    impls = ["flintkv", "listdb", "volatile", "listdb-volatile"]
    res = {}
    for r in range(rounds):
        order = list(dirs) if r % 2 == 0 else list(reversed(dirs))
        for t in threads:
            for d in order:
                io = impls if r % 2 == 0 else list(reversed(impls))
                got = run_bench(binary, t, num, dirs[d], io, extra)
                for impl, (ops, _) in got.items():
                    res.setdefault((t, d, impl), []).append(ops)

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(res[a], res[b]))

    print(f"load average at end: {open('/proc/loadavg').read().strip()}")
    for t in threads:
        print(f"threads={t}")
        for d in dirs:
            kops = " ".join(
                f"{i}={statistics.median(res[(t, d, i)]) / 1e3:.0f}k"
                for i in impls)
            print(f"   {d} {kops}  fk/ldb="
                  f"{ratio((t, d, 'flintkv'), (t, d, 'listdb')):.2f}"
                  f"  vol/ldbvol="
                  f"{ratio((t, d, 'volatile'), (t, d, 'listdb-volatile')):.2f}")
        print("   2m/4k " + " ".join(
            f"{i}={ratio((t, '2m', i), (t, '4k', i)):.2f}"
            for i in ["flintkv", "listdb", "volatile"]))


if __name__ == "__main__":
    main()
