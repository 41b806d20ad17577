#!/usr/bin/env bash
# Runs an MPI job on this one machine as if it were HOSTS machines of PPN
# ranks each, with every byte between hosts through TCP: MPI itself, not
# only our engine, sees separate hosts (its shared-memory domains,
# MPI_Comm_split_type, are the hosts), so MPI's own collectives pay for
# every inter-host message as ours do. This is the fair ground for
# comparing our collectives with MPI's where the network charges for each
# message (an Ethernet cluster); GASPI_HOST_RANKS emulation leaves MPI's
# collectives on shared memory.
#
#   scripts/mpi/hosts-run.sh HOSTS PPN PROGRAM [ARGS...]
#   e.g. scripts/mpi/hosts-run.sh 2 1 env GASPI_ENGINE=mpi target/mpich/release/gaspi-bench allreduce
#
# The MPI on PATH starts the ranks (MPIRUN overrides: mpirun, mpiexec.hydra)
# through its ssh launcher, given a stand-in ssh that drops the host name
# and runs the command here (it refuses lines with killall). The hosts are
# named gaspi-host-0 .. gaspi-host-(HOSTS-1); they need not resolve.
# - Intel MPI: shm inside a host, libfabric's tcp provider between hosts
#   (I_MPI_FABRICS=shm:ofi, FI_PROVIDER=tcp, FI_TCP_IFACE=lo). It pins
#   nothing (each host would pin its ranks to the same first CPUs).
# - MPICH (ch4:ucx): its shared memory inside a host, UCX's tcp transport
#   between hosts (UCX_TLS=tcp,self).
# Set TCP_HOSTS_ENV=none to keep the transports MPI chooses itself.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,25p "$0" >&2; exit 2; }
hosts=$1 ppn=$2
shift 2
case "$hosts$ppn" in *[!0-9]*) echo "hosts-run: HOSTS and PPN must be numbers" >&2; exit 2 ;; esac
[ "$hosts" -ge 1 ] && [ "$ppn" -ge 1 ] || { echo "hosts-run: HOSTS and PPN must be at least 1" >&2; exit 2; }
mpirun=${MPIRUN:-mpirun}
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
cat >"$fake/ssh" <<'SSH'
#!/bin/sh
# stand-in ssh: skip options, drop the host, run the command here
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
shift
case "$*" in *killall*) echo "stand-in ssh: refusing $*" >&2; exit 1 ;; esac
exec /bin/sh -c "$*"
SSH
chmod +x "$fake/ssh"
list=$(seq -f 'gaspi-host-%g' 0 $((hosts - 1)) | paste -sd,)
export PATH="$fake:$PATH"
if "$mpirun" -version 2>/dev/null | grep -q "Intel(R) MPI"; then
    export I_MPI_HYDRA_BOOTSTRAP=ssh HYDRA_BOOTSTRAP=ssh
    unset I_MPI_HYDRA_BOOTSTRAP_EXEC
    if [ "${TCP_HOSTS_ENV:-}" != none ]; then
        # Every host is this machine: loopback is its interface (and the
        # only one on a machine without a network, such as the device).
        export I_MPI_FABRICS=shm:ofi FI_PROVIDER=tcp FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
    fi
    # No pinning: each host would pin its ranks to the same first CPUs
    # (with 2 hosts of 2 ranks on the 16-core device machine, 4 ranks on
    # CPUs 0 and 1: Intel MPI's collectives then produced no result in
    # 125 s).
    export I_MPI_PIN=0
    launcher=()
else
    [ "${TCP_HOSTS_ENV:-}" != none ] && export UCX_TLS=tcp,self
    launcher=(-launcher ssh)
fi
"$mpirun" "${launcher[@]}" -hosts "$list" -ppn "$ppn" -n $((hosts * ppn)) "$@"
