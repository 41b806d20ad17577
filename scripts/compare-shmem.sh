#!/usr/bin/env bash
# Ours beside OpenSHMEM (Open MPI's OSHMEM, Debian's libopenmpi-dev), in
# alternated rounds: per round, scripts/shmem/coll_bench.c
# (shmem_double_sum_to_all, shmem_fcollect64 into the program's symmetric
# arrays) and then gaspi-bench (allreduce auto / auto-private, allgatherv
# ring-shared / ring-private) on the same ranks, sizes, data and checks.
# Prints, per operation, variant and size, the median over rounds of
# ours / OpenSHMEM's (< 1: ours is faster), and keeps the raw rows in
# ${OUT:-target/shmem}/rows.csv.
#
# Usage: scripts/compare-shmem.sh [ROUNDS] [RANKS]       (default 3 4)
# Installs Open MPI from Debian if oshcc is missing (root, after apt-get
# update) and keeps MPICH the default MPI (mpicc, mpirun) afterwards.
# OpenSHMEM runs on this machine's shared memory (UCX); our ranks are one
# node (the same processes layout).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
ranks=${2:-4}
reduce_sizes=${REDUCE_SIZES:-8 4096 65536 262144 1048576 4194304}
gather_sizes=${GATHER_SIZES:-65536 262144 1048576}
if ! command -v oshcc >/dev/null; then
    echo "installing Open MPI (OSHMEM) from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libopenmpi-dev openmpi-bin >&2
    # Open MPI takes over the mpi, mpirun and MPI header alternatives:
    # give them back to MPICH (what the mpi feature builds against).
    if [ -e /usr/bin/mpicc.mpich ]; then
        update-alternatives --set mpi /usr/bin/mpicc.mpich >&2 || true
        update-alternatives --set mpirun /usr/bin/mpirun.mpich >&2 || true
        update-alternatives --set mpi-x86_64-linux-gnu /usr/include/x86_64-linux-gnu/mpich >&2 || true
    fi
fi
out=${OUT:-target/shmem}
mkdir -p "$out"
oshcc -O2 -o "$out/coll_bench" scripts/shmem/coll_bench.c
cargo build --release --bin gaspi-bench >&2
bench=${CARGO_TARGET_DIR:-target}/release/gaspi-bench
# OSHMEM reports the _exit (see coll_bench.c) as an improper exit: ignored,
# the rows carry their own verification.
osh() { oshrun -quiet --allow-run-as-root --oversubscribe -np "$ranks" "$@" 2>/dev/null || true; }
csv_sizes() { echo "$1" | tr ' ' ,; }

rows=$out/rows.csv
echo "round,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified" >"$rows"
for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds" >&2
    {
        # shellcheck disable=SC2086
        osh "$out/coll_bench" allreduce $reduce_sizes
        # shellcheck disable=SC2086
        osh "$out/coll_bench" allgatherv $gather_sizes
        "$bench" allreduce -n "$ranks" --impl auto,auto-private --sizes "$(csv_sizes "$reduce_sizes")" \
            --format csv | tail -n +2 | cut -d, -f1-11
        "$bench" allgatherv -n "$ranks" --impl ring-shared,ring-private --sizes "$(csv_sizes "$gather_sizes")" \
            --format csv | tail -n +2 | cut -d, -f1-11
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
    t.setdefault((r["bench"], int(r["bytes"])), {}).setdefault(r["impl"], {})[r["round"]] = float(r["t_median_us"])
print("bench,bytes,impl,ours_us,shmem_us,ours/shmem (median of per-round ratios),rounds")
for (bench, size) in sorted(t):
    impls = t[(bench, size)]
    shmem = impls.get("shmem", {})
    for impl in sorted(i for i in impls if i != "shmem"):
        per = [(impls[impl][k], shmem[k]) for k in impls[impl] if k in shmem]
        if not per:
            continue
        q = statistics.median(a / b for a, b in per)
        print(f"{bench},{size},{impl},{statistics.median(a for a, _ in per):.2f},"
              f"{statistics.median(b for _, b in per):.2f},{q:.2f},{len(per)}")
EOF
