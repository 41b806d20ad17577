# Sourced by the Intel MPI comparison scripts: installs Intel MPI from PyPI
# into a virtualenv (default .impi-venv, or $IMPI_VENV) unless it is there,
# puts it on PATH / LD_LIBRARY_PATH with I_MPI_FABRICS=shm, and defines
# impi_cc OUT SRC, which compiles an MPI program into the virtualenv.
# Sets: venv (absolute), version.
venv=${IMPI_VENV:-.impi-venv}
version=2021.18.0
if [ ! -x "$venv/bin/IMB-MPI1" ]; then
    echo "installing Intel MPI $version from PyPI into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "impi-rt==$version" "impi-devel==$version"
fi
venv=$(cd "$venv" && pwd)
export PATH="$venv/bin:$PATH" LD_LIBRARY_PATH="$venv/lib:${LD_LIBRARY_PATH:-}"
export I_MPI_FABRICS=shm
# The PyPI mpicc wrapper cannot find mpi.h (its prefix is left
# unsubstituted): compile against the virtualenv's include/ and lib/.
impi_cc() { gcc -O2 -I"$venv/include" -L"$venv/lib" -o "$venv/$1" "$2" -lmpi; }
