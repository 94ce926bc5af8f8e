#!/bin/sh
# The embedding op benchmark (bench/emb_ops.c) runs to the end on the CPU
# device at smoke size and prints its table: a copy line and forward,
# forward (keep_ids), backward+sgd, backward+rowwise_adagrad for each of its
# three cases (d128, d16, m), each with a positive time. With --id-dist zipf:1.05 it runs again, and each
# case line reports a longest run above 1 and fewer distinct rows than ids;
# --id-dist bogus is exit status 2. (Its numbers at full size are for the GPU:
# make bench, then build/bench/emb_ops --device cuda.)
sr_threads=keep
. "$(dirname "$0")/lib.sh"
bin="$sr_build/bench/emb_ops"
sr_need_built "$bin"
smoke="--device cpu --rows 65536 --batch 64 --reps 3 --warmup 1 --copy-mb 16"
out=$("$bin" $smoke 2>&1) ||
    { echo "$out"; echo "FAIL: emb_ops exited with status $?"; exit 1; }
echo "$out"
echo "$out" | awk '
    /^copy \(device to device\)/ { copy++ }
    /^(forward|backward\+)/ { n++; if (!($(NF - 5) > 0)) bad++ } # the ms column
    END { exit !(copy == 1 && n == 12 && !bad) }' ||
    { echo "FAIL: expected a copy line and 12 op lines with a positive time"; exit 1; }

out=$("$bin" $smoke --id-dist zipf:1.05 2>&1) ||
    { echo "$out"; echo "FAIL: emb_ops --id-dist zipf:1.05 exited with status $?"; exit 1; }
echo "$out"
# "... per launch N ids, U distinct rows, longest run L; ..." -> "N U L"
echo "$out" | sed -nE 's/^case .* ([0-9]+) ids, ([0-9]+) distinct rows, longest run ([0-9]+);.*/\1 \2 \3/p' |
    awk '{ n++; if (!($3 > 1 && $2 < $1)) bad++ } END { exit !(n == 3 && !bad) }' ||
    { echo "FAIL: expected 3 Zipf case lines, each with a longest run > 1 and fewer distinct rows than ids"; exit 1; }

"$bin" --device nosuch >/dev/null 2>&1 && { echo "FAIL: --device nosuch accepted"; exit 1; }
"$bin" --id-dist bogus >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --id-dist bogus: exit status $rc, expected 2"; exit 1; }
echo "emb_ops: ok"
