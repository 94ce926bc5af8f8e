#!/bin/sh
# Distributed training equals single-rank training: the same global batch and
# the same initial weights give the same per-step losses, the same evaluation
# and the same final weights (every table gathered) within 1e-5 relative, for
# every sharding type and a mixed plan on 2, 3 and 4 ranks (4 ranks as 2
# emulated nodes of 2). The cases hold a one-row table, tables not divisible
# by W, empty bags (0-3 ids per feature) and ranks that receive no ids.
# Also: the collectives per step are the documented counts, a DCNv2 model
# (--interaction dcn) on 2 ranks equals its one-rank run, and so does a job
# whose features each draw their own number of ids (--ids-per-feature A,B,...)
# and one with a column-wise table of 300,000 rows.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_mpirun
sr_need_built "$bin"
sr_btl=tcp,self,vader
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48 --steps 12
     --optimizer sgd --lr 0.05 --emb-optimizer adagrad --eval-samples 200 --eval-every 6
     --log-every 1 --no-progress"
fail=0

"$bin" train $JOB --metrics "$tmp/ref.jsonl" --save-weights "$tmp/ref.st" 2>"$tmp/ref.err" ||
    { cat "$tmp/ref.err"; exit 1; }

compare() { # name
    /usr/bin/python3 - "$tmp/ref.jsonl" "$tmp/$1.jsonl" "$tmp/ref.st" "$tmp/$1.st" <<'PY'
import json, struct, sys
import numpy as np
def rows(p): return [json.loads(l) for l in open(p)]
def st(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32).reshape(v["shape"])
            for k, v in h.items() if k != "__metadata__"}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert len(a) == len(b) == 12, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    for k in ("loss", "eval_auc", "eval_logloss"):
        if k in x:
            r = abs(x[k] - y[k]) / max(abs(x[k]), 1e-12)
            worst = max(worst, r)
            assert r <= 1e-5, f"step {x['step']} {k}: {x[k]} vs {y[k]} (rel {r:.2e})"
wa, wb = st(sys.argv[3]), st(sys.argv[4])
assert wa.keys() == wb.keys(), (sorted(wa), sorted(wb))
wmax = 0.0
for k in wa:
    d = np.abs(wa[k].astype(np.float64) - wb[k]) / (np.abs(wa[k]) + 1e-6)
    wmax = max(wmax, float(d.max()))
    assert np.allclose(wb[k], wa[k], rtol=1e-5, atol=1e-7), f"{k}: max rel diff {d.max():.2e}"
print(f"losses max rel diff {worst:.1e}, weights max rel diff {wmax:.1e}")
PY
}

run_case() { # name np extra-args...
    name=$1 np=$2
    shift 2
    if ! sr_mpirun "$np" "$bin" train $JOB "$@" --metrics "$tmp/$name.jsonl" \
        --save-weights "$tmp/$name.st" >"$tmp/$name.err" 2>&1; then
        echo "FAIL $name: run failed"; tail -20 "$tmp/$name.err"; fail=1; return
    fi
    if out=$(compare "$name" 2>&1); then
        echo "ok   $name: $out"
    else
        echo "FAIL $name: $out"; fail=1
    fi
}

for np in 2 3 4; do
    rpn=$np
    [ "$np" -eq 4 ] && rpn=2
    for type in dp tw rw cw twrw; do
        run_case "$type-np$np" "$np" --sharding "$type" --ranks-per-node "$rpn"
    done
    sr_mixed_plan "$np" "$rpn" >"$tmp/plan$np.json"
    run_case "mixed-np$np" "$np" --plan "$tmp/plan$np.json" --ranks-per-node "$rpn"
done
# one rank through the sharded path (a plan on a world of one)
run_case "tw-np1" 1 --sharding tw

# --interaction dcn (2 cross layers of rank 24 on n = 7 x 8 = 56): its own
# one-rank reference, then 2 ranks row-wise; its weights (dcn.L.*) are
# gathered and compared with the rest. The tables train with row-wise
# Adagrad here: with element-wise Adagrad the cross layers leave some table
# elements with gradients that are mostly rounding, which Adagrad moves by
# about lr whatever their size (3e-4 apart after 12 steps, losses still
# within 1.2e-7)
DCN="--interaction dcn --dcn-layers 2 --dcn-rank 24 --emb-optimizer rowwise_adagrad"
"$bin" train $JOB $DCN --metrics "$tmp/ref.jsonl" --save-weights "$tmp/ref.st" 2>"$tmp/ref.err" ||
    { cat "$tmp/ref.err"; exit 1; }
run_case "dcn-rw-np2" 2 $DCN --sharding rw --ranks-per-node 2

# ids per feature of their own (--ids-per-feature A,B,..., MLPerf's multi-hot
# form; empty bags in two features): their own one-rank reference, then rw on
# 3 ranks and the mixed plan on 4
IDS="--ids-per-feature 0-3,1,2-5,0-1,1-2,4"
"$bin" train $JOB $IDS --metrics "$tmp/ref.jsonl" --save-weights "$tmp/ref.st" 2>"$tmp/ref.err" ||
    { cat "$tmp/ref.err"; exit 1; }
run_case "ids-rw-np3" 3 $IDS --sharding rw --ranks-per-node 3
run_case "ids-mixed-np4" 4 $IDS --plan "$tmp/plan4.json" --ranks-per-node 2

# a column-wise table of 300,000 rows on 2 ranks: each shard is drawn in one
# op (it was one op a row: on the deferred device its queue scan made that
# quadratic, on a GPU 26 x 1M launches; both looked like a hang)
BIG="--table-rows 1,7,50,333,300000,5"
"$bin" train $JOB $BIG --metrics "$tmp/ref.jsonl" --save-weights "$tmp/ref.st" 2>"$tmp/ref.err" ||
    { cat "$tmp/ref.err"; exit 1; }
run_case "bigcw-np2" 2 $BIG --sharding cw --ranks-per-node 2

# collectives per step of the mixed plan on 4 ranks: input dist 2 (counts +
# data), tw+cw 1 all-to-all each way, rw reduce-scatter + all-gather, twrw
# node reduce-scatter + all-gather and 2 cross all-to-alls, 1 dense bucket.
line=$(grep '^collectives per step' "$tmp/mixed-np4.err")
echo "$line"
echo "$line" | grep -q 'all_to_allv 6.00 all_reduce 1.00 reduce_scatter 2.00 all_gather 2.00 | total 11.00' ||
    { echo "FAIL: unexpected collective counts"; fail=1; }
exit $fail
