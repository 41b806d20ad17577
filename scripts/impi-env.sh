# Sourced by the Intel MPI comparison scripts: installs Intel MPI from PyPI
# into a virtualenv (default .impi-venv, or $IMPI_VENV) unless it is there,
# puts it on PATH / LD_LIBRARY_PATH with I_MPI_FABRICS=shm, builds
# gaspi-bench, and defines
#   impi_cc OUT SRC     compile an MPI program into the virtualenv
# and exports MPI_PKG_CONFIG / PKG_CONFIG_PATH so that `cargo build
# --features mpi` builds against this Intel MPI.
#   impi_header TEXT    the CSV's first line: date, machine, Intel MPI, TEXT
#   ratio A B           B / A with two decimals (ours / Intel's)
#   pick IMPL           the median of gaspi-bench's CSV row for IMPL (stdin)
# Sets: venv (absolute), version, bench (the gaspi-bench binary).
#
# GASPI_PREBUILT=1 builds nothing (for a machine without Rust or a C
# compiler, e.g. one prepared by scripts/devkit.sh): bench is
# $GASPI_BENCH, impi_cc keeps the program already in the virtualenv.
venv=${IMPI_VENV:-.impi-venv}
version=2021.18.0
prebuilt=${GASPI_PREBUILT:-}
if [ ! -x "$venv/bin/mpirun" ]; then
    echo "installing Intel MPI $version from PyPI into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "impi-rt==$version" "impi-devel==$version"
fi
venv=$(cd "$venv" && pwd)
export PATH="$venv/bin:$PATH" LD_LIBRARY_PATH="$venv/lib:${LD_LIBRARY_PATH:-}"
export I_MPI_FABRICS=shm
# The PyPI mpicc wrapper cannot find mpi.h (its prefix is left
# unsubstituted): compile against the virtualenv's include/ and lib/.
impi_cc() {
    if [ -n "$prebuilt" ]; then [ -x "$venv/$1" ] && return 0; echo "GASPI_PREBUILT: $venv/$1 missing" >&2 && return 1; fi
    gcc -O2 -I"$venv/include" -L"$venv/lib" -o "$venv/$1" "$2" -lmpi
}
# The same for `cargo build --features mpi` (rsmpi): a pkg-config file
# naming the virtualenv's include/ and lib/, picked by MPI_PKG_CONFIG.
mkdir -p "$venv/lib/pkgconfig"
cat >"$venv/lib/pkgconfig/impi.pc" <<PC
Name: impi
Description: Intel MPI $version from PyPI
Version: $version
Cflags: -I$venv/include
Libs: -L$venv/lib -lmpi
PC
export MPI_PKG_CONFIG=impi PKG_CONFIG_PATH="$venv/lib/pkgconfig:${PKG_CONFIG_PATH:-}"

if [ -n "$prebuilt" ]; then
    bench=${GASPI_BENCH:?GASPI_PREBUILT needs GASPI_BENCH}
else
    cargo build --release --bin gaspi-bench >&2
    bench=${CARGO_TARGET_DIR:-target}/release/gaspi-bench
fi
impi_header() { echo "# $(date -u +%F), $(nproc) cores, Intel MPI $version (I_MPI_FABRICS=shm)$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }
pick() { awk -F, -v i="$1" '$2 == i {print $8}'; }
