#!/bin/sh
# Tables stored in 16 bits (--emb-dtype), end to end on the CPU:
#   - distributed equals single-rank: bf16 tables with stochastic rounding on
#     2 ranks (rw, tw), 4 ranks (cw, SGD embeddings) and fp16 with nearest
#     rounding on 3 ranks (rw) give the one-rank run's per-step losses and
#     evaluations within 1e-5 relative (stochastic rounding draws by the
#     table's element, so every plan rounds alike); the control: fp32 tables
#     differ from bf16 ones by more than that;
#   - it learns: a small job's final eval AUC with bf16 tables (stochastic)
#     within 0.005 of fp32's;
#   - checkpoints hold 16-bit tables in their dtype: a bf16 run resumes bit
#     for bit (overlapped write), reshards from 2 ranks onto 1 within 1e-5,
#     is sound to inspect, exports as F32 and resumes as fp32;
#   - weights files stay fp32: a bf16 run's --save-weights equals the export
#     of its last checkpoint (1 rank, 2 ranks rw, and the gathering
#     fallback), and --init-weights of bf16-exact values gives fp32's first
#     loss;
#   - what is not built for 16-bit tables yet is refused (exit 2, named):
#     GPU training.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_python3
fail=0
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48 --steps 12
     --optimizer sgd --lr 0.05 --emb-optimizer adagrad --eval-samples 200 --eval-every 6
     --log-every 1 --no-progress"

# compare A B: per-step losses and evaluations within 1e-5 relative; prints the worst
compare() {
    python3 - "$tmp/$1.jsonl" "$tmp/$2.jsonl" <<'PY'
import json, sys
rows = lambda p: [json.loads(l) for l in open(p)]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert len(a) == len(b) == 12, (len(a), len(b))
worst = max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b)
            for k in ("loss", "eval_auc", "eval_logloss") if k in x)
print("%.1e" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
PY
}
one() { # NAME ARGS...: the one-process run
    n=$1
    shift
    "$bin" train $JOB "$@" --metrics "$tmp/$n.jsonl" >"$tmp/$n.out" 2>&1 ||
        { echo "FAIL $n: run failed: $(tail -1 "$tmp/$n.out")"; fail=1; }
}
ranks() { # NAME REF NP ARGS...: the same job on NP ranks against REF
    n=$1 ref=$2 np=$3
    shift 3
    if ! sr_mpirun "$np" "$bin" train $JOB "$@" --metrics "$tmp/$n.jsonl" >"$tmp/$n.out" 2>&1; then
        echo "FAIL $n: run failed: $(tail -1 "$tmp/$n.out")"
        fail=1
    elif w=$(compare "$ref" "$n"); then
        echo "ok   $n: equals one rank (worst $w relative)"
    else
        echo "FAIL $n: differs from one rank ($w relative)"
        fail=1
    fi
}

one bf16 --emb-dtype bf16
one fp32
one bf16-sgd --emb-dtype bf16 --emb-optimizer sgd
one fp16-nearest --emb-dtype fp16 --emb-rounding nearest
if w=$(compare fp32 bf16); then
    echo "FAIL control: bf16 tables train as fp32 ones ($w): the comparison sees nothing"
    fail=1
else
    echo "ok   control: bf16 differs from fp32 by $w relative"
fi
grep -q "MiB in bf16)" "$tmp/bf16.out" || { echo "FAIL the job line does not name bf16"; fail=1; }
if command -v mpirun >/dev/null 2>&1; then
    ranks bf16-2rw bf16 2 --emb-dtype bf16 --sharding rw
    ranks bf16-2tw bf16 2 --emb-dtype bf16 --sharding tw
    ranks bf16-4cw bf16-sgd 4 --emb-dtype bf16 --emb-optimizer sgd --sharding cw
    ranks fp16-3rw fp16-nearest 3 --emb-dtype fp16 --emb-rounding nearest --sharding rw
else
    echo "(no mpirun: the multi-rank cases were not run)"
fi

# ---- checkpoints hold 16-bit tables as they are --------------------------------------
ck_ok() { # NAME WHY: report
    if [ -z "$2" ]; then echo "ok   $1"; else echo "FAIL $1:$2"; fail=1; fi
}
why=""
"$bin" train $JOB --emb-dtype bf16 --checkpoint-dir "$tmp/ck" --checkpoint-every 6 \
    --checkpoint-write overlap >"$tmp/ck.out" 2>&1 || why="$why the run failed;"
python3 - "$tmp/ck/step-00000006/rank-00000.safetensors" <<'PY' || why="$why the rank file's tables are not BF16;"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
w = [v["dtype"] for k, v in h.items() if k.endswith(".weight")]
sys.exit(0 if w and set(w) == {"BF16"} else 1)
PY
rm -rf "$tmp/ck/step-00000012"
"$bin" train $JOB --emb-dtype bf16 --checkpoint-dir "$tmp/ck" --resume \
    --metrics "$tmp/ckr.jsonl" >"$tmp/ckr.out" 2>&1 || why="$why the resume failed;"
fields() { grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$1"; }
fields "$tmp/bf16.jsonl" | awk '/"step"/ { s = $2 } s >= 7' >"$tmp/ck.x"
fields "$tmp/ckr.jsonl" >"$tmp/ck.y"
[ -s "$tmp/ck.y" ] && cmp -s "$tmp/ck.x" "$tmp/ck.y" || why="$why resumed metrics differ from the straight run's;"
"$bin" inspect "$tmp/ck/step-00000006" >"$tmp/ins.out" 2>&1 && grep -q " bf16 " "$tmp/ins.out" ||
    why="$why inspect: $(tail -1 "$tmp/ins.out");"
"$bin" export "$tmp/ck/step-00000006" --out "$tmp/ex.st" >/dev/null 2>&1 &&
    python3 - "$tmp/ex.st" <<'PY' || why="$why export did not write F32 tables;"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
sys.exit(0 if {v["dtype"] for k, v in h.items() if k != "__metadata__"} == {"F32"} else 1)
PY
"$bin" train $JOB --resume "$tmp/ck/step-00000006" --metrics "$tmp/ck32.jsonl" \
    >"$tmp/ck32.out" 2>&1 || why="$why resuming as fp32 failed: $(tail -1 "$tmp/ck32.out");"
ck_ok "checkpoints: bf16 tables in BF16, resumed bit for bit, inspected, exported as F32, resumed as fp32" "$why"
if command -v mpirun >/dev/null 2>&1; then
    why=""
    sr_mpirun 2 "$bin" train $JOB --emb-dtype bf16 --sharding rw --checkpoint-dir "$tmp/ck2" \
        --checkpoint-every 6 >"$tmp/ck2.out" 2>&1 || why="$why the 2-rank run failed;"
    rm -rf "$tmp/ck2/step-00000012"
    "$bin" train $JOB --emb-dtype bf16 --checkpoint-dir "$tmp/ck2" --resume \
        --metrics "$tmp/ck2r.jsonl" >"$tmp/ck2r.out" 2>&1 || why="$why the 1-rank resume failed;"
    grep -q "(resharded)" "$tmp/ck2r.out" || why="$why not resharded;"
    python3 - "$tmp/bf16.jsonl" "$tmp/ck2r.jsonl" <<'PY' || why="$why differs from the straight run;"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][6:]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 6
sys.exit(0 if max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b)
                  for k in ("loss", "eval_auc", "eval_logloss") if k in x) <= 1e-5 else 1)
PY
    ck_ok "checkpoints: bf16 2 ranks rw resharded onto 1 within 1e-5 of the straight run" "$why"
fi

# ---- weights files: fp32, widened on save, rounded to nearest on load -------------------
why=""
"$bin" train $JOB --emb-dtype bf16 --save-weights "$tmp/w1.st" --checkpoint-dir "$tmp/wck" \
    >"$tmp/w1.out" 2>&1 || why="$why the 1-rank save failed: $(tail -1 "$tmp/w1.out");"
"$bin" export "$tmp/wck" --out "$tmp/w1e.st" >/dev/null 2>&1 || why="$why export failed;"
cmp -s "$tmp/w1.st" "$tmp/w1e.st" || why="$why 1 rank: --save-weights differs from the export of its last checkpoint;"
if command -v mpirun >/dev/null 2>&1; then
    sr_mpirun 2 "$bin" train $JOB --emb-dtype bf16 --sharding rw --save-weights "$tmp/w2.st" \
        --checkpoint-dir "$tmp/wck2" >"$tmp/w2.out" 2>&1 || why="$why the 2-rank save failed;"
    "$bin" export "$tmp/wck2" --out "$tmp/w2e.st" >/dev/null 2>&1 || why="$why export failed;"
    cmp -s "$tmp/w2.st" "$tmp/w2e.st" || why="$why 2 ranks: --save-weights differs from the export;"
    SR_SAVE_WEIGHTS_UNSHARED=1 sr_mpirun 2 "$bin" train $JOB --emb-dtype bf16 --sharding rw \
        --save-weights "$tmp/w3.st" >"$tmp/w3.out" 2>&1 || why="$why the gathering save failed;"
    grep -q "gathered to rank 0" "$tmp/w3.out" || why="$why the save did not gather;"
    cmp -s "$tmp/w2.st" "$tmp/w3.st" || why="$why the gathered file differs from the sharded one;"
fi
# a file of bf16-exact values loads into bf16 tables unchanged: step 1 as fp32's
"$bin" train $JOB --emb-dtype bf16 --init-weights "$tmp/w1.st" --steps 1 \
    --metrics "$tmp/i16.jsonl" >"$tmp/i16.out" 2>&1 || why="$why the bf16 load failed;"
"$bin" train $JOB --init-weights "$tmp/w1.st" --steps 1 --metrics "$tmp/i32.jsonl" \
    >"$tmp/i32.out" 2>&1 || why="$why the fp32 load failed;"
[ -s "$tmp/i16.jsonl" ] && [ "$(fields "$tmp/i16.jsonl" | head -2)" = "$(fields "$tmp/i32.jsonl" | head -2)" ] ||
    why="$why loaded bf16 tables do not give fp32's first loss;"
ck_ok "weights files: bf16 runs save fp32 files equal to their exports (1 rank, 2 ranks, gathered) and load them exactly" "$why"

# ---- it learns --------------------------------------------------------------------
LEARN="--steps 300 --batch-size 512 --eval-every 0 --eval-samples 16384 --no-progress"
"$bin" train $LEARN >"$tmp/l32.out" 2>&1 && "$bin" train $LEARN --emb-dtype bf16 >"$tmp/l16.out" 2>&1 ||
    { echo "FAIL learn: a run failed"; fail=1; }
a32=$(sed -n 's/^eval on .* AUC \([0-9.]*\) .*/\1/p' "$tmp/l32.out")
a16=$(sed -n 's/^eval on .* AUC \([0-9.]*\) .*/\1/p' "$tmp/l16.out")
if python3 -c "import sys; sys.exit(0 if abs($a32 - $a16) <= 0.005 else 1)" 2>/dev/null; then
    echo "ok   learn: eval AUC fp32 $a32, bf16 $a16"
else
    echo "FAIL learn: eval AUC fp32 '$a32', bf16 '$a16' (more than 0.005 apart)"
    fail=1
fi

# ---- refusals -------------------------------------------------------------------------
refuse() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    "$bin" train --steps 2 --emb-dtype bf16 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out"; then echo "ok   refuse $name"; else
        echo "FAIL refuse $name: status $rc: $(tail -1 "$tmp/$name.out")"
        fail=1
    fi
}
refuse bad-dtype "--emb-dtype bf17: expected fp32, fp16 or bf16" --emb-dtype bf17
refuse bad-rounding "--emb-rounding up: expected nearest or stochastic" --emb-rounding up

[ $fail -eq 0 ] && echo "$sr_name: passed"
exit $fail
