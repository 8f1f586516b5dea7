"""Helpers shared by scripts/paper/paper_figures.py and paper_figures_e2e.py:
logging, commands, medians, CSV files, grouping and line plots."""
import csv
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(f"[paper_figures {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, env=None, cwd=None, check=True):
    log("$ " + " ".join(cmd))
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"paper_figures: FAIL: {cmd[0]} exited {p.returncode}")
    return p


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def group(runs, *keys):
    out = {}
    for r in runs:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def plot_lines(a, name, data, xlabel, ylabel, title, logx=False):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for s, pts in data.items():
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    label=s)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, f"{name}.png"), dpi=110)
    plt.close(fig)
