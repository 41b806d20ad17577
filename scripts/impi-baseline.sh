#!/usr/bin/env bash
# Intel MPI beside gaspi-bench on this machine, runs alternated so that both
# see the same machine state: barrier (IMB-MPI1) at 2, 4, 8 ranks and a
# notified 8-byte put (scripts/mpi/notified_put_lat.c) at 2 ranks.
#
# Installs Intel MPI from PyPI into a virtualenv (default .impi-venv, or
# $IMPI_VENV). Usage: scripts/impi-baseline.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. scripts/impi-env.sh
impi_cc notified_put_lat scripts/mpi/notified_put_lat.c

impi_header "; times in us"
echo "what,ranks,round,intel_mpi,gaspi,ratio"
for n in 2 4 8; do
    for r in $(seq 1 "$rounds"); do
        impi=$(mpirun -n "$n" IMB-MPI1 Barrier -npmin "$n" -iter 2000 | awk '/#repetitions/{f=1;next} f&&NF>=4{print $4; exit}')
        ours=$($bench barrier -n "$n" --format csv | awk -F, 'NR==2{print $8}')
        echo "barrier,$n,$r,$impi,$ours,$(ratio "$impi" "$ours")"
    done
done
for r in $(seq 1 "$rounds"); do
    impi=$(mpirun -n 2 "$venv/notified_put_lat" 20000 | awk '{print $4}')
    ours=$($bench write-notify-lat -n 2 --sizes 8 --format csv | awk -F, 'NR==2{print $8}')
    echo "notified-put-8B,2,$r,$impi,$ours,$(ratio "$impi" "$ours")"
done
