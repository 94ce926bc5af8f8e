#!/bin/sh
# `shardrec plan` (cli/cmd_plan.c, docs/planner.md) and the planner in train:
#  1. --help lists every preset; the workload T example prints the table,
#     the predicted step and --compare's rows, and the planner's plan is
#     predicted no slower than all-tw and all-rw (its rows, same call);
#  2. --out writes a plan; `train --plan` that file on 2 ranks gives the same
#     per-step losses, bit for bit, as `train` with no plan (which runs the
#     planner on the same nominal topology); the summary prints the
#     predicted beside the measured step;
#  3. a bench comm file merges over a preset (its link and world); alone, the
#     device's figures it lacks are measured on this machine;
#  4. errors, exit status 2 with the message naming what is wrong: an
#     unknown preset (the presets listed), a topology file with an unknown
#     key (file and key named), a table no rank can hold (named), --out
#     naming the --topology file (both flags named), no --topology, an
#     unknown --pipeline; --pipeline none predicts more exposed
#     communication than sparse-dist; --global-batch-size G on W ranks plans
#     each rank as --batch-size G/W;
#  5. hybrid's hot sets sized by cost (Zipf ids over a slow link, 2 ranks):
#     every hybrid table's size is one of its ladder's (ceil(E/d), d = 1000,
#     300, 100, 30, 10), the same in its table line ("hot: N rows"), its
#     --explain reason ("hybrid (N hot rows") and the "hot" list --out
#     writes (N rows, ascending); at least one is not the 1% size; `train
#     --plan` that file on 2 ranks gives the per-step losses of `train`
#     with no plan on the same topology, bit for bit, and train's plan
#     table shows the same hot sets.
# Exit 0 pass, 77 skipped (no mpirun for 2), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

# 1. help and workload T
if "$bin" plan --help >"$tmp/help" 2>&1 &&
    grep -q "a100x8-2node-100g" "$tmp/help" && grep -q "cpu-2core" "$tmp/help" &&
    grep -q "h200x8-400g" "$tmp/help" && grep -q "h200x8 " "$tmp/help"; then
    ok "help lists the presets"
else
    bad "help" "$(head -5 "$tmp/help")"
fi
for w in K M; do
    if "$bin" plan --workload $w --topology a100x8-2node-100g --compare --explain >"$tmp/t$w" 2>&1 &&
        grep -q "^predicted: .* samples/s" "$tmp/t$w" && grep -q "why: " "$tmp/t$w" &&
        awk '/^  planner /{p=$3} /^  all tw /{t=$4} /^  all rw /{r=$4}
             END { exit !(p > 0 && t > 0 && r > 0 && p <= t * 1.000001 && p <= r * 1.000001) }' "$tmp/t$w"; then
        ok "workload T, $w: planner $(awk '/^  planner /{print $3}' "$tmp/t$w") ms <= all tw, all rw"
    else
        bad "workload T $w" "$(tail -6 "$tmp/t$w")"
    fi
done

# 2. the written plan is the one train runs without a plan
JOB="--table-rows 3000,50,20000,700 --batch-size 64 --steps 4 --eval-samples 0 --log-every 1"
if "$bin" plan --topology cpu-2core $JOB --out "$tmp/p.json" >"$tmp/plan.out" 2>&1 &&
    grep -q '"tables"' "$tmp/p.json"; then
    ok "--out writes a plan"
else
    bad "--out" "$(tail -3 "$tmp/plan.out")"
fi
if command -v mpirun >/dev/null 2>&1; then
    sr_mpirun 2 "$bin" train $JOB --plan "$tmp/p.json" --metrics "$tmp/a.jsonl" >"$tmp/a.out" 2>&1
    ra=$?
    sr_mpirun 2 "$bin" train $JOB --metrics "$tmp/b.jsonl" >"$tmp/b.out" 2>&1
    rb=$?
    losses() { grep -o '"loss": *[^,}]*' "$1"; }
    if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ -s "$tmp/a.jsonl" ] &&
        [ "$(losses "$tmp/a.jsonl")" = "$(losses "$tmp/b.jsonl")" ] &&
        grep -q "plan: the planner's" "$tmp/b.out" &&
        grep -q "planner: predicted" "$tmp/a.out" && grep -q "^  step " "$tmp/b.out"; then
        ok "train without a plan runs the planner's plan (losses equal to --plan its file)"
    else
        bad "train with the planner" "rc $ra $rb; $(tail -3 "$tmp/b.out")"
    fi
else
    echo "skip 2-rank train (no mpirun)"
fi

# 3. a bench comm file over a preset
cat >"$tmp/links.json" <<'EOF'
{"source": "shardrec bench comm", "backend": "mpi", "world_size": 4, "ranks_per_node": 2,
 "device": "cpu", "links": {"intra_node": {"bandwidth_gb_s": 3, "latency_us": 8},
 "inter_node": {"bandwidth_gb_s": 0.5, "latency_us": 40}}, "measurements": []}
EOF
if "$bin" plan --topology cpu-2core --topology "$tmp/links.json" $JOB --print-topology \
    >"$tmp/m.out" 2>&1 && grep -q "on 4 ranks (2 nodes of 2)" "$tmp/m.out" &&
    grep -q '"bandwidth_gb_s":[[:space:]]*0.5' "$tmp/m.out"; then
    ok "a bench comm file merges over a preset"
else
    bad "merge" "$(head -5 "$tmp/m.out")"
fi

# 3b. a bench comm file alone: the device's figures are measured here
"$bin" plan --topology "$tmp/links.json" $JOB --print-topology >"$tmp/q.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "measuring this machine" "$tmp/q.out" &&
    grep -q '"memory_gb_s":[[:space:]]*[1-9]' "$tmp/q.out" && grep -q "^predicted: " "$tmp/q.out"; then
    ok "what a file lacks is measured on this machine"
else
    bad "quick measurement" "rc $rc: $(head -5 "$tmp/q.out")"
fi

# 4. errors
expect2() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    "$bin" plan "$@" >"$tmp/e.out" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q -e "$pat" "$tmp/e.out"; then
        ok "$name: exit 2, '$pat'"
    else
        bad "$name" "rc $rc: $(head -3 "$tmp/e.out")"
    fi
}
expect2 "unknown preset" "h200x8-400g" --topology h100x8 $JOB
echo '{"world_size": 2, "memory_gbs": 10}' >"$tmp/typo.json"
expect2 "unknown key" "typo.json.*memory_gbs" --topology cpu-2core --topology "$tmp/typo.json" $JOB
expect2 "table too large" "table 't0'.*fits no rank" --topology h200 --table-rows 100000000000 \
    --batch-size 64
expect2 "--out is an input" "--topology" --topology "$tmp/links.json" --topology cpu-2core $JOB \
    --out "$tmp/links.json"
expect2 "no topology" "--topology is required" $JOB
expect2 "bad --pipeline" "--pipeline: 'sideways'" --topology cpu-2core --pipeline sideways $JOB

# --pipeline: none exposes the input dist that sparse-dist hides behind the
# step's compute (2 nodes over a slow NIC: an input dist to hide)
for p in none sparse-dist; do
    "$bin" plan --workload K --topology a100x8-2node-100g --pipeline $p >"$tmp/p-$p" 2>&1
done
exposed() { sed -n 's/^predicted step (ms): .*exposed \([0-9.]*\),.*/\1/p' "$1"; }
if awk -v n="$(exposed "$tmp/p-none")" -v s="$(exposed "$tmp/p-sparse-dist")" \
    'BEGIN { exit !(n > 0 && s > 0 && n > s) }'; then
    ok "--pipeline: exposed $(exposed "$tmp/p-none") ms with none > $(exposed "$tmp/p-sparse-dist") with sparse-dist"
else
    bad "--pipeline" "none: $(tail -2 "$tmp/p-none") sparse-dist: $(tail -2 "$tmp/p-sparse-dist")"
fi

# --global-batch-size G on W ranks plans as --batch-size G/W: the same
# per-rank memory (the buffers sized for a rank's batch) and step
"$bin" plan --workload K --topology a100x8-2node-100g --global-batch-size 65536 >"$tmp/g-global" 2>&1
"$bin" plan --workload K --topology a100x8-2node-100g --batch-size 4096 >"$tmp/g-rank" 2>&1
ranks() { awk '$1 ~ /^[0-9]+$/ && $3 ~ /B$/ { print $1, $2, $3 }' "$1"; }
if [ -n "$(ranks "$tmp/g-rank")" ] && [ "$(ranks "$tmp/g-global")" = "$(ranks "$tmp/g-rank")" ] &&
    [ "$(grep '^predicted step' "$tmp/g-global")" = "$(grep '^predicted step' "$tmp/g-rank")" ]; then
    ok "--global-batch-size 65536 on 16 ranks: each rank's memory and the step as --batch-size 4096"
else
    bad "--global-batch-size" "$(ranks "$tmp/g-global" | head -2) against $(ranks "$tmp/g-rank" | head -2)"
fi

# 5. hybrid hot sets sized by cost, through --explain, the plan file and train
cat >"$tmp/slow.json" <<'EOF'
{"source": "shardrec bench comm", "backend": "mpi", "world_size": 2, "ranks_per_node": 2,
 "device": "cpu", "links": {"intra_node": {"bandwidth_gb_s": 0.05, "latency_us": 20}},
 "measurements": []}
EOF
HJOB="--table-rows 200000,30000,500 --id-dist zipf:1.05 --batch-size 256 --embedding-dim 16
      --bot-mlp 13-32-16 --top-mlp 32-1 --steps 4 --eval-samples 0 --log-every 1"
TOPO="--topology cpu-2core --topology $tmp/slow.json"
# each hybrid table: "name rows N" from the table's "hot:" line
hot_sets() { awk '$1 ~ /^t[0-9]+$/ { t = $1; e = $2 } $1 == "hot:" { print t, e, $2 }' "$1"; }
if "$bin" plan $TOPO $HJOB --explain --out "$tmp/h.json" >"$tmp/h.out" 2>&1 &&
    [ -n "$(hot_sets "$tmp/h.out")" ] &&
    out=$(hot_sets "$tmp/h.out" | /usr/bin/python3 -c '
import json, re, sys
plan = {t["name"]: t for t in json.load(open(sys.argv[1]))["tables"]}
text = open(sys.argv[2]).read()
other = 0
for line in sys.stdin:
    name, rows, n = line.split(); rows, n = int(rows), int(n)
    assert n in [-(-rows // d) for d in (1000, 300, 100, 30, 10)], (name, n)
    other += n != -(-rows // 100)
    assert re.search(r"why: hybrid \(%d hot rows, [0-9.]+%% of its lookups\)" % n, text), name
    hot = plan[name]["hot"]
    assert plan[name]["sharding"] == "hybrid" and len(hot) == n, (name, len(hot), n)
    assert all(a < b for a, b in zip(hot, hot[1:])) and 0 <= hot[0] and hot[-1] < rows, name
    print("%s %d" % (name, n), end="; ")
assert other, "every hot set is the 1% one"
' "$tmp/h.json" "$tmp/h.out" 2>&1); then
    ok "hybrid hot sets sized by cost, in the table, --explain and the plan file: $out"
else
    bad "hybrid hot sets" "$out $(tail -5 "$tmp/h.out")"
fi
if command -v mpirun >/dev/null 2>&1; then
    sr_mpirun 2 "$bin" train $HJOB $TOPO --plan "$tmp/h.json" --metrics "$tmp/ha.jsonl" \
        >"$tmp/ha.out" 2>&1
    ra=$?
    sr_mpirun 2 "$bin" train $HJOB $TOPO --metrics "$tmp/hb.jsonl" >"$tmp/hb.out" 2>&1
    rb=$?
    losses() { grep -o '"loss": *[^,}]*' "$1"; }
    if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ -s "$tmp/ha.jsonl" ] &&
        [ "$(losses "$tmp/ha.jsonl")" = "$(losses "$tmp/hb.jsonl")" ] &&
        [ "$(hot_sets "$tmp/hb.out")" = "$(hot_sets "$tmp/h.out")" ]; then
        ok "train --plan the hybrid plan file: the losses and hot sets of train's own planner"
    else
        bad "hybrid plan in train" "rc $ra $rb; $(hot_sets "$tmp/hb.out"); $(tail -3 "$tmp/hb.out")"
    fi
else
    echo "skip 2-rank hybrid train (no mpirun)"
fi

echo "check_plan: $pass passed, $fail failed"
[ $fail -eq 0 ]
