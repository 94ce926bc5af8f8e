#!/bin/sh
# The pipeline against the plain loop over an emulated inter-node link:
# workload K at reduced rows (tables capped at 100,000 rows, as
# bench/link_calibration.sh) on 2 ranks declared as 2 nodes
# (--ranks-per-node 1), --pipeline none and sparse-dist, with the link
# (--emulate-link LINK, default 0.025,20: ~40% exposed with the plain loop,
# BENCHMARKS.md) and without it (shared memory). For each of the 4 configs it
# prints the median over R interleaved rounds (order reversed every other
# round) of ms per step, samples/s, communication busy and exposed ms per step
# and exposed as a share of the step, from the run summary of rank 0.
#
#   BUILD=build R=5 STEPS=30 LINK=0.025,20 bench/pipeline_link.sh
#   EXTRA="--bucket-kib 256" CONFIGS="none:link sparse-dist:link" bench/pipeline_link.sh
#
# EXTRA: flags appended to every run; CONFIGS: a subset of the four
# PIPELINE:WHERE configs (WHERE link or shm).
#
# Threads: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (one core per rank; the
# loader thread runs single-threaded beside it).
BUILD=${BUILD:-build}
R=${R:-5}
STEPS=${STEPS:-30}
LINK=${LINK:-0.025,20}
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/$BUILD/shardrec"
out=${OUTDIR:-$(mktemp -d)}
mkdir -p "$out"
as_root=""
[ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset SR_RANKS_PER_NODE SR_EMULATE_LINK
ROWS=1460,583,100000,100000,305,24,12517,633,3,93145,5683,100000,3194,27,14992,100000,10,5652,2173,4,100000,18,15,100000,105,100000
JOB="--table-rows $ROWS --embedding-dim 16 --bot-mlp 13-512-256-64-16 --top-mlp 512-256-1
     --ids-per-feature 1 --id-dist uniform --optimizer sgd --emb-optimizer sgd --lr 0.1
     --batch-size 2048 --steps $STEPS --ranks-per-node 1 --eval-samples 2048 --no-progress
     --log-every 1000 ${EXTRA:-}"
CONFIGS=${CONFIGS:-"none:link sparse-dist:link none:shm sparse-dist:shm"}

run() { # config round
    pipe=${1%%:*} link=""
    [ "${1##*:}" = link ] && link="--emulate-link $LINK"
    # shellcheck disable=SC2086
    mpirun $as_root --oversubscribe --bind-to none -np 2 "$bin" train $JOB $link \
        --pipeline "$pipe" >"$out/$1.$2.log" 2>&1 ||
        { echo "run $1 round $2 failed: $out/$1.$2.log"; exit 1; }
}

echo "commit $(git -C "$here" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -c ^processor /proc/cpuinfo) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$R"); do
    list=$CONFIGS
    [ $((r % 2)) -eq 0 ] && list=$(echo "$CONFIGS" | tr ' ' '\n' | tac | tr '\n' ' ')
    for c in $list; do
        run "$c" "$r"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); logs in $out"

python3 - "$out" "$R" "$LINK" $CONFIGS <<'PY'
import re, statistics, sys
out, R, link, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def one(path):
    t = open(path).read()
    steps, secs, sps = re.search(r"steps (\d+), 2 ranks .*?([\d.]+) s training, (\d+) samples/s", t).groups()
    busy, exposed = re.search(r"busy ([\d.]+) ms, overlapped [\d.]+ ms, exposed ([\d.]+) ms", t).groups()
    step = 1e3 * float(secs) / int(steps)
    return step, float(sps), float(busy), float(exposed), 100 * float(exposed) / step
print("| pipeline | link | ms/step | samples/s | comm busy ms | comm exposed ms | exposed % of step | per-round exposed ms |")
print("|---|---|---|---|---|---|---|---|")
for c in configs:
    rows = [one(f"{out}/{c}.{r}.log") for r in range(1, R + 1)]
    med = [statistics.median(x[i] for x in rows) for i in range(5)]
    pipe, where = c.split(":")
    per = " ".join(f"{x[3]:.0f}" for x in rows)
    print(f"| {pipe} | {link if where == 'link' else 'none (shared memory)'} | {med[0]:.1f} | "
          f"{med[1]:.0f} | {med[2]:.1f} | {med[3]:.1f} | {med[4]:.1f} | {per} |")
PY
