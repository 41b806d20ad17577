#!/usr/bin/env bash
# A/B comparison of two gaspi-bench binaries in alternated rounds, so that
# both see the same machine state; prints, per row (benchmark, impl, size),
# the median over rounds of B's median / A's median (< 1: B is faster).
#
#   scripts/ab-bench.sh A_BIN B_BIN ROUNDS "RUN" ["RUN" ...]
#   e.g. scripts/ab-bench.sh /tmp/old-bench target/release/gaspi-bench 5 \
#          "all" "allreduce -n 4 --ppn 2" "allgatherv -n 4 --ppn 2"
#
# Raw rows go to ${AB_OUT:-ab.csv} (round,variant,run,<gaspi-bench CSV>,
# probe; run: the RUN string with spaces as _ and commas as +, so that runs
# that differ only in options stay apart).
#
# AB_PROBE=CMD runs CMD before each run and keeps the number it prints in
# the rows' probe column (e.g. /tmp/line_round_trip from
# scripts/line_round_trip.c: how far apart the two cores are now); with
# AB_SPLIT=X too, the summary gives each row's ratio over the rounds whose
# A and B runs both probed below X and over those that both probed at X or
# above, beside the ratio over all rounds.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
out=${AB_OUT:-ab.csv}
echo "round,variant,run,bench,impl,procs,ppn,bytes,reps,t_min_us,t_median_us,t_max_us,mbps,verified,probe" >"$out"
for r in $(seq 1 "$rounds"); do
    for run in "$@"; do
        # A then B in odd rounds, B then A in even ones.
        order=(A B)
        [ $((r % 2)) -eq 0 ] && order=(B A)
        for v in "${order[@]}"; do
            bin=$a
            [ "$v" = B ] && bin=$b
            probe=
            if [ -n "${AB_PROBE:-}" ]; then
                probe=$($AB_PROBE | tail -n 1)
            fi
            printf 'round %d/%d: %s %s%s\n' "$r" "$rounds" "$v" "$run" "${probe:+ (probe $probe)}" >&2
            # shellcheck disable=SC2086
            "$bin" $run --format csv 2>/dev/null | tail -n +2 | cut -d, -f1-11 |
                sed "s/^/$r,$v,$(echo "$run" | tr ' ,' '_+'),/; s/\$/,$probe/" >>"$out"
        done
    done
done
echo >&2
python3 - "$out" "${AB_SPLIT:-}" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
split = float(sys.argv[2]) if sys.argv[2] else None
by = {}
for r in rows:
    if r["verified"] not in ("true", "yes"):
        print("NOT VERIFIED:", r, file=sys.stderr)
    key = (r["run"], r["bench"], r["impl"], int(r["bytes"]))
    probe = float(r["probe"]) if r.get("probe") else None
    by.setdefault(key, {}).setdefault(r["round"], {})[r["variant"]] = (float(r["t_median_us"]), probe)

def ratio(per):
    return f"{statistics.median(v['B'][0] / v['A'][0] for v in per):.3f} ({len(per)})" if per else "-"

extra = f",below {split:g} (rounds),from {split:g} (rounds)" if split is not None else ""
print("run,bench,impl,bytes,A_median_us,B_median_us,B/A (median of per-round ratios),rounds" + extra)
ratios = []
for key in sorted(by):
    per = [v for v in by[key].values() if "A" in v and "B" in v and v["A"][0] > 0]
    if not per:
        continue
    q = statistics.median(v["B"][0] / v["A"][0] for v in per)
    ratios.append(q)
    a = statistics.median(v["A"][0] for v in per)
    b = statistics.median(v["B"][0] for v in per)
    line = f"{key[0]},{key[1]},{key[2]},{key[3]},{a:.3f},{b:.3f},{q:.3f},{len(per)}"
    if split is not None:
        probed = [v for v in per if v["A"][1] is not None and v["B"][1] is not None]
        low = [v for v in probed if max(v["A"][1], v["B"][1]) < split]
        high = [v for v in probed if min(v["A"][1], v["B"][1]) >= split]
        line += f",{ratio(low)},{ratio(high)}"
    print(line)
if ratios:
    print(f"# all rows: median B/A {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}, rows {len(ratios)}")
EOF
