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
#     PyTorch's predictions of step 12's weights;
#   - mean pooling: `train --pooling mean --save-weights` on multi-hot bags
#     of varying length, empty ones included (a binary file written by
#     tests/helpers/binfmt_write.py); predict, NOT told the pooling, takes it
#     from the file's __metadata__ records, and eval (no --pooling) too: the
#     same tolerances, on 1 and 2 ranks. Negative control, which must FAIL:
#     the same file with its records stripped, which predict pools by sum
#     (measured: off by 0.6). A malformed record (a value other than sum or
#     mean, a table the file does not hold, an empty table name) is refused
#     by predict and list with exit status 2 naming the file and the key;
#     convert --to reference refuses the mean-pooled file (the reference
#     pools by sum) and writes nothing; init --pooling mean writes records
#     that shardrec train --init-weights reads.
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

# ---- mean pooling, read from the weights file's records ----
# bags of 0..4, 1, 2..6, 0..2, 3, 1..5, 0..4 and 2 ids (chunks of 512 samples)
lens=0-4,1,2-6,0-2,3,1-5,0-4,2
"$sr_python" "$sr_tests/helpers/binfmt_write.py" mtrain.bin $R 1536 1 $lens &&
    "$sr_python" "$sr_tests/helpers/binfmt_write.py" mtest.bin $R 1000 2 $lens ||
    { echo "FAIL binfmt_write.py"; exit 1; }
# IN with its __metadata__ replaced by the JSON object JSON, into OUT
set_meta() { # IN OUT JSON
    "$sr_python" - "$@" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"] = json.loads(sys.argv[3])
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
EOF
}
"$bin" train $job --pooling mean --data mtrain.bin --batch-size 128 --steps 12 --eval-every 0 \
    --no-progress --save-weights w-mean.st >train-mean.out 2>&1 ||
    { echo "FAIL mean: training: $(tail -1 train-mean.out)"; exit 1; }
"$sr_python" "$tool" predict --weights w-mean.st --data mtest.bin --out ref-mean.tsv 2>pm.err ||
    { echo "FAIL mean: predict: $(tail -1 pm.err)"; exit 1; }
grep -q "pooling as w-mean.st records it: mean, recorded for 8 tables" pm.err ||
    bad "mean" "predict does not say it took the recorded pooling: $(tail -1 pm.err)"
for np in 1 2; do
    if [ $np -eq 1 ]; then
        "$bin" eval w-mean.st $job --data mtest.bin --batch-size 96 --out pm.tsv --metrics mm.json \
            >e.out 2>&1
    elif command -v mpirun >/dev/null 2>&1; then
        sr_mpirun 2 "$bin" eval w-mean.st $job --data mtest.bin --batch-size 96 --sharding rw \
            --out pm.tsv --metrics mm.json >e.out 2>&1
    else
        continue
    fi || { bad "mean, $np rank(s)" "eval: $(tail -1 e.out)"; continue; }
    grep -q "pooling mean, as w-mean.st records it" e.out ||
        { bad "mean, $np rank(s)" "eval did not take the recorded pooling"; continue; }
    if "$sr_python" "$tool" check-eval --out pm.tsv --metrics mm.json --reference ref-mean.tsv \
        --atol 1e-6 --rtol 1e-9 >c.out 2>&1; then
        ok "mean, $np rank(s), pooling from the file: $(sed -n 's/^predictions: //p' c.out)"
    else
        bad "mean, $np rank(s)" "$(tail -1 c.out)"
    fi
done

# negative control: without the records predict pools by sum, and must disagree
set_meta w-mean.st w-strip.st '{"format": "pt"}'
"$sr_python" "$tool" predict --weights w-strip.st --data mtest.bin --out ref-strip.tsv ||
    bad "mean, records stripped" "predict failed"
if "$sr_python" "$tool" check-eval --out pm.tsv --metrics mm.json --reference ref-strip.tsv \
    --atol 1e-6 >c.out 2>&1; then
    bad "negative control (mean)" "predictions pooled by sum passed as mean's"
else
    ok "negative control (mean), records stripped: $(sed -n 's/^predictions: //p' c.out)"
fi

# the same values with other pooling are another model: compare-weights says so
"$sr_python" "$tool" compare-weights w-mean.st w-mean.st >c.out 2>&1 || bad "compare-weights, same file" "$(tail -1 c.out)"
if "$sr_python" "$tool" compare-weights w-mean.st w-strip.st >c.out 2>&1; then
    bad "compare-weights of mean against sum" "passed: $(tail -1 c.out)"
elif grep -q "pooling differs: t0 mean vs sum" c.out; then
    ok "compare-weights fails where only the pooling records differ"
else
    bad "compare-weights of mean against sum" "$(tail -1 c.out)"
fi

# malformed records: exit status 2 from predict and list, naming the file and the key
malformed() { # NAME JSON KEY
    set_meta w-mean.st "w-$1.st" "$2"
    why=""
    for cmd in predict list; do
        if [ $cmd = predict ]; then
            "$sr_python" "$tool" predict --weights "w-$1.st" --data mtest.bin --out x.tsv \
                >x.out 2>&1
        else
            "$sr_python" "$tool" list "w-$1.st" >x.out 2>&1
        fi
        rc=$?
        [ $rc -eq 2 ] && grep -qF "w-$1.st: __metadata__" x.out && grep -qF "\"$3\"" x.out ||
            why="$why $cmd: status $rc: $(tail -1 x.out);"
    done
    if [ -z "$why" ]; then ok "malformed record ($1) refused"; else bad "malformed ($1)" "$why"; fi
}
malformed value '{"format": "pt", "shardrec.emb.t3.pooling": "max"}' shardrec.emb.t3.pooling
malformed no-table '{"format": "pt", "shardrec.emb.t99.pooling": "mean"}' shardrec.emb.t99.pooling
malformed empty-name '{"format": "pt", "shardrec.emb..pooling": "sum"}' shardrec.emb..pooling

# list prints the records; convert --to reference refuses mean and writes nothing
if "$sr_python" "$tool" list w-mean.st >l.out 2>&1 &&
    grep -q "^pooling: mean, recorded for 8 tables" l.out; then
    ok "list prints the records"
else
    bad "list" "$(tail -1 l.out)"
fi
"$sr_python" "$tool" convert --to reference w-mean.st ref.st >cv.out 2>&1
rc=$?
if [ $rc -eq 2 ] && [ ! -e ref.st ] && grep -q "pools every table by sum" cv.out; then
    ok "convert --to reference refuses mean pooling"
else
    bad "convert --to reference" "status $rc: $(tail -1 cv.out)"
fi

# the tool's writers record the pooling, and shardrec reads it
"$sr_python" "$tool" init --out i-mean.st --table-rows $R --bot-mlp 13-32-8 --top-mlp 32-16-1 \
    --pooling mean || bad "init --pooling mean" "failed"
why=""
"$bin" train $job --pooling mean --data mtrain.bin --batch-size 128 --steps 1 --eval-every 0 \
    --no-progress --init-weights i-mean.st >i.out 2>&1 ||
    why="$why --pooling mean: $(tail -1 i.out);"
"$bin" train $job --data mtrain.bin --batch-size 128 --steps 1 --eval-every 0 --no-progress \
    --init-weights i-mean.st >i.out 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "table t0 has pooling mean in the file" i.out ||
    why="$why --pooling sum: status $rc: $(tail -1 i.out);"
if [ -z "$why" ]; then ok "init --pooling mean: shardrec reads the records"; else bad init "$why"; fi

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
