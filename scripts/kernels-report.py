#!/usr/bin/env python3
"""The report of scripts/compare-kernels.sh: markdown tables and SVG plots
of the application kernels (stencil, GUPS), ours beside the flat-MPI code
in the same processes.

Usage: kernels-report.py CSV REPORT.md [GASPI_BENCH]
Reads CSV (rows mpi,round,<gaspi-bench CSV>, as compare-kernels.sh writes
them) and writes REPORT.md: per kernel, MPI library, layout and size the
median over rounds of each variant's time, and the median over rounds of
MPI's time / ours (> 1: ours is faster; each round's pair ran in the same
processes). The plots, one per MPI library and kernel, are drawn by
`GASPI_BENCH plot` (default target/release/gaspi-bench) into
docs/plots/<CSV name>-<mpi>-<kernel>.svg, linked from the report.
"""
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

src, report = sys.argv[1:3]
gaspi_bench = sys.argv[3] if len(sys.argv) > 3 else "target/release/gaspi-bench"
med = statistics.median
LIBS = {"impi": "Intel MPI", "mpich": "MPICH"}
# Our variants, in the order the tables show them.
OURS = ["node", "node-atomic", "node-lockfree", "flat"]


def size(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


with open(src) as f:
    text = f.read().splitlines()
comments = [l for l in text if l.startswith("#")]
rows = list(csv.DictReader(l for l in text if not l.startswith("#")))
# The first comment: "DATE, CPU MODEL, N cores; mpi: LIBRARIES".
header = comments[0].lstrip("# ") if comments else ""
machine = header.split(";")[0].split(", ", 1)[-1] or "this machine"

# (mpi, bench, procs, ppn, bytes) -> round -> impl -> median time (us)
runs = defaultdict(lambda: defaultdict(dict))
unverified = 0
for r in rows:
    if r["verified"] != "true":
        unverified += 1
        continue
    key = (r["mpi"], r["bench"], int(r["procs"]), int(r["ppn"]), int(r["bytes"]))
    runs[key][r["round"]][r["impl"]] = float(r["t_median_us"])

name = os.path.splitext(os.path.basename(src))[0]
plots_dir = os.path.join(os.path.dirname(os.path.abspath(report)), "plots")
lines = [
    f"# Application kernels: ours beside flat MPI ({name})",
    "",
    f"Measured: {header or machine}. Made by `scripts/compare-kernels.sh` (raw rows: "
    f"[{os.path.basename(src)}]({os.path.relpath(os.path.abspath(src), os.path.dirname(os.path.abspath(report)))})). "
    "Each row: one layout (ranks : ranks per emulated node; MPI does not see our nodes) "
    "and size (a rank's block for the stencil, a rank's table for GUPS); times in us "
    "(stencil: per sweep; GUPS: per round of 1024 updates per rank), "
    "medians over rounds of per-run medians; *MPI / ours*: the median over rounds "
    "of MPI's time / ours in the same processes (> 1: ours is faster). "
    "Variants: `node` node-shared windows (GUPS: exact, each part updated by its owner), "
    "`node-atomic` (GUPS: exact, any rank of a node updates its words with atomics), "
    "`node-lockfree` (GUPS: plain updates, HPCC's 1% tolerance), `flat` a segment per rank.",
    "",
]
if unverified:
    lines += [f"**{unverified} unverified rows were left out.**", ""]

for bench in sorted({k[1] for k in runs}):
    for mpi in sorted({k[0] for k in runs if k[1] == bench}):
        lib = LIBS.get(mpi, mpi)
        keys = sorted(k for k in runs if k[0] == mpi and k[1] == bench)
        ours = [v for v in OURS if any(v in i for k in keys for i in runs[k].values())]
        lines += [f"## {bench}, {lib}", ""]
        head = ["ranks:ppn", "size", f"{lib} us"] + [f"{v} us" for v in ours]
        head += [f"{lib} / {v}" for v in ours] + ["rounds"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for k in keys:
            per = runs[k].values()
            both = [p for p in per if "mpi" in p]
            if not both:
                continue
            cells = [f"{k[2]}:{k[3]}", size(k[4]), f"{med(p['mpi'] for p in both):.1f}"]
            for v in ours:
                t = [p[v] for p in per if v in p]
                cells.append(f"{med(t):.1f}" if t else "")
            for v in ours:
                q = [p["mpi"] / p[v] for p in both if p.get(v, 0) > 0]
                cells.append(f"{med(q):.2f}" if q else "")
            cells.append(str(len(both)))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        # The plot: this MPI library's rows of this kernel only.
        os.makedirs(plots_dir, exist_ok=True)
        svg = os.path.join(plots_dir, f"{name}-{mpi}-{bench}.svg")
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as t:
            t.write("bench,impl,procs,ppn,bytes,t_median_us,verified\n")
            for r in rows:
                if r["mpi"] == mpi and r["bench"] == bench:
                    t.write(f"{r['bench']},{r['impl']},{r['procs']},{r['ppn']},{r['bytes']},"
                            f"{r['t_median_us']},{r['verified']}\n")
        day = name[len("kernels-"):][:10] if name.startswith("kernels-") else name
        try:
            subprocess.run(
                [gaspi_bench, "plot", t.name, "-o", svg, "--mpi-label", lib, "--date", day,
                 "--machine", machine,
                 "--title", f"{bench}: ours and flat {lib} in the same processes"
                 + (" (time per round of 1024 updates per rank)" if bench == "gups" else "")],
                check=True,
            )
        finally:
            os.unlink(t.name)
        rel = os.path.relpath(svg, os.path.dirname(os.path.abspath(report)))
        lines += [f"![{bench}, {lib}]({rel})", ""]

with open(report, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"report: {report}", file=sys.stderr)
