#!/usr/bin/env bash
# Run integration tests again and again (a soak) to catch stalls that show
# once in many runs. Per run: its time, its result, and what the kernel
# logged meanwhile (workqueue lockups, tasks blocked for minutes: stalls
# below every library). A run that lasts over SLOW seconds (default 150)
# gets the stacks of every process of its test binaries, once (gdb, if
# installed).
#
#   scripts/soak-tests.sh RUNS [cargo test arguments ...]
#   e.g. GASPI_ENGINE=mpi GASPI_EMULATE_HOSTS=1 GASPI_TEST_PPN=1 \
#        scripts/soak-tests.sh 6 --release --features mpi --test allgatherv --test alltoallv
#
# Each run's output goes to ${SOAK_DIR:-soak}/run-N.log, stacks to
# stacks-N.txt, new kernel lines to kernel-N.txt; a line per run to stdout.
# The kernel log needs the right to read it (root, or dmesg_restrict=0);
# without it the column says "unread". Nothing is killed: a run that hangs
# ends by the test harness's own timeouts.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
runs=$1
shift
dir=${SOAK_DIR:-soak}
slow=${SLOW:-150}
mkdir -p "$dir"
# The test binaries' names, for finding their processes: every `--test X`.
names=()
prev=
for a in "$@"; do
    [ "$prev" = --test ] && names+=("$a")
    prev=$a
done
pattern="deps/($(IFS='|'; echo "${names[*]:-[a-z_]+}"))-[0-9a-f]+"
stall_lines='workqueue lockup|blocked for more than'
readable=yes
dmesg >/dev/null 2>&1 || readable=no
kernel_lines() { dmesg | grep -cE "$stall_lines"; }
for i in $(seq 1 "$runs"); do
    [ $readable = yes ] && before=$(kernel_lines)
    start=$(date +%s)
    cargo test "$@" >"$dir/run-$i.log" 2>&1 &
    job=$!
    dumped=0
    while kill -0 "$job" 2>/dev/null; do
        sleep 2
        if [ $dumped = 0 ] && [ $(($(date +%s) - start)) -gt "$slow" ] && command -v gdb >/dev/null; then
            pids=$(pgrep -f "$pattern")
            # Still building: no test process yet.
            [ -n "$pids" ] || continue
            dumped=1
            for p in $pids; do
                echo "=== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-200)"
                timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt 30' 2>/dev/null | grep -E '^#|^Thread'
            done >"$dir/stacks-$i.txt" 2>&1
        fi
    done
    wait "$job"
    rc=$?
    secs=$(($(date +%s) - start))
    kernel=unread
    if [ $readable = yes ]; then
        kernel=$(($(kernel_lines) - before))
        [ "$kernel" -gt 0 ] && dmesg | grep -E "$stall_lines" | tail -n "$kernel" >"$dir/kernel-$i.txt"
    fi
    echo "run $i: exit $rc, ${secs} s, kernel stall lines: $kernel"
done
