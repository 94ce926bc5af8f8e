#!/bin/sh
# Training on the opaque CPU device (SR_CPU_DEFERRED=opaque: device memory
# that the host cannot touch, device.h) gives the same bits as on the
# immediate CPU device, so no layer above device/ reads or writes device
# memory on the host (that would crash with the device's message), and the
# paths a GPU takes (staged collectives, pinned copies of the counts, the
# weights and the losses) compute what the CPU's zero-copy paths do:
#   - one rank, the EBC in local mode, --pipeline none and sparse-dist: every step's loss,
#     two evaluations and the saved weights; then --init-weights from that
#     file, and its saved weights again;
#   - 2 ranks (MPI): a plan with every sharding type (2 nodes of 1) under both
#     pipelines, and rw with fp16 pooled and bf16 dense payloads;
# and the pipelined loop allocates nothing after step 1 on the opaque device.
# Exit 0 pass, 77 skipped (the MPI part, without mpirun), else fail.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
unset SR_CPU_DEFERRED
sr_timeout_opts="-s KILL"
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48 --steps 8
     --optimizer adam --emb-optimizer adagrad --lr 0.05 --eval-samples 200 --eval-every 4
     --log-every 1 --no-progress"
fail=0

fields() { # the step, loss and eval fields of a metrics file
    grep -o '"\(step\|loss\|loss_avg\|eval_auc\|eval_logloss\)": *[^,}]*' "$1"
}

# run NAME DEVICE NP ARGS...: $tmp/NAME-DEVICE.{jsonl,st,out}; DEVICE is
# SR_CPU_DEFERRED's value (0: the immediate device); NP 0: no mpirun.
run() {
    name=$1 dev=$2 np=$3
    shift 3
    out="$tmp/$name-$dev"
    if [ "$np" -eq 0 ]; then
        SR_CPU_DEFERRED=$dev "$bin" train $JOB "$@" --metrics "$out.jsonl" \
            --save-weights "$out.st" >"$out.out" 2>&1
    else
        sr_mpirun "$np" -x SR_CPU_DEFERRED="$dev" "$bin" train $JOB "$@" \
            --metrics "$out.jsonl" --save-weights "$out.st" >"$out.out" 2>&1
    fi
    rc=$?
}

# same NAME NP ARGS...: the immediate and the opaque device agree bit for bit.
same() {
    name=$1 np=$2
    shift 2
    run "$name" 0 "$np" "$@"
    rc0=$rc
    run "$name" opaque "$np" "$@"
    why=""
    [ "$rc0" -eq 0 ] && [ "$rc" -eq 0 ] || why="$why exit status cpu $rc0, opaque $rc;"
    fields "$tmp/$name-0.jsonl" >"$tmp/a" 2>/dev/null
    fields "$tmp/$name-opaque.jsonl" >"$tmp/b" 2>/dev/null
    n=$(grep -c '"loss"' "$tmp/a")
    [ "$n" -ge 3 ] || why="$why $n loss lines;"
    cmp -s "$tmp/a" "$tmp/b" || why="$why metrics differ: $(diff "$tmp/a" "$tmp/b" | head -3 | tr '\n' ' ');"
    cmp -s "$tmp/$name-0.st" "$tmp/$name-opaque.st" || why="$why weights differ;"
    grep -q "allocations in the training loop after step 1: 0" "$tmp/$name-opaque.out" ||
        why="$why the loop allocates on the opaque device;"
    if [ -n "$why" ]; then
        echo "FAIL $name:$why"
        tail -15 "$tmp/$name-opaque.out"
        fail=1
    else
        echo "ok   $name: $n losses, the evaluations and the weights identical"
    fi
}

same plain-none 0 --pipeline none
same plain-sparse-dist 0 --pipeline sparse-dist
same plain-init 0 --pipeline sparse-dist --steps 3 --init-weights "$tmp/plain-none-0.st"

if ! command -v mpirun >/dev/null 2>&1; then
    [ "$fail" -eq 0 ] || exit 1
    echo "skipped: the 2-rank cases need mpirun"
    exit 77
fi
cat >"$tmp/plan.json" <<JSON
{"world_size": 2, "local_size": 1, "tables": [
 {"name": "t0", "sharding": "dp"},
 {"name": "t1", "sharding": "tw", "rank": 1},
 {"name": "t2", "sharding": "rw"},
 {"name": "t3", "sharding": "cw", "ranks": [1, 0]},
 {"name": "t4", "sharding": "twrw", "node": 1},
 {"name": "t5", "sharding": "tw", "rank": 0}]}
JSON
same mixed-np2-none 2 --plan "$tmp/plan.json" --ranks-per-node 1 --pipeline none
same mixed-np2-sparse-dist 2 --plan "$tmp/plan.json" --ranks-per-node 1 --pipeline sparse-dist
same rw-np2-fp16-bf16 2 --sharding rw --comm-dtype fp16 --dense-comm-dtype bf16
exit $fail
