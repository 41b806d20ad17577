#!/usr/bin/env bash
# Lamellar (PNNL's Rust PGAS runtime; 0.7.1, its `shmem` backend: PEs as
# processes on one machine over shared memory) beside gaspi-bench, the
# same operations timed the same way (25 batches, median of the batch
# means, verified), in alternated rounds so both see the same machine
# state (scripts/lamellar/src/main.rs says what each Lamellar row does):
#
#   put-lat     Lamellar: blocking_put of the data, blocking_put of a flag,
#               the target polls the flag (ping-pong, one way), spinning
#               (lamellar-spin) or yielding between looks as Lamellar's
#               examples do (lamellar-yield)
#               ours: write-notify-lat (write_notify + notify_waitsome)
#   am-lat      Lamellar: an active message that returns a value, half its
#               round trip; ours: passive-lat (passive_send +
#               passive_receive ping-pong, one way)
#   atomic-lat  Lamellar: AtomicArray::fetch_add on PE 1's element from
#               PE 0 (an active message to PE 1); ours: atomic-lat
#               (atomic_fetch_add on rank 1's word)
#   barrier     world.barrier() / barrier, 2 and 4 PEs
#   sum         Lamellar: AtomicArray::sum of one u64 per PE, called by
#               every PE at once (each PE gets the total); ours: allreduce
#               of 8 bytes (--impl auto, the result in the node's window,
#               and auto-private, in the caller's buffer), 2 and 4 PEs
#
# Placement: Lamellar's PEs are not bound (lamellar_run.sh binds nothing
# either); gaspi-bench runs with --bind none too, and once more with its
# default (--bind block) for the latencies.
# Each Lamellar PE runs LAMELLAR_THREADS worker threads (default here 1:
# the machine this was written on has 2 cores). Lamellar's waits spin:
# with 4 PEs on 2 cores its barrier and sum take milliseconds, so their
# 4-PE rows run REPS4 repetitions (default 250) instead of 20,000 / 5,000.
# The first run builds Lamellar (about 17 minutes on 2 cores).
#
# Usage: scripts/compare-lamellar.sh [ROUNDS]     (default 3; ~5 minutes)
# Output: CSV on stdout (round,bench,impl,pes,bytes,reps,median_us,verified)
# and on stderr, per row, the median over rounds of Lamellar's time / ours
# (> 1: ours is faster).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${LAMELLAR_THREADS:-1}
sizes=${SIZES:-8,4K,64K,1M}
target=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
cargo build --release --bin gaspi-bench >&2
(cd scripts/lamellar && CARGO_TARGET_DIR="$target/lamellar" cargo build --release) >&2
bench=$target/release/gaspi-bench
lam=$target/lamellar/release/lamellar-bench

# One Lamellar job of N PEs: the launch variables lamellar_run.sh sets, a
# job id of our own; its shared-memory objects (lamellar_JOB_*) are
# removed afterwards whatever happened (Lamellar leaves them behind when a
# PE dies). Only the PEs started here are waited for or stopped.
lamellar_job() {
    local n=$1 job=$((100000 + RANDOM * 32 + RANDOM % 32)) pids=() pe rc=0
    shift
    for pe in $(seq 0 $((n - 1))); do
        LAMELLAR_BACKEND=shmem LAMELLAR_NUM_PES=$n LAMELLAR_PE_ID=$pe LAMELLAR_JOB_ID=$job \
            LAMELLAR_THREADS=$threads LAMELLAR_HEAP_SIZE=$((256 << 20)) LAMELLAR_MEM_SIZE=$((256 << 20)) \
            timeout 300 "$lam" "$@" &
        pids+=($!)
    done
    for pe in "${pids[@]}"; do wait "$pe" || rc=$?; done
    rm -f /dev/shm/lamellar_"${job}"_*
    return $rc
}

# gaspi-bench's CSV rows as round,bench,impl,pes,bytes,reps,median_us,verified
ours() {
    local r=$1 n=$2
    shift 2
    "$bench" "$@" -n "$n" --format csv | awk -F, -v r="$r" -v n="$n" -v tag="${TAG:-}" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { printf "%s,%s,%s%s,%s,%s,%s,%s,%s\n", r, $col["bench"], $col["impl"], tag, n, $col["bytes"], $col["reps"], $col["t_median_us"], $col["verified"] }'
}
# A Lamellar job that fails or runs past its 300 s leaves a row that says
# so, and the rounds go on.
theirs() {
    local r=$1 n=$2 what=$3
    shift
    lamellar_job "$@" | sed "s/^/$r,/" || echo "$r,$what,lamellar,$n,,,,failed"
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "# $(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; Lamellar 0.7.1 shmem, LAMELLAR_THREADS=$threads"
echo "round,bench,impl,pes,bytes,reps,median_us,verified"
{
    for r in $(seq "$rounds"); do
        # Which side goes first alternates between rounds.
        for side in $( [ $((r % 2)) = 1 ] && echo "lamellar gaspi" || echo "gaspi lamellar"); do
            if [ "$side" = lamellar ]; then
                theirs "$r" 2 put-lat "$sizes" spin
                theirs "$r" 2 put-lat "$sizes" yield
                theirs "$r" 2 am-lat
                theirs "$r" 2 atomic-lat
                theirs "$r" 2 barrier
                theirs "$r" 4 barrier "${REPS4:-250}"
                theirs "$r" 2 sum
                theirs "$r" 4 sum "${REPS4:-250}"
            else
                TAG=-none ours "$r" 2 write-notify-lat --sizes "$sizes" --bind none
                TAG=-block ours "$r" 2 write-notify-lat --sizes "$sizes"
                TAG=-none ours "$r" 2 passive-lat --sizes 8 --bind none
                TAG=-none ours "$r" 2 atomic-lat --sizes 8 --bind none
                TAG=-none ours "$r" 2 barrier --bind none
                TAG=-none ours "$r" 4 barrier --bind none
                TAG=-none ours "$r" 2 allreduce --sizes 8 --impl auto,auto-private --bind none
                TAG=-none ours "$r" 4 allreduce --sizes 8 --impl auto,auto-private --bind none
            fi
        done
    done
} | tee "$tmp"
# Summary: per pairing (Lamellar's row and variant, our row and variant,
# PEs, bytes) the median over rounds of Lamellar's time / ours.
awk -F, '
    function pair(b) { return b == "write-notify-lat" ? "put-lat" : b == "passive-lat" ? "am-lat" : b == "allreduce" ? "sum" : b }
    $1 == "round" || $1 ~ /^#/ || $7 == "" { next }
    NR == FNR { if ($3 !~ /^lamellar/) { k = $1 SUBSEP pair($2) SUBSEP $4 SUBSEP $5; n[k]++; oi[k, n[k]] = $3; ov[k, n[k]] = $7 } next }
    $3 ~ /^lamellar/ {
        k = $1 SUBSEP $2 SUBSEP $4 SUBSEP $5
        for (i = 1; i <= n[k]; i++) print $2 "," $4 "," $5 "," $3 "," oi[k, i] "," $7 / ov[k, i]
    }' "$tmp" "$tmp" | sort -t, -k1,1 -k2,2n -k3,3n -k4,4 -k5,5 -k6,6g |
    awk -F, '
        { k = $1 "," $2 "," $3 "," $4 "," $5; v[k, ++n[k]] = $6; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
        END {
            print "# median over rounds of Lamellar time / ours (> 1: ours faster)" > "/dev/stderr"
            for (i = 1; i <= m; i++) {
                k = order[i]; split(k, f, ",")
                printf "#   %-10s %d PEs %8s B  %-15s / %-18s %8.2f  (%d rounds)\n", f[1], f[2], f[3], f[4], f[5], v[k, int((n[k] + 1) / 2)], n[k] > "/dev/stderr"
            }
        }'
