#!/usr/bin/env bash
# Ours beside MPICH (Debian's libmpich-dev), in the same processes:
# gaspi-bench built with --features mpi against MPICH and started by its
# mpirun (see scripts/compare-lib.sh), then the report
# (scripts/compare-report.py) in docs/compare-mpich-DATE.md.
#
# MPICH 4.0 (ch4) busy-waits: with more ranks than cores each of its
# collectives takes milliseconds, so on a 2-core machine this compares at
# -n 2 only; give more layouts on a bigger machine:
#   scripts/compare-mpich.sh [ROUNDS] [LAYOUT...]   (LAYOUT "n:" or "n:ppn")
# Installs MPICH and libclang with apt-get when missing (as root); the
# plots are SVGs drawn by `gaspi-bench plot` (no Python packages).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift $(($# > 0 ? 1 : 0))
layouts=("${@:-2:}")
if ! command -v mpicc >/dev/null 2>&1; then
    apt-get update && apt-get install -y --no-install-recommends libmpich-dev mpich libclang-dev pkg-config
fi
CARGO_TARGET_DIR=target/mpich cargo build --release --features mpi --bin gaspi-bench >&2
day=$(date -u +%F)
out=docs/compare-mpich-$day
mkdir -p "$out"
. scripts/compare-lib.sh
same_processes target/mpich/release/gaspi-bench "$out/same-processes.csv" "$rounds" "${layouts[@]}"
python3 scripts/compare-report.py "$out" "docs/compare-mpich-$day.md" \
    "MPICH $(mpichversion 2>/dev/null | awk '/Version/ {print $3; exit}')" "$(nproc)" target/mpich/release/gaspi-bench
echo "report: docs/compare-mpich-$day.md" >&2
