#!/bin/sh
# The planner's predictions against measurements on this host's CPUs
# (docs/planner.md; BENCHMARKS.md "Planner: predicted against measured").
#
#  1. Topology files, measured here first: `bench device --out` (copy, gather,
#     update, GEMM: the whole host, split over the ranks of a node by the
#     planner; and on one thread, for the 2-node setup whose one-rank nodes
#     share the host), `bench comm --out` on 2 ranks of one node (shared
#     memory), and on 2 ranks as 2 nodes over the emulated link LINK
#     (SR_EMULATE_LINK).
#  2. Three models: workload K at reduced rows (tables capped at 100,000), M at
#     CPU size (26 x 100,000 rows, dim 128, 20 ids a feature; batch MB a rank),
#     and one drawn by a seeded generator (SEED; below, fixed before any
#     measurement), on three setups: 1 rank; 2 ranks on one node; 2 ranks as 2
#     nodes over LINK. Each run is `train` with the planner's plan (no --plan)
#     on the measured topology; its summary prints predicted beside measured.
#     The median over R runs of the measured step and peak memory, and the
#     prediction's error against it.
#  3. On the 2-node setup: the planner's plan against --sharding tw and
#     --sharding rw (PLANS adds hybrid: "planner tw rw hybrid"), median of R
#     each, interleaved; each plan's measured step, then its predicted one.
#
#   R=5 STEPS=20 LINK=0.05,50 bench/planner_check.sh
#
# Threads: 1 rank OMP_NUM_THREADS=2 (the whole host, as bench device
# measured it); 2 ranks one thread each.
#
# DEVICE=cuda runs the same on one GPU, at full size (K's own rows, M's 26 x
# 1M; batch MB = 16384 a rank unless set): setups 1 GPU, and 2 NCCL ranks
# sharing the GPU as 2 nodes (`--ranks-per-node 1 --comm nccl`, NCCL's socket
# transport on loopback, as bench/gpu.sh twonode). Topology files: `bench
# device --device cuda` alone, and twice at once (the 2-node setup's ranks
# take turns on the GPU: each gets what one of two concurrent runs measures),
# and `bench comm` on the 2 ranks. PARTS picks "predict", "compare" or both
# (the default), so that the halves can go to separate calls of a
# time-limited machine. GPU runs make 8 batches first (--batch-pool 8, as
# bench/gpu.sh): else the host's generator, which the planner does not
# model, is the step. MODELS picks and orders the models (default "K M
# drawn"), SETUPS the setups (default "1 node link", on the GPU "1 link").
# On the GPU a step of K or the drawn model takes well under a
# millisecond: they run SHORT_STEPS_GPU steps (default 200) so that the steady
# state is timed over more than a few milliseconds.
BUILD=${BUILD:-build}
DEVICE=${DEVICE:-cpu}
R=${R:-5}
STEPS=${STEPS:-20}
LINK=${LINK:-0.05,50}
PARTS=${PARTS:-predict compare}
MODELS=${MODELS:-K M drawn}
PLANS=${PLANS:-planner tw rw}
# ID_DIST: K's and M's ids (the drawn model draws its own), e.g. zipf:1.05
ID_DIST=${ID_DIST:-uniform}
SHORT_STEPS=$STEPS
if [ "$DEVICE" = cuda ]; then
    MB=${MB:-16384}
    SHORT_STEPS=${SHORT_STEPS_GPU:-200}
    SETUPS=${SETUPS:-1 link}
    export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
    export NCCL_NVLS_ENABLE=0
else
    MB=${MB:-1024}
    SETUPS=${SETUPS:-1 node link}
fi
SEED=${SEED:-20261202}
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/$BUILD/shardrec"
out=${OUTDIR:-$(mktemp -d)}
mkdir -p "$out"
as_root=""
[ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"
unset SR_RANKS_PER_NODE SR_EMULATE_LINK
mpi() { mpirun $as_root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "$@"; }

# 1. topology files
topology_cuda() {
    "$bin" bench device --device cuda --out "$out/device.json" >"$out/device.txt" 2>&1 ||
        { cat "$out/device.txt"; exit 1; }
    # two at once: what each of two ranks sharing the GPU gets
    "$bin" bench device --device cuda --out "$out/device1.json" >"$out/device1.txt" 2>&1 &
    "$bin" bench device --device cuda --out "$out/device1b.json" >"$out/device1b.txt" 2>&1 ||
        { cat "$out/device1b.txt"; exit 1; }
    wait $! || { cat "$out/device1.txt"; exit 1; }
    mpi -np 2 "$bin" bench comm --device cuda --comm nccl --max-bytes 64M --ranks-per-node 1 \
        --out "$out/link.json" >"$out/link.txt" 2>&1 || { cat "$out/link.txt"; exit 1; }
    echo "topology files in $out: device.json, device1.json (2 at once), link.json"
}
if [ "$DEVICE" = cuda ]; then
    topology_cuda
else
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$bin" bench device --out "$out/device.json" >"$out/device.txt" 2>&1 ||
    { cat "$out/device.txt"; exit 1; }
# one core's: the 2-node setup's ranks share this host's 2 cores, one each,
# but a node of one rank is not split
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$bin" bench device --out "$out/device1.json" >"$out/device1.txt" 2>&1 ||
    { cat "$out/device1.txt"; exit 1; }
mpi -np 2 "$bin" bench comm --max-bytes 16M --out "$out/node.json" >"$out/node.txt" 2>&1 ||
    { cat "$out/node.txt"; exit 1; }
mpi -x SR_EMULATE_LINK="$LINK" -np 2 "$bin" bench comm --max-bytes 16M --ranks-per-node 1 \
    --out "$out/link.json" >"$out/link.txt" 2>&1 || { cat "$out/link.txt"; exit 1; }
echo "topology files in $out: device.json, node.json, link.json"
fi

# 2. models
K_ROWS=1460,583,100000,100000,305,24,12517,633,3,93145,5683,100000,3194,27,14992,100000,10,5652,2173,4,100000,18,15,100000,105,100000
M_ROWS=$(python3 -c 'print(",".join(["100000"] * 26))')
DEV=""
if [ "$DEVICE" = cuda ]; then # full size: the presets' rows
    K_ROWS=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
    M_ROWS=$(python3 -c 'print(",".join(["1000000"] * 26))')
    DEV="--device cuda --batch-pool 8" # as every GPU figure: the host's generator out of the step
fi
K="--workload K --table-rows $K_ROWS --batch-size 2048 --id-dist $ID_DIST"
M="--workload M --table-rows $M_ROWS --batch-size $MB --id-dist $ID_DIST"
# The drawn model: a seeded generator, the same figures for the same SEED.
DRAWN=$(python3 - "$SEED" <<'EOF'
import random, sys
r = random.Random(int(sys.argv[1]))
T = r.randint(4, 16)
D = r.choice([16, 32, 64])
rows = [int(10 ** r.uniform(1, 5.5)) for _ in range(T)]
ids = [r.randint(1, 8) for _ in range(T)]
bot = [13] + sorted([r.choice([64, 128, 256, 512]) for _ in range(r.randint(1, 2))], reverse=True) + [D]
top = [r.choice([128, 256, 512]) for _ in range(r.randint(1, 2))] + [1]
dist = r.choice(["uniform", "zipf:1.05"])
batch = r.choice([512, 1024, 2048])
print("--table-rows %s --embedding-dim %d --ids-per-feature %s --bot-mlp %s --top-mlp %s "
      "--id-dist %s --batch-size %d" % (",".join(map(str, rows)), D, ",".join(map(str, ids)),
      "-".join(map(str, bot)), "-".join(map(str, top)), dist, batch))
EOF
)
echo "drawn model (seed $SEED): $DRAWN"
COMMON="--eval-samples 0 --log-every 1000 --no-progress $DEV"
# steps_of MODEL: how many steps a run of it trains
steps_of() { case $1 in M) echo "$STEPS" ;; *) echo "$SHORT_STEPS" ;; esac; }

# run TAG SETUP ARGS...: one run, its summary in $out/TAG.txt
run() {
    tag=$1 setup=$2
    shift 2
    case $setup in
    1) OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$bin" train "$@" $COMMON \
           --topology "$out/device.json" >"$out/$tag.txt" 2>&1 ;;
    node) mpi -np 2 "$bin" train "$@" $COMMON --topology cpu-2core --topology "$out/device.json" \
              --topology "$out/node.json" >"$out/$tag.txt" 2>&1 ;;
    link) if [ "$DEVICE" = cuda ]; then
              mpi -np 2 "$bin" train "$@" $COMMON --ranks-per-node 1 --comm nccl \
                  --topology "$out/device1.json" --topology "$out/link.json" >"$out/$tag.txt" 2>&1
          else
              mpi -x SR_EMULATE_LINK="$LINK" -np 2 "$bin" train "$@" $COMMON --ranks-per-node 1 \
                  --topology cpu-2core --topology "$out/device1.json" --topology "$out/link.json" \
                  >"$out/$tag.txt" 2>&1
          fi ;;
    esac
}

# the planner block of a summary: "pred_step meas_step pred_mem meas_mem"
pick() {
    awk '/^planner: predicted/ {on = 1}
         on && $1 == "step" {ps = $2; ms = $3}
         on && $1 == "memory" {pm = $2; mm = $3; sub(/M/, "", pm); sub(/M/, "", mm)}
         END {print ps, ms, pm, mm}' "$1"
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

case " $PARTS " in *" predict "*)
printf '\n%-6s %-5s %12s %12s %8s %10s %10s %8s\n' model setup "pred ms" "meas ms" error \
    "pred MiB" "meas MiB" error
for model in $MODELS; do
    case $model in K) args=$K ;; M) args=$M ;; drawn) args=$DRAWN ;; esac
    for setup in $SETUPS; do
        : >"$out/$model-$setup.runs"
        for i in $(seq 1 "$R"); do
            run "$model-$setup-$i" "$setup" $args --steps "$(steps_of $model)" || { tail -3 "$out/$model-$setup-$i.txt"; continue; }
            pick "$out/$model-$setup-$i.txt" >>"$out/$model-$setup.runs"
        done
        ps=$(awk '{print $1}' "$out/$model-$setup.runs" | median)
        ms=$(awk '{print $2}' "$out/$model-$setup.runs" | median)
        pm=$(awk '{print $3}' "$out/$model-$setup.runs" | median)
        mm=$(awk '{print $4}' "$out/$model-$setup.runs" | median)
        awk -v m="$model" -v s="$setup" -v ps="$ps" -v ms="$ms" -v pm="$pm" -v mm="$mm" 'BEGIN {
            printf "%-6s %-5s %12.3f %12.3f %+7.1f%% %10.1f %10.1f %+7.1f%%\n", m, s, ps, ms,
                   100 * (ps / ms - 1), pm, mm, 100 * (pm / mm - 1) }'
    done
done
esac

# 3. the planner's plan against all-tw, all-rw (and all-hybrid) on the 2-node setup
case " $PARTS " in *" compare "*) ;; *) exit 0 ;; esac
printf '\n%-6s' model
for plan in $PLANS; do printf ' %18s' "$plan ms (pred)"; done
printf ' %10s\n' "planner vs best other"
for model in $MODELS; do
    case $model in K) args=$K ;; M) args=$M ;; drawn) args=$DRAWN ;; esac
    for plan in $PLANS; do : >"$out/cmp-$model-$plan"; done
    for i in $(seq 1 "$R"); do
        for plan in $PLANS; do
            extra=""
            [ $plan != planner ] && extra="--sharding $plan"
            run "cmp-$model-$plan-$i" link $args $extra --steps "$(steps_of $model)"
            pick "$out/cmp-$model-$plan-$i.txt" >>"$out/cmp-$model-$plan"
        done
    done
    printf '%-6s' "$model"
    best=""
    for plan in $PLANS; do
        m=$(awk '{print $2}' "$out/cmp-$model-$plan" | median)
        p=$(awk '{print $1}' "$out/cmp-$model-$plan" | median)
        printf ' %9.3f (%6.1f)' "$m" "$p"
        [ $plan = planner ] && pl=$m && continue
        best=$(awk -v b="$best" -v m="$m" 'BEGIN { print (b == "" || m < b) ? m : b }')
    done
    awk -v p="$pl" -v b="$best" 'BEGIN { printf " %9.3fx\n", b / p }'
done
