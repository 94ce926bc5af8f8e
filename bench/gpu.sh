#!/usr/bin/env bash
# shardrec on one GPU (issue: CUDA backend), in stages of a few minutes each,
# ending in one printed table. Run from the repository root on the GPU
# machine:
#
#   bench/gpu.sh [STAGE...]     stages: setup test test-ops test-train test-nccl test-torch ceil ops ops16 k m ckpt d dd ab peers nvlink halves twonode
#                               (default: setup test ceil ops k m d)
#
#   setup  unpack the Debian packages in .debs/ the GPU image lacks (cJSON,
#          cmocka) and build (make all tests bench, BUILD=build-gpu)
#   test   make test-gpu (backend ops against the CPU, GPU-vs-CPU training,
#          2 ranks against 1 on the GPU, the PyTorch check): about 10 minutes
#          on an H200, so a call holds it alone; or its parts, one a stage:
#          test-ops, test-train, test-nccl, test-torch (each its time)
#   ceil   the ceilings: a large device copy, a large GEMM per math mode
#          (CEIL_FLAGS=--wgrad: also D's weight-gradient GEMMs per operand
#          layout, seconds more)
#   ops    the embedding op benchmark (bench/emb_ops) on uniform and Zipf ids,
#          then a sweep of the CUDA backward's hot-row split on Zipf ids
#          (SR_EMB_RUN_SPLIT=L, L in 16..256; cases d128 and d16; a row
#          "split L<L> <case> <op>  <ms>" each)
#   ops16  emb_ops with bf16 tables (--emb-dtype bf16, stochastic rounding) on
#          uniform and Zipf ids: the 16-bit kernels' time; bytes are the least
#          the op moves at 2 bytes a weight
#   k      workload K (BENCH.md): batch 2048 fp32 and tf32 SGD, batch 16384
#   m      workload M: batch 16384, fp32 SGD, fp32 row-wise Adagrad, tf32 SGD
#   ckpt   workload M's 13.3 GB of tables checkpointed while training: the run
#          without checkpoints (CK_BASE=0: not run), then with a checkpoint
#          every CK_EVERY steps (default STEPS_CK/3; STEPS_CK default 1500)
#          in each of CKPT_MODES (default "overlap sync"); each checkpoint's
#          stall, copy to pinned host memory and write (CKPT_DIR, default
#          /tmp/ck-m)
#   d      workload D's tables (dot interaction, not DCNv2): batch 16384, tf32,
#          row-wise Adagrad, 1-16 ids per feature
#   dd     workload D itself (--workload D: DCNv2, BENCH.md's ids per feature),
#          math $MATH (tf32 by default), tables in $EMB_DTYPE (fp32 by default;
#          bf16: 16-bit tables)
#   ab     the tree against AB_BASE (a revision: built from `git archive` into
#          $LOGDIR/ab-REV, kept there for the next call; or from AB_SRC, a
#          folder of its sources made where the revision exists, as
#          `git archive REV | tar -x -C DIR`, when this copy of .git lacks
#          it; AB_BASE still names it, and its build is kept by that name):
#          K, M (SGD, row-wise Adagrad, tf32) and D's tables, each on uniform
#          and $ZIPF ids, the base and the tree in turn AB_REPEAT times
#          (default 2), then a row "tree / base" of their mean ms per step.
#          For a change to a kernel: the op alone (ops) can gain while the
#          steps lose
#   peers  the PyTorch DLRM reference (.peers/dlrm/dlrm_s_pytorch.py) and
#          TorchRec (torchrec_gpu.py from .peers/, shared/peers/ or
#          ../shared/peers/; wheels from $PEER_WHL, else /tmp/whl as
#          bench/peer_wheel_piece.sh leaves it), when present. TorchRec's runs
#          are $TORCHREC_RUNS (';'-separated runner flags; default K, M,
#          M --tf32, M --emb-opt rowwise_adagrad, each with --id-dist uniform
#          and --id-dist $ZIPF; set it to a few runs a call to stay within
#          the device tool's 10 minutes)
#   nvlink weak scaling over a node's GPUs (2 or more): M and K on 1 GPU and
#          on 2, 4, ... all, per-GPU efficiency, TorchRec on 1 and all (see
#          the stage; not run on one GPU unless NVLINK_DRY=1)
#   halves the GPUs (4 or more) as two emulated nodes of half each, sockets
#          between the halves, NVLink inside: the link, M and K under
#          all-TW, all-RW and the planner's plan with the link bound, one
#          node of half the GPUs beside, TorchRec the same (HALVES_DRY=1 on
#          one GPU tries it)
#   twonode  the TorchRec user's two nodes, emulated on the one GPU: 2 NCCL
#          ranks, each its own node (--ranks-per-node 1, NCCL's socket
#          transport on loopback). First the link, measured by `shardrec
#          bench comm`; then workloads M (batch 16384 per rank) and K (2048)
#          in fp32 math on uniform and $ZIPF ids, each row with the bytes
#          that crossed the link per step and rank, the link bound (those
#          bytes over the measured bandwidth) and the exposed communication;
#          runs are $TWONODE_RUNS (';'-separated "WORKLOAD PIPELINE WIRE",
#          default: M with bf16 and fp32 wires, K with fp32, each with
#          --pipeline auto (which runs none here: the ranks share the GPU),
#          and M bf16 and K also with sparse-dist); then TorchRec the same way
#          ($TWONODE_PEERS: ';'-separated runner flags, default M and K on
#          both id distributions) when its wheels are there (see peers)
#
# Timing (as the peer's runner): a pool of 8 batches made before timing
# (--batch-pool 8) and copied to the device every step, CUDA graphs as by
# default (on; one uniform run each of K and M without them), steady-state
# steps timed as one block after warm-up ("steady state" in the summary).
# Ids: every run of k, m and d once on uniform ids and once on $ZIPF (default
# zipf:1.05; rows labelled "zipf"). Logs go to $LOGDIR (default
# /tmp/bench-gpu); the table to stdout and, with every log in one archive, to
# $OUT when set (the device tool brings back at most 8 files). Environment:
# STEPS_K (default 400), STEPS_M (120), STEPS_D (40), ZIPF (zipf:1.05).
set -uo pipefail
OUTDIR=${LOGDIR:-/tmp/bench-gpu}
mkdir -p "$OUTDIR"
BUILD=${BUILD:-build-gpu}
SR=$BUILD/shardrec
STEPS_K=${STEPS_K:-400}
STEPS_M=${STEPS_M:-120}
STEPS_D=${STEPS_D:-40}
ZIPF=${ZIPF:-zipf:1.05}
export NCCL_NVLS_ENABLE=0
TABLE=$OUTDIR/table.txt
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(setup test ceil ops k m d)

row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$TABLE"; }

K_ROWS=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
K_FLAGS="--table-rows $K_ROWS --embedding-dim 16 --bot-mlp 13-512-256-64-16 --top-mlp 512-256-1"
M_ROWS=$(printf '1000000,%.0s' $(seq 26)); M_ROWS=${M_ROWS%,}
M_FLAGS="--table-rows $M_ROWS --embedding-dim 128 --bot-mlp 13-512-256-128 --top-mlp 1024-1024-512-256-1 --ids-per-feature 20"
D_ROWS=40000000,39060,17295,7424,20265,3,7122,1543,63,40000000,3067956,405282,10,2209,11938,155,4,976,14,40000000,40000000,40000000,590152,12973,108,36
D_FLAGS="--table-rows $D_ROWS --embedding-dim 128 --bot-mlp 13-512-256-128 --top-mlp 1024-1024-512-256-1 --ids-per-feature 1-16"
COMMON="--device cuda --optimizer sgd --lr 0.1 --batch-pool 8 --eval-samples 0 --eval-every 0 --no-progress"

# One training run: id distribution (uniform or $ZIPF; the label gains
# " zipf" for the latter), label, steps, flags. Prints its steady-state line.
# TRAIN_TIMEOUT (seconds; default 300, 540 in stage d) bounds it.
train() {
    local dist=$1 label=$2 steps=$3; shift 3
    [ "$dist" = uniform ] || label="$label zipf"
    local log=$OUTDIR/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log
    timeout "${TRAIN_TIMEOUT:-300}" ${LAUNCH:-} "$SR" train $COMMON --id-dist "$dist" --steps "$steps" \
        --log-every "$steps" "$@" >"$log" 2>&1
    local rc=$?
    local line; line=$(grep '^steady state' "$log" | head -1)
    last_ms=
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        row "$label" "FAILED (rc $rc; $(tail -1 "$log"))"
        return
    fi
    local ms sps
    ms=$(echo "$line" | sed -E 's/.* ([0-9.]+) ms per step.*/\1/')
    last_ms=$ms
    sps=$(echo "$line" | sed -E 's/.*step, ([0-9]+) samples.*/\1/')
    row "$label" "$(printf '%8.3f ms/step %12s samples/s' "$ms" "$sps")"
    [ -z "${LINK_GB_S:-}" ] && return
    # bytes sent per step: intra-node X KiB, inter-node Y KiB; communication E ms exposed of B ms busy
    echo "$(grep '^bytes sent per step' "$log" | head -1)" | awk -v bw="$LINK_GB_S" -v ms="$ms" '{
        for (i = 1; i <= NF; i++) {
            if ($i == "inter-node") inter = $(i + 1)
            if ($i == "exposed") exposed = $(i - 2)
        }
        bound = inter * 1024 / (bw * 1e9) * 1e3
        printf "%-44s %8.1f MB across the link/step/rank, link bound %.1f ms (step %.2fx it), exposed comm %s ms\n",
            "  link", inter * 1024 / 1e6, bound, (bound > 0 ? ms / bound : 0), exposed }' | tee -a "$TABLE"
}

# Steps and flags of workload W (M or K) at its batch per GPU, into the array wl.
workload_run() {
    if [ "$1" = M ]; then
        wl=("$STEPS_M" $M_FLAGS --batch-size 16384)
    else
        wl=("$STEPS_K" $K_FLAGS --batch-size 2048)
    fi
}

# The same run on uniform ids, then on $ZIPF.
both() {
    train uniform "$@"
    train "$ZIPF" "$@"
}

# Stage ab: one run (id distribution, label, steps, flags) by the base
# ($AB_SR) and by the tree in turn, AB_REPEAT times, then the ratio of their
# mean ms per step (below 1: the tree is faster).
ab_run() {
    local dist=$1 label=$2; shift 2
    local i base=() tree=()
    for ((i = 0; i < ${AB_REPEAT:-2}; i++)); do
        SR=$AB_SR train "$dist" "$label [$AB_BASE]" "$@"
        base+=("$last_ms")
        SR=$BUILD/shardrec train "$dist" "$label [tree]" "$@"
        tree+=("$last_ms")
    done
    [ "$dist" = uniform ] || label="$label zipf"
    row "$label tree / base" "$(echo "${base[*]} | ${tree[*]}" | awk -F'|' '{
        nb = split($1, b, " "); nt = split($2, t, " "); sb = st = 0
        for (i = 1; i <= nb; i++) sb += b[i]
        for (i = 1; i <= nt; i++) st += t[i]
        if (nb == 0 || nt == 0 || sb == 0) print "no ratio (a run failed)"
        else printf "%8.3f (mean %.3f against %.3f ms/step)", (st / nt) / (sb / nb), st / nt, sb / nb }')"
}

# emb_ops on one id distribution: its case lines, shortened, and its table.
emb_ops_on() {
    local dist=$1 dtype=${2:-fp32}
    timeout 300 $BUILD/bench/emb_ops --device cuda --id-dist "$dist" --emb-dtype "$dtype" 2>&1 |
        tee "$OUTDIR/emb_ops_${dtype}_$(echo "$dist" | tr -c 'A-Za-z0-9_.-' '_').txt" |
        sed -nE -e "s/^case ([a-z0-9]+):.*per launch ([^;]*);.*/emb_ops $dist \1: \2/p" \
            -e '/^(copy|forward|backward)/p' | tee -a "$TABLE" ||
        row "emb_ops $dist" "FAILED (see $OUTDIR/emb_ops_*.txt)"
}

# The hot-row split sweep: emb_ops on $ZIPF ids, one row per (split, case, op).
split_sweep() {
    local L c
    for L in 16 32 64 128 256; do
        for c in d128 d16; do
            SR_EMB_RUN_SPLIT=$L timeout 300 $BUILD/bench/emb_ops --device cuda --id-dist "$ZIPF" \
                --case $c --reps 5 --warmup 2 --copy-mb 256 >"$OUTDIR/split_L${L}_$c.txt" 2>&1 ||
                { row "split L$L $c" "FAILED ($(tail -1 "$OUTDIR/split_L${L}_$c.txt"))"; continue; }
            awk -v L="$L" -v c="$c" '/^(forward|backward)/ {
                    op = substr($0, 1, 26); sub(/ +$/, "", op)
                    printf "split L%-3s %-4s %-24s %7.3f ms\n", L, c, op, $(NF - 5) }' \
                "$OUTDIR/split_L${L}_$c.txt" | tee -a "$TABLE"
        done
    done
}

# TorchRec's runner ($runner) and wheels installed into /tmp/site (once);
# else a row saying why not and status 1.
torchrec_ready() {
    [ -n "${TORCHREC_OK:-}" ] && return 0
    local whl=${PEER_WHL:-} r
    if [ -z "$whl" ] && ls /tmp/whl/fbgemm_gpu-*.whl >/dev/null 2>&1; then
        whl=/tmp/whl
    fi
    runner=
    for r in "${PEERS:-.peers}/torchrec_gpu.py" shared/peers/torchrec_gpu.py ../shared/peers/torchrec_gpu.py; do
        [ -f "$r" ] && { runner=$r; break; }
    done
    if [ -z "$runner" ]; then
        row "TorchRec" "not run (no torchrec_gpu.py in ${PEERS:-.peers}/ or shared/peers/)"
    elif [ ! -d "$whl" ]; then
        row "TorchRec" "not run (no wheels: PEER_WHL, or /tmp/whl from bench/peer_wheel_piece.sh)"
    elif ! python3 -m pip install -q --no-index --no-deps --target /tmp/site "$whl"/*.whl >"$OUTDIR/pip.log" 2>&1; then
        row "TorchRec" "not run (pip install from $whl failed: $(tail -1 "$OUTDIR/pip.log"))"
    else
        export PYTHONPATH=/tmp/site
        TORCHREC_OK=1
        return 0
    fi
    return 1
}

for st in "${stages[@]}"; do
    echo "== stage $st ($(date +%T))"
    case $st in
    setup)
        for f in .debs/*.deb; do dpkg -x "$f" / ; done; ldconfig
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUTDIR/gpu.txt"
        make -j16 BUILD=$BUILD all tests bench >"$OUTDIR/build.log" 2>&1 || { tail -30 "$OUTDIR/build.log"; exit 1; }
        # the device's copy of .git may be older than the tree it was sent
        # with: say when the tree differs from the HEAD it names
        rev=$(git rev-parse --short HEAD 2>/dev/null || echo tree)
        git diff --quiet HEAD -- 2>/dev/null || rev="$rev + changes: not that commit"
        row "build" "ok ($rev)"
        ;;
    test)
        timeout ${TEST_TIMEOUT:-480} make BUILD=$BUILD test-gpu >"$OUTDIR/test-gpu.log" 2>&1
        rc=$?
        grep -E "FAIL|PASS|ok|not ok" "$OUTDIR/test-gpu.log" | tail -40
        row "make test-gpu" "$([ $rc -eq 0 ] && echo passed || echo "FAILED rc $rc")"
        ;;
    test-ops | test-train | test-nccl | test-torch)
        # make test-gpu's parts one by one (the whole ran past 560 s on an
        # H200: more than one 10-minute call holds with the rest)
        case $st in
        test-ops) cmd=(env SR_TEST_DEVICE=cuda SR_TEST_BIG=1 "$BUILD/tests/test_backend_ops") ;;
        test-train) cmd=(env BUILD="$BUILD" sh tests/gpu/check_gpu_train.sh) ;;
        test-nccl) cmd=(env BUILD="$BUILD" sh tests/gpu/check_nccl_train.sh) ;;
        test-torch) cmd=(env BUILD="$BUILD" sh tests/gpu/check_gpu_torch.sh) ;;
        esac
        sh tests/gpu/require_gpu.sh "$st" || { row "$st" "FAILED (no GPU)"; continue; }
        t0=$(date +%s)
        timeout ${TEST_TIMEOUT:-480} "${cmd[@]}" >"$OUTDIR/$st.log" 2>&1
        rc=$?
        grep -E "FAIL|ok  |PASSED" "$OUTDIR/$st.log" | tail -20
        row "$st" "$([ $rc -eq 0 ] && echo passed || echo "FAILED rc $rc") in $(($(date +%s) - t0)) s"
        ;;
    ceil)
        $BUILD/bench/ceilings --device cuda ${CEIL_FLAGS:-} 2>&1 | tee "$OUTDIR/ceilings.txt" | while read -r l; do row "${l:0:44}" "${l:44}"; done
        ;;
    ops)
        emb_ops_on uniform
        emb_ops_on "$ZIPF"
        split_sweep
        ;;
    ops16)
        emb_ops_on uniform bf16
        emb_ops_on "$ZIPF" bf16
        ;;
    k)
        both "K b2048 fp32 sgd" "$STEPS_K" $K_FLAGS --emb-optimizer sgd --batch-size 2048
        train uniform "K b2048 fp32 sgd no graphs" "$STEPS_K" $K_FLAGS --emb-optimizer sgd --batch-size 2048 --no-cuda-graphs
        both "K b2048 tf32 sgd" "$STEPS_K" $K_FLAGS --emb-optimizer sgd --batch-size 2048 --math tf32
        both "K b16384 fp32 sgd" "$STEPS_K" $K_FLAGS --emb-optimizer sgd --batch-size 16384
        ;;
    ckpt)
        # workload M's tables (26 x 1M x 128 fp32: 13.3 GB) checkpointed while
        # training in each of $CKPT_MODES (default: overlapped, the default on
        # a GPU, and sync), beside the same run without checkpoints (CK_BASE=0
        # leaves it out); a checkpoint every $CK_EVERY steps (default
        # STEPS_CK/3), the last at the run's end (which waits for its write);
        # on $CKPT_DIR's disk. A mid-run checkpoint stalls training only by its
        # copy when its write ends within CK_EVERY steps.
        local_dir=${CKPT_DIR:-/tmp/ck-m}
        steps_ck=${STEPS_CK:-1500}
        every=${CK_EVERY:-$((steps_ck / 3))}
        [ "${CK_BASE:-1}" = 0 ] ||
            train uniform "M b16384 fp32 sgd, no checkpoints" "$steps_ck" $M_FLAGS --emb-optimizer sgd --batch-size 16384
        for mode in ${CKPT_MODES:-overlap sync}; do
            rm -rf "$local_dir"
            label="M b16384 fp32 sgd, checkpoints $mode"
            train uniform "$label" "$steps_ck" $M_FLAGS --emb-optimizer sgd --batch-size 16384 \
                --checkpoint-dir "$local_dir" --checkpoint-every $every --checkpoint-keep 1 --checkpoint-write $mode
            log=$OUTDIR/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log
            grep -E '^(checkpoint step|checkpoints:)' "$log" | sed "s/^/  $mode: /" | tee -a "$TABLE"
        done
        rm -rf "$local_dir"
        ;;
    m)
        both "M b16384 fp32 sgd" "$STEPS_M" $M_FLAGS --emb-optimizer sgd --batch-size 16384
        both "M b16384 fp32 rowwise_adagrad" "$STEPS_M" $M_FLAGS --emb-optimizer rowwise_adagrad --emb-lr 0.01 --batch-size 16384
        both "M b16384 tf32 sgd" "$STEPS_M" $M_FLAGS --emb-optimizer sgd --batch-size 16384 --math tf32
        train uniform "M b16384 tf32 sgd no graphs" "$STEPS_M" $M_FLAGS --emb-optimizer sgd --batch-size 16384 --math tf32 --no-cuda-graphs
        ;;
    d)
        TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-540} both "D b16384 tf32 rowwise_adagrad" "$STEPS_D" $D_FLAGS \
            --math tf32 --emb-optimizer rowwise_adagrad --emb-lr 0.01 --batch-size 16384
        ;;
    dd)
        # workload D as BENCH.md has it (--workload D: DCNv2, 214 ids a sample,
        # row-wise Adagrad), tf32, on uniform and Zipf ids; tables in
        # $EMB_DTYPE (default fp32; bf16 halves their bytes)
        # (the preset's optimizers: COMMON without its --optimizer and --lr)
        COMMON="--device cuda --batch-pool 8 --eval-samples 0 --eval-every 0 --no-progress" \
            TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-540} both "D dcn b16384 ${MATH:-tf32} ${EMB_DTYPE:-fp32} tables" \
            "$STEPS_D" --workload D --math "${MATH:-tf32}" --emb-dtype "${EMB_DTYPE:-fp32}"
        ;;
    ab)
        [ -n "${AB_BASE:-}" ] || { row "ab" "not run (AB_BASE=<revision> names the base)"; continue; }
        ab_dir=$OUTDIR/ab-$AB_BASE
        if [ ! -x "$ab_dir/$BUILD/shardrec" ]; then
            rm -rf "$ab_dir" && mkdir -p "$ab_dir"
            if [ -n "${AB_SRC:-}" ]; then # AB_BASE's sources, carried: this .git may lack it
                ab_fetch() {
                    cp -r "$AB_SRC"/. "$ab_dir"/ 2>>"$OUTDIR/ab-build.log" &&
                        rm -rf "${ab_dir:?}/$BUILD" # built from the sources, as git archive's
                }
            else
                ab_fetch() { git archive "$AB_BASE" | tar -x -C "$ab_dir"; }
            fi
            if ! { ab_fetch &&
                make -C "$ab_dir" -j16 BUILD="$BUILD" "$BUILD/shardrec" >"$OUTDIR/ab-build.log" 2>&1; }; then
                row "ab" "FAILED (the base $AB_BASE did not build: $OUTDIR/ab-build.log)"
                rm -rf "$ab_dir"
                continue
            fi
        fi
        AB_SR=$ab_dir/$BUILD/shardrec
        for dist in uniform "$ZIPF"; do
            ab_run "$dist" "K b2048 fp32 sgd" "$STEPS_K" $K_FLAGS --emb-optimizer sgd --batch-size 2048
            ab_run "$dist" "M b16384 fp32 sgd" "$STEPS_M" $M_FLAGS --emb-optimizer sgd --batch-size 16384
            ab_run "$dist" "M b16384 fp32 rowwise_adagrad" "$STEPS_M" $M_FLAGS \
                --emb-optimizer rowwise_adagrad --emb-lr 0.01 --batch-size 16384
            ab_run "$dist" "M b16384 tf32 sgd" "$STEPS_M" $M_FLAGS --emb-optimizer sgd --batch-size 16384 \
                --math tf32
            TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-540} ab_run "$dist" "D b16384 tf32 rowwise_adagrad" "$STEPS_D" \
                $D_FLAGS --math tf32 --emb-optimizer rowwise_adagrad --emb-lr 0.01 --batch-size 16384
        done
        ;;
    peers)
        PEERS=${PEERS:-.peers}
        if [ -f "$PEERS/dlrm/dlrm_s_pytorch.py" ]; then
            ref() { # label batches batch args...
                local label=$1 n=$2 b=$3; shift 3
                local log=$OUTDIR/ref_$(echo "$label" | tr -c 'A-Za-z0-9' '_').log
                (cd "$PEERS/dlrm" && timeout 400 python3 dlrm_s_pytorch.py --use-gpu \
                    --arch-interaction-op=dot --data-generation=random \
                    --num-indices-per-lookup-fixed=True --loss-function=bce --round-targets=True \
                    --optimizer=sgd --learning-rate=0.1 --mini-batch-size="$b" \
                    --num-batches="$n" --nepochs=1 --print-freq=1 --print-time "$@") >"$log" 2>&1
                local ms
                ms=$(grep -o '[0-9.]* ms/it' "$log" | awk -v w=3 'NR>w {s+=$1; n++} END {if (n) printf "%.3f", s/n}')
                if [ -n "$ms" ]; then
                    row "DLRM reference $label" "$(awk -v ms="$ms" -v b="$b" 'BEGIN {printf "%8.3f ms/step %12.0f samples/s", ms, b * 1000 / ms}')"
                else
                    row "DLRM reference $label" "FAILED ($(tail -1 "$log"))"
                fi
            }
            ref "K b2048 fp32 sgd" 20 2048 --arch-sparse-feature-size=16 \
                --arch-embedding-size=$(echo $K_ROWS | tr , -) --arch-mlp-bot=13-512-256-64-16 \
                --arch-mlp-top=512-256-1 --num-indices-per-lookup=1
            ref "M b16384 fp32 sgd" 8 16384 --arch-sparse-feature-size=128 \
                --arch-embedding-size=$(echo $M_ROWS | tr , -) --arch-mlp-bot=13-512-256-128 \
                --arch-mlp-top=1024-1024-512-256-1 --num-indices-per-lookup=20
        else
            row "DLRM reference" "not run (no $PEERS/dlrm)"
        fi
        if torchrec_ready; then
            default_runs=
            for w in "K" "M" "M --tf32" "M --emb-opt rowwise_adagrad"; do
                default_runs+="$w --id-dist uniform;$w --id-dist $ZIPF;"
            done
            IFS=';' read -r -a runs <<<"${TORCHREC_RUNS:-${default_runs%;}}"
            for w in "${runs[@]}"; do
                l=$(timeout 400 torchrun --nproc_per_node 1 "$runner" --workload $w 2>&1 | tail -1)
                row "TorchRec $w" "$l"
            done
        fi
        ;;
    nvlink)
        # weak scaling over one node's GPUs (NCCL over NVLink; NVLS off), fp32
        # math, SGD: each run on 1 GPU, then on all NG GPUs (mpirun, a rank a
        # GPU, --comm nccl, the batch per GPU kept); per-GPU efficiency = the
        # NG-GPU samples/s over NG x the 1-GPU run's, both from this call.
        # Runs: $NVLINK_RUNS (';'-separated "WORKLOAD DIST", default M uniform,
        # M $ZIPF, K uniform); then TorchRec the same way (torchrun, 1 and NG
        # processes) when its wheels are there. With one GPU it is not run,
        # unless NVLINK_DRY=1: then 2 ranks share the GPU as two emulated
        # nodes (NCCL's socket transport), to try the stage, not to measure.
        ng=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        nv_env=()
        if [ "$ng" -lt 2 ]; then
            if [ "${NVLINK_DRY:-0}" != 1 ]; then
                row "nvlink" "not run: $ng GPU visible (needs 2 or more; NVLINK_DRY=1 tries it on one)"
                continue
            fi
            ng=2 nv_env=(--ranks-per-node 1)
            export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
        fi
        IFS=';' read -r -a nv <<<"${NVLINK_RUNS:-M uniform;M $ZIPF;K uniform}"
        for r in "${nv[@]}"; do
            read -r w dist <<<"$r"
            workload_run "$w"
            set -- "${wl[@]}"
            train "$dist" "$w b/gpu fp32 sgd, 1 GPU" "$@" --emb-optimizer sgd
            one=$(tail -1 "$TABLE" | awk '$NF == "samples/s" { print $(NF - 1) }')
            for ((n = 2; n <= ng; n *= 2)); do # 2, 4, 8, ... GPUs
                LAUNCH="mpirun --allow-run-as-root --bind-to none -np $n" train "$dist" \
                    "$w b/gpu fp32 sgd, $n GPUs" "$@" --emb-optimizer sgd --comm nccl "${nv_env[@]}"
                all=$(tail -1 "$TABLE" | awk '$NF == "samples/s" { print $(NF - 1) }')
                [ -n "$one" ] && [ -n "$all" ] &&
                    row "  per-GPU efficiency" "$(awk -v a="$all" -v o="$one" -v n="$n" 'BEGIN { printf "%.1f%%", 100 * a / (n * o) }')"
            done
        done
        if torchrec_ready; then
            for r in "${nv[@]}"; do
                read -r w dist <<<"$r"
                # (a dry run on one GPU: TorchRec's 1-GPU runs only; its ranks
                # on one GPU need the twonode stage's distinct host ids)
                for n in 1 $([ ${#nv_env[@]} -eq 0 ] && echo "$ng"); do # 1 GPU and all
                    l=$(timeout 400 torchrun --nproc_per_node "$n" "$runner" --workload "$w" \
                        --id-dist "$dist" 2>&1 | tail -1)
                    row "TorchRec $w $dist, $n GPU(s)" "$l"
                done
            done
        fi
        unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
        ;;
    halves)
        # the TorchRec user's topology in miniature: NG GPUs (4 or more, even)
        # as two emulated nodes of NG/2 ranks (--ranks-per-node NG/2: each
        # half claims its own NCCL host id), so NCCL keeps NVLink inside a
        # half and takes its socket transport on loopback between them
        # (NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo). First the link (`bench
        # comm` in the same layout); then M (uniform, $ZIPF) and K (uniform)
        # under all-TW, all-RW and the planner's plan (--topology the
        # measured link), each row with its link bound; then one node of
        # NG/2 GPUs, the same runs, for "within 1.25x of max(one node's
        # step, the link bound)"; then TorchRec on the same 2 x NG/2 layout.
        # HALVES_DRY=1 on one GPU: 2 ranks as 2 nodes of 1 (socket transport
        # between them), to try the stage, not to measure.
        ng=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
        hv_env=(NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo)
        if [ "$ng" -lt 4 ] || [ $((ng % 2)) -ne 0 ]; then
            if [ "${HALVES_DRY:-0}" != 1 ]; then
                row "halves" "not run: $ng GPU(s) visible (needs an even 4 or more; HALVES_DRY=1 tries it on one)"
                continue
            fi
            ng=2 hv_env+=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
        fi
        half=$((ng / 2))
        MPIRUN="env ${hv_env[*]} mpirun --allow-run-as-root --bind-to none -np $ng"
        timeout 300 $MPIRUN "$SR" bench comm --ranks-per-node $half --comm nccl --device cuda \
            --out "$OUTDIR/link_halves.json" >"$OUTDIR/bench_comm_halves.txt" 2>&1 ||
            row "bench comm ($ng ranks, 2 nodes)" "FAILED ($(tail -1 "$OUTDIR/bench_comm_halves.txt"))"
        LINK_GB_S=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["links"]; print(min(v["bandwidth_gb_s"] for v in l.values()))' "$OUTDIR/link_halves.json" 2>/dev/null)
        row "link between the halves (bench comm)" "${LINK_GB_S:-unknown} GB/s"
        IFS=';' read -r -a hr <<<"${HALVES_RUNS:-M uniform;M $ZIPF;K uniform}"
        for r in "${hr[@]}"; do
            read -r w dist <<<"$r"
            workload_run "$w"
            set -- "${wl[@]}"
            for plan in tw rw planner; do
                pf=(--sharding "$plan")
                [ "$plan" = planner ] && pf=(--topology "$OUTDIR/link_halves.json")
                LAUNCH=$MPIRUN train "$dist" "2 x $half GPUs $w b/gpu fp32 $plan" "$@" \
                    --emb-optimizer sgd --comm nccl --ranks-per-node $half "${pf[@]}"
            done
            LINK_GB_S= LAUNCH="env ${hv_env[*]} mpirun --allow-run-as-root --bind-to none -np $half" \
                train "$dist" "1 x $half GPUs $w b/gpu fp32 (one node)" "$@" --emb-optimizer sgd \
                --comm nccl
        done
        LINK_GB_S=
        if torchrec_ready; then
            for r in "${hr[@]}"; do
                read -r w dist <<<"$r"
                for ((k = 0; k < ng; k++)); do
                    env "${hv_env[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=29612 RANK=$k \
                        WORLD_SIZE=$ng LOCAL_RANK=$((ng > 2 ? k % half : 0)) LOCAL_WORLD_SIZE=$half \
                        NCCL_HOSTID=half$((k / half)) timeout 400 python3 "$runner" --workload "$w" \
                        --id-dist "$dist" --ranks-per-gpu $((ng > 2 ? 1 : 2)) --steps 40 --warmup 10 \
                        >"$OUTDIR/trh_$k.log" 2>&1 &
                done
                wait
                row "TorchRec 2 x $half GPUs $w $dist" "$(tail -1 "$OUTDIR/trh_0.log")"
            done
        fi
        ;;
    twonode)
        export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
        MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
        timeout 300 $MPIRUN "$SR" bench comm --ranks-per-node 1 --comm nccl --device cuda \
            --out "$OUTDIR/link.json" >"$OUTDIR/bench_comm.txt" 2>&1 ||
            row "bench comm (2 ranks, 2 nodes)" "FAILED ($(tail -1 "$OUTDIR/bench_comm.txt"))"
        cat "$OUTDIR/bench_comm.txt"
        LINK_GB_S=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["links"]; print(list(l.values())[0]["bandwidth_gb_s"])' "$OUTDIR/link.json" 2>/dev/null)
        row "link (bench comm, all-to-all busbw)" "${LINK_GB_S:-unknown} GB/s"
        IFS=';' read -r -a tn <<<"${TWONODE_RUNS:-M auto bf16;M sparse-dist bf16;M auto fp32;K auto fp32;K sparse-dist fp32}"
        for r in "${tn[@]}"; do
            read -r w pipe wire <<<"$r"
            workload_run "$w"
            set -- "${wl[@]}"
            LAUNCH=$MPIRUN both "2 nodes $w b/rank fp32 $pipe $wire" "$@" --emb-optimizer sgd \
                --comm nccl --ranks-per-node 1 --pipeline "$pipe" --comm-dtype "$wire" \
                --dense-comm-dtype "$wire"
        done
        LINK_GB_S=
        if torchrec_ready; then
            IFS=';' read -r -a tp <<<"${TWONODE_PEERS:-M --id-dist uniform;M --id-dist $ZIPF;K --id-dist uniform;K --id-dist $ZIPF}"
            for w in "${tp[@]}"; do
                # one GPU: both ranks on it; two or more: a GPU each
                gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
                for r in 0 1; do
                    lr=0 per=2
                    [ "$gpus" -ge 2 ] && lr=$r per=1
                    MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 RANK=$r WORLD_SIZE=2 LOCAL_RANK=$lr \
                        LOCAL_WORLD_SIZE=1 NCCL_HOSTID=emu$r timeout 400 python3 "$runner" \
                        --workload $w --nodes-as-ranks --ranks-per-gpu $per --steps 40 --warmup 10 \
                        >"$OUTDIR/tr2_$r.log" 2>&1 &
                done
                wait
                row "TorchRec 2 nodes $w" "$(tail -1 "$OUTDIR/tr2_0.log")"
            done
        fi
        ;;
    *) echo "unknown stage $st"; exit 2 ;;
    esac
done
echo; echo "== table"; cat "$TABLE"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp "$TABLE" "$OUT/table.txt"
    tar czf "$OUT/bench-gpu-logs.tgz" -C "$OUTDIR" .
fi
