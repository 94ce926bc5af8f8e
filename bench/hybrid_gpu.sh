#!/bin/sh
# Hot-row replication on one GPU, in one call of a few minutes: the 2-node
# setup of bench/gpu.sh twonode (2 NCCL ranks sharing the GPU, each its own
# node, sockets on loopback) on Zipf(1.05) ids, workloads K (batch 2048 a
# rank) and M (16384), fp32: the planner's plan, all tw, all rw and all
# hybrid, R runs each interleaved; prints "model sharding ms/step" (the
# steady-state step by device events) and the median per plan.
#   BUILD=build-gpu R=1 STEPS=14 sh bench/hybrid_gpu.sh
BUILD=${BUILD:-build-gpu}
R=${R:-1}
STEPS=${STEPS:-14}
MODELS=${MODELS:-K M}
here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/$BUILD/shardrec"
out=${OUTDIR:-$(mktemp -d)}
mkdir -p "$out"
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
export NCCL_NVLS_ENABLE=0
as_root=""
[ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"
K_ROWS=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
M_ROWS=$(python3 -c 'print(",".join(["1000000"] * 26))')
for i in $(seq 1 "$R"); do
    for model in $MODELS; do
        case $model in
        K) args="--workload K --table-rows $K_ROWS --batch-size 2048" ;;
        M) args="--workload M --table-rows $M_ROWS --batch-size 16384" ;;
        esac
        for plan in planner tw rw hybrid; do
            extra=""
            [ $plan != planner ] && extra="--sharding $plan"
            f="$out/$model-$plan-$i.txt"
            mpirun $as_root --oversubscribe --bind-to none -np 2 "$bin" train $args $extra \
                --id-dist zipf:1.05 --device cuda --batch-pool 8 --steps "$STEPS" \
                --eval-samples 0 --log-every 1000 --no-progress --ranks-per-node 1 --comm nccl \
                >"$f" 2>&1 || { echo "$model $plan: FAILED"; tail -5 "$f"; continue; }
            ms=$(sed -n 's/^steady state: .* \([0-9.]*\) ms per step.*/\1/p' "$f")
            echo "$model $plan $ms" | tee -a "$out/steps"
        done
    done
done
echo "medians (ms a step):"
for model in $MODELS; do
    for plan in planner tw rw hybrid; do
        awk -v m=$model -v p=$plan '$1 == m && $2 == p {print $3}' "$out/steps" | sort -g |
            awk -v m=$model -v p=$plan '{v[NR] = $1} END {if (NR) printf "%s %-8s %9.3f (%d runs)\n", m, p, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, NR}'
    done
done
