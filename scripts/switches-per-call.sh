#!/usr/bin/env bash
# Context switches per call of a gaspi-bench run: with more ranks than
# cores a call costs at least one switch per rank that must run in it, so
# the count tells whether a call's time is hand-offs at that floor or
# ranks woken before they can go on (each woken and put back to sleep
# costs a switch more). Runs the benchmark with FEW and MANY calls (one
# size, --iters) and takes the differences of the machine's switch
# counter (/proc/stat ctxt: every CPU, every process; keep the machine
# otherwise idle) and of the wall time, so that the job's start and end
# drop out. Prints, per round: switches per call (all ranks together),
# per rank (the ranks of ARGS' -n), and wall us per call.
#
#   scripts/switches-per-call.sh ROUNDS ARGS...
#   e.g. scripts/switches-per-call.sh 5 alltoallv -n 8 --ppn 2 --sizes 1K --impl aggregated
#
# GASPI_BENCH (default target/release/gaspi-bench), FEW (200), MANY (2200).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
rounds=$1
shift
ranks=
prev=
for a in "$@"; do
    case "$prev" in -n | -np | --np) ranks=$a ;; esac
    prev=$a
done
[ -n "$ranks" ] || { echo "ARGS must name the ranks with -n N" >&2; exit 2; }
bench=${GASPI_BENCH:-target/release/gaspi-bench}
few=${FEW:-200} many=${MANY:-2200}
[ "$many" -gt "$few" ] || { echo "MANY must exceed FEW" >&2; exit 2; }
ctxt() { awk '/^ctxt/ { print $2 }' /proc/stat; }
# One run of $1 calls: its switches and nanoseconds in S and T.
one() {
    local calls=$1 s0 t0
    s0=$(ctxt)
    t0=$(date +%s%N)
    "$bench" "${@:2}" --iters "$calls" >/dev/null
    T=$(($(date +%s%N) - t0))
    S=$(($(ctxt) - s0))
}
for r in $(seq 1 "$rounds"); do
    one "$few" "$@"
    sf=$S tf=$T
    one "$many" "$@"
    awk -v r="$r" -v n="$ranks" -v c=$((many - few)) -v s=$((S - sf)) -v t=$((T - tf)) \
        'BEGIN { printf "round %d: %.1f switches per call, %.2f per rank, %.1f us per call\n", r, s / c, s / c / n, t / c / 1000 }'
done
