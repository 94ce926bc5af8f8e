#!/bin/sh
# `shardrec eval`'s predictions against PyTorch (tools/torch_dlrm.py predict:
# the same model built from the same weights file, run in float64) on a
# Criteo TSV that `gen` wrote, and its --metrics against the same metrics
# recomputed in numpy from its --out (tools/torch_dlrm.py check-eval):
#
#   - a checkpoint of 12 steps, evaluated on 1 rank and on 2 ranks (rw): every
#     probability within 1e-6 of PyTorch's float64 (float32 arithmetic: measured
#     1e-7), AUC, accuracy and the positive rate exact, log loss and NE within
#     1e-9 relative of numpy's;
#   - with --interaction dcn (2 cross layers of rank 8);
#   - negative control, which must FAIL: the checkpoint of step 6 against
#     PyTorch's predictions of step 12's weights.
# Needs PyTorch for Python 3 (Debian: python3-torch); without it exit 77.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_torch
sr_timeout_opts="-s KILL"
sr_timeout=120
tool="$sr_root/tools/torch_dlrm.py"
R=40,7,300,1000,60,5,2000,90
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
cd "$tmp" || exit 1
"$bin" gen --table-rows $R --out train.tsv --samples 1536 >/dev/null 2>&1 &&
    "$bin" gen --table-rows $R --out test.tsv --samples 1000 --eval-split >/dev/null 2>&1 ||
    { echo "FAIL gen"; exit 1; }

case_eval() { # NAME MODEL-FLAGS...
    name=$1
    shift
    job="--table-rows $R --embedding-dim 8 --bot-mlp 13-32-8 --top-mlp 32-16-1 $*"
    "$bin" train $job --data train.tsv --batch-size 128 --steps 12 --checkpoint-dir "ck-$name" \
        --checkpoint-every 6 --eval-every 0 --no-progress >"train-$name.out" 2>&1 ||
        { bad "$name" "training: $(tail -1 "train-$name.out")"; return; }
    "$bin" export "ck-$name/step-00000012" --out "w-$name.st" >/dev/null 2>&1 ||
        { bad "$name" "export failed"; return; }
    "$sr_python" "$tool" predict --weights "w-$name.st" --data test.tsv --out "ref-$name.tsv" ||
        { bad "$name" "predict failed"; return; }
    for np in 1 2; do
        if [ $np -eq 1 ]; then
            "$bin" eval "ck-$name" $job --data test.tsv --batch-size 96 --out p.tsv \
                --metrics m.json >e.out 2>&1
        elif command -v mpirun >/dev/null 2>&1; then
            sr_mpirun 2 "$bin" eval "ck-$name" $job --data test.tsv --batch-size 96 --sharding rw \
                --out p.tsv --metrics m.json >e.out 2>&1
        else
            continue
        fi || { bad "$name, $np rank(s)" "eval: $(tail -1 e.out)"; continue; }
        if "$sr_python" "$tool" check-eval --out p.tsv --metrics m.json --reference "ref-$name.tsv" \
            --atol 1e-6 --rtol 1e-9 >c.out 2>&1; then
            ok "$name, $np rank(s): $(sed -n 's/^predictions: //p' c.out)"
        else
            bad "$name, $np rank(s)" "$(tail -1 c.out)"
        fi
    done
}

case_eval dot
case_eval dcn --interaction dcn --dcn-layers 2 --dcn-rank 8

# negative control: step 6's model is not step 12's
job="--table-rows $R --embedding-dim 8 --bot-mlp 13-32-8 --top-mlp 32-16-1"
"$bin" eval ck-dot/step-00000006 $job --data test.tsv --out p6.tsv --metrics m6.json >/dev/null 2>&1
if "$sr_python" "$tool" check-eval --out p6.tsv --metrics m6.json --reference ref-dot.tsv \
    --atol 1e-6 >c6.out 2>&1; then
    bad "negative control" "step 6's predictions passed as step 12's"
else
    ok "negative control: $(sed -n 's/^predictions: //p' c6.out)"
fi

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
