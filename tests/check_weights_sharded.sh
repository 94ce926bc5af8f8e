#!/bin/sh
# --init-weights on sharded tables, per rank: every rank maps the single
# weights file (the --save-weights format) and copies the dense parameters
# and only its own blocks of each table; no rank gathers a table.
#
#   - a one-process run writes x.st after 3 steps; runs of 2 ranks (a mixed
#     plan: dp, tw, rw, cw, twrw) and of 3 ranks (rw) with --init-weights
#     x.st give per-step losses within 1e-5 relative of a one-process run
#     with --init-weights x.st (the independent reference: the local path
#     loads whole tables), and their first loss differs from a run without
#     --init-weights (the load took effect);
#   - a NaN in the last row of table t4, which only rank 1 of 2 holds under
#     rw, stops every rank with exit status 2 (no hang), the tensor named.
# Exit 0 pass, 77 skipped (no MPI or python3), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_mpirun
sr_need_python3
unset SR_CPU_DEFERRED
sr_timeout_opts="-s KILL"
sr_timeout=120
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --global-batch-size 48 --emb-optimizer adagrad --log-every 1
     --no-progress"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

cat >"$tmp/losses.py" <<'PY'
import json, sys
def losses(path):
    return {j["step"]: j["loss"] for j in map(json.loads, open(path)) if "loss" in j}
ref, got, fresh = losses(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[3])
if sorted(ref) != sorted(got) or not ref:
    sys.exit("steps differ")
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in ref)
print("%.3g" % worst)
if abs(fresh[1] - ref[1]) <= 1e-5 * abs(ref[1]):
    sys.exit("the first loss is that of a run without --init-weights")
sys.exit(0 if worst <= 1e-5 else 1)
PY

"$bin" train $JOB --steps 3 --save-weights "$tmp/x.st" >"$tmp/x.out" 2>&1 || { echo "FAIL: writing x.st: $(tail -1 "$tmp/x.out")"; exit 1; }
"$bin" train $JOB --steps 4 --init-weights "$tmp/x.st" --metrics "$tmp/ref.jsonl" >"$tmp/ref.out" 2>&1 || { echo "FAIL: reference: $(tail -1 "$tmp/ref.out")"; exit 1; }
"$bin" train $JOB --steps 4 --metrics "$tmp/fresh.jsonl" >"$tmp/fresh.out" 2>&1 || { echo "FAIL: fresh run: $(tail -1 "$tmp/fresh.out")"; exit 1; }

sharded_case() { # NAME NP ARGS...
    name=$1 np=$2
    shift 2
    sr_mpirun "$np" "$bin" train $JOB "$@" --steps 4 --init-weights "$tmp/x.st" \
        --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>&1 || { bad "$name" "run failed: $(grep 'shardrec' "$tmp/$name.out" | head -1)"; return; }
    if l=$(python3 "$tmp/losses.py" "$tmp/ref.jsonl" "$tmp/$name.jsonl" "$tmp/fresh.jsonl" 2>&1); then
        ok "$name (max relative loss difference $l)"; else bad "$name" "$l"; fi
}
sr_mixed_plan 2 2 >"$tmp/mixed.json"
sharded_case mixed2 2 --plan "$tmp/mixed.json"
sharded_case rw3 3 --sharding rw

python3 - "$tmp/x.st" "$tmp/nan.st" <<'PY'
import json, struct, sys
raw = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
end = json.loads(raw[8:8 + n])["emb.t4.weight"]["data_offsets"][1]
raw[8 + n + end - 4:8 + n + end] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(raw)
PY
sr_mpirun 2 "$bin" train $JOB --sharding rw --steps 2 --init-weights "$tmp/nan.st" >"$tmp/nan.out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "tensor emb.t4.weight holds nan at row 999" "$tmp/nan.out" &&
    grep -q "rank 1 could not load its shards" "$tmp/nan.out"; then ok nan-on-rank1; else
    bad nan-on-rank1 "status $rc: $(grep shardrec "$tmp/nan.out" | head -2 | tr '\n' ' ')"; fi

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
