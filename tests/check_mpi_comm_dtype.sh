#!/bin/sh
# Compressed exchanges (--comm-dtype, --dense-comm-dtype fp16|bf16):
#  1. $BUILD/tests/mpi_grad_buckets on 1-4 ranks: dense buckets in fp32, bf16
#     and fp16 (sums, exact tail and loss, identical replicas, 2 calls per
#     compressed bucket, bytes; half of fp32's gradient bytes on 2 ranks).
#  2. Training with both flags in fp16 and in bf16 (every sharding type on 2
#     ranks, the mixed plan on 4 ranks as 2 nodes of 2) against the fp32
#     single-rank run: per-step losses and evaluations within a tolerance.
#     Each step rounds pooled values, their gradients and the dense gradients
#     once per hop (relative u = 2^-11 fp16, 2^-8 bf16). Step 1 moves the loss
#     by ~u/20; later steps amplify it: Adagrad's first updates of a row are
#     ~lr * sign(g), and a tiny gradient whose sign follows the rounding of the
#     forward changes a row by a full step; and the AUC on 200 samples moves
#     in steps of ~2e-4 (one pair swapped). Measured over 12 steps: fp16 <=
#     1e-3, bf16 <= 1e-2 relative. Tolerances: fp16 5e-3, bf16 3e-2; a lost,
#     unsummed or misplaced block moves the loss by far more from step 1 (and
#     mpi_sharded_ebc checks each pooled value).
#  3. The mixed plan's collectives per step with both flags: the fp32 line of
#     check_mpi_train_equiv.sh with rw's and twrw's reduce-scatters as
#     all-to-alls and the one dense bucket as all-to-all + all-gather.
# The pooled bytes of each sharding type are checked in mpi_sharded_ebc.c.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_mpirun
sr_need_built "$bin" "$sr_build/tests/mpi_grad_buckets"
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48 --steps 12
     --optimizer sgd --lr 0.05 --emb-optimizer adagrad --eval-samples 200 --eval-every 6
     --log-every 1 --no-progress"
fail=0

for np in 1 2 3 4; do
    if sr_mpirun "$np" "$sr_build/tests/mpi_grad_buckets" >"$tmp/gb.out" 2>&1 &&
        grep -q " 0 failed" "$tmp/gb.out"; then
        grep '^mpi_grad_buckets' "$tmp/gb.out"
    else
        tail -20 "$tmp/gb.out"; echo "FAIL mpi_grad_buckets np $np"; fail=1
    fi
done

"$bin" train $JOB --metrics "$tmp/ref.jsonl" 2>"$tmp/ref.err" || { cat "$tmp/ref.err"; exit 1; }

compare() { # name
    /usr/bin/python3 - "$tmp/ref.jsonl" "$tmp/$1.jsonl" "$2" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
tol = {"fp16": 5e-3, "bf16": 3e-2}[sys.argv[3]]
assert len(a) == len(b) == 12, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    for k in ("loss", "eval_logloss", "eval_auc"):
        if k in x:
            r = abs(x[k] - y[k]) / abs(x[k])
            worst = max(worst, r)
            assert r <= tol, f"step {x['step']} {k}: {x[k]} vs {y[k]} (rel {r:.2e})"
print(f"losses max rel diff {worst:.1e}")
PY
}

run_case() { # name np dtype extra-args...
    name=$1 np=$2 dt=$3
    shift 3
    if ! sr_mpirun "$np" "$bin" train $JOB --comm-dtype "$dt" --dense-comm-dtype "$dt" "$@" \
        --metrics "$tmp/$name.jsonl" >"$tmp/$name.err" 2>&1; then
        echo "FAIL $name: run failed"; tail -20 "$tmp/$name.err"; fail=1; return
    fi
    if out=$(compare "$name" "$dt" 2>&1); then echo "ok   $name: $out"; else echo "FAIL $name: $out"; fail=1; fi
}

for dt in fp16 bf16; do
    for type in tw rw cw twrw; do
        run_case "$type-np2-$dt" 2 $dt --sharding "$type"
    done
done
cat >"$tmp/plan.json" <<'JSON'
{"world_size": 4, "local_size": 2, "tables": [
 {"name": "t0", "sharding": "dp"}, {"name": "t1", "sharding": "tw", "rank": 3},
 {"name": "t2", "sharding": "rw"}, {"name": "t3", "sharding": "cw", "ranks": [3, 0]},
 {"name": "t4", "sharding": "twrw", "node": 1}, {"name": "t5", "sharding": "tw", "rank": 0}]}
JSON
run_case "mixed-np4-fp16" 4 fp16 --plan "$tmp/plan.json" --ranks-per-node 2
run_case "mixed-np4-bf16" 4 bf16 --plan "$tmp/plan.json" --ranks-per-node 2

line=$(grep '^collectives per step' "$tmp/mixed-np4-bf16.err")
echo "$line"
echo "$line" | grep -q 'all_to_allv 9.00 all_gather 3.00 | total 12.00' ||
    { echo "FAIL: unexpected collective counts"; fail=1; }
grep -q '^wire dtypes: pooled bf16, dense bf16 (1 buckets, 2 dense calls per step)' \
    "$tmp/mixed-np4-bf16.err" || { echo "FAIL: no wire dtypes line"; fail=1; }
exit $fail
