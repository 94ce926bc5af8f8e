#!/bin/sh
# Checkpoints resume exactly (same world size and plan): k steps with
# --checkpoint-every k, stop, --resume, k more steps give the same per-step
# losses and evaluations (--metrics fields as written) and the same final
# weights (--save-weights, cmp) as 2k steps straight. Adagrad on the tables,
# Adam on the dense layers, synthetic data; one process, and 2 ranks under
# tw, rw and a mixed plan; --pipeline none and sparse-dist. Then the refusals
# (exit status 2): --resume with no checkpoint, a byte-flipped rank file
# (named; also rank 1's of 2), a checkpoint of another model (--embedding-dim named); and a step
# folder without manifest.json is skipped by --resume; --resume of a folder of step
# folders takes the latest complete one, of a missing path names it; a table
# name with a quote and a backslash keeps the manifest JSON.
# Exit 0 pass, 77 skipped (no MPI for the 2-rank cases), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
unset SR_CPU_DEFERRED
sr_timeout_opts="-s KILL"
K=4
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48
     --optimizer adam --lr 0.01 --emb-optimizer adagrad --eval-samples 200 --eval-every $K
     --log-every 1 --no-progress"
pass=0 fail=0
have_mpi=1
command -v mpirun >/dev/null 2>&1 || have_mpi=0

fields() { grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$1"; }

launch() { # NP ARGS...
    np=$1
    shift
    if [ "$np" -eq 0 ]; then "$bin" train $JOB "$@"; else sr_mpirun "$np" "$bin" train $JOB "$@"; fi
}

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }

exact_case() { # NAME NP PIPELINE ARGS...
    name=$1 np=$2 pipe=$3
    shift 3
    d="$tmp/$name"
    mkdir -p "$d"
    launch "$np" --pipeline "$pipe" "$@" --steps $((2 * K)) --metrics "$d/straight.jsonl" \
        --save-weights "$d/straight.st" >"$d/straight.out" 2>&1 || { bad "$name" "straight run failed: $(tail -1 "$d/straight.out")"; return; }
    launch "$np" --pipeline "$pipe" "$@" --steps "$K" --checkpoint-dir "$d/ck" \
        --checkpoint-every "$K" --metrics "$d/a.jsonl" >"$d/a.out" 2>&1 || { bad "$name" "first half failed: $(tail -1 "$d/a.out")"; return; }
    launch "$np" --pipeline "$pipe" "$@" --steps $((2 * K)) --checkpoint-dir "$d/ck" --resume \
        --metrics "$d/b.jsonl" --save-weights "$d/resumed.st" >"$d/b.out" 2>&1 || { bad "$name" "resume failed: $(tail -1 "$d/b.out")"; return; }
    fields "$d/straight.jsonl" >"$d/x"
    { fields "$d/a.jsonl"; fields "$d/b.jsonl"; } >"$d/y"
    why=""
    n=$(grep -c '"loss"' "$d/y")
    [ "$n" -eq $((2 * K)) ] || why="$why $n loss lines, expected $((2 * K));"
    cmp -s "$d/x" "$d/y" || why="$why metrics differ: $(diff "$d/x" "$d/y" | head -4 | tr '\n' ' ');"
    cmp -s "$d/straight.st" "$d/resumed.st" || why="$why weights differ;"
    grep -q "checkpoint step $K:" "$d/a.out" || why="$why no checkpoint log line;"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

for pipe in none sparse-dist; do
    exact_case "one-$pipe" 0 "$pipe"
done
if [ "$have_mpi" -eq 1 ]; then
    sr_mixed_plan 2 2 >"$tmp/mixed.json"
    for pipe in none sparse-dist; do
        exact_case "tw-$pipe" 2 "$pipe" --sharding tw
        exact_case "rw-$pipe" 2 "$pipe" --sharding rw
    done
    exact_case "mixed-sparse-dist" 2 sparse-dist --plan "$tmp/mixed.json"
fi

# refusals
expect2() { # NAME PATTERN ARGS...
    name=$1 pat=$2
    shift 2
    launch 0 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out"; then ok "$name"; else
        bad "$name" "status $rc, output: $(tail -1 "$tmp/$name.out")"; fi
}
mkdir -p "$tmp/empty"
expect2 no-checkpoint "no complete checkpoint" --steps 8 --checkpoint-dir "$tmp/empty" --resume
d="$tmp/one-none/ck"
expect2 other-model "embedding-dim" --steps 8 --embedding-dim 4 --bot-mlp 13-16-4 --resume "$d/step-0000000$K"
# (the resumed run wrote step 2K at its end; --checkpoint-keep 2 kept K too)
L=$(printf '%08d' $((2 * K)))
cp -r "$tmp/one-none/ck" "$tmp/flip"
f="$tmp/flip/step-$L/rank-00000.safetensors"
size=$(wc -c <"$f")
printf '\377' | dd of="$f" bs=1 seek=$((size - 5)) conv=notrunc 2>/dev/null
expect2 byte-flipped "step-$L/rank-00000.safetensors is damaged" --steps 12 --checkpoint-dir "$tmp/flip" --resume
if [ "$have_mpi" -eq 1 ]; then # rank 1's file damaged: every rank stops, status 2, the file named
    cp -r "$tmp/tw-none/ck" "$tmp/flip2"
    f="$tmp/flip2/step-$L/rank-00001.safetensors"
    printf 'X' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
    launch 2 --steps 12 --sharding tw --checkpoint-dir "$tmp/flip2" --resume >"$tmp/flip2.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "step-$L/rank-00001.safetensors is damaged" "$tmp/flip2.out"; then
        ok byte-flipped-rank1; else bad byte-flipped-rank1 "status $rc: $(grep shardrec "$tmp/flip2.out" | head -2 | tr '\n' ' ')"; fi
fi
# a later step folder without manifest is skipped
cp -r "$tmp/one-none/ck" "$tmp/skip"
mkdir -p "$tmp/skip/step-00000099"
cp "$tmp/skip/step-$L/rank-00000.safetensors" "$tmp/skip/step-00000099/"
"$bin" train $JOB --steps 12 --checkpoint-dir "$tmp/skip" --resume --pipeline none \
    --metrics "$tmp/skip.jsonl" >"$tmp/skip.out" 2>&1
if [ $? -eq 0 ] && grep -q "resumed from .*step-$L at step $((2 * K))" "$tmp/skip.out" &&
    grep -q "step-00000099 is incomplete" "$tmp/skip.out"; then ok incomplete-skipped; else
    bad incomplete-skipped "$(tail -2 "$tmp/skip.out" | tr '\n' ' ')"; fi

# --resume PARENT: the latest complete step folder under it (an incomplete later one skipped)
cp -r "$tmp/one-none/ck" "$tmp/parent"
mkdir -p "$tmp/parent/step-00000099"
"$bin" train $JOB --steps 12 --resume "$tmp/parent" --pipeline none >"$tmp/parent.out" 2>&1
if [ $? -eq 0 ] && grep -q "resumed from .*parent/step-$L at step $((2 * K))" "$tmp/parent.out"; then
    ok resume-parent-folder; else bad resume-parent-folder "$(tail -2 "$tmp/parent.out" | tr '\n' ' ')"; fi
expect2 resume-missing "$tmp/missing: cannot open (No such file or directory)" --steps 8 \
    --resume "$tmp/missing"
# a table name JSON must escape (a quote, a backslash): the manifest stays JSON, so
# inspect finds the checkpoint sound and --resume reads it
printf '{"tables": [{"name": "q\\"t\\\\1", "rows": 50}, {"name": "plain", "rows": 7}]}\n' \
    >"$tmp/quoted.json"
"$bin" train --config "$tmp/quoted.json" --steps 2 --checkpoint-every 2 --checkpoint-dir \
    "$tmp/quoted" --eval-samples 0 --no-progress >"$tmp/quoted.out" 2>&1 &&
    "$bin" inspect "$tmp/quoted" >"$tmp/quoted-inspect.out" 2>&1 &&
    "$bin" train --config "$tmp/quoted.json" --steps 3 --resume "$tmp/quoted" \
        --eval-samples 0 --no-progress >"$tmp/quoted-resume.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q 'q"t\\1' "$tmp/quoted-inspect.out" &&
    grep -q "resumed from .*step-00000002 at step 2" "$tmp/quoted-resume.out"; then
    ok quoted-table-name; else
    bad quoted-table-name "status $rc: $(cat "$tmp"/quoted*.out | grep -i "shardrec\|sound" | head -3 | tr '\n' ' ')"; fi

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
