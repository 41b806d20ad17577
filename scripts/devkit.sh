#!/usr/bin/env bash
# Packs what the comparison scripts need into .devkit/ (ignored by git), for
# a machine that has neither Rust, a C compiler nor Intel MPI, such as the
# workplace's 16-core device machine: gaspi-bench (default features), its
# --features mpi twin, scripts/mpi/coll_bench.c and
# scripts/mpi/notified_put_lat.c, all three built against Intel MPI, and
# the part of Intel MPI's PyPI install that mpirun with I_MPI_FABRICS=shm
# uses (hydra, libmpi, libfabric's shm and tcp providers), stripped: about
# 40 MB.
# On that machine:
#   GASPI_PREBUILT=1 IMPI_VENV=.devkit/impi GASPI_BENCH=.devkit/gaspi-bench \
#     GASPI_BENCH_IMPI=.devkit/gaspi-bench-impi MPIS=impi scripts/compare-kernels.sh ...
# (scripts/impi-collectives.sh the same way; scripts/device-figures.sh
# runs both with the settings used for the published core-per-rank figures.)
# Also scripts/alltoall_model.c, and with GPI2_DIR set (a GPI-2 install),
# what scripts/compare-gpi2.sh needs: that install's bin/ and lib64/,
# gaspi-bench built with --features gpi2, scripts/gpi2/write_notify_lat.c.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/impi-env.sh
impi_cc coll_bench scripts/mpi/coll_bench.c
impi_cc notified_put_lat scripts/mpi/notified_put_lat.c
CARGO_TARGET_DIR=target/impi cargo build --release --features mpi --bin gaspi-bench >&2
kit=.devkit
# AB_KEEP=1: keep the gaspi-bench being replaced as gaspi-bench-old (for
# scripts/device-figures.sh's A/B stage).
old=
if [ -n "${AB_KEEP:-}" ] && [ -x "$kit/gaspi-bench" ]; then
    old=$(mktemp)
    cp "$kit/gaspi-bench" "$old"
fi
rm -rf "$kit"
mkdir -p "$kit/impi/bin" "$kit/impi/lib"
grep -qx '/.devkit/' .git/info/exclude 2>/dev/null || echo '/.devkit/' >>.git/info/exclude
strip -o "$kit/gaspi-bench" "$bench"
strip -o "$kit/gaspi-bench-impi" target/impi/release/gaspi-bench
[ -n "$old" ] && mv "$old" "$kit/gaspi-bench-old" && chmod +x "$kit/gaspi-bench-old"
cp "$venv/coll_bench" "$venv/notified_put_lat" "$kit/impi/"
for f in mpirun mpiexec mpiexec.hydra hydra_pmi_proxy hydra_bstrap_proxy cpuinfo; do
    cp "$venv/bin/$f" "$kit/impi/bin/"
done
# libtcp-fi.so and librxm-fi.so: libfabric's tcp provider, for the stages
# where Intel MPI sees hosts (scripts/mpi/hosts-run.sh).
cp -L "$venv/lib/libmpi.so.12" "$venv/lib/libfabric.so.1" "$venv/lib/libshm-fi.so" \
    "$venv/lib/libtcp-fi.so" "$venv/lib/librxm-fi.so" "$kit/impi/lib/"
strip "$kit/impi/lib/libmpi.so.12" 2>/dev/null || true
gcc -O2 -o "$kit/alltoall_model" scripts/alltoall_model.c
if [ -n "${GPI2_DIR:-}" ]; then
    glib=$GPI2_DIR/lib64
    [ -d "$glib" ] || glib=$GPI2_DIR/lib
    CARGO_TARGET_DIR=target/gpi2kit cargo build --release --features gpi2 --bin gaspi-bench >&2
    mkdir -p "$kit/gpi2/bin" "$kit/gpi2/lib64"
    cp "$GPI2_DIR/bin/gaspi_run" "$GPI2_DIR/bin/ssh.spawner" "$GPI2_DIR/bin/gaspi_cleanup" "$kit/gpi2/bin/"
    cp -L "$glib/libGPI2.so.0" "$kit/gpi2/lib64/"
    strip -o "$kit/gaspi-bench-gpi2" target/gpi2kit/release/gaspi-bench
    cc -O2 -o "$kit/write_notify_lat" scripts/gpi2/write_notify_lat.c -I"$GPI2_DIR/include" -L"$glib" -lGPI2 -lpthread
fi
du -sh "$kit" >&2
