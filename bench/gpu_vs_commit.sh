#!/usr/bin/env bash
# A change to the step against an earlier commit, on one GPU, in one table:
# bit identity of training (tools/bitcheck.sh on CUDA: one rank with graphs
# on and off, 2 ranks under every sharding type and a mixed plan) and speed
# (workloads K and M, BENCH.md, medians of R interleaved runs, new/base).
#
#   bench/gpu_vs_commit.sh BASE_DIR [STAGE...]    stages: setup bits speed (default all)
#
# BASE_DIR holds the earlier commit's source (on the workstation:
# `git archive REF | tar -x -C .base`, then carry .base); it is built there
# with BUILD=build-gpu, as this tree is. .debs/ holds the Debian packages the
# GPU image lacks (cJSON, cmocka), as for bench/gpu.sh. Speed runs use
# uniform and Zipf(1.05) ids, a pool of 8 batches (--batch-pool 8), graphs as
# by default, and the steady-state line of the summary (device events).
# Environment: R (default 5), STEPS_K (300), STEPS_M (80); the table goes
# to stdout and to $OUT/table.txt when OUT is set.
set -uo pipefail
BASE=${1:?usage: bench/gpu_vs_commit.sh BASE_DIR [STAGE...]}
shift
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(setup bits speed)
R=${R:-5}
STEPS_K=${STEPS_K:-300}
STEPS_M=${STEPS_M:-80}
LOGDIR=${LOGDIR:-/tmp/gpu-vs-commit}
mkdir -p "$LOGDIR"
TABLE=${OUT:-$LOGDIR}/table.txt
NEW=build-gpu/shardrec
OLD=/tmp/gpu-vs-commit-base/build-gpu/shardrec # built from a copy: a carried BASE_DIR arrives anew each call
export NCCL_NVLS_ENABLE=0
row() { printf '%-40s %s\n' "$1" "$2" | tee -a "$TABLE"; }

K_ROWS=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
K="--table-rows $K_ROWS --embedding-dim 16 --bot-mlp 13-512-256-64-16 --top-mlp 512-256-1 --batch-size 2048"
M_ROWS=$(printf '1000000,%.0s' $(seq 26)); M_ROWS=${M_ROWS%,}
M="--table-rows $M_ROWS --embedding-dim 128 --bot-mlp 13-512-256-128 --top-mlp 1024-1024-512-256-1 --ids-per-feature 20 --batch-size 16384"
COMMON="--device cuda --optimizer sgd --emb-optimizer sgd --lr 0.1 --batch-pool 8 --eval-samples 0 --eval-every 0 --no-progress"

# steady ms per step of one run: bin steps flags...
steady_ms() {
    local bin=$1 steps=$2; shift 2
    timeout 300 "$bin" train $COMMON --steps "$steps" --log-every "$steps" "$@" >"$LOGDIR/run.log" 2>&1 ||
        { echo "FAILED: $(tail -1 "$LOGDIR/run.log")" >&2; echo nan; return; }
    grep '^steady state' "$LOGDIR/run.log" | sed -E 's/.* ([0-9.]+) ms per step.*/\1/'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# label steps flags...: R rounds, alternating which build goes first
compare() {
    local label=$1 steps=$2; shift 2
    local old="" new="" a b
    for i in $(seq "$R"); do
        if [ $((i % 2)) -eq 1 ]; then
            a=$(steady_ms "$OLD" "$steps" "$@"); b=$(steady_ms "$NEW" "$steps" "$@")
        else
            b=$(steady_ms "$NEW" "$steps" "$@"); a=$(steady_ms "$OLD" "$steps" "$@")
        fi
        old="$old $a" new="$new $b"
    done
    local mo mn
    mo=$(echo "$old" | median) mn=$(echo "$new" | median)
    row "$label" "$(printf 'base %7.3f ms  new %7.3f ms  new/base %.3f  (new:%s)' "$mo" "$mn" \
        "$(awk -v a="$mn" -v b="$mo" 'BEGIN {print a / b}')" "$new")"
}

for st in "${stages[@]}"; do
    echo "== stage $st ($(date +%T))"
    case $st in
    setup)
        for f in .debs/*.deb; do dpkg -x "$f" /; done
        ldconfig
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
        make -j16 BUILD=build-gpu all >"$LOGDIR/build-new.log" 2>&1 || { tail -20 "$LOGDIR/build-new.log"; exit 1; }
        rm -rf /tmp/gpu-vs-commit-base && cp -r "$BASE" /tmp/gpu-vs-commit-base
        make -C /tmp/gpu-vs-commit-base -j16 BUILD=build-gpu all >"$LOGDIR/build-old.log" 2>&1 ||
            { tail -20 "$LOGDIR/build-old.log"; exit 1; }
        row "build" "ok"
        ;;
    bits)
        sh tools/bitcheck.sh "$OLD" "$NEW" cuda quick 2>&1 | tee "$LOGDIR/bits.txt" | grep -v '^same'
        row "bit identity (CUDA)" "$(tail -1 "$LOGDIR/bits.txt")"
        ;;
    speed)
        compare "K b2048 fp32 uniform" "$STEPS_K" $K --id-dist uniform
        compare "K b2048 fp32 zipf:1.05" "$STEPS_K" $K --id-dist zipf:1.05
        compare "M b16384 fp32 uniform" "$STEPS_M" $M --id-dist uniform
        compare "M b16384 fp32 zipf:1.05" "$STEPS_M" $M --id-dist zipf:1.05
        ;;
    esac
done
