#!/bin/sh
# Checkpoints written by a thread while training goes on (--checkpoint-write
# overlap) against the same job written between steps (sync):
#
#   same-bits      every checkpoint (steps 3, 6, 9, 12) holds the same files,
#                  byte for byte, as sync's, and the run's metrics and final
#                  weights are the same bits; the log says each overlapped
#                  write's place ("behind N steps of training") and the
#                  summary what the saves cost; one process and 2 ranks
#   in-flight      the write of step 4's rank file is held (SR_FAULT
#                  hold-write) until training has begun step 7: in order, not
#                  in time, so the write is still in flight while steps 5 and
#                  6 change the tables. The checkpoint is complete only after
#                  step 7 ("behind" at least 3 steps), holds step 4's state
#                  (sync's bytes), and --resume from it ends on the straight
#                  run's bits. Sync cannot pass this: its write would wait for
#                  a step that never starts (60 s, then "behind" is absent).
#                  One process, and rank 1 of 2 held.
#   slow-disk      every commit of step 4's files delayed 300 ms (SR_FAULT
#                  delay ... write=): the write takes at least 0.6 s (rank file
#                  and dense file), its bytes are sync's
#   fail-write     a file of step 4 that cannot be written, found after the
#                  steps that went on meanwhile: exit status 1 naming the
#                  file, step 4 without a manifest, nothing pruned
#   kill-write     the process SIGKILLed as its overlapped step-8 write
#                  commits: step 4 stays complete and resumes to the straight
#                  run's bits
#   memory         --checkpoint-write overlap counts the host copy in the
#                  memory check: tables of 60% of the machine's memory are
#                  refused (exit 2, the staging named)
# The 2-rank cases are skipped without mpirun.
. "$(dirname "$0")/lib.sh"
bin=$sr_shardrec
sr_need_built "$bin"
unset SR_CPU_DEFERRED SR_FAULT
sr_timeout=180 sr_timeout_opts="-s KILL"
. "$(dirname "$0")/checkpoint_lib.sh"

# run NAME NP MODE STEPS EVERY ARGS...: checkpoints in $tmp/NAME.ck, metrics,
# final weights and log beside
run() {
    n=$1 np=$2 mode=$3 steps=$4 every=$5
    shift 5
    launch "$np" --steps "$steps" --checkpoint-dir "$tmp/$n.ck" --checkpoint-every "$every" \
        --checkpoint-keep 100 --checkpoint-write "$mode" --metrics "$tmp/$n.jsonl" \
        --save-weights "$tmp/$n.st" "$@" >"$tmp/$n.out" 2>&1
}
same_files() { # DIR_A DIR_B: every file of a step folder equal
    for f in "$1"/*; do
        cmp -s "$f" "$2/$(basename "$f")" || { echo "$(basename "$f")"; return 1; }
    done
    [ "$(ls "$1" | wc -l)" -eq "$(ls "$2" | wc -l)" ] || { echo "file count"; return 1; }
}
behind() { # LOG STEP: N of "checkpoint step STEP: ... behind N steps", or nothing
    sed -n "s/^checkpoint step $2: .* behind \([0-9]*\) steps\{0,1\} of training.*/\1/p" "$1"
}

# ---- the same bits -------------------------------------------------------------
same_case() { # NAME NP
    name=$1 np=$2 why=""
    run "$name.s" "$np" sync 12 3 || { bad "$name" "sync run failed: $(tail -1 "$tmp/$name.s.out")"; return; }
    run "$name.o" "$np" overlap 12 3 ||
        { bad "$name" "overlap run failed: $(tail -1 "$tmp/$name.o.out")"; return; }
    for s in 3 6 9 12; do
        d=step-$(printf '%08d' $s)
        [ -f "$tmp/$name.o.ck/$d/manifest.json" ] || why="$why $d incomplete;"
        f=$(same_files "$tmp/$name.s.ck/$d" "$tmp/$name.o.ck/$d") || why="$why $d: $f differs;"
        grep -q "^checkpoint step $s: .* within the stall" "$tmp/$name.s.out" ||
            why="$why sync's line of step $s;"
        [ -n "$(behind "$tmp/$name.o.out" $s)" ] || why="$why overlap's line of step $s;"
    done
    fields "$tmp/$name.s.jsonl" >"$tmp/$name.x"
    fields "$tmp/$name.o.jsonl" >"$tmp/$name.y"
    [ -s "$tmp/$name.x" ] && cmp -s "$tmp/$name.x" "$tmp/$name.y" || why="$why metrics differ;"
    cmp -s "$tmp/$name.s.st" "$tmp/$name.o.st" || why="$why final weights differ;"
    grep -q "^checkpoints: 4 written (written by a thread as training went on)" \
        "$tmp/$name.o.out" || why="$why no summary line;"
    grep -q "^allocations in the training loop after step 1: 0" "$tmp/$name.o.out" ||
        why="$why the loop allocated;"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}
same_case same-bits 0
[ "$have_mpi" -eq 0 ] || same_case same-bits-2ranks 2

# ---- a write in flight while training goes on ----------------------------------
flight_case() { # NAME NP RANK
    name=$1 np=$2 r=$3 why=""
    run "$name.s" "$np" sync 8 4 || { bad "$name" "sync run failed"; return; }
    rf=rank-$(printf '%05d' "$r")
    SR_FAULT="hold-write:rank=$r:write=step-00000004/$rf:step=7" run "$name" "$np" overlap 8 4 ||
        { bad "$name" "run failed: $(tail -1 "$tmp/$name.out")"; return; }
    k=$(behind "$tmp/$name.out" 4)
    [ -n "$k" ] && [ "$k" -ge 3 ] || why="$why step 4 completed behind '$k' steps, not >= 3;"
    grep -q "gave up" "$tmp/$name.out" && why="$why the hold gave up;"
    f=$(same_files "$tmp/$name.s.ck/step-00000004" "$tmp/$name.ck/step-00000004") ||
        why="$why step 4's $f differs from sync's;"
    cmp -s "$tmp/$name.s.st" "$tmp/$name.st" || why="$why final weights differ;"
    launch "$np" --steps 8 --resume "$tmp/$name.ck/step-00000004" --metrics "$tmp/$name.r.jsonl" \
        --save-weights "$tmp/$name.r.st" >"$tmp/$name.r.out" 2>&1 ||
        why="$why resume failed: $(tail -1 "$tmp/$name.r.out");"
    fields_from "$tmp/$name.s.jsonl" 5 >"$tmp/$name.x"
    fields "$tmp/$name.r.jsonl" >"$tmp/$name.y"
    cmp -s "$tmp/$name.x" "$tmp/$name.y" || why="$why resumed metrics differ;"
    cmp -s "$tmp/$name.s.st" "$tmp/$name.r.st" || why="$why resumed weights differ;"
    if [ -z "$why" ]; then ok "$name (behind $k steps)"; else bad "$name" "$why"; fi
}
flight_case in-flight 0 0
[ "$have_mpi" -eq 0 ] || flight_case in-flight-rank1 2 1

# ---- a slow disk: every commit of a step-4 file sleeps 300 ms ------------------------
why=""
SR_FAULT="delay:rank=0:ms=300:write=step-00000004/" run slow 0 overlap 8 4 ||
    why="$why run failed: $(tail -1 "$tmp/slow.out");"
w=$(sed -n 's/^checkpoint step 4: .*; write \([0-9.]*\) s .*/\1/p' "$tmp/slow.out")
python3 -c "import sys; sys.exit(0 if float('${w:-0}') >= 0.6 else 1)" ||
    why="$why the write took '$w' s, not at least the 2 x 300 ms of its two delayed commits;"
f=$(same_files "$tmp/in-flight.s.ck/step-00000004" "$tmp/slow.ck/step-00000004") ||
    why="$why step 4's $f differs from sync's;"
if [ -z "$why" ]; then ok "slow-disk (write $w s)"; else bad slow-disk "$why"; fi

# ---- a failed write, found steps later -----------------------------------------
why=""
SR_FAULT="fail-write:path=step-00000004/rank-00000" run fw 0 overlap 12 4
rc=$?
[ "$rc" -eq 1 ] || why="$why exit status $rc, not 1;"
grep -q "checkpoint step 4: $tmp/fw.ck/step-00000004/rank-00000.safetensors: cannot write" \
    "$tmp/fw.out" || why="$why the file is not named: $(grep 'shardrec train:' "$tmp/fw.out");"
[ ! -f "$tmp/fw.ck/step-00000004/manifest.json" ] || why="$why step 4 has a manifest;"
if [ -z "$why" ]; then ok fail-write; else bad fail-write "$why"; fi

# ---- killed while an overlapped write commits ------------------------------------
why=""
run ref 0 sync 8 8 || why="$why straight run failed;"
SR_FAULT="kill:rank=0:write=step-00000008/rank-00000" run kw 0 overlap 8 4
rc=$?
[ "$rc" -eq 137 ] || why="$why exit status $rc, not 137;"
[ -f "$tmp/kw.ck/step-00000004/manifest.json" ] || why="$why step 4 incomplete;"
[ ! -f "$tmp/kw.ck/step-00000008/manifest.json" ] || why="$why step 8 has a manifest;"
launch 0 --steps 8 --checkpoint-dir "$tmp/kw.ck" --resume --metrics "$tmp/kw.r.jsonl" \
    --save-weights "$tmp/kw.r.st" >"$tmp/kw.r.out" 2>&1 || why="$why resume failed;"
grep -q "resumed from .*step-00000004 at step 4" "$tmp/kw.r.out" || why="$why not from step 4;"
fields_from "$tmp/ref.jsonl" 5 >"$tmp/kw.x"
fields "$tmp/kw.r.jsonl" >"$tmp/kw.y"
cmp -s "$tmp/kw.x" "$tmp/kw.y" || why="$why resumed metrics differ;"
cmp -s "$tmp/ref.st" "$tmp/kw.r.st" || why="$why resumed weights differ;"
if [ -z "$why" ]; then ok kill-write; else bad kill-write "$why"; fi

# ---- the host copy in the memory check ------------------------------------------
mem=$(awk '/^MemTotal:/ { print $2 * 1024 }' /proc/meminfo)
lim=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo max)
[ "$lim" != max ] && [ "$lim" -lt "$mem" ] && mem=$lim
rows=$(awk -v m="$mem" 'BEGIN { printf "%d", m * 0.6 / 8 }') # dim 2: 8 bytes a row
timeout 60 "$bin" train --steps 1 --table-rows "$rows" --embedding-dim 2 --bot-mlp 13-2 \
    --checkpoint-dir "$tmp/mem.ck" --checkpoint-write overlap >"$tmp/mem.out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "checkpoints' host copy of the rank's tables" "$tmp/mem.out"; then
    ok memory; else bad memory "status $rc: $(tail -1 "$tmp/mem.out")"; fi

echo "$sr_name: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
