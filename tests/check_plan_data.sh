#!/bin/sh
# `shardrec plan --data` and `train --data`: the planner's table statistics
# measured on a sample of the data (docs/planner.md "Inputs",
# src/plan/table_stats.c):
#  1. two files of 20000 samples from `shardrec gen`, over tables of 1000 and
#     100000 rows, one with Zipf(1.05) ids and one with uniform ids;
#     `plan --data` says "statistics: measured on 20000 samples of --data"
#     (the data ends before --plan-sample's 65536) and 1 id a sample a table;
#     --plan-sample 5000 measures 5000; the file converted to the binary
#     format measures the same;
#  2. the 1000-row table (10 hot rows): the Zipf file's hot share is more
#     than 10 times the uniform file's, and close to both the generator's
#     exact law and sr_planner_hot_share's analytic value, which
#     `plan --id-dist zipf:1.05` (no --data) prints. The tolerances: the
#     share of n = 20000 lookups that 10 fixed rows take has a standard
#     deviation sqrt(h(1-h)/n) <= 0.0035, so 0.015 (4 sd) against the
#     generator's law P(rank < 10) = (21^t - 1) / (2001^t - 1), t = 1 - s
#     (src/data/zipf.c); the generator's continuous law itself lies about
#     0.011 above the discrete Zipf sum at E = 1000 (its rank 0 is 10%
#     heavier), so 0.03 against the analytic value. Uniform ids: the 10
#     fullest of 1000 rows, about 20 ids each, hold about 1.5%;
#  3. train on 2 ranks with no plan runs the planner on the measured
#     statistics (rank 0 measures and broadcasts them: the plan check at
#     start-up passes), logs them, and the summary says so; also when rank
#     1's copy of the file holds other ids (rank 0's statistics, one plan);
#  4. a missing --data file: exit status 2, the file named.
# Exit 0 pass, else fail (part 3 is skipped without mpirun).
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

JOB="--table-rows 1000,100000 --batch-size 64 --topology cpu-2core"
hot() { awk -v t="$1" '$1 == t && NF == 5 && $2 ~ /^[0-9]+$/ { print $5; exit }' "$2"; }
ids() { awk -v t="$1" '$1 == t && NF == 5 && $2 ~ /^[0-9]+$/ { print $4; exit }' "$2"; }

# 1. measured statistics
for d in zipf:1.05 uniform; do
    "$bin" gen --table-rows 1000,100000 --id-dist $d --samples 20000 \
        --out "$tmp/${d%%:*}.tsv" >/dev/null 2>&1 || bad "gen $d" "exit $?"
done
"$bin" plan $JOB --data "$tmp/zipf.tsv" >"$tmp/z.out" 2>&1
rz=$?
"$bin" plan $JOB --data "$tmp/uniform.tsv" >"$tmp/u.out" 2>&1
ru=$?
"$bin" plan $JOB --id-dist zipf:1.05 >"$tmp/a.out" 2>&1
ra=$?
if [ $rz -eq 0 ] && [ $ru -eq 0 ] && [ $ra -eq 0 ] &&
    grep -q "^statistics: measured on 20000 samples of --data" "$tmp/z.out" &&
    grep -q "^statistics: from --ids-per-feature and --id-dist zipf:1.05" "$tmp/a.out" &&
    [ "$(ids t0 "$tmp/z.out")" = 1.000 ] && [ "$(ids t1 "$tmp/u.out")" = 1.000 ] &&
    grep -q "^predicted: " "$tmp/z.out"; then
    ok "plan --data prints the measured statistics (20000 samples, 1 id a sample)"
else
    bad "plan --data" "rc $rz $ru $ra; $(head -8 "$tmp/z.out")"
fi
if "$bin" plan $JOB --data "$tmp/zipf.tsv" --plan-sample 5000 >"$tmp/s.out" 2>&1 &&
    grep -q "^statistics: measured on 5000 samples of --data" "$tmp/s.out"; then
    ok "--plan-sample 5000 measures 5000 samples"
else
    bad "--plan-sample" "$(head -4 "$tmp/s.out")"
fi

if "$bin" convert "$tmp/zipf.tsv" -o "$tmp/zipf.bin" --table-rows 1000,100000 >/dev/null 2>&1 &&
    "$bin" plan $JOB --data "$tmp/zipf.bin" >"$tmp/b.out" 2>&1 &&
    [ "$(hot t0 "$tmp/b.out")" = "$(hot t0 "$tmp/z.out")" ] &&
    [ "$(hot t1 "$tmp/b.out")" = "$(hot t1 "$tmp/z.out")" ]; then
    ok "the binary file (convert) measures as its TSV"
else
    bad "binary --data" "$(head -6 "$tmp/b.out")"
fi

# 2. the 1000-row table's hot share
hz=$(hot t0 "$tmp/z.out")
hu=$(hot t0 "$tmp/u.out")
ha=$(hot t0 "$tmp/a.out")
if awk -v z="$hz" -v u="$hu" -v a="$ha" 'BEGIN {
        t = 1 - 1.05; g = (21 ^ t - 1) / (2001 ^ t - 1)
        d1 = z - g; if (d1 < 0) d1 = -d1
        d2 = z - a; if (d2 < 0) d2 = -d2
        exit !(z != "" && u != "" && a != "" && z > 10 * u && u < 0.03 && d1 < 0.015 && d2 < 0.03)
    }'; then
    ok "hot share of 1000 rows: zipf $hz, uniform $hu, analytic $ha"
else
    bad "hot share" "zipf '$hz' uniform '$hu' analytic '$ha'"
fi

# 3. train with the planner on 2 ranks
if command -v mpirun >/dev/null 2>&1; then
    sr_mpirun 2 "$bin" train --table-rows 1000,100000 --batch-size 64 --steps 3 \
        --eval-samples 0 --log-every 1 --data "$tmp/zipf.tsv" >"$tmp/t.out" 2>&1
    rt=$?
    if [ $rt -eq 0 ] && grep -q "plan: table statistics measured on 20000 samples of --data" \
        "$tmp/t.out" && grep -q "plan: the planner's" "$tmp/t.out" &&
        grep -q "(table statistics: measured on 20000 samples of --data)" "$tmp/t.out" &&
        [ "$(hot t0 "$tmp/t.out")" = "$hz" ]; then
        ok "train on 2 ranks plans on the measured statistics"
    else
        bad "train --data" "rc $rt; $(tail -5 "$tmp/t.out")"
    fi
    # rank 1's copy of d.tsv holds the uniform ids (the same size): the plan is
    # still rank 0's, so the ranks agree on it and train
    mkdir -p "$tmp/r0" "$tmp/r1"
    cp "$tmp/zipf.tsv" "$tmp/r0/d.tsv"
    cp "$tmp/uniform.tsv" "$tmp/r1/d.tsv"
    sr_mpirun 2 sh -c 'cd "$0/r$OMPI_COMM_WORLD_RANK" && exec "$@"' "$tmp" \
        "$bin" train --table-rows 1000,100000 --batch-size 64 --steps 2 --eval-samples 0 \
        --data d.tsv >"$tmp/t2.out" 2>&1
    rt=$?
    if [ $rt -eq 0 ] && [ "$(hot t0 "$tmp/t2.out")" = "$hz" ]; then
        ok "ranks whose --data differ in content plan on rank 0's statistics"
    else
        bad "train, different --data" "rc $rt; $(tail -5 "$tmp/t2.out")"
    fi
else
    echo "skip 2-rank train (no mpirun)"
fi

# 4. a missing data file
"$bin" plan $JOB --data "$tmp/none.tsv" >"$tmp/e.out" 2>&1
re=$?
if [ $re -eq 2 ] && grep -q "none.tsv" "$tmp/e.out"; then
    ok "a missing --data file: exit 2, named"
else
    bad "missing --data" "rc $re; $(head -3 "$tmp/e.out")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
