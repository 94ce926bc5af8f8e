#!/bin/sh
# The emulated inter-node link (--emulate-link, SR_EMULATE_LINK; comm.h):
#  1. $BUILD/tests/mpi_link (tests/mpi/mpi_link.c) on 2 ranks, over shared
#     memory and over TCP on loopback: 2 ranks as 2 nodes, every collective
#     kind takes at least bytes/bandwidth + latency, back-to-back collectives
#     queue on one FIFO, a collective hidden behind compute is not waited for;
#     2 ranks on 1 node are not delayed; SR_EMULATE_LINK values. Only lower
#     bounds and generous upper bounds are asserted (a shared machine).
#  2. Training with the link on is bit-identical to training without it (it
#     only delays): per-step losses, evaluation and the saved weights, on 2
#     ranks as 2 nodes (rw) and 4 ranks as 2 nodes of 2 (twrw: node and cross
#     communicators share the link).
#  3. A bad --emulate-link value stops `train` with exit status 2 naming the
#     flag; `train --help` lists the flag.
# Prints one line per check; exit 0 only if all passed; 77 without MPI.
#
# Under ASan: make SANITIZE=1 tests; BUILD=build-asan sh tests/check_mpi_link.sh
# (Open MPI's leaks suppressed by tests/lib.sh).
. "$(dirname "$0")/lib.sh"
bin="$sr_build/tests/mpi_link"
shardrec=$sr_shardrec
sr_need_mpi
sr_need_built "$bin" "$shardrec"
unset SR_EMULATE_LINK
failed=0

fail() {
    failed=$((failed + 1))
    echo "FAILED: $*"
}

# 1. the comm-level checks
for transport in shm tcp; do
    mca=""
    [ "$transport" = tcp ] && mca="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo"
    # shellcheck disable=SC2086
    sr_mpirun 2 $mca "$bin" >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q " 0 failed" "$tmp/out"; then
        echo "mpi_link $transport:"
        grep '^  ' "$tmp/out"
        grep '^mpi_link:' "$tmp/out"
    else
        tail -30 "$tmp/out"
        fail "mpi_link $transport (exit $rc)"
    fi
done

# 2. training: bit-identical with and without the link
sr_btl=tcp,self,vader
JOB="--table-rows 7,50,333,1000,5000,20 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 1-3 --global-batch-size 64 --steps 10 --optimizer sgd --lr 0.05
     --eval-samples 256 --eval-every 5 --log-every 1 --no-progress"
train() { # name np extra-args...
    name=$1 np=$2
    shift 2
    # shellcheck disable=SC2086
    sr_mpirun "$np" "$shardrec" train $JOB "$@" \
        --metrics "$tmp/$name.jsonl" --save-weights "$tmp/$name.st" >"$tmp/$name.err" 2>&1
}
# the fields that do not depend on time
numbers() {
    sed -e 's/"samples_per_s":[^,}]*//' -e 's/"step_ms":[^,}]*//' "$1"
}
for c in "2 1 rw" "4 2 twrw"; do
    set -- $c
    np=$1 rpn=$2 type=$3 base="$type-np$1"
    if ! train "$base" "$np" --sharding "$type" --ranks-per-node "$rpn"; then
        tail -20 "$tmp/$base.err"
        fail "$base without the link"
        continue
    fi
    if ! train "$base-link" "$np" --sharding "$type" --ranks-per-node "$rpn" \
        --emulate-link 0.02,200; then
        tail -20 "$tmp/$base-link.err"
        fail "$base with --emulate-link"
        continue
    fi
    numbers "$tmp/$base.jsonl" >"$tmp/a"
    numbers "$tmp/$base-link.jsonl" >"$tmp/b"
    if cmp -s "$tmp/a" "$tmp/b" && cmp -s "$tmp/$base.st" "$tmp/$base-link.st" &&
        [ "$(wc -l <"$tmp/a")" -eq 10 ]; then
        busy=$(grep '^communication per step' "$tmp/$base.err")
        busy_link=$(grep '^communication per step' "$tmp/$base-link.err")
        echo "$np ranks as $((np / rpn)) nodes ($type): losses, evaluation and weights bit-identical with --emulate-link 0.02,200"
        echo "  without: $busy"
        echo "  with:    $busy_link"
    else
        diff "$tmp/a" "$tmp/b" | head -6
        fail "$base: results differ with --emulate-link"
    fi
done

# 3. flag errors and help
for bad in 0 -2 fast 1,-1 1,2,3 ""; do
    "$shardrec" train --emulate-link "$bad" --steps 1 >"$tmp/bad.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "--emulate-link" "$tmp/bad.out"; then
        :
    else
        cat "$tmp/bad.out"
        fail "--emulate-link '$bad': exit $rc"
    fi
done
echo "bad --emulate-link values: exit 2 naming the flag"
if "$shardrec" train --help 2>&1 | grep -q -- "--emulate-link"; then
    echo "train --help lists --emulate-link"
else
    fail "train --help does not list --emulate-link"
fi

[ "$failed" -eq 0 ]
