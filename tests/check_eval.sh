#!/bin/sh
# `shardrec eval MODEL`: a checkpoint or a weights file evaluated without
# training, against independent references:
#
#   - train's own final evaluation: 2 ranks (every sharding type, bags of 0-3
#     ids) train and evaluate 1000 held-back synthetic samples (a padded last
#     batch); eval of their checkpoint (given as the --checkpoint-dir: the
#     newest step) prints the same AUC, log loss, NE and accuracy (train's
#     metrics line has 6 decimals), with another batch size;
#   - the export of that checkpoint (a weights file) gives the same bits as
#     the checkpoint: --out and --metrics compared with cmp; so does the
#     checkpoint read onto the opaque device through a 37-float staging
#     buffer (many pieces);
#   - other world sizes and plans: tw and cw at 2 and 3 ranks give the same
#     bits as 1 rank; rw and twrw split a bag's sum across ranks, so their
#     probabilities are within 1e-6 (and the metrics within 1e-4 AUC, 1e-5
#     relative log loss);
#   - --metrics recomputed from --out with awk (AUC by pairs, log loss) and
#     the --out file's order: sample i of a TSV written by `gen` is line i;
#     train --eval-data on the same TSV prints the same metrics (its memory
#     line: the evaluation sized "by the files");
#   - refusals, exit status 2, each naming what is wrong: no MODEL, a MODEL
#     that does not exist, model flags that differ from the checkpoint's
#     (--bot-mlp, --table-rows, --pooling) or from the weights file's shapes,
#     --eval-data, training flags, data without samples, --out naming an
#     input, --out in a missing folder, a damaged checkpoint file, an
#     --eval-samples whose buffers exceed the machine's memory (a weights file
#     and a checkpoint: the memory check names the flag and the hint), files
#     whose predictions exceed the host's memory (SR_HOST_MEMORY: eval --data
#     and train --eval-data name the files, the sizes and the hint; the same
#     files evaluate on a larger host), and files whose predictions fit the
#     host alone but not beside the model (the CPU's tables: eval, train; 2
#     ranks of tw on 2 emulated hosts, where the rank holding the large table
#     refuses and the other stops with it; the same 2 ranks on one host, where
#     both refuse alike, counting both ranks' predictions and models; a larger
#     host evaluates them); a job that each rank's share of the host fits but
#     not the ranks together (2 ranks of rw on one host: both refuse naming
#     the sum; a host of the sum trains), and 2 emulated hosts of which one
#     refuses the job (the other stops with it); and an
#     --out that cannot be written leaves no file behind;
#   - a training --config given whole does not replace its metrics log; a
#     write of --out that fails (SR_FAULT) is exit status 1 naming --out, and
#     --metrics is still written;
#   - the pooling a weights file or a checkpoint records (docs/weights.md, "Metadata"): a
#     mean-pooled model's file evaluated without --pooling gives train's own
#     evaluation (eval takes the recorded pooling) and says so; inspect prints
#     it; a contradicting --pooling, and train --init-weights without
#     --pooling, are refused naming the file, the table, both poolings and the
#     flag to give; a damaged value and a record of a table the file does not
#     hold are refused by eval and inspect naming the key; a file that records
#     no pooling (the export of a checkpoint whose manifest predates the
#     record) evaluates as the checkpoint does, with any --pooling.
# The PyTorch check of the predictions is tests/check_eval_torch.sh.
# Exit 0 pass, 77 skipped (no MPI), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_mpirun
sr_timeout_opts="-s KILL"
sr_timeout=120
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --no-progress"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
cd "$tmp" || exit 1

# A key of a --metrics file (one JSON object, one key a line).
key() { sed -n "s/.*\"$2\":[[:space:]]*\([^,]*\),*$/\1/p" "$1"; }
# The metrics of a --metrics file without its "model" line (for cmp).
strip_model() { grep -v '"model"' "$1"; }
# max |a - b| over the probabilities of two --out files of the same labels.
max_diff() {
    paste "$1" "$2" | awk -F'\t' '$1 != $3 && !bad { bad = NR }
        { d = $2 - $4; if (d < 0) d = -d; if (d > m) m = d }
        END { if (bad) { print "labels differ at line " bad; exit 1 } printf "%.3e\n", m }'
}
# TRAIN_JSONL METRICS KEY...: " KEY: train T, eval E;" for each KEY where train's last
# evaluation (a --metrics line's eval_KEY) and eval's --metrics file differ
eval_differs() {
    last=$(tail -1 "$1") m=$2
    shift 2
    for k in "$@"; do
        t=$(echo "$last" | sed -n "s/.*\"eval_$k\": \([^,}]*\).*/\1/p")
        e=$(printf '%.6f' "$(key "$m" "$k")")
        [ "$t" = "$e" ] || printf ' %s: train %s, eval %s;' "$k" "$t" "$e"
    done
}
# |a - b| <= tol (awk numbers)
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

sr_mixed_plan 2 2 >mixed.json
sr_mpirun 2 "$bin" train $JOB --global-batch-size 48 --steps 6 --plan mixed.json \
    --emb-optimizer adagrad --eval-samples 1000 --eval-every 0 --metrics train.jsonl \
    --checkpoint-dir ck >train.out 2>&1 || { echo "FAIL training: $(tail -3 train.out)"; exit 1; }

# 1. the checkpoint against train's own evaluation
why=""
"$bin" eval ck $JOB --eval-samples 1000 --batch-size 64 --metrics m1.json --out p1.tsv \
    >eval1.out 2>&1 || why="exit $?: $(tail -1 eval1.out)"
if [ -z "$why" ]; then
    why="$why$(eval_differs train.jsonl m1.json auc logloss ne accuracy)"
    [ "$(key m1.json samples)" = 1000 ] || why="$why $(key m1.json samples) samples, not 1000;"
    [ "$(wc -l <p1.tsv)" -eq 1000 ] || why="$why --out holds $(wc -l <p1.tsv) lines;"
    grep -q "step-00000006 at step 6" eval1.out || why="$why the newest step was not taken;"
fi
if [ -z "$why" ]; then ok "checkpoint = train's evaluation"; else bad "checkpoint" "$why"; fi

# 2. the exported weights file: the same bits
why=""
"$bin" export ck/step-00000006 --out w.st >/dev/null 2>&1 || why="export failed"
"$bin" eval w.st $JOB --eval-samples 1000 --metrics mw.json --out pw.tsv >evalw.out 2>&1 ||
    why="$why exit $?: $(tail -1 evalw.out)"
cmp -s p1.tsv pw.tsv || why="$why --out differs;"
strip_model m1.json >a.json && strip_model mw.json >b.json && cmp -s a.json b.json ||
    why="$why --metrics differ;"
if [ -z "$why" ]; then ok "weights file = checkpoint"; else bad "weights file" "$why"; fi

# inspect of a weights file: every tensor listed; a NaN (the file's last 4
# bytes, data of its last tensor) is exit status 2
why=""
"$bin" inspect w.st >i.out 2>&1 || why="exit $?: $(tail -1 i.out);"
grep -q "emb.t4.weight  *F32  1000 x 8" i.out && grep -q "values, 0 not finite" i.out ||
    why="$why the listing lacks a table or the count;"
grep -q "pooling: sum, recorded for 6 tables" i.out || why="$why the recorded pooling is not printed;"
cp w.st wnan.st
size=$(wc -c <wnan.st)
printf '\377\377\377\377' | dd of=wnan.st bs=1 seek=$((size - 4)) conv=notrunc 2>/dev/null
"$bin" inspect wnan.st >i.out 2>&1
st=$?
[ $st -eq 2 ] && grep -q "1 values are NaN or infinite" i.out || why="$why a NaN: exit $st, $(tail -1 i.out);"
if [ -z "$why" ]; then ok "inspect of a weights file"; else bad "inspect of weights" "$why"; fi

# 2b. a device the host cannot address (the opaque CPU device, as a GPU):
# the checkpoint goes to it through a 37-float staging buffer, in pieces
why=""
SR_CPU_DEFERRED=opaque SR_CKPT_READ_STAGING_FLOATS=37 "$bin" eval ck $JOB --eval-samples 1000 \
    --batch-size 64 --out po.tsv >evalo.out 2>&1 || why="exit $?: $(tail -1 evalo.out);"
cmp -s p1.tsv po.tsv || why="$why --out differs;"
if [ -z "$why" ]; then ok "opaque device, staged in pieces = host"; else bad "staged in pieces" "$why"; fi

# 3. world sizes and plans
for np in 2 3; do
    for s in tw cw rw twrw; do
        why=""
        sr_mpirun $np "$bin" eval ck $JOB --eval-samples 1000 --batch-size 16 --sharding $s \
            --metrics m.json --out p.tsv >evalr.out 2>&1 || { bad "$np ranks $s" "exit $?: $(tail -1 evalr.out)"; continue; }
        strip_model m1.json >a.json
        strip_model m.json >b.json
        case $s in
        tw | cw)
            cmp -s p1.tsv p.tsv || why="--out differs from 1 rank's;"
            cmp -s a.json b.json || why="$why --metrics differ from 1 rank's;"
            ;;
        *)
            d=$(max_diff p1.tsv p.tsv) || why="$d;"
            within "$d" 0 1e-6 || why="$why probabilities differ by $d;"
            within "$(key m.json auc)" "$(key m1.json auc)" 1e-4 || why="$why AUC;"
            l1=$(key m1.json logloss)
            within "$(key m.json logloss)" "$l1" "$(awk -v l="$l1" 'BEGIN { print l * 1e-5 }')" ||
                why="$why log loss;"
            ;;
        esac
        if [ -z "$why" ]; then ok "$np ranks $s = 1 rank"; else bad "$np ranks $s" "$why"; fi
    done
done

# 4. files: the order of --out, the metrics recomputed, train --eval-data
why=""
R=1,7,50,333,1000,5
FJOB="--table-rows $R --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1 --no-progress"
"$bin" gen --table-rows $R --out test.tsv --samples 700 --eval-split >/dev/null 2>&1 || why="gen failed"
"$bin" gen --table-rows $R --out train.tsv --samples 960 >/dev/null 2>&1 || why="gen failed"
"$bin" train $FJOB --data train.tsv --batch-size 32 --eval-data test.tsv --metrics tf.jsonl \
    --checkpoint-dir ckf --eval-every 0 >trainf.out 2>&1 || why="$why train: $(tail -1 trainf.out)"
sr_mpirun 2 "$bin" eval ckf $FJOB --data test.tsv --batch-size 50 --metrics mf.json --out pf.tsv \
    >evalf.out 2>&1 || why="$why exit $?: $(tail -1 evalf.out)"
cut -f1 test.tsv >labels.data
cut -f1 pf.tsv >labels.out
cmp -s labels.data labels.out || why="$why --out's labels are not the file's, in order;"
grep -q "memory per rank .*, evaluation by the files" trainf.out ||
    why="$why the memory line does not say the files size the evaluation;"
if [ -z "$why" ]; then
    why="$why$(eval_differs tf.jsonl mf.json auc logloss)"
    # AUC over positive-negative pairs (ties count 1/2) and the clamped log loss
    got=$(awk -F'\t' '{ y[NR] = $1; p[NR] = $2 } END {
        for (i = 1; i <= NR; i++) {
            q = p[i]; if (q < 1e-7) q = 1e-7; if (q > 1 - 1e-7) q = 1 - 1e-7
            ll += y[i] ? -log(q) : -log(1 - q)
            if (!y[i]) continue
            for (j = 1; j <= NR; j++) if (!y[j]) { n++; s += p[i] > p[j] ? 1 : p[i] == p[j] ? 0.5 : 0 }
        }
        printf "%.12f %.12f\n", s / n, ll / NR }' pf.tsv)
    within "${got% *}" "$(key mf.json auc)" 1e-12 || why="$why AUC $(key mf.json auc), by pairs ${got% *};"
    within "${got#* }" "$(key mf.json logloss)" 1e-9 || why="$why log loss $(key mf.json logloss), recomputed ${got#* };"
fi
if [ -z "$why" ]; then ok "files: order, metrics, train --eval-data"; else bad "files" "$why"; fi

# 5. refusals
refuse() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    "$bin" eval "$@" >r.out 2>&1
    st=$?
    if [ $st -eq 2 ] && grep -q -- "$pat" r.out; then ok "refuses $name"; else bad "refuses $name" "exit $st: $(tail -1 r.out)"; fi
}
refuse "no model" "give the model first" --data test.tsv
refuse "a missing model" "no such file or folder" nothere $JOB
refuse "another --bot-mlp" "another --bot-mlp" ck $JOB --bot-mlp 13-32-8
refuse "another --table-rows" "table 't4' is 1000 rows" ck $JOB --table-rows 1,7,50,333,999,5
refuse "weights of other shapes" "bot_mlp" w.st $JOB --bot-mlp 13-32-8
refuse "--eval-data" "eval reads the files of --data" ck $FJOB --eval-data test.tsv
refuse "--out naming an input" "test.tsv" ckf $FJOB --data test.tsv --out test.tsv
refuse "--out in a missing folder" "nofolder" ckf $FJOB --data test.tsv --out nofolder/p.tsv
refuse "training flags" "eval does not train: --steps, --lr are for training" ck $JOB --steps 5 --lr 0.1
: >empty.tsv
refuse "data without samples" "empty.tsv holds no samples" ck $FJOB --data empty.tsv
# files whose predictions exceed the host (SR_HOST_MEMORY: a host of 300,000 bytes, which
# the model and batch buffers fit), in eval and in train's --eval-data; a larger one evaluates
"$bin" gen --table-rows $R --out big.tsv --samples 20000 --eval-split >/dev/null 2>&1
export SR_HOST_MEMORY=300000
refuse "--data beyond the host's memory" \
    "big.tsv: evaluating 625 batches of 32 samples (20000 a rank) needs 625.2 KiB of host memory on every rank.*more than the 300000 bytes (293.0 KiB) this machine has; HINT: evaluate the files in parts" \
    ckf $FJOB --data big.tsv --batch-size 32
"$bin" train $FJOB --data big.tsv --eval-data big.tsv --batch-size 32 --steps 2 >r.out 2>&1
st=$?
if [ $st -eq 2 ] && grep -q -- "--eval-data big.tsv: evaluating 625 batches.*HINT: evaluate the files in parts" r.out; then
    ok "train refuses --eval-data beyond the host's memory"
else
    bad "train refuses --eval-data beyond the host's memory" "exit $st: $(tail -1 r.out)"
fi
SR_HOST_MEMORY=2000000 "$bin" eval ckf $FJOB --data big.tsv --batch-size 32 >r.out 2>&1
st=$?
unset SR_HOST_MEMORY
if [ $st -eq 0 ] && grep -q "^AUC" r.out; then ok "evaluates the same files on a host that holds them"; else bad "evaluates on a larger host" "exit $st: $(tail -1 r.out)"; fi
# the model beside the files' predictions: on the CPU the host holds both. Table t4
# of 40000 rows takes far more than test.tsv's predictions; N, the model's bytes
# on the host, comes from the job's own memory check (a host of 1 byte). A host
# of N + 1000 bytes holds the model and the predictions alone, not both (the
# predictions take more than 1000 bytes); one of N + 1000000 holds both.
BJOB="--table-rows 1,7,50,333,40000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
      --no-progress --batch-size 32"
needs() { sed -n "s/.*the job needs \([0-9]*\) bytes .* on rank.*/\1/p" r.out | sort -n | tail -1; }
together() { sed -n "s/.*the 2 ranks on this host (0, 1) need \([0-9]*\) bytes .*/\1/p" r.out | head -1; }
"$bin" train $BJOB --steps 1 --eval-samples 0 --save-weights wbig.st >r.out 2>&1 ||
    bad "a model of large tables" "exit $?: $(tail -1 r.out)"
beside="beside the model's [0-9.]* [KMG]*i*B (tables [^)]*), [0-9]* bytes ([^)]*) in all, more than the"
for cmd in eval train; do
    case $cmd in
    eval) args="wbig.st $BJOB --data test.tsv" flag=--data ;;
    *) args="$BJOB --data train.tsv --eval-data test.tsv --steps 2" flag=--eval-data ;;
    esac
    SR_HOST_MEMORY=1 "$bin" $cmd $args >r.out 2>&1
    n=$(needs)
    SR_HOST_MEMORY=$((n + 1000)) "$bin" $cmd $args >r.out 2>&1
    st=$?
    if [ -n "$n" ] && [ $st -eq 2 ] && grep -q -- "$flag test.tsv: evaluating 22 batches of 32 samples (704 a rank) needs [0-9.]* KiB of host memory on every rank (every prediction, for the exact AUC) $beside $((n + 1000)) bytes .*HINT: evaluate the files in parts, or a smaller model" r.out; then
        ok "$cmd refuses files the host holds, but not beside the model"
    else
        bad "$cmd refuses files beside the model" "model $n bytes, exit $st: $(tail -1 r.out)"
    fi
    SR_HOST_MEMORY=$((n + 1000000)) "$bin" $cmd $args >r.out 2>&1
    st=$?
    if [ $st -eq 0 ] && grep -q "AUC" r.out; then ok "$cmd evaluates the files beside the model on a larger host"; else bad "$cmd beside the model on a larger host" "exit $st: $(tail -1 r.out)"; fi
done
# 2 ranks of tw on 2 emulated hosts (SR_RANKS_PER_NODE=1): the rank holding t4
# refuses on a host of its model's N + 1000 bytes, the other stops with it
export SR_RANKS_PER_NODE=1
SR_HOST_MEMORY=1 sr_mpirun 2 "$bin" eval wbig.st $BJOB --data test.tsv --sharding tw >r.out 2>&1
n=$(needs)
SR_HOST_MEMORY=$((n + 1000)) sr_mpirun 2 "$bin" eval wbig.st $BJOB --data test.tsv --sharding tw >r.out 2>&1
st=$?
unset SR_RANKS_PER_NODE
if [ -n "$n" ] && [ $st -eq 2 ] && grep -q -- "$beside $((n + 1000)) bytes" r.out &&
    grep -q -- "--data: rank [01] cannot evaluate them (its message says why)" r.out; then
    ok "2 hosts stop together when one cannot hold the files beside its shards"
else
    bad "2 hosts, one refusing the files beside its shards" "exit $st: $(grep shardrec r.out | tail -2)"
fi
# the same 2 ranks on one host: the files' predictions on both ranks beside
# both ranks' models (S bytes together, from the job's check on a host of 1
# byte); a host of S + 1000 bytes holds the models, not the predictions as
# well: both ranks refuse alike; one of S + 1000000 evaluates the files
SR_HOST_MEMORY=1 sr_mpirun 2 "$bin" eval wbig.st $BJOB --data test.tsv --sharding tw >r.out 2>&1
s=$(together)
SR_HOST_MEMORY=$((s + 1000)) sr_mpirun 2 "$bin" eval wbig.st $BJOB --data test.tsv --sharding tw >r.out 2>&1
st=$?
if [ -n "$s" ] && [ $st -eq 2 ] && [ "$(grep -c -- "KiB of host memory on every rank (every prediction, for the exact AUC), [0-9.]* KiB on the 2 ranks on this host $beside $((s + 1000)) bytes" r.out)" -eq 2 ] &&
    ! grep -q "cannot evaluate them" r.out; then
    ok "2 ranks on one host refuse files beside both their shards, alike"
else
    bad "2 ranks on one host, files beside both their shards" "sum $s, exit $st: $(grep shardrec r.out | tail -2)"
fi
SR_HOST_MEMORY=$((s + 1000000)) sr_mpirun 2 "$bin" eval wbig.st $BJOB --data test.tsv --sharding tw >r.out 2>&1
st=$?
if [ $st -eq 0 ] && grep -q "AUC" r.out; then ok "2 ranks on a larger host evaluate the files"; else bad "2 ranks on a larger host" "exit $st: $(tail -1 r.out)"; fi
# the job's own check counts every rank on the host: 2 ranks of rw whose
# needs (each its own emulated host of 1 byte: n0, n1) each fit a host of
# n0 + n1 - 1 bytes, together do not: both ranks refuse naming the sum; a
# host of n0 + n1 runs the job
TJOB="$BJOB --steps 2 --eval-samples 0 --comm-timeout 10"
export SR_RANKS_PER_NODE=1
SR_HOST_MEMORY=1 sr_mpirun 2 "$bin" train $TJOB --sharding rw >r.out 2>&1
unset SR_RANKS_PER_NODE
n0=$(sed -n "s/.*the job needs \([0-9]*\) bytes .* on rank 0,.*/\1/p" r.out)
n1=$(sed -n "s/.*the job needs \([0-9]*\) bytes .* on rank 1,.*/\1/p" r.out)
SR_HOST_MEMORY=$((n0 + n1 - 1)) sr_mpirun 2 "$bin" train $TJOB --sharding rw >r.out 2>&1
st=$?
msg="the 2 ranks on this host (0, 1) need $((n0 + n1)) bytes ([0-9.]* [KM]iB) of memory together, more than the $((n0 + n1 - 1)) bytes ([^)]*) this machine has (rank [01] needs the most, [0-9]* bytes ([^)]*), where table 't4' (40000 rows x 8, with its rowwise_adagrad state) takes .*HINT: .*; or fewer ranks on this host"
if [ -n "$n0" ] && [ -n "$n1" ] && [ $st -eq 2 ] && [ "$(grep -c -- "$msg" r.out)" -eq 2 ]; then
    ok "2 ranks on one host refuse a job that only their shares fit, each naming the sum"
else
    bad "2 ranks on one host, a job only their shares fit" "needs $n0 + $n1, exit $st: $(grep shardrec r.out | tail -2)"
fi
SR_HOST_MEMORY=$((n0 + n1)) sr_mpirun 2 "$bin" train $TJOB --sharding rw >r.out 2>&1
st=$?
if [ $st -eq 0 ] && grep -q "last training loss" r.out; then ok "2 ranks train on a host of their sum"; else bad "2 ranks on a host of their sum" "exit $st: $(tail -1 r.out)"; fi
# 2 emulated hosts whose verdicts differ (tw: t4 on one rank): a host of the
# smaller rank's needs; the other rank refuses, this one stops with it (no hang)
export SR_RANKS_PER_NODE=1
SR_HOST_MEMORY=1 sr_mpirun 2 "$bin" train $TJOB --sharding tw >r.out 2>&1
lo=$(sed -n "s/.*the job needs \([0-9]*\) bytes .* on rank.*/\1/p" r.out | sort -n | head -1)
SR_HOST_MEMORY=$lo sr_mpirun 2 "$bin" train $TJOB --sharding tw >r.out 2>&1
st=$?
unset SR_RANKS_PER_NODE SR_HOST_MEMORY
if [ -n "$lo" ] && [ $st -eq 2 ] && grep -q "the job needs [0-9]* bytes .* on rank [01], more than the $lo bytes" r.out &&
    grep -q "the memory check: rank [01] refused the job (its message says why)" r.out; then
    ok "2 hosts stop together when one refuses the job"
else
    bad "2 hosts, one refusing the job" "host $lo, exit $st: $(grep shardrec r.out | tail -2)"
fi
refuse "another --pooling" "table t0 was trained with pooling sum, this job has mean; HINT: give --pooling sum" \
    ck $JOB --pooling mean
refuse "--eval-samples beyond memory (weights)" \
    "evaluation buffers (--eval-samples 68719476736) take .*HINT: fewer --eval-samples" \
    w.st $JOB --eval-samples 68719476736
refuse "--eval-samples beyond memory (checkpoint)" \
    "evaluation buffers (--eval-samples 68719476736) take .*HINT: fewer --eval-samples" \
    ck $JOB --eval-samples 68719476736
cp -r ck ckbad
printf 'X' | dd of=ckbad/step-00000006/rank-00001.safetensors bs=1 seek=200 conv=notrunc 2>/dev/null
refuse "a damaged checkpoint" "rank-00001.safetensors" ckbad $JOB
mkdir ro && chmod 555 ro
if [ "$(id -u)" -ne 0 ]; then
    refuse "--out in a read-only folder" "ro/p.tsv" ck $JOB --out ro/p.tsv
fi
[ -z "$(ls -A ro)" ] && ok "no file left behind" || bad "left behind" "$(ls -A ro)"

# 6. a training --config whole: its metrics log is not replaced; a failed
# --out is exit status 1 naming it, and --metrics is still written
why=""
printf '{"eval_every": 3, "metrics": "train.jsonl", "lr": 0.5}\n' >job.json
cp train.jsonl train.keep
"$bin" eval ck $JOB --config job.json --eval-samples 100 >c.out 2>&1 || why="exit $?: $(tail -1 c.out);"
cmp -s train.jsonl train.keep || why="$why the config's metrics file was replaced;"
rm -f mx.json
SR_FAULT=fail-write:path=px.tsv "$bin" eval ck $JOB --eval-samples 100 --out px.tsv --metrics mx.json \
    >x.out 2>&1
st=$?
[ $st -eq 1 ] && grep -q -- "--out px.tsv" x.out || why="$why a failed --out: exit $st, $(tail -1 x.out);"
[ -s mx.json ] && [ ! -e px.tsv ] || why="$why --metrics missing or --out left behind;"
if [ -z "$why" ]; then ok "outputs: a config's metrics kept, a failed --out"; else bad "outputs" "$why"; fi

# 7. the pooling a weights file records
why=""
"$bin" train $JOB --pooling mean --batch-size 32 --steps 4 --eval-samples 1000 --eval-every 0 \
    --metrics tmean.jsonl --save-weights wmean.st --checkpoint-dir ckmean --checkpoint-every 4 \
    >tmean.out 2>&1 || why="train: $(tail -1 tmean.out);"
for model in wmean.st ckmean; do # a weights file's record, a checkpoint manifest's
    "$bin" eval $model $JOB --eval-samples 1000 --batch-size 64 --metrics mmean.json >emean.out 2>&1 ||
        why="$why $model: exit $?: $(tail -1 emean.out);"
    if [ -z "$why" ]; then
        d=$(eval_differs tmean.jsonl mmean.json auc logloss)
        why="$why${d:+ $model:$d}"
        grep -q "pooling mean, as $model records it" emean.out || why="$why $model: no line says so;"
    fi
done
"$bin" inspect wmean.st >imean.out 2>&1 && grep -q "pooling: mean, recorded for 6 tables" imean.out ||
    why="$why inspect: $(tail -1 imean.out);"
if [ -z "$why" ]; then ok "eval takes a weights file's and a checkpoint's pooling"; else bad "recorded pooling" "$why"; fi

refuse "a --pooling the weights file contradicts" 'wmean.st: table t0 has pooling mean in the file (__metadata__ "shardrec.emb.t0.pooling"), sum in this job; HINT: give --pooling mean' \
    wmean.st $JOB --pooling sum
why=""
"$bin" train $JOB --steps 1 --batch-size 32 --eval-samples 0 --init-weights wmean.st >ti.out 2>&1
st=$?
[ $st -eq 2 ] && grep -q 'train: wmean.st: table t0 has pooling mean in the file.*sum in this job; HINT: give --pooling mean' ti.out ||
    why="without --pooling: exit $st, $(tail -1 ti.out);"
"$bin" train $JOB --steps 1 --batch-size 32 --eval-samples 0 --init-weights wmean.st --pooling mean \
    >ti.out 2>&1 || why="$why with --pooling mean: exit $?, $(tail -1 ti.out);"
if [ -z "$why" ]; then ok "train --init-weights checks the recorded pooling"; else bad "train --init-weights" "$why"; fi

# a damaged value ("meen"), then a record of table "q2", which the file does not hold
at=$(grep -obUa 'shardrec.emb.t2.pooling":"mean' wmean.st | cut -d: -f1)
cp wmean.st wbad.st
printf 'meen' | dd of=wbad.st bs=1 seek=$((at + 26)) conv=notrunc 2>/dev/null
refuse "a damaged pooling record" 'wbad.st: __metadata__ "shardrec.emb.t2.pooling" is "meen", not "sum" or "mean"' \
    wbad.st $JOB
"$bin" inspect wbad.st >ib.out 2>&1
st=$?
[ $st -eq 2 ] && grep -q '"shardrec.emb.t2.pooling" is "meen"' ib.out && ok "inspect refuses a damaged pooling record" ||
    bad "inspect of a damaged pooling record" "exit $st: $(tail -1 ib.out)"
cp wmean.st wq2.st
printf 'q' | dd of=wq2.st bs=1 seek=$((at + 13)) conv=notrunc 2>/dev/null
refuse "a pooling record of a table not in the file" \
    'wq2.st: __metadata__ "shardrec.emb.q2.pooling" records a table the file.s tensors do not hold' \
    wq2.st $JOB
"$bin" inspect wq2.st >iq.out 2>&1
st=$?
[ $st -eq 2 ] && grep -q '"shardrec.emb.q2.pooling" records a table the file.s tensors do not hold' iq.out &&
    ok "inspect refuses a pooling record of a table not in the file" ||
    bad "inspect of a record of a table not in the file" "exit $st: $(tail -1 iq.out)"

# a file that records no pooling: the export of a checkpoint from before the record
why=""
cp -r ck ckold
sed -i 's/, "pooling": "[a-z]*"//' ckold/step-00000006/manifest.json
grep -q '"pooling"' ckold/step-00000006/manifest.json && why="the manifest still records the pooling;"
"$bin" export ckold/step-00000006 --out wold.st >/dev/null 2>&1 || why="$why export failed;"
grep -qa 'shardrec.emb' wold.st && why="$why the export records a pooling;"
"$bin" inspect wold.st >io.out 2>&1 && grep -q "pooling: not recorded" io.out || why="$why inspect: $(tail -1 io.out);"
"$bin" eval wold.st $JOB --eval-samples 1000 --out pold.tsv >eo.out 2>&1 || why="$why exit $?: $(tail -1 eo.out);"
cmp -s p1.tsv pold.tsv || why="$why --out differs from the checkpoint's;"
"$bin" eval wold.st $JOB --eval-samples 100 --pooling mean >eo.out 2>&1 || why="$why --pooling mean: exit $?;"
if [ -z "$why" ]; then ok "a file without a recorded pooling evaluates as before"; else bad "old file" "$why"; fi
# a manifest without the record: its settings hash still refuses another pooling
refuse "another --pooling (a manifest without the record)" "another --table-rows or --pooling" \
    ckold $JOB --pooling mean

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
