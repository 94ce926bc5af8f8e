#!/bin/sh
# Training on the GPU equals training on the CPU, and 2 GPU ranks equal 1.
#
#   1. cuda vs cpu: the default model and data (`shardrec train`, workload K's
#      shape, batch 2048, Zipf ids) at --lr 0.01 with SGD embeddings (see
#      part1) for 20 steps in fp32 math, the same flags on --device cuda and
#      --device cpu; the loss of every step (--log-every 1, --metrics), the
#      final evaluation's logloss and AUC and the weights must agree within
#      1e-4 relative (RTOL). The comparison is first shown to fail on a copy
#      of the CPU losses with one step moved by 2 x RTOL (a negative control).
#      (A hot row's gradient is summed in pieces on the GPU, in another order
#      than the CPU's: over many steps on skewed ids that rounding may drift
#      past 1e-4, which part 4 allows for.)
#   2. 2 ranks vs 1 rank on CUDA, through mpirun: the job of
#      tests/check_mpi_train_equiv.sh (tables of 1..1000 rows, 0-3 ids per
#      feature, Zipf ids, global batch 48, 12 steps, eval every 6) on 1 rank,
#      then on 2 ranks with each sharding type (dp tw rw cw twrw hybrid) and a mixed
#      plan; per-step losses, evaluations and the final weights (every table
#      gathered) within 1e-5 relative (EQUIV_RTOL; DESIGN.md's contract for
#      any world size and plan). With one GPU both ranks share it.
#   3. CUDA graphs replay the eager step bit for bit (part3).
#   4. the default job (`shardrec train`: Zipf ids, row-wise Adagrad) for 1000
#      steps on cuda and on cpu: the final evaluation's logloss within 0.1%.
#   5. checkpoints on CUDA: overlapped writes hold sync's bytes, and --resume
#      continues bit for bit (part5).
#   6. 16-bit tables (--emb-dtype bf16|fp16) on CUDA equal the CPU's, and
#      their checkpoints resume bit for bit (part6).
#   7. checkpoints of 2 CUDA ranks: every sharding type resumes bit for bit;
#      and resharding: a checkpoint of 2 ranks (rw) resumed by 1, and of 1
#      resumed by 2 ranks (tw), continue within 1e-5 of the straight run at
#      the new world size (part7; the CPU suite's check_checkpoint_reshard
#      holds the other layouts).
#   8. `shardrec eval` of a CUDA checkpoint on CUDA, on the CPU and on 2 CUDA
#      ranks (part8).
#
# Stops with a message and exit status 1 when no GPU is visible (or the build
# lacks CUDA). Needs python3 (standard library only) and, for part 2, mpirun.
# PARTS="1 2" picks the parts; KEEP_TMP=1 keeps the folder of logs.
sr_threads=keep
. "$(dirname "$0")/../lib.sh"
bin=${SHARDREC:-$sr_shardrec}
rtol=${RTOL:-1e-4}
equiv_rtol=${EQUIV_RTOL:-1e-5}
parts=${PARTS:-1 2 3 4 5 6 7 8}
sh "$sr_tests/gpu/require_gpu.sh" check_gpu_train || exit 1
sr_need_built "$bin"
command -v python3 >/dev/null 2>&1 || { echo "check_gpu_train: FAIL: python3 is needed"; exit 1; }
sr_timeout=600 sr_btl=tcp,self,vader
fail=0

# compare A.jsonl B.jsonl RTOL STEPS [A.st B.st]: per-step losses and eval_*
# within RTOL relative; with weights files, every tensor too.
compare() {
    python3 "$sr_tests/gpu/compare.py" "$@"
}

# ---- 1. cuda vs cpu -----------------------------------------------------------
# The default model at --lr 0.01 with SGD embeddings: the default job (lr 0.1,
# row-wise Adagrad) amplifies rounding so much that the CPU alone, on 1 and
# on 2 threads, differs by 8e-3 at step 66; at these settings the two CPU
# runs differ by 1e-7, so 1e-4 judges the GPU, not the model's chaos.
part1() {
    flags="--steps 20 --log-every 1 --math fp32 --no-progress --lr 0.01 --emb-optimizer sgd"
    for dev in cuda cpu; do
        t0=$(date +%s)
        if ! "$bin" train $flags --device "$dev" --metrics "$tmp/$dev.jsonl" \
            --save-weights "$tmp/$dev.st" >"$tmp/$dev.log" 2>&1
        then
            tail -20 "$tmp/$dev.log"
            echo "FAIL cuda-vs-cpu: shardrec train --device $dev failed"
            fail=1
            return
        fi
        echo "     --device $dev: 20 steps in $(($(date +%s) - t0)) s"
    done
    if out=$(compare "$tmp/cuda.jsonl" "$tmp/cpu.jsonl" "$rtol" 20 "$tmp/cuda.st" "$tmp/cpu.st"); then
        echo "ok   cuda-vs-cpu (default model, lr 0.01, SGD, 20 steps, fp32, rtol $rtol): $out"
    else
        echo "FAIL cuda-vs-cpu (default model, lr 0.01, SGD, 20 steps, fp32, rtol $rtol): $out"
        fail=1
    fi
    # weights saved on the GPU load on the CPU: a CPU step at lr 1e-30 (below
    # fp32 resolution against these weights) saves them back, the same bytes
    if "$bin" train --device cpu --steps 1 --lr 1e-30 --emb-optimizer sgd --eval-samples 0 \
        --no-progress --init-weights "$tmp/cuda.st" --save-weights "$tmp/back.st" \
        >"$tmp/back.log" 2>&1 && cmp -s "$tmp/cuda.st" "$tmp/back.st"; then
        echo "ok   weights saved on cuda load on the cpu and save back identical"
    else
        tail -5 "$tmp/back.log"
        echo "FAIL weights saved on cuda: the cpu did not load them back unchanged"
        fail=1
    fi
    # negative control: one step's loss moved by 2 x rtol must fail the comparison
    python3 - "$tmp/cpu.jsonl" "$tmp/bad.jsonl" "$rtol" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows[len(rows) // 2]["loss"] *= 1 + 2 * float(sys.argv[3])
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
    if compare "$tmp/cpu.jsonl" "$tmp/bad.jsonl" "$rtol" 20 >/dev/null; then
        echo "FAIL negative control: a loss moved by 2 x $rtol passed the comparison"
        fail=1
    else
        echo "ok   negative control: a loss moved by 2 x $rtol fails the comparison"
    fi
}

# ---- 2. 2 ranks vs 1 rank on CUDA ----------------------------------------------
part2() {
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "FAIL 2-vs-1 ranks: mpirun not found (HINT: tools/install-deps.sh)"
        fail=1
        return
    fi
    job="--device cuda --math fp32 --table-rows 1,7,50,333,1000,5 --embedding-dim 8
         --bot-mlp 13-16-8 --top-mlp 16-1 --ids-per-feature 0-3 --id-dist zipf:1.05
         --global-batch-size 48 --steps 12 --optimizer sgd --lr 0.05 --emb-optimizer adagrad
         --eval-samples 200 --eval-every 6 --log-every 1 --no-progress"
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    [ "${gpus:-0}" -lt 2 ] && echo "     ($gpus GPU visible: both ranks share it)"
    if ! sr_mpirun 1 "$bin" train $job --metrics "$tmp/np1.jsonl" --save-weights "$tmp/np1.st" \
        >"$tmp/np1.log" 2>&1; then
        tail -20 "$tmp/np1.log"
        echo "FAIL 2-vs-1 ranks: the 1-rank CUDA run failed"
        fail=1
        return
    fi
    sr_mixed_plan 2 2 >"$tmp/plan.json" # check_mpi_train_equiv.sh's, 2 ranks of one node
    for c in dp tw rw cw twrw mixed hybrid; do
        if [ "$c" = mixed ]; then
            set -- --plan "$tmp/plan.json"
        else
            set -- --sharding "$c"
        fi
        if ! sr_mpirun 2 "$bin" train $job "$@" --ranks-per-node 2 --metrics "$tmp/$c.jsonl" \
            --save-weights "$tmp/$c.st" >"$tmp/$c.log" 2>&1; then
            tail -20 "$tmp/$c.log"
            echo "FAIL 2-vs-1 ranks ($c): the 2-rank CUDA run failed"
            fail=1
            continue
        fi
        if out=$(compare "$tmp/np1.jsonl" "$tmp/$c.jsonl" "$equiv_rtol" 12 "$tmp/np1.st" \
            "$tmp/$c.st"); then
            echo "ok   2-vs-1 ranks on cuda, $c (rtol $equiv_rtol): $out"
        else
            echo "FAIL 2-vs-1 ranks on cuda, $c (rtol $equiv_rtol): $out"
            fail=1
        fi
    done
}

# ---- 3. --cuda-graphs replays the same step: the same bits ------------------------
# A multi-hot, weighted-free job whose ids per feature vary from batch to
# batch (graphs are re-captured when a slot's shape changes) and one with a
# fixed shape (replayed from step 3); losses, evaluations and the saved
# weights must equal the eager run's bit for bit.
part3() {
    for ids in 1 1-3; do
        flags="--steps 40 --log-every 1 --no-progress --eval-every 20 --eval-samples 4096 --ids-per-feature $ids --device cuda"
        for g in eager graphs; do
            extra=--no-cuda-graphs
            [ $g = graphs ] && extra=--cuda-graphs
            if ! "$bin" train $flags $extra --metrics "$tmp/g-$g.jsonl" \
                --save-weights "$tmp/g-$g.st" >"$tmp/g-$g.log" 2>&1; then
                tail -20 "$tmp/g-$g.log"
                echo "FAIL cuda-graphs (ids $ids): the $g run failed"
                fail=1
                return
            fi
        done
        replayed=$(grep -o "CUDA graphs: [0-9]* of" "$tmp/g-graphs.log" | grep -o "[0-9]*" | head -1)
        grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$tmp/g-eager.jsonl" >"$tmp/ga"
        grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$tmp/g-graphs.jsonl" >"$tmp/gb"
        if cmp -s "$tmp/ga" "$tmp/gb" && cmp -s "$tmp/g-eager.st" "$tmp/g-graphs.st" &&
            [ "${replayed:-0}" -gt 0 ]; then
            echo "ok   cuda-graphs (ids per feature $ids): losses, evaluations and weights identical to eager; $replayed of 40 steps replayed"
        else
            echo "FAIL cuda-graphs (ids per feature $ids): differs from eager or nothing replayed (replayed ${replayed:-0})"
            diff "$tmp/ga" "$tmp/gb" | head -4
            fail=1
        fi
    done
}

# ---- 4. the default job, 1000 steps: cuda vs cpu -----------------------------
part4() {
    for dev in cuda cpu; do
        if ! "$bin" train --device "$dev" --steps 1000 --math fp32 --no-progress \
            --metrics "$tmp/d-$dev.jsonl" >"$tmp/d-$dev.log" 2>&1; then
            tail -20 "$tmp/d-$dev.log"
            echo "FAIL default job on $dev: shardrec train failed"
            fail=1
            return
        fi
    done
    if out=$(python3 - "$tmp/d-cuda.jsonl" "$tmp/d-cpu.jsonl" <<'PY'
import json, sys
def last_logloss(p):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    return [r for r in rows if "eval_logloss" in r][-1]["eval_logloss"]
a, b = last_logloss(sys.argv[1]), last_logloss(sys.argv[2])
r = abs(a - b) / abs(b)
print(f"final eval logloss {a} (cuda) vs {b} (cpu): rel {r:.1e}")
sys.exit(0 if r <= 1e-3 else 1)
PY
    ); then
        echo "ok   default job, 1000 steps: $out (within 0.1%)"
    else
        echo "FAIL default job, 1000 steps: $out (more than 0.1%)"
        fail=1
    fi
}

# resumed_same STRAIGHT RESUMED FROM: RESUMED.jsonl's steps, losses and
# evaluations equal STRAIGHT.jsonl's from step FROM on, and RESUMED.st equals
# STRAIGHT.st, bit for bit; else appends the difference to $why.
resumed_same() {
    grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$1.jsonl" |
        awk -v from="$3" '/"step"/ { s = $2 } s >= from' >"$tmp/same-a"
    grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$2.jsonl" >"$tmp/same-b"
    [ -s "$tmp/same-a" ] && cmp -s "$tmp/same-a" "$tmp/same-b" || why="$why resumed metrics differ;"
    cmp -s "$1.st" "$2.st" || why="$why resumed weights differ;"
}

# ---- 5. checkpoints on CUDA: exact resume, overlap = sync -----------------------
# A multi-hot job with row-wise Adagrad, 12 steps, a checkpoint every 4: the
# overlapped write (the default on a GPU) holds the same bytes as sync's in
# every file, and --resume from step 4 ends on the straight run's losses,
# evaluations and weights, bit for bit; with each --pipeline, CUDA graphs on.
ck_case() { # PIPELINE LABEL EXTRA-FLAGS...
    pipe=$1 label=$2
    shift 2
    flags="--steps 12 --log-every 1 --no-progress --eval-every 6 --eval-samples 4096 --ids-per-feature 1-3 --emb-optimizer rowwise_adagrad --device cuda $*"
    why=""
    for mode in overlap sync; do
        rm -rf "$tmp/ck-$mode"
        "$bin" train $flags --pipeline $pipe --checkpoint-dir "$tmp/ck-$mode" \
            --checkpoint-every 4 --checkpoint-keep 10 --checkpoint-write $mode \
            --metrics "$tmp/ck-$mode.jsonl" --save-weights "$tmp/ck-$mode.st" \
            >"$tmp/ck-$mode.log" 2>&1 || why="$why the $mode run failed;"
    done
    for s in 4 8 12; do
        d=step-$(printf '%08d' $s)
        for f in "$tmp/ck-sync/$d"/*; do
            cmp -s "$f" "$tmp/ck-overlap/$d/$(basename "$f")" ||
                why="$why $d/$(basename "$f") differs (overlap vs sync);"
        done
    done
    grep -q "behind [0-9]* steps\{0,1\} of training" "$tmp/ck-overlap.log" ||
        why="$why the overlap run did not overlap;"
    "$bin" train $flags --pipeline $pipe --resume "$tmp/ck-overlap/step-00000004" \
        --metrics "$tmp/ck-r.jsonl" --save-weights "$tmp/ck-r.st" >"$tmp/ck-r.log" 2>&1 ||
        why="$why the resume failed;"
    resumed_same "$tmp/ck-overlap" "$tmp/ck-r" 5
    if [ -z "$why" ]; then
        echo "ok   checkpoints on cuda ($label): overlap's files = sync's; resume from step 4 = the straight run, bit for bit"
        grep "^checkpoint step 12" "$tmp/ck-overlap.log" | sed 's/^/     /'
    else
        echo "FAIL checkpoints on cuda ($label):$why"
        tail -3 "$tmp/ck-r.log"
        fail=1
    fi
}

part5() {
    for pipe in sparse-dist none; do
        ck_case $pipe "--pipeline $pipe"
    done
}

# ---- 6. 16-bit tables on CUDA ---------------------------------------------------
# --emb-dtype on the GPU against the CPU: part 1's job (20 steps, lr 0.01,
# fp32 math) with bf16 tables and stochastic rounding (SGD and row-wise
# Adagrad) and fp16 tables rounded to nearest. Both devices draw the same
# rounding bits, so they part only where their fp32 sums differ in the last
# bits next to a 16-bit rounding boundary: losses and evaluations within
# RTOL16 (1e-3) relative. With SGD the weights too, within 2 ulps of bf16
# (8e-3) plus 1e-5. Not with row-wise Adagrad: its first update of a row
# moves it by about lr whatever the gradient's size, so a gradient that is
# rounding noise on both devices moves a weight far, by chance (measured on
# an H200: 10 bf16 ulps in one element, 2% in a dense weight near zero, the
# evaluations within 1.5e-4). Then a checkpoint of bf16 tables on CUDA
# resumes bit for bit (part 5's check).
part6() {
    rtol16=${RTOL16:-1e-3}
    base="--steps 20 --log-every 1 --math fp32 --no-progress --lr 0.01"
    for case in "bf16 sgd stochastic" "bf16 rowwise_adagrad stochastic" "fp16 sgd nearest"; do
        set -- $case
        flags="$base --emb-dtype $1 --emb-optimizer $2 --emb-rounding $3"
        why="" out="" wout="" weights="" what="weights 8e-3 + 1e-5"
        for dev in cuda cpu; do
            "$bin" train $flags --device $dev --metrics "$tmp/h-$dev.jsonl" \
                --save-weights "$tmp/h-$dev.st" >"$tmp/h-$dev.log" 2>&1 ||
                { why="$why --device $dev failed: $(tail -1 "$tmp/h-$dev.log");"; }
        done
        [ "$2" = sgd ] && weights="$tmp/h-cuda.st $tmp/h-cpu.st" || what="losses only"
        if [ -z "$why" ] && out=$(compare "$tmp/h-cuda.jsonl" "$tmp/h-cpu.jsonl" "$rtol16" 20) &&
            { [ -z "$weights" ] ||
                wout=$(ATOL=1e-5 compare "$tmp/h-cuda.jsonl" "$tmp/h-cpu.jsonl" 8e-3 20 $weights); }; then
            echo "ok   $1 tables on cuda = cpu ($2, $3 rounding, 20 steps, rtol $rtol16; $what): $out"
        else
            echo "FAIL $1 tables on cuda vs cpu ($2, $3 rounding):$why ${out:-} $wout"
            fail=1
        fi
    done
    ck_case sparse-dist "bf16 tables" --emb-dtype bf16
}

# ---- 7. resharding on CUDA -------------------------------------------------------
# 12 steps with a checkpoint at step 6 on world size A, --resume on world size
# B to step 12, against 12 straight steps on B: steps 7-12's losses and the
# evaluation at step 12 within 1e-5 relative (row-wise Adagrad: each row's
# state moves with it).
reshard_case() { # NP-A FLAGS-A NP-B FLAGS-B LABEL
    job="--device cuda --math fp32 --table-rows 1,7,50,333,1000,5 --embedding-dim 8
         --bot-mlp 13-16-8 --top-mlp 16-1 --ids-per-feature 0-3 --global-batch-size 48
         --steps 12 --optimizer sgd --lr 0.05 --emb-optimizer rowwise_adagrad --emb-lr 0.05
         --eval-samples 200 --eval-every 12 --log-every 1 --no-progress"
    why=""
    rm -rf "$tmp/rs-ck"
    sr_mpirun "$1" "$bin" train $job $2 --checkpoint-dir "$tmp/rs-ck" --checkpoint-every 6 \
        >"$tmp/rs-a.log" 2>&1 || why="$why the run on $1 failed;"
    sr_mpirun "$3" "$bin" train $job $4 --resume "$tmp/rs-ck/step-00000006" \
        --metrics "$tmp/rs-b.jsonl" >"$tmp/rs-b.log" 2>&1 || why="$why the resume on $3 failed;"
    grep -q "resharded" "$tmp/rs-b.log" || why="$why the resume did not say it resharded;"
    sr_mpirun "$3" "$bin" train $job $4 --metrics "$tmp/rs-s.jsonl" >"$tmp/rs-s.log" 2>&1 ||
        why="$why the straight run on $3 failed;"
    python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.strip() and json.loads(l)["step"] >= 7: print(l, end="")' "$tmp/rs-s.jsonl" >"$tmp/rs-s7.jsonl"
    if [ -z "$why" ] && out=$(compare "$tmp/rs-s7.jsonl" "$tmp/rs-b.jsonl" "$equiv_rtol" 6); then
        echo "ok   resharding on cuda ($5): steps 7-12 = the straight run on $3 (rtol $equiv_rtol): $out"
    else
        echo "FAIL resharding on cuda ($5):$why ${out:-}"
        tail -3 "$tmp/rs-b.log"
        fail=1
    fi
}

# Exact resume of every sharding type on 2 CUDA ranks: 12 steps with
# checkpoints every 6, then --resume from step 6: steps 7-12's metrics and
# the final weights equal the straight run's, bit for bit (element-wise
# Adagrad: cw needs it).
exact2_case() { # SHARDING
    job="--device cuda --math fp32 --table-rows 1,7,50,333,1000,5 --embedding-dim 8
         --bot-mlp 13-16-8 --top-mlp 16-1 --ids-per-feature 0-3 --global-batch-size 48
         --steps 12 --optimizer sgd --lr 0.05 --emb-optimizer adagrad --emb-lr 0.05
         --eval-samples 200 --eval-every 6 --log-every 1 --no-progress --sharding $1
         --ranks-per-node 2"
    why=""
    rm -rf "$tmp/ex-ck"
    sr_mpirun 2 "$bin" train $job --checkpoint-dir "$tmp/ex-ck" --checkpoint-every 6 \
        --metrics "$tmp/ex-s.jsonl" --save-weights "$tmp/ex-s.st" >"$tmp/ex-s.log" 2>&1 ||
        why="$why the straight run failed;"
    sr_mpirun 2 "$bin" train $job --resume "$tmp/ex-ck/step-00000006" \
        --metrics "$tmp/ex-r.jsonl" --save-weights "$tmp/ex-r.st" >"$tmp/ex-r.log" 2>&1 ||
        why="$why the resume failed;"
    resumed_same "$tmp/ex-s" "$tmp/ex-r" 7
    if [ -z "$why" ]; then
        echo "ok   exact resume on 2 cuda ranks ($1): steps 7-12 and the weights = the straight run, bit for bit"
    else
        echo "FAIL exact resume on 2 cuda ranks ($1):$why"
        tail -3 "$tmp/ex-r.log"
        fail=1
    fi
}

part7() {
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "FAIL resharding on cuda: mpirun not found (HINT: tools/install-deps.sh)"
        fail=1
        return
    fi
    for c in dp tw rw cw twrw hybrid; do
        exact2_case $c
    done
    reshard_case 2 "--sharding rw --ranks-per-node 2" 1 "" "2 ranks rw -> 1"
    reshard_case 1 "" 2 "--sharding tw --ranks-per-node 2" "1 -> 2 ranks tw"
}

# ---- 8. shardrec eval on CUDA -----------------------------------------------------
# A checkpoint of 12 CUDA steps evaluated by `shardrec eval` on CUDA: the same
# metrics as train's own final evaluation (6 decimals); on the CPU, every
# probability within 1e-5 (float rounding of two devices' sums) and the AUC
# within 1e-4; on 2 CUDA ranks (tw), the same bits as 1.
part8() {
    job="--math fp32 --table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8
         --top-mlp 16-1 --ids-per-feature 0-3 --no-progress"
    why=""
    rm -rf "$tmp/ev-ck"
    "$bin" train $job --device cuda --global-batch-size 48 --steps 12 --eval-samples 500 \
        --eval-every 0 --metrics "$tmp/ev-t.jsonl" --checkpoint-dir "$tmp/ev-ck" \
        >"$tmp/ev-t.log" 2>&1 || why="$why training failed;"
    for dev in cuda cpu; do
        "$bin" eval "$tmp/ev-ck" $job --device $dev --eval-samples 500 --out "$tmp/ev-$dev.tsv" \
            --metrics "$tmp/ev-$dev.json" >"$tmp/ev-$dev.log" 2>&1 ||
            why="$why eval on $dev failed: $(tail -1 "$tmp/ev-$dev.log");"
    done
    if command -v mpirun >/dev/null 2>&1; then
        sr_mpirun 2 "$bin" eval "$tmp/ev-ck" $job --device cuda --eval-samples 500 --sharding tw \
            --ranks-per-node 2 --out "$tmp/ev-2.tsv" >"$tmp/ev-2.log" 2>&1 ||
            why="$why eval on 2 ranks failed;"
        cmp -s "$tmp/ev-cuda.tsv" "$tmp/ev-2.tsv" || why="$why 2 cuda ranks differ from 1;"
    fi
    out=$(python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
last = [json.loads(l) for l in open(f"{d}/ev-t.jsonl") if l.strip()][-1]
m = {dev: json.load(open(f"{d}/ev-{dev}.json")) for dev in ("cuda", "cpu")}
bad = [k for k in ("auc", "logloss", "ne", "accuracy")
       if f"{m['cuda'][k]:.6f}" != f"{last['eval_' + k]:.6f}"]
rows = [[l.split("\t") for l in open(f"{d}/ev-{dev}.tsv")] for dev in ("cuda", "cpu")]
if [r[0] for r in rows[0]] != [r[0] for r in rows[1]]:
    bad.append("labels")
diff = max(abs(float(a[1]) - float(b[1])) for a, b in zip(*rows))
if diff > 1e-5 or abs(m["cuda"]["auc"] - m["cpu"]["auc"]) > 1e-4:
    bad.append("cuda vs cpu")
print(f"max |p_cuda - p_cpu| {diff:.2e}, AUC {m['cuda']['auc']:.6f} / {m['cpu']['auc']:.6f}"
      + (": FAIL " + ", ".join(bad) if bad else ""))
sys.exit(1 if bad else 0)
PY
) || why="$why $out;"
    if [ -z "$why" ]; then
        echo "ok   eval on cuda = train's evaluation, = cpu within 1e-5, 2 ranks = 1: $out"
    else
        echo "FAIL eval on cuda:$why"
        fail=1
    fi
}

for p in $parts; do
    part$p
done
[ $fail -eq 0 ] && echo "check_gpu_train: ok" || echo "check_gpu_train: FAIL"
exit $fail
