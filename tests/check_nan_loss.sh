#!/bin/sh
# A diverging run stops with "training loss is nan at step N" (exit status
# 1) naming the FIRST bad step, although the host reads the losses only at
# log lines, before evaluations, at the end and at least every 50 steps (the
# loss stays on the device: src/train/loss_ring.h):
#   - --log-every 1 finds step N and writes the N-1 metrics lines before it;
#   - a log interval that holds N in its middle names the same N and writes
#     only the lines of the intervals before it (same bits as --log-every 1);
#   - --log-every 1000 (read every 50 steps) and --eval-every (read before
#     each evaluation) name the same N;
#   - on 2 ranks every rank stops at the same read (no hang), same message.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
sr_btl=tcp,self,vader
JOB="--steps 120 --lr 10 --table-rows 1000,1000,100 --embedding-dim 8 --bot-mlp 13-16-8
     --top-mlp 16-1 --global-batch-size 64 --no-progress --eval-samples 0"
fail=0

run() { # NAME ARGS...: run, keep stderr and metrics, expect exit status 1
    name=$1; shift
    "$bin" train $JOB "$@" --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || { echo "FAIL $name: exit status $rc, expected 1"; tail -3 "$tmp/$name.out"; fail=1; }
}
bad_step() { # NAME -> the step the error names
    sed -n 's/.*training loss is -\{0,1\}nan at step \([0-9]*\);.*/\1/p' "$tmp/$1.out" | tail -1
}
expect_step() { # NAME N
    got=$(bad_step "$1")
    if [ "$got" != "$2" ]; then
        echo "FAIL $1: the error names step '$got', expected $2"; tail -3 "$tmp/$1.out"; fail=1
    else
        echo "ok   $1: training loss is nan at step $got"
    fi
}

run every1 --log-every 1
N=$(bad_step every1)
if [ -z "$N" ] || [ "$N" -lt 3 ]; then
    echo "FAIL: no NaN loss after step 2 with --lr 10 (first bad step '$N')"; cat "$tmp/every1.out"
    exit 1
fi
[ "$(wc -l <"$tmp/every1.jsonl")" -eq $((N - 1)) ] ||
    { echo "FAIL every1: $(wc -l <"$tmp/every1.jsonl") metrics lines, expected $((N - 1))"; fail=1; }
echo "ok   every1: training loss is nan at step $N, $((N - 1)) metrics lines before it"

# an interval of length L with N strictly inside it, after at least one logged interval
L=2
while [ $((N % L)) -eq 0 ] || [ $((N % L)) -eq $((L - 1)) ]; do L=$((L + 1)); done
[ "$L" -lt "$N" ] || L=$((N - 1))
run mid --log-every "$L"
expect_step mid "$N"
lines=$(((N - 1) / L))
[ "$(wc -l <"$tmp/mid.jsonl")" -eq "$lines" ] ||
    { echo "FAIL mid: $(wc -l <"$tmp/mid.jsonl") metrics lines, expected $lines"; fail=1; }
# the logged lines are those of --log-every 1 at the same steps (loss of the step)
for s in $(seq "$L" "$L" $((N - 1))); do
    a=$(grep "\"step\": $s," "$tmp/every1.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
    b=$(grep "\"step\": $s," "$tmp/mid.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL mid: step $s loss '$b', expected '$a'"; fail=1; }
done

run cap --log-every 1000
expect_step cap "$N"
run eval --log-every 1000 --eval-samples 128 --eval-every $((N + 1))
expect_step eval "$N"

if command -v mpirun >/dev/null 2>&1; then
    sr_mpirun 2 "$bin" train $JOB --log-every 1 --sharding tw >"$tmp/np2a.out" 2>&1
    N2=$(bad_step np2a)
    sr_mpirun 2 "$bin" train $JOB --log-every 50 --sharding tw >"$tmp/np2.out" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] ||
        { echo "FAIL np2: exit status $rc"; tail -5 "$tmp/np2.out"; fail=1; }
    if [ -n "$N2" ]; then expect_step np2 "$N2"; else echo "FAIL np2a: no NaN"; fail=1; fi
else
    echo "skip np2: no mpirun"
fi
exit $fail
