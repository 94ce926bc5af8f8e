#!/bin/sh
# A stuck peer never hangs the job (comm.h's deadline). For 2, 3 and 4 ranks,
# with the first, a middle and the last rank stopped (SIGSTOP) in the middle
# of training, under --comm-timeout 6 (STUCK_TIMEOUT): every rank is gone within the deadline
# plus 15 s, mpirun exits non-zero, and a survivor's message names the
# collective, the step and the stopped rank ("no answer to a probe"). A rank
# killed outright (SIGKILL) still ends the others within 20 s. The
# comm layer alone (tests/mpi/mpi_stuck.c): a rank alive but outside the
# collectives is named as such; a large payload extends the deadline; a
# timeout of 0 waits forever.
# Every run has its own hard timeout, so a hang fails the test instead of CI.
# Skips (exit 77) without MPI.
#
# STUCK_FLAGS adds flags to every training run and STUCK_CASES picks the
# training cases by name (the comm-layer cases then do not run): how
# tests/gpu/check_nccl_train.sh runs them on NCCL ranks.
#
# The training runs start mpirun by hand, in the background: the test needs
# the pid of what it waits for (sr_mpirun is a shell function), finds each
# rank's pid and kills any left at exit.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_mpirun
sr_need_built "$bin" "$sr_build/tests/mpi_stuck"
pids_left=""
kill_left() {
    for p in $pids_left; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
}
sr_on_exit=kill_left
# --comm-timeout under test: well above how late a healthy rank can be to a
# collective on a loaded 2-core host under ASan (4 ranks), so that only the
# stopped rank trips it
TIMEOUT=${STUCK_TIMEOUT:-6}
HARD=120  # seconds a run may take at all
sr_timeout=$HARD sr_timeout_opts="-s KILL"
JOB="--table-rows 1000,2000,50,7 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --global-batch-size 48 --steps 100000000 --eval-samples 0 --log-every 1 --no-progress
     --comm-timeout $TIMEOUT ${STUCK_FLAGS:-}"
fail=0

now() { date +%s.%N; }
alive() { # pid: 0 if the process exists, is not a zombie and is still a rank
    # (a pid reused by another program after the rank ended does not count;
    # comm, unlike cmdline, stays readable while a process tears down)
    [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null &&
        [ "$(cat "/proc/$1/comm" 2>/dev/null)" = shardrec ]
}

# pid of world rank $2 of the run whose metrics file is $1
rank_pid() {
    for p in $(pgrep -x shardrec); do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qx "$1" || continue
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
            echo "$p"
    done
}

# name np rank signal max-seconds: start a run, send `signal` to `rank` once
# training is under way, check how the job ends.
run_case() {
    name=$1 np=$2 victim=$3 sig=$4 limit=$5
    metrics="$tmp/$name.jsonl"
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout -s KILL "$HARD" \
        mpirun $sr_as_root --oversubscribe --bind-to none -np "$np" \
        "$bin" train $JOB --metrics "$metrics" >"$tmp/$name.out" 2>&1 &
    job=$!
    i=0 # wait for 5 logged steps (rank 0 writes the metrics)
    while [ "$(cat "$metrics" 2>/dev/null | wc -l)" -lt 5 ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    pids=""
    for r in $(seq 0 $((np - 1))); do pids="$pids $(rank_pid "$metrics" "$r")"; done
    pids_left="$pids_left $pids"
    target=$(rank_pid "$metrics" "$victim")
    if [ -z "$target" ] || [ "$(echo $pids | wc -w)" -ne "$np" ]; then
        echo "FAIL $name: training did not start (ranks found:$pids)"
        tail -20 "$tmp/$name.out"
        kill -KILL $pids $job 2>/dev/null
        fail=1
        return
    fi
    t0=$(now)
    kill -"$sig" "$target"
    wait "$job"
    rc=$?
    tw=$(now)
    # mpirun can return while a rank it killed is still tearing down (not yet
    # a zombie): the bound is on every rank being gone, so poll until they
    # are or the limit has passed.
    while :; do
        left=""
        for p in $pids; do alive "$p" && left="$left $p"; done
        t1=$(now)
        [ -n "$left" ] && awk -v a="$t0" -v b="$t1" -v l="$limit" 'BEGIN { exit !(b - a <= l) }' ||
            break
        sleep 0.1
    done
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    msg=$(grep -m1 "comm timeout:" "$tmp/$name.out")
    why=""
    [ "$rc" -ne 0 ] || why="$why exit status 0;"
    [ -z "$left" ] || why="$why ranks still alive (pids$left);"
    awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s <= l) }' || why="$why took ${secs} s > ${limit} s;"
    if [ "$sig" = STOP ]; then
        echo "$msg" | grep -q "comm timeout: [a-z_]* #[0-9]* on communicator '[a-z]*' ($np ranks) at step [0-9]" ||
            why="$why no message naming the collective and step;"
        echo "$msg" | grep -q "Did not arrive: rank $victim (no answer to a probe" ||
            why="$why the message does not name rank $victim as missing;"
    fi
    if [ -n "$why" ]; then
        echo "FAIL $name:$why (mpirun exit $rc)"
        tail -20 "$tmp/$name.out"
        fail=1
    else
        late=$(awk -v a="$tw" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
        echo "ok   $name: all $np ranks gone ${secs} s after SIG$sig of rank $victim (${late} s after mpirun), exit $rc"
        [ -z "$msg" ] || echo "     $msg"
    fi
}

# The comm layer alone (tests/mpi/mpi_stuck.c): np mode want, where want is
# "ok" (exit 0) or a pattern the message must match (exit non-zero).
comm_case() {
    np=$1 mode=$2 want=$3
    t0=$(now)
    sr_mpirun "$np" "$sr_build/tests/mpi_stuck" "$mode" >"$tmp/comm_$mode.out" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    if [ "$want" = ok ] && [ "$rc" -eq 0 ]; then
        echo "ok   comm_${mode}_np$np: completed in ${secs} s"
    elif [ "$want" != ok ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 137 ] &&
        grep -q "$want" "$tmp/comm_$mode.out"; then
        echo "ok   comm_${mode}_np$np: job ended in ${secs} s, exit $rc"
        echo "     $(grep -m1 "comm timeout:" "$tmp/comm_$mode.out")"
    else
        echo "FAIL comm_${mode}_np$np: exit $rc after ${secs} s, wanted $want"
        tail -20 "$tmp/comm_$mode.out"
        fail=1
    fi
}

if [ -z "${STUCK_CASES:-}" ]; then
    comm_case 3 elsewhere "barrier #1 on communicator 'test' (3 ranks) at step 7 .*Did not arrive: rank 2 (alive at step 7, in no collective"
    comm_case 2 scaled ok
    comm_case 2 off ok
fi

bound=$((TIMEOUT + 15))
cases=${STUCK_CASES:-stop2_first stop2_last stop3_middle stop3_last stop4_first stop4_middle kill3_middle}
for c in $cases; do
    case $c in
    stop2_first) run_case stop2_first 2 0 STOP $bound ;;
    stop2_last) run_case stop2_last 2 1 STOP $bound ;;
    stop3_middle) run_case stop3_middle 3 1 STOP $bound ;;
    stop3_last) run_case stop3_last 3 2 STOP $bound ;;
    stop4_first) run_case stop4_first 4 0 STOP $bound ;;
    stop4_middle) run_case stop4_middle 4 2 STOP $bound ;;
    kill3_middle) run_case kill3_middle 3 1 KILL 20 ;;
    *) echo "FAIL unknown case $c"; fail=1 ;;
    esac
done
exit $fail
