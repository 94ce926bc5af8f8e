#!/bin/sh
# Calibration of the emulated inter-node link (--emulate-link, comm.h) for
# the pipeline measurements: BENCH.md's workload K at reduced rows (tables
# capped at 100,000 rows) on 2 ranks declared as 2 nodes (--ranks-per-node
# 1), the plain loop (no pipeline), for a few link bandwidths. For each it
# prints the median over R interleaved rounds (order reversed every other
# round) of ms per step, communication busy and exposed ms per step and
# exposed as a share of the step, all from the run summary of rank 0.
#
#   BUILD=build R=5 STEPS=30 bench/link_calibration.sh [GB_S ...]
#   (default bandwidths: none 0.4 0.2 0.1 0.05; latency LAT_US, default 20)
#
# Threads: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (one core per rank).
BUILD=${BUILD:-build}
R=${R:-5}
STEPS=${STEPS:-30}
LAT_US=${LAT_US:-20}
BWS=${*:-none 0.4 0.2 0.1 0.05}
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
     --log-every 1000"

run() { # bw round
    link=""
    [ "$1" != none ] && link="--emulate-link $1,$LAT_US"
    # shellcheck disable=SC2086
    mpirun $as_root --oversubscribe --bind-to none -np 2 "$bin" train $JOB $link \
        >"$out/$1.$2.log" 2>&1 || { echo "run $1 round $2 failed: $out/$1.$2.log"; exit 1; }
}

echo "commit $(git -C "$here" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -c ^processor /proc/cpuinfo) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$R"); do
    list=$BWS
    [ $((r % 2)) -eq 0 ] && list=$(echo "$BWS" | tr ' ' '\n' | tac | tr '\n' ' ')
    for bw in $list; do
        run "$bw" "$r"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); logs in $out"

python3 - "$out" "$R" $BWS <<'PY'
import re, statistics, sys
out, R, bws = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def one(path):
    t = open(path).read()
    steps, secs = re.search(r"steps (\d+), 2 ranks .*?([\d.]+) s training", t).groups()
    busy, exposed = re.search(r"busy ([\d.]+) ms, overlapped [\d.]+ ms, exposed ([\d.]+) ms", t).groups()
    inter = re.search(r"inter-node ([\d.]+) KiB", t).group(1)
    step = 1e3 * float(secs) / int(steps)
    return step, float(busy), float(exposed), 100 * float(exposed) / step, float(inter)
print("| link GB/s | link ms/step (bytes/bw) | ms/step | comm busy ms | comm exposed ms | exposed % of step | per-round exposed % |")
print("|---|---|---|---|---|---|---|")
for bw in bws:
    rows = [one(f"{out}/{bw}.{r}.log") for r in range(1, R + 1)]
    med = [statistics.median(x[i] for x in rows) for i in range(5)]
    link = "–" if bw == "none" else f"{med[4] * 1024 / (float(bw) * 1e9) * 1e3:.1f}"
    shares = " ".join(f"{x[3]:.0f}" for x in rows)
    print(f"| {bw} | {link} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} | {med[3]:.1f} | {shares} |")
PY
