#!/usr/bin/env python3
"""The report of scripts/compare-impi.sh: markdown tables and SVG plots.

Usage: compare-report.py OUT_DIR REPORT.md "MPI LIBRARY AND VERSION" CORES [GASPI_BENCH]
The plots are drawn by `GASPI_BENCH plot` (default target/release/gaspi-bench),
one per benchmark: ours against the MPI library's default algorithm in the
same processes, with a ratio panel.
Reads OUT_DIR/same-processes.csv (gaspi-bench under mpirun: ours and Intel
MPI's default algorithm in the same processes) and OUT_DIR/best-algorithm.csv
(scripts/impi-collectives.sh: Intel MPI's best I_MPI_ADJUST algorithm per
size at 4 ranks). Every figure is a median over rounds of per-run medians.
"""
import csv
import os
import statistics
import subprocess
import sys
from collections import defaultdict

out_dir, report, lib, cores = sys.argv[1:5]
gaspi_bench = sys.argv[5] if len(sys.argv) > 5 else "target/release/gaspi-bench"
med = statistics.median


def is_mpi(impl):
    return "mpi" in impl.split(":")


def operation(bench, impl):
    """What a row measures beyond bench and size: the fence pattern, the
    lock mode and contenders; our implementation and MPI's are the rest."""
    parts = impl.split(":")
    if bench == "fence":
        return parts[0]
    if bench == "lock":
        return ":".join(parts[1:])
    return ""


def comparable(bench, impl):
    """Our rows that stand for the operation (the barrier over all ranks,
    not the flat or node-only ones)."""
    return bench != "barrier" or impl == "gaspi"


def size(b):
    b = int(b)
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


# (layout, bench, bytes) -> impl -> [median per round]
same = defaultdict(lambda: defaultdict(list))
unverified = 0
with open(os.path.join(out_dir, "same-processes.csv")) as f:
    for r in csv.DictReader(f):
        if r["verified"] != "true":
            unverified += 1
            continue
        if not is_mpi(r["impl"]) and not comparable(r["bench"], r["impl"]):
            continue
        layout = (int(r["ranks"]), int(r["ppn"]))
        op = operation(r["bench"], r["impl"])
        same[(layout, r["bench"], op, int(r["bytes"]))][r["impl"]].append(float(r["t_median_us"]))

# (bench, ppn, bytes, variant) -> per round: (intel best over placements,
# algo, ours best over placements); variant: shared (result in the node
# window) or private (copied into each rank's buffer).
best = defaultdict(lambda: defaultdict(lambda: [float("inf"), "", float("inf")]))
# (bench, op, bytes) keys of `same` never include an op for the collectives.
path = os.path.join(out_dir, "best-algorithm.csv")
if os.path.exists(path):
    with open(path) as f:
        rows = [l for l in f if not l.startswith("#")]
    for r in csv.DictReader(rows):
        k = (r["bench"], int(r["ppn"]), int(r["bytes"]), r.get("variant") or "shared")
        cur = best[k][r["round"]]
        if float(r["intel_best_us"]) < cur[0]:
            cur[0], cur[1] = float(r["intel_best_us"]), r["intel_best_algo"]
        cur[2] = min(cur[2], float(r["gaspi_us"]))

# (bench, bytes) -> (IMB-MPI1's best t_avg, algorithm), 4 ranks.
imb = {}
path = os.path.join(out_dir, "imb-best.csv")
if os.path.exists(path):
    with open(path) as f:
        for r in csv.DictReader(f):
            imb[(r["bench"], int(r["bytes"]))] = (float(r["imb_best_us"]), r["algo"])

lines = [
    f"# Ours against {lib}",
    "",
    f"Machine: {cores} cores; one machine (shared memory); our ranks in emulated nodes "
    f"where `ppn` says so ({lib} does not see them). Made by `scripts/compare-impi.sh` or "
    "`scripts/compare-mpich.sh` (raw data in the directory beside this file). Times in us, "
    "medians over rounds of per-run medians; ratios below 1 mean ours is faster.",
    "",
    f"- *same processes*: `gaspi-bench` under `mpirun` runs {lib}'s operation (default "
    "algorithm selection) beside ours, size by size alternately, on the same data, both verified.",
    "- *best algorithm* (Intel MPI only): every `I_MPI_ADJUST_ALLREDUCE` / "
    "`I_MPI_ADJUST_ALLGATHERV` value, the best per size and round (Al Ahad et al. 2018's method), both "
    "rank placements, best against best, 4 ranks.",
    "- *IMB-MPI1 best* (Intel MPI only): IMB-MPI1 Allreduce / Allgatherv (equal sizes) itself "
    "with every algorithm, its lowest `t_avg` per size, 4 ranks, one run.",
    "",
]
if unverified:
    lines += [f"**{unverified} unverified rows were left out.**", ""]

benches = sorted({k[1] for k in same})
plots = []
for bench in benches:
    lines += [f"## {bench}", ""]
    lines += [
        f"| ranks | ppn | operation | size | ours | impl | {lib} (default) | ours / MPI | best algorithm | its time | ours / best | ours private / best | IMB-MPI1 best (algorithm) | ours / IMB best |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    series = defaultdict(lambda: defaultdict(dict))
    for (layout, b, op, nbytes) in sorted(k for k in same if k[1] == bench):
        impls = same[(layout, b, op, nbytes)]
        ours = {i: med(v) for i, v in impls.items() if not is_mpi(i)}
        theirs = {i: med(v) for i, v in impls.items() if is_mpi(i)}
        if not ours or not theirs:
            continue
        oi = min(ours, key=ours.get)
        t_ours, t_mpi = ours[oi], min(theirs.values())
        cell_best, cell_t, cell_r, cell_p = "", "", "", ""
        bk = (bench, layout[1], nbytes, "shared")
        if layout[0] == 4 and bench.startswith(("allreduce", "allgatherv")) and bk in best:
            rounds = best[bk].values()
            ib = med(x[0] for x in rounds)
            algos = sorted({x[1] for x in rounds})
            cell_best, cell_t = "/".join(algos), f"{ib:.2f}"
            cell_r = f"{med(x[2] / x[0] for x in rounds):.2f}"
        pk = (bench, layout[1], nbytes, "private")
        if layout[0] == 4 and pk in best:
            cell_p = f"{med(x[2] / x[0] for x in best[pk].values()):.2f}"
        cell_imb, cell_imb_r = "", ""
        if layout[0] == 4 and (bench, nbytes) in imb:
            t_imb, algo = imb[(bench, nbytes)]
            cell_imb, cell_imb_r = f"{t_imb:.2f} ({algo})", f"{t_ours / t_imb:.2f}"
        lines.append(
            f"| {layout[0]} | {layout[1]} | {op or bench} | {size(nbytes)} | {t_ours:.2f} | {oi} | {t_mpi:.2f} | "
            f"{t_ours / t_mpi:.2f} | {cell_best} | {cell_t} | {cell_r} | {cell_p} | {cell_imb} | {cell_imb_r} |"
        )
        series[(layout, op)]["ours"][nbytes] = t_ours
        series[(layout, op)]["MPI"][nbytes] = t_mpi
    lines.append("")
    sized = [l for l in series if len(series[l]["ours"]) > 1]
    if sized:
        svg = os.path.join(out_dir, f"{bench}.svg")
        day = os.path.basename(os.path.normpath(out_dir))[-10:]
        subprocess.run(
            [gaspi_bench, "plot", os.path.join(out_dir, "same-processes.csv"),
             "--bench", bench, "-o", svg, "--mpi-label", lib, "--date", day,
             "--title", f"{bench}: ours and {lib} (its default algorithm) in the same processes"],
            check=True,
        )
        rel = os.path.relpath(svg, os.path.dirname(report))
        lines += [f"![{bench}]({rel})", ""]

with open(report, "w") as f:
    f.write("\n".join(lines) + "\n")
