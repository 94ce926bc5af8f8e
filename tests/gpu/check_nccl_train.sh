#!/bin/sh
# NCCL ranks train as one rank does (comm/comm_nccl.c), on one GPU: each rank
# its own emulated node (--ranks-per-node 1: shardrec gives each its own
# NCCL_HOSTID), so NCCL moves their traffic over loopback sockets, as between
# two hosts.
#
#   1. 2, 3 and 4 NCCL ranks against 1 rank (one process on the GPU): the
#      job of check_gpu_train.sh part 2 (tables of 1..1000 rows, 0-3 ids per
#      feature, Zipf ids, global batch 48) for 20 steps in fp32 math, every
#      sharding type (hybrid: hot rows replicated, cold ones rw, compact) and
#      a mixed plan (2 ranks: both pipelines, and auto,
#      which must choose none: the ranks take turns on one GPU); per-step
#      losses, evaluations and the final weights within 1e-5 relative. Each
#      run's summary (rank 0's) must name the nccl backend and count no
#      allocation in the training loop after step 1.
#   2. NCCL against MPI at the same world size (2 ranks, --comm mpi), with
#      fp32 and with bf16 wires (--comm-dtype, --dense-comm-dtype): the same
#      results within 1e-5, and the same collectives and bytes per step
#      (--pipeline auto: none for NCCL, sparse-dist for MPI; hybrid: none for
#      both, since its hot sets are sized on the pipeline, and the same ones).
#   3. The NCCL backend at world size 1 (mpirun -np 1 --comm nccl) gives the
#      bits of one process: metrics and saved weights identical.
#   4. The deadline: a SIGSTOPped NCCL rank ends every rank within the
#      deadline plus 15 s, and a survivor names it (check_mpi_stuck.sh's
#      training cases with --comm nccl).
#   5. The trace of 2 NCCL ranks (--trace): every rank has a track "device
#      nccl" whose spans are its collectives as the GPU ran them, named by
#      the stage that issued them, on the 'input', 'sparse' and 'dense'
#      communicators, each inside the traced steps' time.
#
# Stops with exit status 1 when no GPU is visible, the build lacks NCCL, or
# mpirun is missing. PARTS="1 2" picks parts, SHARDINGS and SHARDINGS2 the
# plans of parts 1 and 2; KEEP_TMP=1 keeps the logs.
sr_threads=keep
. "$(dirname "$0")/../lib.sh"
bin=${SHARDREC:-$sr_shardrec}
rtol=${EQUIV_RTOL:-1e-5}
parts=${PARTS:-1 2 3 4 5}
sh "$sr_tests/gpu/require_gpu.sh" check_nccl_train || exit 1
sr_need_built "$bin"
command -v mpirun >/dev/null 2>&1 || { echo "check_nccl_train: FAIL: mpirun not found"; exit 1; }
sr_timeout=300 sr_btl=tcp,self,vader
# ranks sharing one GPU as separate hosts: NCCL's socket transport on loopback
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
export NCCL_NVLS_ENABLE=0
fail=0
JOB="--device cuda --math fp32 --table-rows 1,7,50,333,1000,5 --embedding-dim 8
     --bot-mlp 13-16-8 --top-mlp 16-1 --ids-per-feature 0-3 --id-dist zipf:1.05
     --global-batch-size 48 --steps 20 --optimizer sgd --lr 0.05 --emb-optimizer adagrad
     --eval-samples 200 --eval-every 10 --log-every 1 --no-progress"

compare() {
    python3 "$sr_tests/gpu/compare.py" "$@"
}

# name np [flags...]: a training run of $JOB on np ranks (np 0: one process,
# no mpirun) into $tmp/name.{jsonl,st,log}; 1 when it failed.
run() {
    name=$1 np=$2
    shift 2
    if [ "$np" = 0 ]; then
        # shellcheck disable=SC2086
        "$bin" train $JOB "$@" --metrics "$tmp/$name.jsonl" --save-weights "$tmp/$name.st" \
            >"$tmp/$name.log" 2>&1
    else
        # shellcheck disable=SC2086
        sr_mpirun "$np" "$bin" train $JOB "$@" --metrics "$tmp/$name.jsonl" \
            --save-weights "$tmp/$name.st" >"$tmp/$name.log" 2>&1
    fi || {
        tail -20 "$tmp/$name.log"
        echo "FAIL $name: the run failed"
        fail=1
        return 1
    }
}

# name backend: the run's summary names the backend it ran on
check_backend() {
    grep -q "^steps [0-9]*, [0-9]* ranks ($2)" "$tmp/$1.log" || {
        echo "FAIL $1: the summary does not name the $2 backend:"
        grep -m1 "^steps [0-9]*, " "$tmp/$1.log"
        fail=1
        return 1
    }
}

# name: the summary (rank 0's) says the training loop allocated nothing after
# step 1 (NCCL's work items and buffers are made before, or reused)
check_allocs() {
    lines=$(grep "^allocations in the training loop after step 1: " "$tmp/$1.log")
    if [ -z "$lines" ] || echo "$lines" | grep -qv ": 0$"; then
        echo "FAIL $1: allocations after step 1:"
        echo "${lines:-(no summary line)}"
        fail=1
        return 1
    fi
}

# label A B: compare two runs (metrics and weights)
judge() {
    if out=$(compare "$tmp/$2.jsonl" "$tmp/$3.jsonl" "$rtol" 20 "$tmp/$2.st" "$tmp/$3.st"); then
        echo "ok   $1 (rtol $rtol): $out"
    else
        echo "FAIL $1 (rtol $rtol): $out"
        fail=1
    fi
}

part1() {
    run np1 0 || return
    for np in 2 3 4; do
        sr_mixed_plan "$np" 1 >"$tmp/plan$np.json"
        pipes=sparse-dist
        [ "$np" = 2 ] && pipes="sparse-dist none auto"
        for c in ${SHARDINGS:-dp tw rw cw twrw mixed hybrid}; do
            if [ "$c" = mixed ]; then
                set -- --plan "$tmp/plan$np.json"
            else
                set -- --sharding "$c"
            fi
            for p in $pipes; do
                name=nccl$np-$c-$p
                run "$name" "$np" "$@" --pipeline "$p" --comm nccl --ranks-per-node 1 || continue
                check_backend "$name" nccl || continue
                check_allocs "$name"
                if [ "$p" = auto ] && ! grep -q "pipeline auto: none, since NCCL ranks 0 and 1 take turns on one GPU" "$tmp/$name.log"; then
                    echo "FAIL $name: --pipeline auto did not choose none for ranks sharing the GPU"
                    fail=1
                fi
                judge "$np NCCL ranks vs 1 rank, $c, --pipeline $p" np1 "$name"
            done
        done
    done
}

# the collectives and bytes lines of a run's summary
comm_lines() {
    grep "^collectives per step\|^bytes sent per step" "$tmp/$1.log" | sed 's/; communication.*//'
}

# the hot sets --sharding hybrid sized (rank 0's log)
hot_sets() {
    grep "^plan: all hybrid, hot sets" "$tmp/$1.log"
}

part2() {
    sr_mixed_plan 2 1 >"$tmp/plan2.json"
    for wire in fp32 bf16; do
        for c in ${SHARDINGS2:-rw mixed hybrid}; do
            if [ "$c" = mixed ]; then
                set -- --plan "$tmp/plan2.json"
            else
                set -- --sharding "$c"
            fi
            set -- "$@" --ranks-per-node 1 --comm-dtype $wire --dense-comm-dtype $wire
            # auto takes none for NCCL ranks sharing the GPU and sparse-dist for MPI's (so
            # the others compare the two pipelines too), but hybrid's hot sets are sized
            # by cost on the pipeline: one for both, or the plans may differ
            [ "$c" = hybrid ] && set -- "$@" --pipeline none
            run "m-$wire-$c" 2 "$@" --comm mpi || continue
            run "n-$wire-$c" 2 "$@" --comm nccl || continue
            check_backend "n-$wire-$c" nccl || continue
            hm=$(hot_sets "m-$wire-$c") hn=$(hot_sets "n-$wire-$c")
            if [ "$c" = hybrid ] && { [ -z "$hm" ] || [ "$hm" != "$hn" ]; }; then
                echo "FAIL NCCL vs MPI, hybrid, $wire wires: the hot sets differ (or are not named)"
                printf '%s\n%s\n' "$hm" "$hn"
                fail=1
            fi
            judge "NCCL vs MPI, 2 ranks, $c, $wire wires" "m-$wire-$c" "n-$wire-$c"
            if [ "$(comm_lines "m-$wire-$c")" = "$(comm_lines "n-$wire-$c")" ]; then
                echo "ok   NCCL vs MPI, $c, $wire wires: the same collectives and bytes per step"
                comm_lines "n-$wire-$c" | sed 's/^/     /'
            else
                echo "FAIL NCCL vs MPI, $c, $wire wires: collectives or bytes per step differ"
                comm_lines "m-$wire-$c"
                comm_lines "n-$wire-$c"
                fail=1
            fi
        done
    done
}

part3() {
    [ -f "$tmp/np1.jsonl" ] || run np1 0 || return
    run nccl1 1 --comm nccl || return
    check_backend nccl1 nccl || return
    grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$tmp/np1.jsonl" >"$tmp/a1"
    grep -o '"\(step\|loss\|eval_auc\|eval_logloss\)": *[^,}]*' "$tmp/nccl1.jsonl" >"$tmp/b1"
    if cmp -s "$tmp/a1" "$tmp/b1" && cmp -s "$tmp/np1.st" "$tmp/nccl1.st"; then
        echo "ok   NCCL at world size 1: losses, evaluations and weights identical to one process"
    else
        echo "FAIL NCCL at world size 1 differs from one process"
        diff "$tmp/a1" "$tmp/b1" | head -4
        fail=1
    fi
}

part4() {
    STUCK_FLAGS="--device cuda --comm nccl --ranks-per-node 1" \
        STUCK_CASES="stop2_last stop3_middle stop4_first" sh "$sr_tests/check_mpi_stuck.sh" ||
        fail=1
}

part5() {
    run trace2 2 --sharding rw --comm nccl --ranks-per-node 1 --trace "$tmp/trace2.json" \
        --trace-steps 5:8 ||
        return
    if out=$(python3 - "$tmp/trace2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
          if e["ph"] == "M" and e["name"] == "thread_name"}
spans = [e for e in ev if e["ph"] == "X"]
bad, counts = [], []
for r in (0, 1):
    dev = [e for e in spans if e["pid"] == r and tracks.get((r, e["tid"])) == "device nccl"]
    steps = [e for e in spans if e["pid"] == r and e["name"] == "step"]
    if not dev or not steps:
        bad.append("rank %d: %d device nccl spans, %d step spans" % (r, len(dev), len(steps)))
        continue
    lo = min(float(e["ts"]) for e in steps) - 1e6
    hi = max(float(e["ts"]) + float(e["dur"]) for e in steps) + 1e6
    comms = set(e["args"].get("comm") for e in dev)
    if not {"input", "sparse", "dense"} <= comms:
        bad.append("rank %d: device spans on communicators %s" % (r, sorted(comms)))
    outside = [e for e in dev if not lo <= float(e["ts"]) <= hi or float(e["dur"]) < 0]
    if outside:
        bad.append("rank %d: %d device spans outside the traced steps' time" % (r, len(outside)))
    counts.append("rank %d: %d spans (%s)" % (r, len(dev), ", ".join(sorted(set(e["name"] for e in dev)))))
print("; ".join(bad or counts))
sys.exit(1 if bad else 0)
PY
    ); then
        echo "ok   trace of 2 NCCL ranks: device nccl spans: $out"
    else
        echo "FAIL trace of 2 NCCL ranks: $out"
        fail=1
    fi
}

for p in $parts; do
    part$p
done
exit $fail
