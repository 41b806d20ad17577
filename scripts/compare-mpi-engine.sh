#!/usr/bin/env bash
# The MPI engine across emulated hosts, beside MPI itself, in alternated
# rounds of one run (MPICH from Debian; any MPICH-ABI MPI on PATH):
# - write_notify one way across hosts (gaspi-bench write-notify-lat, ranks
#   on 2 hosts) beside the bare MPI sequence that does the same
#   (scripts/mpi/notified_put_lat.c: put + flush + flag put + flush, on a
#   dynamic window as the engine's, and at 8 B on MPI_Win_allocate's; and
#   with the flag as the engine's two accumulates, at 8 B and 4 KiB);
# - allgatherv, allreduce and alltoallv on 2 hosts of 1 rank (MPICH 4 busy-waits: with
#   more ranks than cores each of its collectives takes tens of ms, so on a
#   2-core machine the twin is measured at 2 ranks; LAYOUT n:ppn for more),
#   MPI's MPI_Allgatherv, MPI_Allreduce and MPI_Alltoallv measured in the
#   same processes (gaspi-bench's MPI twin); the alltoallv also as a flat
#   exchange of ours (one write_notify per pair of ranks), which shows what
#   the node aggregation saves once messages cost round trips.
#   scripts/compare-mpi-engine.sh [ROUNDS] [LAYOUT]   -> docs/mpi-engine-DATE[-N].csv
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
layout=${2:-2:1}
CARGO_TARGET_DIR=target/mpich cargo build --release --features mpi --bin gaspi-bench >&2
bench=target/mpich/release/gaspi-bench
npl=$(mktemp -d)/notified_put_lat
mpicc -O2 scripts/mpi/notified_put_lat.c -o "$npl"
out=docs/mpi-engine-$(date -u +%F).csv
# a second run on one day keeps the first's rows
k=2
while [ -e "$out" ]; do out=docs/mpi-engine-$(date -u +%F)-$k.csv; k=$((k + 1)); done
echo "round,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi" >"$out"
rows() { awk -v r="$1" '/^[a-z]/ && !/^bench,/ {print r","$0}'; }
hosts=(--engine mpi --emulate-hosts)
for r in $(seq "$rounds"); do
    "$bench" write-notify-lat -n 2 --ppn 1 "${hosts[@]}" --sizes 8,4K,64K,1M,4M --format csv | rows "$r" >>"$out"
    # the bare MPI sequence on the window kind the engine uses (dynamic),
    # and at 8 B on MPI_Win_allocate's (MPICH maps it shared on one machine)
    # (`put`: the flag by MPI_Put; `acc`: the engine's two element-atomic
    # accumulates, the cheapest sequence with its guarantee)
    for x in 8:dynamic:put 4096:dynamic:put 65536:dynamic:put 1048576:dynamic:put \
        8:allocate:put 8:dynamic:acc 4096:dynamic:acc; do
        IFS=: read -r bytes window flag <<<"$x"
        reps=20000
        [ "$bytes" -ge 1048576 ] && reps=2050
        mpiexec -n 2 "$npl" $reps "$bytes" "$window" "$flag" | tr -d '()' |
            awk -v r="$r" -v n=$reps -v f="$flag" '{print r",write-notify-lat,mpi-"f"-flush-flag-"$4",2,1,"$2","n","$10","$7","$12",,"($13 ~ /yes/ ? "yes" : "no")","}' >>"$out"
    done
    for b in allgatherv allreduce alltoallv; do
        sizes=64K,256K,1M
        impls=()
        [ $b = allreduce ] && sizes=8,4K,64K,1M,4M
        [ $b = alltoallv ] && sizes=1K,64K,1M && impls=(--impl aggregated,aggregated-private,flat)
        "$bench" $b -n "${layout%:*}" --ppn "${layout#*:}" "${hosts[@]}" --sizes $sizes \
            "${impls[@]}" --iters 200 --format csv | rows "$r" >>"$out"
    done
done
echo "rows: $out" >&2
