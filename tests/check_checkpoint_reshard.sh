#!/bin/sh
# --resume under another world size or plan (resharding) continues the
# trajectory: K steps under plan A on W_A ranks with a checkpoint, then
# --resume to 2K under plan B on W_B ranks, against an independent
# reference: 2K steps straight under plan B on W_B ranks, with the same
# global batch (--global-batch-size 48). The contract (DESIGN.md): the same
# global batch and weights give the same losses for any world size and plan
# within 1e-5 relative, so
#
#   - every loss of steps K+1..2K is within 1e-5 relative of the reference's
#     (steps 1..K too: plan A's first half against plan B's);
#   - the final weights (--save-weights) match the reference's within
#     1e-5 x the tensor's largest magnitude, element by element. Why scaled
#     by the tensor: the two runs sum in different orders in their first K
#     steps (parts in 1e-7), and Adagrad/Adam divide by the square root of
#     the accumulated squares, so an element with a tiny gradient sum can
#     differ by more than 1e-5 of itself while staying ~1e-7 of the tensor.
#
# Cases (each also moves the optimizer state its optimizer keeps): 4 ranks tw
# -> 3 ranks rw (adagrad: one state per element); 2 ranks rw -> 1 process
# (rowwise_adagrad: one per row); 1 process -> 4 ranks rw (sgd: none);
# 2 ranks tw -> 2 ranks cw (adam: m and v); a mixed plan of 4 ranks in 2
# nodes (dp, tw, rw, cw, twrw) -> 3 ranks rw; 2 ranks rw -> the mixed plan.
# A resharded resume says "(resharded)" in its log line. Then the refusals
# (exit status 2): a checkpoint of another table shape, the table named;
# another embedding optimizer; another global batch.
# Exit 0 pass, 77 skipped (no MPI or no python3), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_mpirun
sr_need_python3
unset SR_CPU_DEFERRED
sr_timeout_opts="-s KILL"
sr_timeout=120
K=3
ROWS=1,7,50,333,1000,5
JOB="--embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1 --ids-per-feature 0-3
     --id-dist zipf:1.05 --global-batch-size 48 --optimizer adam --lr 0.01 --log-every 1
     --no-progress"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

cat >"$tmp/compare.py" <<'PY'
import json, struct, sys

def losses(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "loss" in j:
            out[j["step"]] = j["loss"]
    return out

def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out

what, x, y = sys.argv[1], sys.argv[2], sys.argv[3]
if what == "losses":  # x: the reference's metrics; y: the two halves' metrics
    ref, got = losses(x), {}
    for p in y.split(","):
        got.update(losses(p))
    if sorted(ref) != sorted(got):
        sys.exit("steps differ: %s vs %s" % (sorted(ref), sorted(got)))
    worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in ref)
    print("%.3g" % worst)
    sys.exit(0 if worst <= 1e-5 else 1)
a, b = tensors(x), tensors(y)
if sorted(a) != sorted(b):
    sys.exit("tensor names differ")
worst = 0.0
for name in a:
    if len(a[name]) != len(b[name]):
        sys.exit("tensor %s: sizes differ" % name)
    scale = max(max(abs(v) for v in b[name]), 1e-30)
    worst = max([worst] + [abs(p - q) / scale for p, q in zip(a[name], b[name])])
print("%.3g" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY

launch() { # NP ARGS... (NP 0: one process without mpirun)
    np=$1
    shift
    if [ "$np" -eq 0 ]; then "$bin" train $JOB "$@"; else
        sr_mpirun "$np" ${SR_RANKS_PER_NODE:+-x SR_RANKS_PER_NODE} "$bin" train $JOB "$@"; fi
}

rpn() { # set SR_RANKS_PER_NODE to $1, or unset it when empty
    if [ -n "$1" ]; then export SR_RANKS_PER_NODE="$1"; else unset SR_RANKS_PER_NODE; fi
}

# NAME EMB_OPTIMIZER NP_A "PLAN_A" RPN_A NP_B "PLAN_B" RPN_B
reshard_case() {
    name=$1 opt=$2 npa=$3 plana=$4 rpna=$5 npb=$6 planb=$7 rpnb=$8
    d="$tmp/$name"
    mkdir -p "$d"
    common="--table-rows $ROWS --emb-optimizer $opt"
    rpn "$rpnb"
    # shellcheck disable=SC2086
    launch "$npb" $common $planb --steps $((2 * K)) --metrics "$d/ref.jsonl" \
        --save-weights "$d/ref.st" >"$d/ref.out" 2>&1 || { bad "$name" "reference run failed: $(tail -1 "$d/ref.out")"; return; }
    rpn "$rpna"
    # shellcheck disable=SC2086
    launch "$npa" $common $plana --steps $K --checkpoint-dir "$d/ck" --metrics "$d/a.jsonl" \
        >"$d/a.out" 2>&1 || { bad "$name" "first half failed: $(tail -1 "$d/a.out")"; return; }
    rpn "$rpnb"
    # shellcheck disable=SC2086
    launch "$npb" $common $planb --steps $((2 * K)) --checkpoint-dir "$d/ck" --resume \
        --metrics "$d/b.jsonl" --save-weights "$d/b.st" >"$d/b.out" 2>&1 || { bad "$name" "resume failed: $(tail -1 "$d/b.out")"; return; }
    why=""
    grep -q "resumed from .*step-0000000$K at step $K (resharded)" "$d/b.out" || why="$why no resharded resume line;"
    l=$(python3 "$tmp/compare.py" losses "$d/ref.jsonl" "$d/a.jsonl,$d/b.jsonl" 2>&1) || why="$why losses differ (max relative $l);"
    w=$(python3 "$tmp/compare.py" weights "$d/ref.st" "$d/b.st" 2>&1) || why="$why final weights differ (max $w of the tensor's scale);"
    if [ -z "$why" ]; then ok "$name (max relative loss difference $l, weights $w)"; else bad "$name" "$why"; fi
}

sr_mixed_plan 4 2 >"$tmp/mixed4.json"
reshard_case tw4-rw3 adagrad 4 "--sharding tw" "" 3 "--sharding rw" ""
reshard_case rw2-one rowwise_adagrad 2 "--sharding rw" "" 0 "" ""
reshard_case one-rw4 sgd 0 "" "" 4 "--sharding rw" ""
reshard_case tw2-cw2 adam 2 "--sharding tw" "" 2 "--sharding cw" ""
reshard_case mixed4-rw3 adagrad 4 "--plan $tmp/mixed4.json" 2 3 "--sharding rw" ""
reshard_case rw2-mixed4 adagrad 2 "--sharding rw" "" 4 "--plan $tmp/mixed4.json" 2
unset SR_RANKS_PER_NODE

# refusals: another table shape (the table named), optimizer, global batch
expect2() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    launch 0 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out"; then ok "$name"; else
        bad "$name" "status $rc, output: $(tail -1 "$tmp/$name.out")"; fi
}
ck="$tmp/tw4-rw3/ck/step-0000000$K"
expect2 other-rows "table 't3' is 333 rows x 8 in the checkpoint, 334 x 8" \
    --table-rows 1,7,50,334,1000,5 --emb-optimizer adagrad --steps 8 --resume "$ck"
expect2 other-optimizer "another --emb-optimizer" \
    --table-rows $ROWS --emb-optimizer sgd --steps 8 --resume "$ck"
expect2 other-global-batch "global batch of 48 samples" \
    --table-rows $ROWS --emb-optimizer adagrad --global-batch-size 24 --steps 8 --resume "$ck"

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
