# Sourced by scripts/compare-impi.sh and scripts/compare-mpich.sh: the
# same-processes comparison (gaspi-bench built with --features mpi, started
# by mpirun, runs the MPI library's operation beside ours size by size;
# MPI's first in even rounds, since a process's later runs may find the
# machine in another state).
# same_processes TWIN OUT_CSV ROUNDS LAYOUT...   (LAYOUT: "n:" or "n:ppn")
same_processes() {
    local twin=$1 raw=$2 rounds=$3
    shift 3
    local layouts=("$@")
    local runs=(
        "allreduce --sizes 8,64,512,4K,64K,1M"
        "allgatherv --dist regular,decreasing,bcast --sizes 64K,1M,4M"
        "bcast --sizes 8,64K,1M"
        "barrier"
        "fence --pattern zero,single --design notified --sizes 8"
        "lock --mode excl-same,put-flush --design two-level --contenders 1 --sizes 8"
    )
    local total=$((rounds * ${#layouts[@]} * ${#runs[@]})) step=0 r layout n ppn run
    echo "round,ranks,ppn,bench,impl,procs,ppn_bench,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,vs_mpi" >"$raw"
    for r in $(seq 1 "$rounds"); do
        for layout in "${layouts[@]}"; do
            n=${layout%%:*}
            ppn=${layout#*:}
            for run in "${runs[@]}"; do
                step=$((step + 1))
                printf '\r[%d/%d] same processes: round %d, -n %s%s: %-40s' "$step" "$total" "$r" "$n" \
                    "${ppn:+ (ppn $ppn)}" "${run%% *}" >&2
                first=""
                [ $((r % 2)) = 0 ] && first=--mpi-first
                # shellcheck disable=SC2086
                GASPI_PPN=${ppn:-$n} mpirun -n "$n" "$twin" $run $first --format csv 2>/dev/null |
                    tail -n +2 | sed "s/^/$r,$n,${ppn:-$n},/" >>"$raw"
            done
        done
    done
    echo >&2
}
