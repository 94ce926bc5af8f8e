#!/bin/sh
# Checkpoints of --data runs resume exactly: k steps with --checkpoint-every
# k, stop, --resume, more steps give the same per-step losses and
# evaluations (--eval-data; --metrics fields as written) and the same final
# weights (--save-weights, cmp) as the whole run straight. The data: 250
# samples (5 global batches of 48 and a partial one, dropped), so every
# case crosses at least one epoch boundary; checkpoints land mid-epoch, on
# the boundary itself (k = 5) and in the second epoch (k = 7). Binary data
# with --shuffle (blocks of 20 samples, a new order each epoch), TSV data in
# file order, two files read as one stream; one process and 2 ranks (rw);
# --pipeline none and sparse-dist. A negative control: a checkpoint whose
# data position is moved one batch back resumes into other weights.
# Then the refusals (exit status 2, the cause named): a data file changed
# since the checkpoint (same size, another head; or another size), another
# --shuffle, another --shuffle-block, a synthetic-data checkpoint resumed
# with --data.
# Exit 0 pass, else fail (the 2-rank cases are skipped without mpirun).
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
unset SR_CPU_DEFERRED SR_FAULT
sr_timeout_opts="-s KILL"
ROWS="--table-rows 1,7,50,333,1000,5"
JOB="$ROWS --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1 --global-batch-size 48
     --optimizer adam --lr 0.01 --emb-optimizer adagrad --eval-every 3
     --log-every 1 --no-progress"
pass=0 fail=0
have_mpi=1
command -v mpirun >/dev/null 2>&1 || have_mpi=0

# the data: gen writes exactly the synthetic samples, convert the binary file
"$bin" gen --out "$tmp/d.tsv" --samples 250 --seed 3 $ROWS >"$tmp/gen.out" 2>&1 &&
    "$bin" gen --out "$tmp/d1.tsv" --samples 130 --seed 5 $ROWS >>"$tmp/gen.out" 2>&1 &&
    "$bin" gen --out "$tmp/d2.tsv" --samples 120 --first 130 --seed 5 $ROWS >>"$tmp/gen.out" 2>&1 &&
    "$bin" gen --out "$tmp/eval.tsv" --samples 100 --eval-split $ROWS >>"$tmp/gen.out" 2>&1 &&
    "$bin" convert "$tmp/d.tsv" -o "$tmp/d.bin" $ROWS >>"$tmp/gen.out" 2>&1 &&
    "$bin" convert "$tmp/d1.tsv" -o "$tmp/d1.bin" $ROWS >>"$tmp/gen.out" 2>&1 &&
    "$bin" convert "$tmp/d2.tsv" -o "$tmp/d2.bin" $ROWS >>"$tmp/gen.out" 2>&1 ||
    { echo "FAIL making the data: $(tail -3 "$tmp/gen.out")"; exit 1; }
EVAL="--eval-data $tmp/eval.tsv"
SHUF="--data $tmp/d.bin --shuffle --shuffle-block 20 $EVAL"
TSV="--data $tmp/d.tsv $EVAL"
TWO="--data $tmp/d1.bin $tmp/d2.bin --shuffle --shuffle-block 20 $EVAL"

fields() { grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$1"; }
# the first part's fields without the evaluation its end adds at step K
# (not one of the straight run's, unless K is a multiple of --eval-every 3)
fields_upto() { # FILE K
    if [ $(($2 % 3)) -eq 0 ]; then fields "$1"; else
        fields "$1" | awk -v k="$2" '/"step"/ { s = $2 } !(s == k && /"eval_/)'; fi
}

launch() { # NP ARGS...
    np=$1
    shift
    if [ "$np" -eq 0 ]; then "$bin" train $JOB "$@"; else sr_mpirun "$np" "$bin" train $JOB "$@"; fi
}

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

# NAME NP PIPELINE K TOTAL DATA-ARGS...: K steps with a checkpoint, then
# --resume to TOTAL, against TOTAL steps straight.
exact_case() {
    name=$1 np=$2 pipe=$3 k=$4 total=$5
    shift 5
    d="$tmp/$name"
    mkdir -p "$d"
    launch "$np" --pipeline "$pipe" "$@" --steps "$total" --metrics "$d/straight.jsonl" \
        --save-weights "$d/straight.st" >"$d/straight.out" 2>&1 || { bad "$name" "straight run failed: $(tail -1 "$d/straight.out")"; return; }
    launch "$np" --pipeline "$pipe" "$@" --steps "$k" --checkpoint-dir "$d/ck" \
        --checkpoint-every "$k" --metrics "$d/a.jsonl" >"$d/a.out" 2>&1 || { bad "$name" "first part failed: $(tail -1 "$d/a.out")"; return; }
    cp -r "$d/ck" "$d/ck0" # for the refusals and the control
    launch "$np" --pipeline "$pipe" "$@" --steps "$total" --checkpoint-dir "$d/ck" --resume \
        --metrics "$d/b.jsonl" --save-weights "$d/resumed.st" >"$d/b.out" 2>&1 || { bad "$name" "resume failed: $(tail -1 "$d/b.out")"; return; }
    fields "$d/straight.jsonl" >"$d/x"
    { fields_upto "$d/a.jsonl" "$k"; fields "$d/b.jsonl"; } >"$d/y"
    why=""
    n=$(grep -c '"loss"' "$d/y")
    [ "$n" -eq "$total" ] || why="$why $n loss lines, expected $total;"
    grep -q eval_auc "$d/b.jsonl" || why="$why no evaluation after the resume;"
    cmp -s "$d/x" "$d/y" || why="$why metrics differ: $(diff "$d/x" "$d/y" | head -4 | tr '\n' ' ');"
    cmp -s "$d/straight.st" "$d/resumed.st" || why="$why weights differ;"
    grep -q "resumed from .*step-$(printf '%08d' "$k") at step $k" "$d/b.out" || why="$why no 'resumed' line;"
    if [ -z "$why" ]; then ok "$name (checkpoint at step $k of $total)"; else bad "$name" "$why"; fi
}

for pipe in none sparse-dist; do
    exact_case "one-shuffle-$pipe" 0 "$pipe" 4 9 $SHUF
    exact_case "one-tsv-$pipe" 0 "$pipe" 5 9 $TSV
done
exact_case one-shuffle-epoch2 0 sparse-dist 7 13 $SHUF
exact_case one-two-files 0 sparse-dist 3 8 $TWO
if [ "$have_mpi" -eq 1 ]; then
    for pipe in none sparse-dist; do
        exact_case "rw-shuffle-$pipe" 2 "$pipe" 4 9 --sharding rw $SHUF
        exact_case "rw-tsv-$pipe" 2 "$pipe" 5 8 --sharding rw $TSV
    done
    exact_case rw-shuffle-epoch2 2 sparse-dist 7 12 --sharding rw $SHUF
fi

# negative control: the data position one batch back gives other weights
d="$tmp/one-shuffle-none"
cp -r "$d/ck0" "$tmp/moved"
m="$tmp/moved/step-00000004/manifest.json"
sed 's/"batch_in_epoch":4/"batch_in_epoch":3/' "$m" >"$m.new" && mv "$m.new" "$m"
launch 0 --pipeline none $SHUF --steps 9 --checkpoint-dir "$tmp/moved" --resume \
    --save-weights "$tmp/moved.st" >"$tmp/moved.out" 2>&1
if [ $? -eq 0 ] && grep -q '"batch_in_epoch":3' "$m" && ! cmp -s "$tmp/moved.st" "$d/straight.st"; then
    ok "control: a moved data position resumes into other weights"
else bad control "$(tail -1 "$tmp/moved.out")"; fi

# refusals
expect2() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    launch 0 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out"; then ok "$name"; else
        bad "$name" "status $rc, output: $(tail -1 "$tmp/$name.out")"; fi
}
ck="$tmp/one-tsv-none/ck0"
cp "$tmp/d.tsv" "$tmp/same-size.tsv"
sed '1s/^0/X/;1s/^1/0/;1s/^X/1/' "$tmp/d.tsv" >"$tmp/same-size.tsv" # the first label flipped
expect2 changed-head "data file $tmp/same-size.tsv changed since the checkpoint" \
    --data "$tmp/same-size.tsv" $EVAL --steps 9 --resume "$ck/step-00000005"
head -n 240 "$tmp/d.tsv" >"$tmp/shorter.tsv"
expect2 changed-size "data file $tmp/shorter.tsv changed since the checkpoint: [0-9]* bytes" \
    --data "$tmp/shorter.tsv" $EVAL --steps 9 --resume "$ck/step-00000005"
ck="$tmp/one-shuffle-none/ck0/step-00000004"
expect2 other-shuffle "another --shuffle" --data "$tmp/d.bin" $EVAL --steps 9 --resume "$ck"
expect2 other-block "another --shuffle-block" $SHUF --shuffle-block 30 --steps 9 --resume "$ck"
"$bin" train $JOB --steps 2 --checkpoint-dir "$tmp/synth" >"$tmp/synth.out" 2>&1 ||
    bad synthetic "$(tail -1 "$tmp/synth.out")"
expect2 synthetic-to-data "written by a run on synthetic data, this run reads --data" \
    $SHUF --steps 4 --resume "$tmp/synth/step-00000002"

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
