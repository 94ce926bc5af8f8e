#!/bin/sh
# Out of device memory is an error naming the buffer and the bytes. The
# deferred and opaque CPU devices stand in for a full GPU: with
# SR_TEST_DEVICE_MEMORY=BYTES their device allocations fail, as cudaMalloc
# does, once BYTES have been allocated. Each case must exit non-zero and say
# "out of device memory on cpu (...) allocating <what>: <n> bytes", where
# <what> names the table (or the shard, under a plan), or the batch's device
# copy for a batch too large; the same jobs without the limit must succeed.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
fail=0
BASE="--steps 2 --embedding-dim 16 --eval-samples 0 --no-progress"

# case NAME DEVICE LIMIT WANT LAUNCH ARGS...: WANT a pattern of the message;
# LAUNCH runs the binary (empty: directly)
case_() {
    name=$1 dev=$2 limit=$3 want=$4 launch=$5
    shift 5
    SR_CPU_DEFERRED=$dev SR_TEST_DEVICE_MEMORY=$limit $launch "$bin" train $BASE "$@" \
        >"$tmp/$name.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] || ! grep -q "out of device memory on cpu ([a-z]*) allocating $want: [0-9]* bytes" "$tmp/$name.out"; then
        echo "FAIL $name: exit $rc, wanted an error naming $want"
        tail -5 "$tmp/$name.out"
        fail=1
        return
    fi
    echo "ok   $name: exit $rc: $(grep -m1 -o "allocating .*asked for" "$tmp/$name.out")"
    if ! SR_CPU_DEFERRED=$dev $launch "$bin" train $BASE "$@" >"$tmp/$name.ok" 2>&1; then
        echo "FAIL $name: the job fails without the limit too"
        tail -5 "$tmp/$name.ok"
        fail=1
    fi
}

case_ table 1 50000000 "table 't1' (2000000 rows x 16, weights and optimizer state)" "" \
    --table-rows 1000,2000000,50
case_ table_opaque opaque 50000000 "table 't1' (2000000 rows x 16, weights and optimizer state)" "" \
    --table-rows 1000,2000000,50
case_ batch opaque 3000000 "the batch's device copy (grows with the batch size and the ids per sample)" "" \
    --table-rows 1000,20000,50 --batch-size 65536
if command -v mpirun >/dev/null 2>&1; then
    case_ shard 1 50000000 "table 't1' shard (2000000 rows x 16 from row [0-9]*, weights and optimizer state)" \
        "sr_mpirun 2 -x SR_CPU_DEFERRED -x SR_TEST_DEVICE_MEMORY" \
        --table-rows 1000,4000000,50 --sharding rw
fi
exit $fail
