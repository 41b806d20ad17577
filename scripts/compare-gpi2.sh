#!/usr/bin/env bash
# Ours on the GPI-2 engine beside GPI-2 alone, in alternated rounds, on two
# ranks that are two emulated hosts (every byte through GPI-2's device):
# per round gaspi-bench write-notify-lat (twice: batch means, and single
# calls with --per-op) and passive-lat
# (`-n 2 --ppn 1 --engine gpi2 --emulate-hosts`), then
# scripts/gpi2/write_notify_lat.c, the same ping-pong in plain GPI-2 under
# GPI-2's own gaspi_run. Both are timed alike (median of 25 batch means);
# the C program also prints the median of single round trips (what GPI-2's
# tests/microbenchmarks/write_notify_lat reports), set beside ours with
# --per-op.
# Prints per size the medians over rounds and the median of the per-round
# ratios ours / GPI-2 (< 1: ours faster) and passive / write_notify
# (ours); keeps the raw rows in ${OUT:-target/gpi2}/rows.csv.
#
# Usage: GPI2_DIR=/opt/gpi2 scripts/compare-gpi2.sh [ROUNDS]   (default 3)
#   SIZES="8 1024 65536 1048576"  PASSIVE_SIZES="8 1024 4096 32768"  ITERS=1000
# GPI2_DIR: a GPI-2 install (README, "On a cluster"; .ci/run builds one
# under ~/.cache/gaspi-ci). gaspi_run starts ranks with `ssh HOST CMD`: a
# stand-in ssh that runs the command here is put first on PATH.
# Besides the batch means, each round times ours with --wait block (the
# waiter sleeps in the kernel until woken: impl gaspi-block).
# GASPI_PREBUILT=1 (scripts/devkit.sh with GPI2_DIR set) builds nothing:
# GPI2_DIR=.devkit/gpi2, gaspi-bench is .devkit/gaspi-bench-gpi2 and the C
# program .devkit/write_notify_lat.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
sizes=${SIZES:-8 1024 65536 1048576}
passive_sizes=${PASSIVE_SIZES:-8 1024 4096 32768}
iters=${ITERS:-1000}
if [ -z "${GPI2_DIR:-}" ]; then
    GPI2_DIR=$(pkg-config --variable=prefix GPI2 2>/dev/null || true)
fi
if [ -z "$GPI2_DIR" ] || [ ! -x "$GPI2_DIR/bin/gaspi_run" ]; then
    echo "set GPI2_DIR to a GPI-2 install (see the README: On a cluster)" >&2
    exit 2
fi
export GPI2_DIR
lib=$GPI2_DIR/lib64
[ -d "$lib" ] || lib=$GPI2_DIR/lib
out=${OUT:-target/gpi2}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "${GASPI_PREBUILT:-}" ]; then
    cp .devkit/write_notify_lat "$out/write_notify_lat"
    bench=.devkit/gaspi-bench-gpi2
    export LD_LIBRARY_PATH="$(cd "$lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
    cc -O2 -o "$out/write_notify_lat" scripts/gpi2/write_notify_lat.c \
        -I"$GPI2_DIR/include" -L"$lib" -lGPI2 -lpthread -Wl,-rpath,"$lib"
    cargo build --release --features gpi2 --bin gaspi-bench >&2
    bench=${CARGO_TARGET_DIR:-target}/release/gaspi-bench
fi
# gaspi_run: a stand-in ssh (drops the host, refuses killall), a machine
# file naming this host twice, and a script carrying the arguments
# (gaspi_run passes none).
fake=$out/bin
mkdir -p "$fake"
printf '#!/bin/sh\nshift\ncase "$*" in *killall*) exit 1 ;; esac\nexec /bin/sh -c "$*"\n' >"$fake/ssh"
chmod +x "$fake/ssh"
printf 'localhost\nlocalhost\n' >"$out/machines"
# shellcheck disable=SC2086
printf '#!/bin/sh\nexec %s %s %s\n' "$out/write_notify_lat" "$iters" "$(echo $sizes)" >"$out/run-c.sh"
chmod +x "$out/run-c.sh"
csv_sizes() { echo "$1" | tr ' ' ,; }
ours() { "$bench" "$1" -n 2 --ppn 1 --engine gpi2 --emulate-hosts --sizes "$(csv_sizes "$2")" \
    --iters "$iters" "${@:3}" --format csv | tail -n +2 | cut -d, -f1-11; }

rows=$out/rows.csv
echo "round,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified" >"$rows"
for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds" >&2
    {
        ours write-notify-lat "$sizes"
        ours write-notify-lat "$sizes" --per-op | sed 's/^write-notify-lat,gaspi,/write-notify-lat,gaspi-op-median,/'
        PATH=$fake:$PATH timeout 600 bash "$GPI2_DIR/bin/gaspi_run" -m "$out/machines" -n 2 "$out/run-c.sh" \
            2>/dev/null | grep '^write-notify-lat,'
        ours passive-lat "$passive_sizes"
        ours write-notify-lat "$sizes" --wait block | sed 's/^write-notify-lat,gaspi,/write-notify-lat,gaspi-block,/'
        ours passive-lat "$passive_sizes" --wait block | sed 's/^passive-lat,gaspi,/passive-lat,gaspi-block,/'
    } | sed "s/^/$r,/" >>"$rows"
done

python3 - "$rows" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {}
for r in rows:
    if r["verified"] not in ("true", "yes"):
        print("NOT VERIFIED:", r, file=sys.stderr)
        continue
    t.setdefault((r["bench"], r["impl"], int(r["bytes"])), {})[r["round"]] = float(r["t_median_us"])
med = lambda d: statistics.median(d.values())
def ratio(a, b):
    per = [a[k] / b[k] for k in a if k in b]
    return (f"{statistics.median(per):.2f}", len(per)) if per else ("", 0)
nan = float("nan")
print("bytes,ours_us,gpi2_us,ours/gpi2,ours_op_median_us,gpi2_op_median_us,ours/gpi2 (op medians),rounds")
for (bench, impl, size) in sorted(k for k in t if k[0] == "write-notify-lat" and k[1] == "gaspi"):
    ours, c = t[(bench, impl, size)], t.get((bench, "gpi2", size), {})
    oo = t.get((bench, "gaspi-op-median", size), {})
    op = t.get((bench, "gpi2-op-median", size), {})
    q, n = ratio(ours, c)
    qo, _ = ratio(oo, op)
    print(f"{size},{med(ours):.1f},{med(c) if c else nan:.1f},{q},"
          f"{med(oo) if oo else nan:.1f},{med(op) if op else nan:.1f},{qo},{n}")
print()
print("bytes,ours_passive_us,ours_write_notify_us,passive/write_notify,rounds")
for (bench, impl, size) in sorted(k for k in t if k[0] == "passive-lat" and k[1] == "gaspi"):
    p = t[(bench, impl, size)]
    # the write_notify of the same size, or of the nearest size measured
    wn = {k[2]: v for k, v in t.items() if k[0] == "write-notify-lat" and k[1] == "gaspi"}
    if not wn:
        continue
    near = min(wn, key=lambda s: abs(s - size))
    q, n = ratio(p, wn[near])
    print(f"{size},{med(p):.1f},{med(wn[near]):.1f} ({near} B),{q},{n}")
print()
print("bench,bytes,ours_block_us,ours_us,block/spin-then-yield,rounds")
for (bench, impl, size) in sorted(k for k in t if k[1] == "gaspi-block"):
    b, o = t[(bench, impl, size)], t.get((bench, "gaspi", size), {})
    q, n = ratio(b, o)
    print(f"{bench},{size},{med(b):.1f},{med(o) if o else nan:.1f},{q},{n}")
EOF
