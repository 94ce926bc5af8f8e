#!/bin/sh
# Checkpoints under injected faults (SR_FAULT, docs/user-guide.md "Fault
# injection"), each compared with a straight run of the same job:
#
#   kill-step       a process SIGKILLed at the start of step 3: exit 137, the
#                   checkpoints of steps 1 and 2 only
#   kill-write      a process SIGKILLed while its checkpoint of step 8 is
#                   being written (its file written, not yet renamed): the
#                   step-8 folder has no manifest, step 4 stays complete, and
#                   --resume (which skips step 8 with a warning) gives the
#                   straight run's losses and weights; one process, and rank 1
#                   of 2 killed during its rank file
#   fail-write      a checkpoint file that cannot be written (path=, nth=):
#                   exit status 1, the file named, the previous checkpoint
#                   intact and resumable to the straight run's bits
#   stop            rank 1 of 2 stops itself (SIGSTOP) at step 5: the other
#                   rank's deadline (--comm-timeout 3) ends the job, naming the
#                   collective and rank 1, well within the hard timeout
#   minutes         --checkpoint-every 0.001m (60 ms) with rank 0's
#                   collectives delayed 100 ms each (a lower bound on every
#                   step's time: no race): a checkpoint after every step, all
#                   complete, and one from the middle resumes exactly; on 2
#                   ranks too; with 600m only the final one is written
#   refusals        bad SR_FAULT specs and --checkpoint-every values: exit 2,
#                   the problem named
#
# Every run has a hard timeout (SIGKILL); a stopped rank left behind is
# killed at exit (found by the unique folder on its command line).
# The 2-rank cases are skipped without mpirun.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
unset SR_CPU_DEFERRED SR_FAULT
sr_timeout=120 sr_timeout_opts="-s KILL"
kill_left() { # ranks of this test's runs still alive (a stopped rank)
    for p in $(pgrep -x shardrec); do
        tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$tmp/" && kill -KILL "$p" 2>/dev/null
    done
}
sr_on_exit=kill_left
. "$(dirname "$0")/checkpoint_lib.sh"

straight() { # NAME NP STEPS ARGS...: the reference run
    n=$1 np=$2 steps=$3
    shift 3
    [ -f "$tmp/$n.st" ] && return 0
    launch "$np" --steps "$steps" --metrics "$tmp/$n.jsonl" --save-weights "$tmp/$n.st" "$@" \
        >"$tmp/$n.out" 2>&1
}

# resume NAME NP CKDIR STEP STRAIGHT ARGS...: --resume from the latest
# complete checkpoint in CKDIR must be STEP's and end on STRAIGHT's bits.
resume_check() {
    name=$1 np=$2 ck=$3 from=$4 ref=$5
    shift 5
    launch "$np" --steps 8 --checkpoint-dir "$ck" --resume --metrics "$tmp/$name.b.jsonl" \
        --save-weights "$tmp/$name.st" "$@" >"$tmp/$name.b.out" 2>&1 ||
        { why="$why resume failed: $(tail -1 "$tmp/$name.b.out");"; return; }
    grep -q "resumed from .*step-$(printf '%08d' "$from") at step $from" "$tmp/$name.b.out" ||
        why="$why did not resume from step $from;"
    fields_from "$tmp/$ref.jsonl" $((from + 1)) >"$tmp/$name.x"
    fields "$tmp/$name.b.jsonl" >"$tmp/$name.y"
    cmp -s "$tmp/$name.x" "$tmp/$name.y" || why="$why metrics differ from the straight run;"
    cmp -s "$tmp/$ref.st" "$tmp/$name.st" || why="$why weights differ from the straight run;"
}

# ---- kill -9 during a checkpoint write ---------------------------------------
kill_case() { # NAME NP FAULT
    name=$1 np=$2 fault=$3 why=""
    ck="$tmp/$name.ck"
    straight "ref$np" "$np" 8 || { bad "$name" "straight run failed"; return; }
    SR_FAULT=$fault launch "$np" --steps 8 --checkpoint-dir "$ck" --checkpoint-every 4 \
        >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] || why="$why exit status 0;"
    grep -q "SR_FAULT: SIGKILL before committing .*step-00000008" "$tmp/$name.out" ||
        why="$why no fault line;"
    [ -f "$ck/step-00000004/manifest.json" ] || why="$why step 4 incomplete;"
    [ ! -f "$ck/step-00000008/manifest.json" ] || why="$why step 8 has a manifest;"
    resume_check "$name" "$np" "$ck" 4 "ref$np"
    grep -q "step-00000008 is incomplete" "$tmp/$name.b.out" || why="$why step 8 not skipped;"
    if [ -z "$why" ]; then ok "$name (exit $rc)"; else bad "$name" "$why"; fi
}
kill_case kill-write 0 "kill:rank=0:write=step-00000008/dense"
[ "$have_mpi" -eq 0 ] || kill_case kill-write-rank1 2 "kill:rank=1:write=step-00000008/rank-00001"

# ---- kill -9 at a step's start: the job ends there, no checkpoint of it --------
why=""
SR_FAULT="kill:rank=0:step=3" launch 0 --steps 8 --checkpoint-dir "$tmp/ks.ck" \
    --checkpoint-every 1 --metrics "$tmp/ks.jsonl" >"$tmp/ks.out" 2>&1
rc=$?
[ "$rc" -eq 137 ] || why="$why exit status $rc, not 137;"
grep -q "SR_FAULT: SIGKILL at the start of step 3" "$tmp/ks.out" || why="$why no fault line;"
[ "$(grep -c '"loss"' "$tmp/ks.jsonl")" -eq 2 ] || why="$why not 2 steps logged;"
[ -f "$tmp/ks.ck/step-00000002/manifest.json" ] && [ ! -d "$tmp/ks.ck/step-00000003" ] ||
    why="$why checkpoints not those of steps 1-2;"
if [ -z "$why" ]; then ok kill-step; else bad kill-step "$why"; fi

# ---- a failed write -------------------------------------------------------
fail_case() { # NAME NP FAULT FILE
    name=$1 np=$2 fault=$3 file=$4 why=""
    ck="$tmp/$name.ck"
    straight "ref$np" "$np" 8 || { bad "$name" "straight run failed"; return; }
    SR_FAULT=$fault launch "$np" --steps 8 --checkpoint-dir "$ck" --checkpoint-every 4 \
        >"$tmp/$name.out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || why="$why exit status $rc, not 1;"
    grep -q "checkpoint step 8: $ck/step-00000008/$file: cannot write" "$tmp/$name.out" ||
        why="$why the file is not named: $(grep 'shardrec train:' "$tmp/$name.out" | head -2 | tr '\n' ' ');"
    [ -f "$ck/step-00000004/manifest.json" ] || why="$why step 4 incomplete;"
    [ ! -f "$ck/step-00000008/manifest.json" ] || why="$why step 8 has a manifest;"
    resume_check "$name" "$np" "$ck" 4 "ref$np"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}
fail_case fail-write-path 0 "fail-write:path=step-00000008/rank-00000" rank-00000.safetensors
# writes of one process: step 4's rank file, dense file, manifest; step 8's ...
fail_case fail-write-nth 0 "fail-write:nth=6" manifest.json
[ "$have_mpi" -eq 0 ] ||
    fail_case fail-write-rank1 2 "fail-write:rank=1:step-00000008/rank-00001" rank-00001.safetensors

# ---- a stopped rank: the deadline ends the job --------------------------------
if [ "$have_mpi" -eq 1 ]; then
    why=""
    t0=$(date +%s)
    SR_FAULT="stop:rank=1:step=5" sr_mpirun 2 "$bin" train $JOB --steps 100 --comm-timeout 10 \
        --checkpoint-dir "$tmp/stop.ck" >"$tmp/stop.out" 2>&1
    rc=$? secs=$(($(date +%s) - t0))
    [ "$rc" -ne 0 ] || why="$why exit status 0;"
    [ "$rc" -ne 137 ] || why="$why the hard timeout ended it;"
    grep -q "SR_FAULT: SIGSTOP at the start of step 5" "$tmp/stop.out" || why="$why no fault line;"
    grep -q "comm timeout: .* at step [45]" "$tmp/stop.out" || why="$why no deadline message;"
    grep -q "Did not arrive: rank 1 (no answer to a probe" "$tmp/stop.out" ||
        why="$why rank 1 not named;"
    if [ -z "$why" ]; then ok "stop-rank1 (ended in ${secs} s, exit $rc)"; else
        bad stop-rank1 "$why $(tail -3 "$tmp/stop.out" | tr '\n' ' ')"; fi
fi

# ---- --checkpoint-every Nm ------------------------------------------------
minutes_case() { # NAME NP
    name=$1 np=$2 why=""
    ck="$tmp/$name.ck"
    straight "ref$np" "$np" 8 || { bad "$name" "straight run failed"; return; }
    SR_FAULT="delay:rank=0:ms=100" launch "$np" --steps 6 --checkpoint-dir "$ck" \
        --checkpoint-every 0.001m --checkpoint-keep 100 >"$tmp/$name.out" 2>&1 ||
        { bad "$name" "run failed: $(tail -1 "$tmp/$name.out")"; return; }
    for s in 1 2 3 4 5 6; do
        f="$ck/step-$(printf '%08d' $s)"
        grep -q "checkpoint step $s:" "$tmp/$name.out" || why="$why no checkpoint at step $s;"
        [ -f "$f/manifest.json" ] || why="$why $f incomplete;"
        last=$((np > 0 ? np - 1 : 0))
        for r in $(seq 0 "$last"); do
            [ -f "$f/rank-$(printf '%05d' "$r").safetensors" ] || why="$why $f lacks rank $r;"
        done
    done
    rm -rf "$ck/step-00000004" "$ck/step-00000005" "$ck/step-00000006"
    resume_check "$name" "$np" "$ck" 3 "ref$np"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}
minutes_case minutes 0
[ "$have_mpi" -eq 0 ] || minutes_case minutes-2ranks 2
launch 0 --steps 5 --checkpoint-dir "$tmp/long.ck" --checkpoint-every 600m >"$tmp/long.out" 2>&1
rc=$?
n=$(grep -c "^checkpoint step" "$tmp/long.out")
if [ "$rc" -eq 0 ] && [ "$n" -eq 1 ] && [ -f "$tmp/long.ck/step-00000005/manifest.json" ]; then
    ok "minutes-long (only the final checkpoint)"; else bad minutes-long "$n checkpoints"; fi

# ---- refusals ------------------------------------------------------------------
expect2() { # NAME PATTERN FAULT ARGS...
    name=$1 pat=$2 fault=$3
    shift 3
    SR_FAULT=$fault launch 0 --steps 2 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$tmp/$name.out"; then ok "$name"; else
        bad "$name" "status $rc, output: $(tail -1 "$tmp/$name.out")"; fi
}
expect2 fault-unknown "unknown fault 'explode'" "explode:rank=0:step=1"
expect2 fault-no-when "needs one of step=S and write=SUB" "kill:rank=0"
expect2 fault-no-rank "needs rank=R" "stop:step=3"
expect2 fault-bad-number "ms=1e3 is not a whole number" "delay:rank=0:ms=1e3"
expect2 fault-unknown-key "unknown key 'when'" "kill:rank=0:when=3"
expect2 fault-twice "rank given twice" "kill:rank=0:rank=1:step=2"
expect2 fault-empty-field "an empty field" "kill::rank=0:step=2"
expect2 fault-empty "an empty fault" "kill:rank=0:step=2,"
expect2 fault-nth-and-path "needs one of nth=N and path=SUB" "fail-write:nth=2:path=x"
expect2 fault-delay-both "one of step= and write=" "delay:rank=0:ms=5:step=2:write=x"
expect2 fault-hold-no-step "needs step=S and write=SUB" "hold-write:write=x"
expect2 every-bad "not N (steps) or Nm" "" --checkpoint-dir "$tmp/e" --checkpoint-every 5x
expect2 every-zero "out of range" "" --checkpoint-dir "$tmp/e" --checkpoint-every 0m
expect2 every-no-dir "needs --checkpoint-dir" "" --checkpoint-every 2m

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
