#!/usr/bin/env bash
# The MPI engine across emulated hosts, beside MPI itself, in alternated
# rounds of one run (MPICH from Debian; any MPICH-ABI MPI on PATH):
# - write_notify one way across hosts (gaspi-bench write-notify-lat, ranks
#   on 2 hosts) beside the bare MPI sequence that does the same
#   (scripts/mpi/notified_put_lat.c: put + flush + flag put + flush, on a
#   dynamic window as the engine's, and at 8 B on MPI_Win_allocate's; and
#   with the flag as the engine's two accumulates, at 8 B and 4 KiB, with
#   MPI_THREAD_SINGLE and with MPI_THREAD_MULTIPLE as the engine runs);
# - allgatherv, allreduce and alltoallv on 2 hosts of 1 rank (MPICH 4 busy-waits: with
#   more ranks than cores each of its collectives takes tens of ms, so on a
#   2-core machine the twin is measured at 2 ranks; LAYOUT n:ppn for more),
#   MPI's MPI_Allgatherv, MPI_Allreduce and MPI_Alltoallv measured in the
#   same processes (gaspi-bench's MPI twin); the alltoallv also as a flat
#   exchange of ours (one write_notify per pair of ranks), which shows what
#   the node aggregation saves once messages cost round trips.
#   scripts/compare-mpi-engine.sh [ROUNDS] [LAYOUT]   -> docs/mpi-engine-DATE[-N].csv
#
# HOSTS=tcp lets MPI see the hosts too (scripts/mpi/hosts-run.sh: each
# LAYOUT host a host of MPI's own, TCP between them: UCX's tcp transport
# for MPICH, libfabric's for Intel MPI), so the bare sequences and MPI's
# collectives cross hosts through TCP as ours do; ours learns the hosts
# from MPI. (MPICH 4.0.2 with UCX 1.13 over tcp may hang in MPI_Finalize,
# ours or not: docs/guide/troubleshooting.md; OURS_LIMIT, default 300
# seconds, bounds each of ours there.)
# MPIRUN (default mpiexec) starts the MPI programs, OUT names the CSV,
# NPL_LIMIT (seconds, default 120) bounds each bare sequence's run,
# COLLS (default "allgatherv allreduce alltoallv"; "" for none) picks the
# collectives. GASPI_PREBUILT=1 builds nothing (a machine prepared by
# scripts/devkit.sh, with Intel MPI): GASPI_BENCH_MPI is gaspi-bench built
# with --features mpi, NPL notified_put_lat, both for the MPI on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
layout=${2:-2:1}
mpirun=${MPIRUN:-mpiexec}
colls=${COLLS-allgatherv allreduce alltoallv}
if [ -n "${GASPI_PREBUILT:-}" ]; then
    bench=${GASPI_BENCH_MPI:?GASPI_PREBUILT needs GASPI_BENCH_MPI}
    npl=${NPL:?GASPI_PREBUILT needs NPL}
else
    CARGO_TARGET_DIR=target/mpich cargo build --release --features mpi --bin gaspi-bench >&2
    bench=target/mpich/release/gaspi-bench
    npl=$(mktemp -d)/notified_put_lat
    mpicc -O2 scripts/mpi/notified_put_lat.c -o "$npl"
fi
out=${OUT:-docs/mpi-engine-$(date -u +%F).csv}
# a second run on one day keeps the first's rows
k=2
while [ -z "${OUT:-}" ] && [ -e "$out" ]; do out=docs/mpi-engine-$(date -u +%F)-$k.csv; k=$((k + 1)); done
echo "round,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi" >"$out"
rows() { awk -v r="$1" '/^[a-z]/ && !/^bench,/ {print r","$0}'; }
# on_hosts N HOST_RANKS ARGS...: an MPI job of N ranks on hosts of
# HOST_RANKS that MPI sees (HOSTS=tcp), else on this machine; LIMIT
# (seconds) bounds it.
on_hosts() {
    local n=$1 h=$2
    shift 2
    if [ "${HOSTS:-}" = tcp ]; then
        MPIRUN=$mpirun timeout "${LIMIT:-0}" scripts/mpi/hosts-run.sh $((n / h)) "$h" "$@"
    else
        timeout "${LIMIT:-0}" "$mpirun" -n "$n" "$@"
    fi
}
# ours N HOST_RANKS ARGS...: gaspi-bench on N ranks in emulated hosts of
# HOST_RANKS ranks, self-launched (our launcher serves MPI's process
# manager), or by $MPIRUN where that is set.
ours() {
    local n=$1 h=$2
    shift 2
    if [ "${HOSTS:-}" = tcp ]; then
        # (a job that hangs in MPI_Finalize has printed its rows already)
        LIMIT=${OURS_LIMIT:-300} on_hosts "$n" "$h" -genv GASPI_ENGINE mpi "$bench" "$@" || true
    elif [ -n "${MPIRUN:-}" ]; then
        "$mpirun" -n "$n" -genv GASPI_ENGINE mpi -genv GASPI_HOST_RANKS "$h" "$bench" "$@"
    else
        "$bench" "$@" -n "$n" --ppn "$h" --engine mpi --emulate-hosts
    fi
}
for r in $(seq "$rounds"); do
    ours 2 1 write-notify-lat --sizes 8,4K,64K,1M,4M --format csv | rows "$r" >>"$out"
    # the bare MPI sequence on the window kind the engine uses (dynamic),
    # and at 8 B on MPI_Win_allocate's (MPICH maps it shared on one machine)
    # (`put`: the flag by MPI_Put; `acc`: the engine's two element-atomic
    # accumulates, the cheapest sequence with its guarantee; `acc-mt`: the
    # same with MPI_THREAD_MULTIPLE, the thread level the engine runs at)
    for x in 8:dynamic:put 4096:dynamic:put 65536:dynamic:put 1048576:dynamic:put \
        8:allocate:put 8:dynamic:acc 4096:dynamic:acc 8:dynamic:acc:multiple \
        4096:dynamic:acc:multiple; do
        IFS=: read -r bytes window flag level <<<"$x"
        reps=20000
        [ "$bytes" -ge 1048576 ] && reps=2050
        # (MPICH 4.0.2 hung with `allocate` at 8 B on the AMD EPYC VM on
        # 2026-11-30: a sequence that gives up is left out, not waited for)
        { LIMIT=${NPL_LIMIT:-120} on_hosts 2 1 "$npl" $reps "$bytes" "$window" "$flag" "${level:-single}" ||
            echo "compare-mpi-engine: notified_put_lat $x gave up or failed (exit $?)" >&2; } | tr -d '()' |
            awk -v r="$r" -v n=$reps '/^mpi-notified-/ {f=substr($1, 14); print r",write-notify-lat,mpi-"f"-flush-flag-"$4",2,1,"$2","n","$10","$7","$12",,"($13 ~ /yes/ ? "yes" : "no")","}' >>"$out"
    done
    for b in $colls; do
        sizes=64K,256K,1M
        impls=()
        [ $b = allreduce ] && sizes=8,4K,64K,1M,4M
        [ $b = alltoallv ] && sizes=1K,64K,1M && impls=(--impl aggregated,aggregated-private,flat)
        ours "${layout%:*}" "${layout#*:}" $b --sizes $sizes "${impls[@]}" --iters 200 --format csv |
            rows "$r" >>"$out"
    done
done
echo "rows: $out" >&2
