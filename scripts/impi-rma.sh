#!/usr/bin/env bash
# The MPI adapters beside Intel MPI on this machine, runs alternated so that
# both see the same machine state: a fence epoch with one 8-byte put to the
# right ("single") and without puts ("zero"), and exclusive lock + 8-byte
# put + unlock (one contender, and every rank contending for one target),
# at 2, 4 and 8 ranks on one node. The MPI side is scripts/mpi/rma_bench.c;
# ours is gaspi-bench fence / lock with the default designs (notified
# fence, two-level lock) and, for the lock, the paper's MCS-RW design too.
# put-flush: IMB-RMA Unidir_put, non-aggregate mode (MPI_Put +
# MPI_Win_flush per message inside one lock_all epoch), 8 B, beside
# gaspi-bench lock --mode put-flush.
# Broadcast: IMB-MPI1 Bcast (t_max: until the last rank has the data)
# beside gaspi-bench bcast (rank 0's broadcast + flush: until every rank
# has it), 8 B, 64 KiB and 1 MiB: "bcast" takes our best implementation
# (node: one copy per node, read in place), "bcast-copy" the best that
# copies into every rank's window (linear or binomial), as MPI_Bcast does.
# The extra column names the implementation; for lock rows it is the
# MCS-RW design's time.
#
# Installs Intel MPI from PyPI into a virtualenv (default .impi-venv, or
# $IMPI_VENV). Usage: scripts/impi-rma.sh [ROUNDS]  (CSV on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. scripts/impi-env.sh
impi_cc rma_bench scripts/mpi/rma_bench.c

impi_header "; medians in us"
echo "what,ranks,round,intel_mpi,gaspi,ratio,extra"
for n in 2 4 8; do
    for r in $(seq 1 "$rounds"); do
        for p in single zero; do
            impi=$(mpirun -n "$n" "$venv/rma_bench" fence "$p" 8 | awk -F, '{print $5}')
            ours=$($bench fence -n "$n" --pattern "$p" --design notified --sizes 8 --format csv | pick "$p:notified")
            echo "fence-$p,$n,$r,$impi,$ours,$(ratio "$impi" "$ours"),"
        done
        for c in 1 "$n"; do
            impi=$(mpirun -n "$n" "$venv/rma_bench" lock excl-same "$c" 8 | awk -F, '{print $5}')
            csv=$($bench lock -n "$n" --mode excl-same --contenders "$c" --sizes 8 --format csv)
            ours=$(echo "$csv" | pick "two-level:excl-same:c$c")
            mcs=$(echo "$csv" | pick "mcs-rw:excl-same:c$c")
            echo "lock-excl-c$c,$n,$r,$impi,$ours,$(ratio "$impi" "$ours"),$mcs"
        done
        impi=$(mpirun -n "$n" IMB-RMA Unidir_put -npmin "$n" -iter 2000 -time 10 -msglog 3:3 |
            awk '/NON-AGGREGATE/ {f = 1} f && $1 == 8 {print $3; exit}')
        ours=$($bench lock -n "$n" --mode put-flush --contenders 1 --design two-level --sizes 8 --format csv | pick "two-level:put-flush:c1")
        echo "put-flush,$n,$r,$impi,$ours,$(ratio "$impi" "$ours"),"
        imb=$(mpirun -n "$n" IMB-MPI1 Bcast -npmin "$n" -iter 1000 -time 10)
        csv=$($bench bcast -n "$n" --sizes 8,64K,1M --format csv)
        for size in 8 65536 1048576; do
            impi=$(echo "$imb" | awk -v s="$size" '$1 == s && NF >= 5 {print $4; exit}')
            for kind in bcast bcast-copy; do
                best=$(echo "$csv" | awk -F, -v s="$size" -v k="$kind" '$5 == s && (k == "bcast" || $2 != "node") && (m == "" || $8 < m) {m = $8; i = $2} END {print m "," i}')
                echo "$kind-$size,$n,$r,$impi,${best%,*},$(ratio "$impi" "${best%,*}"),${best#*,}"
            done
        done
    done
done
