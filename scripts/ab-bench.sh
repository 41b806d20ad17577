#!/usr/bin/env bash
# A/B comparison of two gaspi-bench binaries in alternated rounds, so that
# both see the same machine state; prints, per row (benchmark, impl, size),
# the median over rounds of B's median / A's median (< 1: B is faster).
#
#   scripts/ab-bench.sh A_BIN B_BIN ROUNDS "RUN" ["RUN" ...]
#   e.g. scripts/ab-bench.sh /tmp/old-bench target/release/gaspi-bench 5 \
#          "all" "allreduce -n 4 --ppn 2" "allgatherv -n 4 --ppn 2"
#
# Raw rows go to ${AB_OUT:-ab.csv} (round,variant,run,<gaspi-bench CSV>;
# run: the RUN string with spaces as _ and commas as +, so that runs that
# differ only in options stay apart).
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
out=${AB_OUT:-ab.csv}
echo "round,variant,run,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified" >"$out"
for r in $(seq 1 "$rounds"); do
    for run in "$@"; do
        # A then B in odd rounds, B then A in even ones.
        order=(A B)
        [ $((r % 2)) -eq 0 ] && order=(B A)
        for v in "${order[@]}"; do
            bin=$a
            [ "$v" = B ] && bin=$b
            printf 'round %d/%d: %s %s\n' "$r" "$rounds" "$v" "$run" >&2
            # shellcheck disable=SC2086
            "$bin" $run --format csv 2>/dev/null | tail -n +2 | cut -d, -f1-11 |
                sed "s/^/$r,$v,$(echo "$run" | tr ' ,' '_+'),/" >>"$out"
        done
    done
done
echo >&2
python3 - "$out" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    if r["verified"] not in ("true", "yes"):
        print("NOT VERIFIED:", r, file=sys.stderr)
    key = (r["run"], r["bench"], r["impl"], int(r["bytes"]))
    by.setdefault(key, {}).setdefault(r["round"], {})[r["variant"]] = float(r["t_median_us"])
print("run,bench,impl,bytes,A_median_us,B_median_us,B/A (median of per-round ratios),rounds")
ratios = []
for key in sorted(by):
    per = [v for v in by[key].values() if "A" in v and "B" in v and v["A"] > 0]
    if not per:
        continue
    q = statistics.median(v["B"] / v["A"] for v in per)
    ratios.append(q)
    a = statistics.median(v["A"] for v in per)
    b = statistics.median(v["B"] for v in per)
    print(f"{key[0]},{key[1]},{key[2]},{key[3]},{a:.3f},{b:.3f},{q:.3f},{len(per)}")
if ratios:
    print(f"# all rows: median B/A {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}, rows {len(ratios)}")
EOF
