#!/bin/sh
# `shardrec inspect` and `shardrec export` on checkpoints of 2 ranks (a
# mixed plan: dp, tw, rw, cw, twrw; and rw with rowwise_adagrad) and of one
# process:
#
#   - inspect of a sound checkpoint exits 0 and prints its step and world
#     size; given the --checkpoint-dir it reads the latest complete step;
#   - export of the checkpoint at step K is the same file (cmp) as
#     `train --save-weights` of the same run at step K (the independent
#     reference: rank 0 gathers the tables there), and `train --init-weights`
#     loads it; with mean pooling too (the file records each table's pooling,
#     from the manifest's tables), which `train --init-weights` then needs;
#   - inspect and export refuse (exit status 2), naming the file: a truncated
#     rank file, a byte-flipped dense file, a missing rank file, a manifest
#     with a number out of range or not an integer; export refuses an --out
#     that is one of the checkpoint's files; a missing folder and one
#     without checkpoints are named once ("shardrec inspect: /x: cannot open").
# Exit 0 pass, 77 skipped (no MPI), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_need_mpirun
unset SR_CPU_DEFERRED
sr_timeout_opts="-s KILL"
sr_timeout=120
K=3
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --global-batch-size 48 --optimizer adam --lr 0.01 --no-progress"
pass=0 fail=0 INIT=""
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1: $2"; }
S=$(printf 'step-%08d' $K)

export_case() { # NAME NP ARGS... ($INIT: flags of the --init-weights run too)
    name=$1 np=$2
    shift 2
    d="$tmp/$name"
    mkdir -p "$d"
    if [ "$np" -eq 0 ]; then
        "$bin" train $JOB "$@" --steps $K --checkpoint-dir "$d/ck" --save-weights "$d/saved.st" >"$d/run.out" 2>&1
    else
        sr_mpirun "$np" "$bin" train $JOB "$@" --steps $K --checkpoint-dir "$d/ck" \
            --save-weights "$d/saved.st" >"$d/run.out" 2>&1
    fi || { bad "$name" "training failed: $(tail -1 "$d/run.out")"; return; }
    why=""
    "$bin" inspect "$d/ck" >"$d/inspect.out" 2>&1 || why="$why inspect exit $?: $(tail -1 "$d/inspect.out");"
    grep -q "step $K, world size $((np > 0 ? np : 1))" "$d/inspect.out" || why="$why inspect does not print the step and world size;"
    grep -q "ck/$S: sound" "$d/inspect.out" || why="$why inspect did not pick the latest step folder;"
    "$bin" export "$d/ck/$S" --out "$d/export.st" >"$d/export.out" 2>&1 || why="$why export exit $?: $(tail -1 "$d/export.out");"
    cmp -s "$d/saved.st" "$d/export.st" || why="$why export differs from --save-weights;"
    "$bin" train $JOB $INIT --steps 1 --init-weights "$d/export.st" >"$d/init.out" 2>&1 || why="$why --init-weights of the export failed: $(tail -1 "$d/init.out");"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

sr_mixed_plan 2 2 >"$tmp/mixed.json"
export_case mixed2 2 --plan "$tmp/mixed.json" --emb-optimizer adagrad
export_case rw2 2 --sharding rw --emb-optimizer rowwise_adagrad
export_case one 0 --emb-optimizer sgd
INIT="--pooling mean"
export_case mean2 2 --sharding rw --pooling mean
INIT=""
grep -q '"pooling": "mean"' "$tmp/mean2/ck/$S/manifest.json" && grep -qa 'shardrec.emb.t4.pooling":"mean' "$tmp/mean2/export.st" &&
    ok "mean pooling recorded in the manifest and the export" || bad "mean2" "the pooling is not recorded"

# damage, each named: exit status 2 from inspect and export
damaged() { # NAME FILE PATTERN
    name=$1 file=$2 pat=$3
    why=""
    "$bin" inspect "$tmp/$name" >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out" || why="$why inspect: status $rc: $(tail -1 "$tmp/$name.out");"
    grep -q "$file" "$tmp/$name.out" || why="$why inspect does not name $file;"
    "$bin" export "$tmp/$name" --out "$tmp/$name.st" >"$tmp/$name.eout" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] && grep -q "$file" "$tmp/$name.eout" || why="$why export: status $rc: $(tail -1 "$tmp/$name.eout");"
    [ ! -e "$tmp/$name.st" ] || why="$why export wrote a file;"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}
src="$tmp/mixed2/ck/$S"
cp -r "$src" "$tmp/truncated"
f="$tmp/truncated/rank-00001.safetensors"
truncate -s $(($(wc -c <"$f") - 7)) "$f"
damaged truncated "truncated/rank-00001.safetensors" "is damaged"
cp -r "$src" "$tmp/flipped"
f="$tmp/flipped/dense.safetensors"
printf '\377' | dd of="$f" bs=1 seek=$(($(wc -c <"$f") - 9)) conv=notrunc 2>/dev/null
damaged flipped "flipped/dense.safetensors" "is damaged"
cp -r "$src" "$tmp/missing"
rm "$tmp/missing/rank-00000.safetensors"
damaged missing "missing/rank-00000.safetensors" "cannot open"

# a damaged manifest: a number out of range or not an integer is named, never
# cast (tests/fuzz/fuzz_ckpt.c runs the same under UBSan)
manifest_case() { # NAME SED-EXPRESSION FIELD
    cp -r "$src" "$tmp/$1"
    sed -i "$2" "$tmp/$1/manifest.json"
    damaged "$1" "$1/manifest.json" "\"$3\" is missing or malformed"
}
manifest_case huge-world 's/"world_size": 2,/"world_size": 1e12,/' world_size
manifest_case big-world 's/"world_size": 2,/"world_size": 1000000,/' files
manifest_case fractional-step 's/"step": 3,/"step": 2.5,/' step
manifest_case huge-rows 's/"rows": 7,/"rows": 1e300,/' tables
manifest_case negative-batch 's/"global_batch": 48,/"global_batch": -1e300,/' global_batch
manifest_case huge-dense-shape 's/"shape": \[16, 13\]/"shape": [1e30, 13]/' dense_tensors

"$bin" export "$src" --out "$src/rank-00000.safetensors" >"$tmp/clash.out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "would destroy that input" "$tmp/clash.out" && "$bin" inspect "$src" >/dev/null 2>&1; then
    ok out-is-input; else bad out-is-input "status $rc: $(tail -1 "$tmp/clash.out")"; fi

# a path that is no checkpoint: the message names the command once
# ("shardrec inspect: /x: cannot open", not "shardrec inspect: inspect /x: ...")
mkdir "$tmp/empty"
no_checkpoint() { # PATH MESSAGE
    for cmd in inspect export; do
        set -- "$1" "$2"
        [ $cmd = inspect ] || set -- "$@" --out "$tmp/none.st"
        "$bin" $cmd "$1" $3 $4 >"$tmp/path.out" 2>&1
        rc=$?
        if [ "$rc" -eq 2 ] && grep -qF "shardrec $cmd: $2; HINT" "$tmp/path.out"; then
            ok "$cmd $(basename "$1"): named once"
        else
            bad "$cmd $(basename "$1")" "status $rc: $(tail -1 "$tmp/path.out")"
        fi
    done
}
no_checkpoint "$tmp/nothere" "$tmp/nothere: cannot open (No such file or directory)"
no_checkpoint "$tmp/empty" "no complete checkpoint in $tmp/empty"

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
