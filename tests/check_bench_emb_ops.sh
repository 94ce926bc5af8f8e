#!/bin/sh
# The embedding op benchmark (bench/emb_ops.c) runs to the end on the CPU
# device at smoke size and prints its table: a copy line and forward,
# forward (keep_ids), backward+sgd, backward+rowwise_adagrad for D 128 and 16,
# each with a positive time. (Its numbers at full size are for the GPU: make
# bench, then build/bench/emb_ops --device cuda.)
sr_threads=keep
. "$(dirname "$0")/lib.sh"
bin="$sr_build/bench/emb_ops"
sr_need_built "$bin"
out=$("$bin" --device cpu --rows 65536 --batch 64 --reps 3 --warmup 1 --copy-mb 16 2>&1) ||
    { echo "$out"; echo "FAIL: emb_ops exited with status $?"; exit 1; }
echo "$out"
echo "$out" | awk '
    /^copy \(device to device\)/ { copy++ }
    /^(forward|backward\+)/ { n++; if (!($(NF - 3) > 0)) bad++ }
    END { exit !(copy == 1 && n == 8 && !bad) }' ||
    { echo "FAIL: expected a copy line and 8 op lines with a positive time"; exit 1; }
"$bin" --device nosuch >/dev/null 2>&1 && { echo "FAIL: --device nosuch accepted"; exit 1; }
echo "emb_ops: ok"
