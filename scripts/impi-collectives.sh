#!/usr/bin/env bash
# Intel MPI's allreduce, allgatherv and alltoallv (every I_MPI_ADJUST_*
# algorithm) beside gaspi-bench's, rounds alternated so that both see the same machine
# state. Both sides run the same data, sizes, verification and statistics
# (scripts/mpi/coll_bench.c mirrors gaspi-bench): per round, the best Intel
# MPI algorithm for each size (lowest median) against ours, both with the
# result shared in the node's window (gaspi-bench --impl auto, ring-shared,
# aggregated) and copied into each rank's own buffer (auto-private,
# ring-private, aggregated-private), as a flat-MPI code needs it;
# VARIANTS="shared private" (default) picks; "window" adds the alltoallv
# whose pieces are made in the window (aggregated-window: its input copy
# left out too, so only a program that makes its data there may compare
# with it); "unknown" adds the alltoallv with sizes unknown in advance
# (unknown-private: counts exchanged in the call) against Intel MPI's
# MPI_Alltoall of the counts then MPI_Alltoallv (coll_bench
# alltoallv-unknown; rows named alltoallv-unknown-DIST), "varying" the
# same with counts that change every call (unknown-varying against
# coll_bench alltoallv-varying). COLLS (default "allreduce
# allgatherv alltoallv") picks the collectives; alltoallv sizes are bytes
# per pair of ranks (A2A_SIZES), its distributions A2A_DISTS.
#
# Both sides run under both placements of ranks on CPUs: "spread" (rank r
# on CPU r % cpus: Intel MPI's default; gaspi-bench --bind spread) and
# "block" (consecutive ranks share a CPU: gaspi-run's default; Intel MPI
# with I_MPI_PIN_PROCESSOR_LIST). With more ranks than CPUs the placement
# decides what shares a core, which changes results by up to 2x here.
#
# Usage: scripts/impi-collectives.sh [ROUNDS] [RANKS] [PPN...]
#   e.g. scripts/impi-collectives.sh 5 4 4 2   (4 ranks: one node, then 2x2)
# Output: CSV on stdout (one line per round, placement, size, layout and
# variant) and a summary on stderr: per placement, and best placement
# against best placement, the median over rounds of ours / Intel's best
# (< 1 is faster).
#
# COOLDOWN (seconds, default 10) passes before each side's runs: on the
# project's VM (Firecracker, 2 vCPUs) a run right after another side's
# minutes of spinning was often 2-3.5x slower for some seconds (4 KiB
# allreduce 9 us instead of 5 in 2 of 5 tries, never 15 s later), which
# the runs first in each round (Intel MPI's, then our shared variant)
# paid for the others.
#
# ENGINE=mpi runs ours on the MPI engine instead (gaspi-bench built with
# --features mpi against this Intel MPI: $GASPI_BENCH_IMPI, built here
# unless GASPI_PREBUILT), started by Intel MPI's mpirun with the same
# pinning, each PPN then the ranks of an emulated host (GASPI_HOST_RANKS:
# no shared memory between hosts, every byte between them through Intel
# MPI's one-sided calls); Intel MPI's collectives still run over shared
# memory among all ranks, as it does not know our hosts.
#
# HOSTS=tcp (with ENGINE=mpi) lets Intel MPI see the hosts too: both sides
# start through scripts/mpi/hosts-run.sh, each PPN ranks a host of Intel
# MPI's own (shared memory inside it, libfabric's tcp provider between
# hosts, I_MPI_FABRICS=shm:ofi), so Intel MPI's collectives pay for every
# inter-host message as ours do; ours learns the hosts from MPI.
#
# Installs Intel MPI from PyPI into a virtualenv (default .impi-venv, or
# $IMPI_VENV), like scripts/impi-baseline.sh. Intel MPI does not know our
# emulated nodes: it runs its ranks on this machine with shared memory.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
ranks=${2:-4}
shift $(($# > 2 ? 2 : $#))
layouts=("${@:-$ranks}")
reduce_sizes=${REDUCE_SIZES:-8 64 512 1024 2048 4096 8192 16384 65536 262144 1048576 4194304}
gather_sizes=${GATHER_SIZES:-65536 131072 262144 524288 1048576 2097152 4194304}
dists=${DISTS:-regular decreasing bcast}
colls=${COLLS:-allreduce allgatherv alltoallv}
a2a_sizes=${A2A_SIZES:-1024 8192 65536 262144 1048576}
a2a_dists=${A2A_DISTS:-regular random sparse}
has() { case " $colls " in *" $1 "*) return 0 ;; esac; return 1; }
placements=${PLACEMENTS:-spread block}
variants=${VARIANTS:-shared private}
cooldown=${COOLDOWN:-10}
cpus=$(nproc)
# Intel MPI's wait modes (I_MPI_WAIT_MODE): 0 polls (its default), 1 waits
# (its setting for oversubscription). With more ranks than CPUs its
# polling ranks take the cores from the ranks they wait for (a 2x2
# allgatherv over TCP on 2 cores: 5.6 ms polling, 0.15 ms waiting), so
# both run there and its best counts; IMPI_WAIT_MODES overrides.
if [ "$ranks" -gt "$cpus" ]; then impi_wait_modes=${IMPI_WAIT_MODES:-0 1}; else impi_wait_modes=${IMPI_WAIT_MODES:-0}; fi
# Intel MPI's CPU for each rank under a placement, as a pin list.
pin_list() {
    local r list=""
    for r in $(seq 0 $((ranks - 1))); do
        if [ "$1" = spread ]; then list="$list,$((r % cpus))"; else list="$list,$((r * cpus / ranks))"; fi
    done
    echo "${list#,}"
}

. scripts/impi-env.sh
impi_cc coll_bench scripts/mpi/coll_bench.c
engine=${ENGINE:-native}
if [ "$engine" = mpi ]; then
    mpi_bench=${GASPI_BENCH_IMPI:-target/impi/release/gaspi-bench}
    [ -n "$prebuilt" ] || CARGO_TARGET_DIR=target/impi cargo build --release --features mpi --bin gaspi-bench >&2
fi
hosts=${HOSTS:-}
if [ -n "$hosts" ] && { [ "$hosts" != tcp ] || [ "$engine" != mpi ]; }; then
    echo "impi-collectives: HOSTS=tcp needs ENGINE=mpi" >&2
    exit 2
fi
# launch PPN ARGS...: Intel MPI's mpirun on all ranks, or (HOSTS=tcp) on
# hosts of PPN ranks that Intel MPI sees as such.
launch() {
    local ppn=$1
    shift
    if [ -n "$hosts" ]; then
        scripts/mpi/hosts-run.sh $((ranks / ppn)) "$ppn" "$@"
    else
        mpirun -n "$ranks" "$@"
    fi
}
# ours PPN PLACEMENT ARGS...: gaspi-bench's rows (its MPI twin's left out).
ours() {
    local ppn=$1 place=$2
    shift 2
    if [ "$engine" = mpi ] && [ -n "$hosts" ]; then
        launch "$ppn" -genv GASPI_ENGINE mpi "$mpi_bench" "$@" --format csv | awk -F, '$2 != "mpi"'
    elif [ "$engine" = mpi ]; then
        mpirun -n "$ranks" -genv GASPI_ENGINE mpi -genv GASPI_HOST_RANKS "$ppn" "$mpi_bench" "$@" --format csv |
            awk -F, '$2 != "mpi"'
    else
        $bench "$@" -n "$ranks" --ppn "$ppn" --format csv --bind "$place"
    fi
}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# CSV column 8 is the median; keep "bench,bytes,median" per row.
medians() { awk -F, '$11 == "true" { print $1 "," $5 "," $8 } $11 == "false" { print "unverified: " $0 > "/dev/stderr" }'; }

impi_header ", $ranks ranks, our engine $engine${hosts:+, hosts Intel MPI sees (tcp between them, I_MPI_FABRICS=shm:ofi)}; times in us (medians over batches)"
echo "bench,ppn,placement,round,bytes,intel_best_us,intel_best_algo,gaspi_us,ratio,variant"
for r in $(seq 1 "$rounds"); do
  for place in $placements; do
    export I_MPI_PIN_PROCESSOR_LIST
    I_MPI_PIN_PROCESSOR_LIST=$(pin_list "$place")
    for ppn in "${layouts[@]}"; do
        # Intel MPI: every algorithm, then keep the best per (bench, size).
        sleep "$cooldown"
        : >"$out/impi"
        # (An algorithm run in wait mode 1 is named "A/w1".)
        for wm in $impi_wait_modes; do
        export I_MPI_WAIT_MODE=$wm
        w=$([ "$wm" = 0 ] || echo "/w$wm")
        has allreduce && for a in $(seq 1 11); do
            I_MPI_ADJUST_ALLREDUCE=$a launch "$ppn" "$venv/coll_bench" allreduce "impi-$a" $reduce_sizes |
                medians | sed "s|\$|,$a$w|" >>"$out/impi"
        done
        has allgatherv && for d in $dists; do
            for a in 1 2 3 4; do
                I_MPI_ADJUST_ALLGATHERV=$a launch "$ppn" "$venv/coll_bench" allgatherv "impi-$a" "$d" $gather_sizes |
                    medians | sed "s|\$|,$a$w|" >>"$out/impi"
            done
        done
        # (With sizes unknown, the counts' MPI_Alltoall at Intel MPI's
        # default algorithm, the data's at each.)
        a2a_modes=""
        for v in $variants; do
            mode=alltoallv
            [ "$v" = unknown ] && mode=alltoallv-unknown
            [ "$v" = varying ] && mode=alltoallv-varying
            case " $a2a_modes " in *" $mode "*) ;; *) a2a_modes="$a2a_modes $mode" ;; esac
        done
        has alltoallv && for d in $a2a_dists; do
            for mode in $a2a_modes; do
            for a in 1 2 3 4 5; do
                I_MPI_ADJUST_ALLTOALLV=$a launch "$ppn" "$venv/coll_bench" "$mode" "impi-$a" "$d" $a2a_sizes |
                    medians | sed "s|\$|,$a$w|" >>"$out/impi"
            done
            done
        done
        done
        unset I_MPI_WAIT_MODE
        # Ours: the result in the node's window (shared) or copied into
        # the caller's buffer (private), per variant.
        : >"$out/ours"
        for v in $variants; do
            sleep "$cooldown"
            # Rows of sizes unknown are named as coll_bench names its own.
            rename=cat
            case "$v" in
                private) red=auto-private gat=ring-private a2a=aggregated-private ;;
                window) red="" gat="" a2a=aggregated-window ;;
                unknown) red="" gat="" a2a=unknown-private rename="sed s/^alltoallv-/alltoallv-unknown-/" ;;
                varying) red="" gat="" a2a=unknown-varying rename="sed s/^alltoallv-/alltoallv-varying-/" ;;
                *) red=auto gat=ring-shared a2a=aggregated ;;
            esac
            has allreduce && [ -n "$red" ] && ours "$ppn" "$place" allreduce --impl $red \
                --sizes "$(echo $reduce_sizes | tr ' ' ,)" | medians | sed "s/\$/,$v/" >>"$out/ours"
            has allgatherv && [ -n "$gat" ] && for d in $dists; do
                ours "$ppn" "$place" allgatherv --impl $gat --dist "$d" \
                    --sizes "$(echo $gather_sizes | tr ' ' ,)" | medians | sed "s/\$/,$v/" >>"$out/ours"
            done
            has alltoallv && for d in $a2a_dists; do
                ours "$ppn" "$place" alltoallv --impl $a2a --dist "$d" \
                    --sizes "$(echo $a2a_sizes | tr ' ' ,)" | medians | $rename | sed "s/\$/,$v/" >>"$out/ours"
            done
        done
        awk -F, -v ppn="$ppn" -v place="$place" -v round="$r" '
            NR == FNR { k = $1 "," $2; if (!(k in best) || $3 < best[k]) { best[k] = $3; algo[k] = $4 } next }
            { k = $1 "," $2; if (k in best) printf "%s,%s,%s,%s,%s,%.3f,%s,%.3f,%.3f,%s\n", $1, ppn, place, round, $2, best[k], algo[k], $3, $3 / best[k], $4 }
        ' "$out/impi" "$out/ours"
    done
  done
done | tee "$out/all"
echo "# median ratio over rounds (ours / Intel MPI's best algorithm of that round)" >&2
# Per placement: group by bench, layout, placement and size; sorted by the
# ratio, the middle line of each group is its median.
summary() {
    sort -t, -k10,10 -k1,1 -k2,2n -k3,3 -k5,5n -k9,9n | awk -F, '
        function flush() { if (n) printf "#   %-22s %-7s ppn %-2s %-6s %8s B  ratio %.2f  (%d rounds)\n", b, va, p, pl, s, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), n >"/dev/stderr"; n = 0 }
        { if ($1 != b || $2 != p || $3 != pl || $5 != s || $10 != va) { flush(); b = $1; p = $2; pl = $3; s = $5; va = $10 } v[++n] = $9 }
        END { flush() }'
}
echo "# median over rounds of ours / Intel MPI's best algorithm, per placement" >&2
summary <"$out/all"
# Best placement against best placement: per round, each side's lower time.
echo "# median over rounds of (ours, best placement) / (Intel MPI's best algorithm, best placement)" >&2
awk -F, '$1 !~ /^#/ && $1 != "bench" {
        k = $1 "," $2 "," $4 "," $5 "," $10
        if (!(k in i) || $6 < i[k]) i[k] = $6
        if (!(k in g) || $8 < g[k]) g[k] = $8
    }
    END { for (k in i) { split(k, f, ","); printf "%s,%s,best,%s,%s,%.3f,-,%.3f,%.3f,%s\n", f[1], f[2], f[3], f[4], i[k], g[k], g[k] / i[k], f[5] } }' "$out/all" | summary
