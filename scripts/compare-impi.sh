#!/usr/bin/env bash
# Ours beside Intel MPI, in one command, into a dated report under docs/.
#
# 1. Same processes: gaspi-bench built with --features mpi against Intel
#    MPI and started by mpirun runs Intel's operation beside ours, size by
#    size alternately (allreduce, allgatherv regular/decreasing/bcast,
#    bcast, barrier, fence, lock, put + flush) at -n 2, -n 4 and -n 4 in 2
#    emulated nodes (GASPI_PPN=2); Intel MPI uses its default algorithms
#    and its default wait mode (polling, even where ranks outnumber CPUs:
#    step 2 gives its best, both wait modes included).
# 2. Best Intel algorithm: scripts/impi-collectives.sh runs every
#    I_MPI_ADJUST_ALLREDUCE (1-11) and I_MPI_ADJUST_ALLGATHERV (1-4) with
#    scripts/mpi/coll_bench.c at 4 ranks and keeps the best per size, as
#    Al Ahad et al. 2018 does (sections II-B and III-B).
#    And IMB-MPI1 itself (Allreduce, Allgatherv) with every algorithm, the
#    best t_avg per size (imb-best.csv).
# 3. scripts/compare-report.py writes docs/compare-impi-DATE.md (one table
#    per operation: size, ours, Intel default, Intel best algorithm, its
#    time, ratios) and PNG plots (time against size, log-log) beside it.
#
# Installs Intel MPI from PyPI (plots: `gaspi-bench plot`, SVG) into a
# virtualenv (default .impi-venv, or $IMPI_VENV). Takes about 15 minutes
# on 2 cores with the default 3 rounds.
# Usage: scripts/compare-impi.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. scripts/impi-env.sh
# The mpi-feature build in a target directory of its own (it links Intel
# MPI; the default build stays MPI-free).
CARGO_TARGET_DIR=target/impi cargo build --release --features mpi --bin gaspi-bench >&2
twin=target/impi/release/gaspi-bench

# IMB-MPI1 Allreduce (I_MPI_ADJUST_ALLREDUCE 1-11) and Allgatherv (1-4) at
# 4 ranks: the lowest t_avg per size and the algorithm that gave it. With
# more ranks than CPUs every algorithm runs in both of Intel MPI's wait
# modes (I_MPI_WAIT_MODE 0 polls, 1 waits: its setting for
# oversubscription, 3-300x faster there on the AMD VM; see
# impi-collectives.sh and docs/guide/benchmarking.md), the
# algorithm column then "A/w1" for the waiting one.
if [ 4 -gt "$(nproc)" ]; then imb_wait_modes=${IMPI_WAIT_MODES:-0 1}; else imb_wait_modes=${IMPI_WAIT_MODES:-0}; fi
imb_best() {
    local a w tag
    echo "bench,bytes,imb_best_us,algo"
    {
        for w in $imb_wait_modes; do
            tag=$([ "$w" = 0 ] || echo "/w$w")
            for a in $(seq 1 11); do
                I_MPI_WAIT_MODE=$w I_MPI_ADJUST_ALLREDUCE=$a mpirun -n 4 IMB-MPI1 Allreduce -npmin 4 -msglog 3:20 -iter 500 -time 2 2>/dev/null |
                    awk -v a="$a$tag" 'NF == 5 && $1 ~ /^[0-9]+$/ && $1 > 0 {print "allreduce," $1 "," $5 "," a}'
            done
            for a in 1 2 3 4; do
                I_MPI_WAIT_MODE=$w I_MPI_ADJUST_ALLGATHERV=$a mpirun -n 4 IMB-MPI1 Allgatherv -npmin 4 -msglog 16:22 -iter 200 -time 2 2>/dev/null |
                    awk -v a="$a$tag" 'NF == 5 && $1 ~ /^[0-9]+$/ && $1 > 0 {print "allgatherv-regular," $1 "," $5 "," a}'
            done
        done
    } | sort -t, -k1,1 -k2,2n -k3,3g | awk -F, '!seen[$1 "," $2]++'
}

day=$(date -u +%F)
out=docs/compare-impi-$day
mkdir -p "$out"
. scripts/compare-lib.sh
same_processes "$twin" "$out/same-processes.csv" "$rounds" "2:" "4:" "4:2"
echo "best Intel MPI algorithm per size (scripts/impi-collectives.sh, 4 ranks)..." >&2
REDUCE_SIZES="8 64 512 4096 65536 1048576" GATHER_SIZES="65536 1048576 4194304" \
    scripts/impi-collectives.sh "$rounds" 4 4 2 >"$out/best-algorithm.csv" 2>"$out/best-algorithm.txt"
echo "IMB-MPI1 with every algorithm, 4 ranks..." >&2
imb_best >"$out/imb-best.csv"
"$venv/bin/python" scripts/compare-report.py "$out" "docs/compare-impi-$day.md" "Intel MPI $version" "$(nproc)" "$twin"
echo "report: docs/compare-impi-$day.md" >&2
