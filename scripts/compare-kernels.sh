#!/usr/bin/env bash
# The application kernels ported to GASPI beside the flat-MPI codes they
# were ported from, in the same processes: gaspi-bench built with
# --features mpi and started by mpirun runs, size by size, our flat variant
# (a segment per rank), our node-shared variant (a window per emulated
# node) and the flat-MPI code, all verified:
# - stencil: halo exchange by write_notify (flat), rows inside a node read
#   in place (node), MPI_Isend/MPI_Irecv + MPI_Waitall (MPI); checked bit
#   for bit against the sequential sweep;
# - gups (HPCC Random Access, exact): buckets by write_notify per rank
#   (flat), one bucket per node and each part of a node's table updated by
#   its owner (node), buckets by MPI_Alltoallv (MPI); checked as HPCC
#   does, no error allowed.
# Rounds alternate MPI libraries and layouts so that every side sees the
# same machine state, and which side of a size runs first in its process.
#
# MPIS picks the MPI libraries: mpich (Debian's, mpiexec.mpich) and impi
# (Intel MPI 2021 from PyPI, installed by scripts/impi-env.sh into
# $IMPI_VENV or .impi-venv). Point-to-point has no I_MPI_ADJUST algorithm
# to pick; Intel MPI runs with its defaults and I_MPI_FABRICS=shm.
# Both MPI libraries busy-poll while they wait: with more ranks than cores
# their sweeps take the scheduler's time slices, so the layouts with one
# rank per core (2:1, 2:2 on a 2-core machine) are the fair comparison and
# the others show what waiting costs when cores are shared.
#
# Usage: scripts/compare-kernels.sh [ROUNDS] [N:PPN ...]
#   default: 3 rounds of 2:1 2:2 4:2 8:2 (ranks:ranks per node)
#   KERNELS (default "stencil gups"); stencil: SIZES (bytes of one rank's
#   block, default 32K,512K,8M), ITERS (sweeps per size, default 400),
#   DECOMPS (default 1d,2d); gups: GUPS_SIZES (bytes of one rank's table,
#   default 8M,64M), GUPS_ROUNDS (rounds of 1024 updates per rank, default 1000)
# Output: docs/kernels-DATE.csv or $KERNELS_CSV (rows: mpi,round + gaspi-bench's CSV);
# its report beside it (the same name with .md: per kernel and MPI library
# a table of the medians and of MPI's time / ours, > 1: ours is faster,
# and a plot in docs/plots/, by scripts/kernels-report.py); and on stderr
# the ratios per MPI, layout, cut, size and variant.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift $(($# > 0 ? 1 : 0))
if [ $# -gt 0 ]; then layouts=("$@"); else layouts=(2:1 2:2 4:2 8:2); fi
sizes=${SIZES:-32K,512K,8M}
iters=${ITERS:-400}
decomps=${DECOMPS:-1d,2d}
kernels=${KERNELS:-stencil gups}
gups_sizes=${GUPS_SIZES:-8M,64M}
gups_rounds=${GUPS_ROUNDS:-1000}
mpis=${MPIS:-mpich impi}
# GASPI_PREBUILT=1 (scripts/devkit.sh): no builds; Intel MPI's twin is
# $GASPI_BENCH_IMPI, MPICH's $GASPI_BENCH_MPICH.
impi_twin=${GASPI_BENCH_IMPI:-target/impi/release/gaspi-bench}
mpich_twin=${GASPI_BENCH_MPICH:-target/mpich/release/gaspi-bench}

for m in $mpis; do
    [ -n "${GASPI_PREBUILT:-}" ] && break
    case $m in
    mpich)
        CARGO_TARGET_DIR=target/mpich cargo build --release --features mpi --bin gaspi-bench >&2
        ;;
    impi)
        (
            . scripts/impi-env.sh
            CARGO_TARGET_DIR=target/impi cargo build --release --features mpi --bin gaspi-bench >&2
        )
        ;;
    *) echo "MPIS: unknown MPI '$m' (mpich, impi)" >&2 && exit 2 ;;
    esac
done
impi_venv=$(cd "${IMPI_VENV:-.impi-venv}" 2>/dev/null && pwd || true)

run() { # MPI N PPN KERNEL ROUND: gaspi-bench's CSV rows
    local m=$1 n=$2 ppn=$3
    local args=(stencil --sizes "$sizes" --iters "$iters" --decomp "$decomps" --format csv)
    [ "$4" = gups ] && args=(gups --sizes "$gups_sizes" --iters "$gups_rounds" --format csv)
    # MPI's side first in even rounds: a process's later runs may find the
    # machine in another state.
    [ $(($5 % 2)) = 0 ] && args+=(--mpi-first)
    if [ "$m" = mpich ]; then
        GASPI_PPN=$ppn mpiexec.mpich -n "$n" "$mpich_twin" "${args[@]}"
    else
        PATH="$impi_venv/bin:$PATH" LD_LIBRARY_PATH="$impi_venv/lib:${LD_LIBRARY_PATH:-}" \
            I_MPI_FABRICS=shm GASPI_PPN=$ppn \
            "$impi_venv/bin/mpirun" -n "$n" "$impi_twin" "${args[@]}"
    fi
}

out=${KERNELS_CSV:-docs/kernels-$(date -u +%F).csv}
k=2
while [ -z "${KERNELS_CSV:-}" ] && [ -e "$out" ]; do out=docs/kernels-$(date -u +%F)-$k.csv; k=$((k + 1)); done
{
    echo "# $(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; mpi: $mpis"
    echo "mpi,round,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi"
} >"$out"
for r in $(seq "$rounds"); do
    for l in "${layouts[@]}"; do
        for m in $mpis; do
            for kernel in $kernels; do
                run "$m" "${l%:*}" "${l#*:}" "$kernel" "$r" |
                    awk -v m="$m" -v r="$r" '/^(stencil|gups)/ {print m "," r "," $0}' >>"$out"
            done
        done
    done
done
echo "rows: $out" >&2
if grep -q ',false,' "$out"; then
    echo "UNVERIFIED rows:" >&2
    grep ',false,' "$out" >&2
    exit 1
fi
echo "# median over rounds of MPI's time / ours (> 1: ours is faster)" >&2
# Per round, MPI's median and ours come from the same processes and run.
awk -F, '$1 !~ /^#/ && $1 != "mpi" {
        run = $1 "," $2 "," $3 "," $5 "," $6 "," $7
        if ($4 == "mpi") mpi[run] = $10; else { ours[run "," $4] = $10 }
    }
    END {
        for (k in ours) {
            split(k, f, ",")
            run = f[1] "," f[2] "," f[3] "," f[4] "," f[5] "," f[6]
            if (!(run in mpi) || ours[k] <= 0) continue
            g = f[1] " " f[4] ":" f[5] " " f[3] " " f[6] " " f[7]
            n[g]++; v[g, n[g]] = mpi[run] / ours[k]
        }
        for (g in n) {
            m = n[g]
            for (i = 1; i <= m; i++) a[i] = v[g, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            printf "#   %-40s %8.2f  (%d rounds)\n", g, (m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2), m
        }
    }' "$out" | sort -k2,2 -k3,3 -k4,4 -k5,5n -k6,6 >&2
# The report (tables and plots); `gaspi-bench plot` from one of the twins.
plotter=$mpich_twin
plot_env=()
if [[ " $mpis " != *" mpich "* ]]; then
    plotter=$impi_twin
    plot_env=(LD_LIBRARY_PATH="$impi_venv/lib:${LD_LIBRARY_PATH:-}")
fi
env "${plot_env[@]}" python3 scripts/kernels-report.py "$out" "${out%.csv}.md" "$plotter"
