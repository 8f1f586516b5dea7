"""End-to-end figures of scripts/paper/paper_figures.py: stock db_bench
fillrandom with the flintkv plugin vs RocksDB's WAL (Fig 8/9, and the WAL on
the real disk; both run by scripts/bench/e2e_bench.py) and recovery time
(Fig 10, scripts/bench/recovery_bench.sh)."""
import csv as csv_module
import os
import re
import sys

from paper_figures_lib import ROOT, log, median, plot_lines, sh, write_csv

sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
from e2e_bench import parse_args, resolve_db_bench, run_once  # noqa: E402


def end_to_end(a, md, name, cfgs, num, threads, where, title, paper):
    """db_bench fillrandom through e2e_bench's run_once (DB and WAL in
    `where`, the pool on /dev/shm) with Debian's db_bench and, when
    resolve_db_bench finds it, the release build; repeats interleaved ABBA."""
    opts = parse_args(["--num", str(num), "--db_dir", where])
    builds = [("debian",) + resolve_db_bench("debian")[1:]]
    auto = resolve_db_bench("auto")  # warns when the release build is absent
    if auto[1] != builds[0][1]:
        builds.append(("release",) + auto[1:])
    runs = [(b, cfg) for b in builds for cfg in cfgs]
    res = {}
    asserts = {}
    for rep in range(a.repeats):
        for t in threads:
            for (label, binary, env), cfg in (runs if rep % 2 == 0
                                              else runs[::-1]):
                r, out = run_once(opts, binary, env, a.plugin, cfg, t)
                ops = r["fillrandom"][0]
                res.setdefault((label, cfg, t), []).append(ops)
                asserts[label] = "Assertions are enabled" in out
                log(f"{label} {cfg} {t} threads: {ops:.0f} ops/s")
    rows = [[b, c, t, len(v), round(median(v)), round(min(v)), round(max(v))]
            for (b, c, t), v in sorted(res.items())]
    write_csv(os.path.join(a.out, f"{name}.csv"),
              ["rocksdb_build", "config", "threads", "runs", "ops_per_s_median",
               "min", "max"], rows)
    med = {k: median(v) for k, v in res.items()}
    other = cfgs[1]
    table = ["| threads | " + " | ".join(
        f"{b}: flintkv | {b}: {other} | {b}: ratio" for b, _, _ in builds) +
             " |", "|---:|" + "---:|" * 3 * len(builds)]
    for t in threads:
        cells = []
        for b, _, _ in builds:
            f, o = med[(b, "flintkv", t)], med[(b, other, t)]
            cells += [f"{f / 1e3:.0f}k", f"{o / 1e3:.0f}k", f"**{f / o:.2f}**"]
        table.append(f"| {t} | " + " | ".join(cells) + " |")
    plot_lines(a, name, {f"{b}: {c}": [(t, med[(b, c, t)] / 1e3)
                                       for t in threads]
                         for b, _, _ in builds for c in cfgs},
               "threads", "kops/s (median)", title, logx=True)
    which = "; ".join(
        f"`{b}` = {bin_} ({'assertions ON' if asserts.get(b) else 'NDEBUG'}"
        f"{', LD_LIBRARY_PATH=' + env['LD_LIBRARY_PATH'] if env else ''})"
        for b, bin_, env in builds)
    if len(builds) == 1:
        which += ("; the release build is absent (run "
                  "scripts/setup/build_release_rocksdb.sh, then this script again)")
    md.append(f"### {title}\n\n![{name}](paper_figures/{name}.png)\n\n"
              f"RocksDB builds: {which}. Ratio = flintkv / {other}, medians of "
              f"{a.repeats}.\n\n" + "\n".join(table) + f"\n\nPaper: {paper}\n")


# ---------------------------------------------------------------- recovery

def fig10(a, md):
    out = os.path.join(a.out, "recovery.md")
    cmd = [os.path.join(ROOT, "scripts", "bench", "recovery_bench.sh")]
    if a.quick or a.short:
        cmd.append("--quick")  # 30 MB only, one run
    cmd.append(a.build)
    env = dict(os.environ, RECOVERY_OUT=out)
    sh(cmd, env=env)
    rows = []
    pat = re.compile(r"recovery mb=(\d+) .*?flintkv ([\d.]+) s.*rocksdb_wal "
                     r"([\d.]+) s")
    with open(out) as f:
        for line in f:
            m = pat.search(line)
            if m:
                rows.append([int(m.group(1)), float(m.group(2)),
                             float(m.group(3))])
    if not rows:
        raise SystemExit("paper_figures: FAIL: no recovery lines in " + out)
    write_csv(os.path.join(a.out, "fig10.csv"),
              ["mb", "flintkv_s", "rocksdb_wal_s"], rows)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.4))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] for r in rows], 0.4, label="flintkv")
    ax.bar([x + 0.2 for x in xs], [r[2] for r in rows], 0.4,
           label="RocksDB WAL replay")
    ax.set_xticks(list(xs), [f"{r[0]} MB" for r in rows])
    ax.set_ylabel("seconds (median)")
    ax.set_title("Fig 10: recovery time", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "fig10.png"), dpi=110)
    plt.close(fig)
    table = ["| MB | flintkv s | RocksDB WAL replay s | speed-up |",
             "|---:|---:|---:|---:|"] + [
        f"| {m} | {f:.2f} | {r:.2f} | {r / f:.2f}x |" for m, f, r in rows]
    md.append("### Fig 10: recovery (scripts/bench/recovery_bench.sh; its full "
              "output: `paper_figures/recovery.md`)\n\n"
              "![fig10](paper_figures/fig10.png)\n\n" + "\n".join(table) +
              "\n\nPaper: FlintKV recovers 171.5% faster at ~30 MB and 20% "
              "faster at ~300 MB than the WAL replay of PMemRocksDB/ListDB.\n")


# ------------------------------------------ e2e_bench: fill and memtable reads

def e2e_bench_section(a, md, name, workload, threads, num, title):
    """Runs scripts/bench/e2e_bench.py (interleaved rounds, same-round ratios),
    plots its CSV and appends its tables."""
    csv = os.path.join(a.out, f"{name}.csv")
    table_md = os.path.join(a.out, f"{name}.md")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench", "e2e_bench.py"),
           "--db_bench", "auto", "--workload", workload,
           "--threads", ",".join(str(t) for t in threads), "--num", str(num),
           "--rounds", str(a.repeats), "--plugin", a.plugin,
           "--out", table_md, "--csv", csv]
    if workload == "reads":
        cmd += ["--reads", str(num), "--configs", "flintkv,nowal"]
    else:
        cmd += ["--configs", "flintkv,walsync,wal,nowal"]
    sh(cmd)
    images = plot_e2e(a, name, workload, csv)
    with open(table_md) as f:
        # Without its own title; its per-benchmark headings under ours.
        tables = f.read().split("\n", 1)[1].replace("\n## ", "\n#### ")
    md.append(f"### {title}\n\n" + "\n".join(images) + "\n" + tables + "\n")


def plot_e2e(a, name, workload, csv):
    """Plots of an e2e_bench CSV (one per benchmark; fill: also p99);
    returns their markdown image links."""
    rows = list(csv_module.DictReader(open(csv)))
    benches = sorted({r["bench"] for r in rows},
                     key=lambda b: [r["bench"] for r in rows].index(b))
    images = []
    for b in benches:
        br = [r for r in rows if r["bench"] == b]
        cfgs = sorted({r["config"] for r in br})
        data = {c: [(int(r["threads"]), float(r["ops_median"]) / 1e3)
                    for r in br if r["config"] == c] for c in cfgs}
        if workload == "reads":
            data["flintkv modeled (Optane reads)"] = [
                (int(r["threads"]), float(r["modeled_ops"]) / 1e3)
                for r in br if r["config"] == "flintkv"]
        plot_lines(a, f"{name}_{b}", data, "threads", "kops/s (median)",
                   f"db_bench {b}: flintkv vs RocksDB skiplist", logx=True)
        images.append(f"![{name} {b}](paper_figures/{name}_{b}.png)")
        if workload == "fill":
            p99 = {c: [(int(r["threads"]), float(r["p99_us_median"]))
                       for r in br if r["config"] == c] for c in cfgs}
            plot_lines(a, f"{name}_{b}_p99", p99, "threads",
                       "p99 latency, us (median)", f"db_bench {b}: p99",
                       logx=True)
            images.append(f"![{name} {b} p99](paper_figures/{name}_{b}_p99.png)")
    return images
