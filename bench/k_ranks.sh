#!/usr/bin/env bash
# Weak scaling on BENCH.md's workload K over CPU ranks: shardrec under mpirun
# at W = 1, 2, 4 ranks (shared memory and TCP transports, default plan, plus
# --sharding rw and an emulated 2-node layout at W=4), and the PyTorch DLRM
# reference's distributed mode (gloo over loopback, ranks started by hand) at
# the same global batches.
#
#   DLRM_REF=/work/peers/dlrm bench/k_ranks.sh          # R=3 rounds
#   SR_ONLY=1 R=1 bench/k_ranks.sh                       # shardrec only
#
# Workload K: 26 tables (BENCH.md rows), dim 16, one uniform id per feature,
# bottom MLP 13-512-256-64-16, top 512-256-1, dot interaction, SGD lr 0.1.
# Batch 2048 PER RANK (weak scaling): the global batch is 2048*W. Efficiency =
# samples/s at W / (W * samples/s at W=1), as BENCH.md defines it.
#
# Runs per round (the order is reversed every other round, so that load from
# other jobs hits all alike):
#   shardrec  W=1                      (one rank: no transport)
#             W=2, W=4 x {shm, tcp}    default plan (tables <= 1024 rows dp, others tw)
#             W=4 x {shm, tcp} --sharding rw
#             W=4 tcp --ranks-per-node 2   (2 emulated nodes: inter-node bytes)
#             W=4 shm OMP_WAIT_POLICY=passive   (does passive waiting help when oversubscribed?)
#   reference W=1 (one process), W=2, W=4 (gloo, GLOO_SOCKET_IFNAME=lo)
#   shm = Open MPI's default btl (vader shared memory); tcp = --mca pml ob1
#   --mca btl tcp,self --mca btl_tcp_if_include lo.
#   Threads: OMP_NUM_THREADS = max(1, NCORES/W), OPENBLAS_NUM_THREADS=1 for both
#   programs (NCORES defaults to nproc). When W exceeds the cores, ranks are
#   oversubscribed (mpirun --oversubscribe --bind-to none) and the output says so.
#
# What is timed:
#   shardrec   mean step_ms from --metrics after WARMUP steps: the end-to-end
#              step including generating its own batch slice. The run summary
#              on stderr gives collectives per step (rank 0), bytes per step
#              intra/inter-node, and communication ms exposed/busy per step.
#   reference  mean --print-time ms/it (rank 0) after WARMUP iterations, run
#              from a patched scratch copy (bench/lib/dlrm_ref.sh): a barrier
#              right before its timer starts (BENCH.md: otherwise the timer
#              absorbs the wait for the slowest rank's data) and, with
#              REF_FASTGEN=1 (default), a vectorised generator producing the
#              identical batches (its Python loop is untimed but would make W=4
#              take minutes). Its ms/it excludes batch generation; every rank
#              draws the whole global batch and keeps its slice.
#
# Environment (all optional except DLRM_REF unless SR_ONLY=1):
#   DLRM_REF     checkout of facebookresearch/dlrm (kept outside this repo).
#   R            rounds (default 3); STEPS (40) steps per run; WARMUP (10).
#   REF_STEPS    reference iterations per run (default STEPS).
#   WS           world sizes (default "1 2 4").
#   NCORES       cores to divide among ranks (default nproc).
#   SR_ONLY=1    skip the reference; REF_ONLY=1 skip shardrec.
#   REF_FASTGEN  1 (default) or 0: the reference's original batch generator.
#   RUN_TIMEOUT  seconds before one run is killed (default 300).
#   PYTHON       interpreter with torch (default /usr/bin/python3).
#   SHARDREC     binary (default build/shardrec); OUTDIR logs (default mktemp).
set -euo pipefail

die() { echo "k_ranks: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/dlrm_ref.sh
. "$here/lib/dlrm_ref.sh"

R=${R:-3}
STEPS=${STEPS:-40}
WARMUP=${WARMUP:-10}
REF_STEPS=${REF_STEPS:-$STEPS}
WS=${WS:-1 2 4}
NCORES=${NCORES:-$(nproc)}
SR_ONLY=${SR_ONLY:-0}
REF_ONLY=${REF_ONLY:-0}
REF_FASTGEN=${REF_FASTGEN:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
PYTHON=${PYTHON:-/usr/bin/python3}
SHARDREC=${SHARDREC:-$repo/build/shardrec}
BATCH=2048
[ "$STEPS" -gt "$WARMUP" ] && [ "$REF_STEPS" -gt "$WARMUP" ] || die "STEPS and REF_STEPS must exceed WARMUP ($WARMUP)"

rows_csv=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
rows_dash=${rows_csv//,/-}

if [ "$SR_ONLY" != 1 ]; then
    : "${DLRM_REF:=}"
    [ -n "$DLRM_REF" ] || die "set DLRM_REF to a checkout of facebookresearch/dlrm (or SR_ONLY=1)"
    [ -f "$DLRM_REF/dlrm_s_pytorch.py" ] || die "DLRM_REF=$DLRM_REF has no dlrm_s_pytorch.py"
    DLRM_REF=$(cd "$DLRM_REF" && pwd)
    "$PYTHON" -c 'import torch, numpy, torch.distributed' 2>/dev/null || die "$PYTHON cannot import torch and numpy"
fi
if [ "$REF_ONLY" != 1 ]; then
    [ -x "$SHARDREC" ] || die "$SHARDREC not found: build it first (make -j2) or set SHARDREC"
    command -v mpirun >/dev/null || die "mpirun not found (apt-get install openmpi-bin)"
fi

OUTDIR=${OUTDIR:-$(mktemp -d "${TMPDIR:-/tmp}/k_ranks.XXXXXX")}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
case "$OUTDIR/" in "$repo"/*) die "OUTDIR must be outside the repository (the reference's patched copy goes there)" ;; esac

asroot=()
[ "$(id -u)" = 0 ] && asroot=(--allow-run-as-root)
omp_for() { local t=$((NCORES / $1)); [ "$t" -ge 1 ] || t=1; echo "$t"; }

if [ "$SR_ONLY" != 1 ]; then
    stub=$OUTDIR/pystub
    dlrm_ref_stub "$stub"
    refcopy=$OUTDIR/dlrm_patched
    dlrm_ref_patched_copy "$DLRM_REF" "$refcopy" "$REF_FASTGEN" || die "could not patch a scratch copy of the reference"
    ref_commit=$(git -C "$DLRM_REF" rev-parse --short HEAD 2>/dev/null || echo unknown)
fi

sr_commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
sr_dirty=$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null || true)
[ -z "$sr_dirty" ] || sr_dirty="+dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)

sr_base=(train --table-rows "$rows_csv" --embedding-dim 16
    --bot-mlp 13-512-256-64-16 --top-mlp 512-256-1 --optimizer sgd --emb-optimizer sgd --lr 0.1
    --ids-per-feature 1 --id-dist uniform --eval-every 0 --eval-samples 0
    --steps "$STEPS" --log-every 1 --no-progress)
ref_base=(--arch-sparse-feature-size=16 --arch-embedding-size="$rows_dash"
    --arch-mlp-bot=13-512-256-64-16 --arch-mlp-top=512-256-1 --arch-interaction-op=dot
    --data-generation=random --num-indices-per-lookup=1 --num-indices-per-lookup-fixed=True
    --loss-function=bce --round-targets=True --optimizer=sgd --learning-rate=0.1
    --num-batches="$REF_STEPS" --nepochs=1 --print-freq=1 --print-time)
mpi_tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)

# Configurations: id|program|W|transport|plan flags|extra env
configs=()
for w in $WS; do
    [ "$REF_ONLY" = 1 ] || {
        if [ "$w" = 1 ]; then
            configs+=("sr_w1|sr|1|-||")
        else
            configs+=("sr_w${w}_shm|sr|$w|shm||" "sr_w${w}_tcp|sr|$w|tcp||")
            if [ "$w" = 4 ]; then
                configs+=("sr_w4_shm_rw|sr|4|shm|--sharding rw|"
                    "sr_w4_tcp_rw|sr|4|tcp|--sharding rw|"
                    "sr_w4_tcp_rpn2|sr|4|tcp|--ranks-per-node 2|"
                    "sr_w4_shm_passive|sr|4|shm||OMP_WAIT_POLICY=passive")
            fi
        fi
    }
    [ "$SR_ONLY" = 1 ] || configs+=("ref_w$w|ref|$w|gloo||")
done

oversub=""
for w in $WS; do [ "$w" -le "$NCORES" ] || oversub="$oversub $w"; done
{
    echo "workload K, batch $BATCH per rank (global 2048*W), shardrec $STEPS steps / reference $REF_STEPS its, mean after $WARMUP warm-up, $R rounds interleaved"
    echo "date     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine  $(nproc) cores, $cpu; $(mpirun --version 2>/dev/null | head -1)"
    [ -z "$oversub" ] || echo "NOTE     W =$oversub exceed the $NCORES cores: those ranks are OVERSUBSCRIBED (time-shared), so their step times measure contention as much as scaling"
    echo "shardrec $sr_commit$sr_dirty  OMP_NUM_THREADS=max(1,$NCORES/W) OPENBLAS_NUM_THREADS=1"
    echo "  mpirun ${asroot[*]} --oversubscribe --bind-to none -np W [tcp: ${mpi_tcp[*]}] $SHARDREC ${sr_base[*]} --global-batch-size \$((2048*W)) --metrics FILE [plan flags]"
    if [ "$SR_ONLY" != 1 ]; then
        echo "reference $DLRM_REF @ $ref_commit, run from patched copy $refcopy (barrier before timer; fastgen=$REF_FASTGEN)"
        echo "  W>1: RANK=r WORLD_SIZE=W LOCAL_RANK=r MASTER_ADDR=127.0.0.1 MASTER_PORT=P GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=max(1,$NCORES/W) OPENBLAS_NUM_THREADS=1 $PYTHON dlrm_s_pytorch.py ${ref_base[*]} --mini-batch-size=\$((2048*W)) --dist-backend=gloo"
    fi
    echo "logs     $OUTDIR"
} | tee "$OUTDIR/header.txt"

port=$((20000 + RANDOM % 20000))

run_sr() { # id W transport plan env round
    local id=$1 w=$2 tr=$3 plan=$4 xenv=$5 r=$6
    local log=$OUTDIR/${id}_$r.log met=$OUTDIR/${id}_$r.jsonl omp
    omp=$(omp_for "$w"); rm -f "$met"
    local mpi=(mpirun "${asroot[@]}" --oversubscribe --bind-to none -np "$w")
    [ "$tr" = tcp ] && mpi+=("${mpi_tcp[@]}")
    local t0=$SECONDS
    # shellcheck disable=SC2086
    if ! env OMP_NUM_THREADS="$omp" OPENBLAS_NUM_THREADS=1 $xenv timeout "$RUN_TIMEOUT" \
        "${mpi[@]}" "$SHARDREC" "${sr_base[@]}" --global-batch-size $((BATCH * w)) --metrics "$met" $plan \
        >"$log" 2>&1 </dev/null; then
        echo "  round $r $id FAILED (log $log)" >&2; tail -5 "$log" >&2; return 0
    fi
    echo "  round $r $id done in $((SECONDS - t0)) s (load average $(cut -d" " -f1-3 /proc/loadavg))" >&2
}

run_ref() { # id W round
    local id=$1 w=$2 r=$3 omp pids=() rc=0 k
    omp=$(omp_for "$w")
    local args=("$refcopy/dlrm_s_pytorch.py" "${ref_base[@]}" --mini-batch-size=$((BATCH * w)))
    local t0=$SECONDS
    if [ "$w" = 1 ]; then
        (cd "$OUTDIR" && env PYTHONPATH="$stub${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS="$omp" \
            OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout "$RUN_TIMEOUT" "$PYTHON" "${args[@]}" \
            >"$OUTDIR/${id}_$r.log" 2>&1 </dev/null) || rc=$?
    else
        port=$((port + 1))
        for k in $(seq 0 $((w - 1))); do
            (cd "$OUTDIR" && env PYTHONPATH="$stub${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS="$omp" \
                OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 RANK=$k WORLD_SIZE="$w" LOCAL_RANK=$k \
                MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo \
                timeout "$RUN_TIMEOUT" "$PYTHON" "${args[@]}" --dist-backend=gloo \
                >"$OUTDIR/${id}_$r.rank$k.log" 2>&1 </dev/null) &
            pids+=($!)
        done
        for k in "${pids[@]}"; do wait "$k" || rc=$?; done
        cp "$OUTDIR/${id}_$r.rank0.log" "$OUTDIR/${id}_$r.log"
    fi
    if [ "$rc" != 0 ]; then
        echo "  round $r $id FAILED rc=$rc (logs $OUTDIR/${id}_$r*.log)" >&2; tail -5 "$OUTDIR/${id}_$r.log" >&2; return 0
    fi
    echo "  round $r $id done in $((SECONDS - t0)) s (load average $(cut -d" " -f1-3 /proc/loadavg))" >&2
}

for r in $(seq 1 "$R"); do
    order=("${configs[@]}")
    if [ $((r % 2)) = 0 ]; then
        order=(); for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
    fi
    for c in "${order[@]}"; do
        IFS='|' read -r id prog w tr plan xenv <<<"$c"
        if [ "$prog" = sr ]; then run_sr "$id" "$w" "$tr" "$plan" "$xenv" "$r"; else run_ref "$id" "$w" "$r"; fi
    done
done

printf '%s\n' "${configs[@]}" >"$OUTDIR/configs.txt"
"$PYTHON" - "$OUTDIR" "$R" "$WARMUP" "$BATCH" "$STEPS" "$REF_STEPS" "$NCORES" <<'PYEOF'
import json, os, re, statistics, sys

outdir, R, warmup, batch, steps, ref_steps, ncores = sys.argv[1], *map(int, sys.argv[2:])
configs = [ln.rstrip("\n").split("|") for ln in open(os.path.join(outdir, "configs.txt")) if ln.strip()]
ref_pat = re.compile(r"Finished training it (\d+)/\d+ of epoch \d+, ([0-9.]+) ms/it")
coll_pat = re.compile(r"collectives per step \(rank 0\):\s*(.*?)\s*\|\s*total\s+([0-9.]+)")
bytes_pat = re.compile(r"bytes sent per step: intra-node ([0-9.]+) KiB, inter-node ([0-9.]+) KiB; "
                       r"communication ([0-9.]+) ms exposed of ([0-9.]+) ms busy")

def sr_round(cid, r):
    met, log = (os.path.join(outdir, "%s_%d.%s" % (cid, r, e)) for e in ("jsonl", "log"))
    if not os.path.exists(met):
        return None
    rows = []
    for ln in open(met):
        try:
            o = json.loads(ln)
        except ValueError:
            continue
        if "step" in o and "step_ms" in o:
            rows.append(o)
    rows.sort(key=lambda o: o["step"])
    if len(rows) != steps:
        return None
    text = open(log).read() if os.path.exists(log) else ""
    c, b = coll_pat.search(text), bytes_pat.search(text)
    return {"ms": statistics.mean(float(o["step_ms"]) for o in rows[warmup:]),
            "coll": float(c.group(2)) if c else None, "coll_kinds": c.group(1) if c else "",
            "intra": float(b.group(1)) if b else None, "inter": float(b.group(2)) if b else None,
            "exposed": float(b.group(3)) if b else None, "busy": float(b.group(4)) if b else None,
            "loss": rows[-1].get("loss")}

def ref_round(cid, r):
    p = os.path.join(outdir, "%s_%d.log" % (cid, r))
    if not os.path.exists(p):
        return None
    its = sorted((int(m.group(1)), float(m.group(2))) for m in map(ref_pat.search, open(p)) if m)
    if len(its) != ref_steps:
        return None
    return {"ms": statistics.mean(ms for it, ms in its if it > warmup)}

res = {}
for cid, prog, w, tr, plan, xenv in configs:
    f = sr_round if prog == "sr" else ref_round
    runs = [f(cid, r) for r in range(1, R + 1)]
    ok = [x for x in runs if x]
    res[cid] = {"prog": prog, "W": int(w), "transport": tr, "plan": plan or "default", "env": xenv,
                "rounds_ms": [x["ms"] if x else None for x in runs], "ok": len(ok)}
    if ok:
        med = statistics.median(x["ms"] for x in ok)
        res[cid].update(ms=med, sps=batch * int(w) * 1000.0 / med)
        if prog == "sr":
            for k in ("coll", "coll_kinds", "intra", "inter", "exposed", "busy", "loss"):
                res[cid][k] = ok[0][k] if k in ("coll_kinds", "loss") else statistics.median(x[k] for x in ok if x[k] is not None) if any(x[k] is not None for x in ok) else None

def base(prog):
    b = res.get("sr_w1" if prog == "sr" else "ref_w1")
    return b.get("sps") if b else None

f = lambda x, p: "-" if x is None else p % x
print()
print("K weak scaling, batch %d per rank; ms/step = median over %d rounds of the mean after %d warm-up steps" % (batch, R, warmup))
print("eff = samples/s / (W x samples/s at W=1, same program); coll = collectives per step on rank 0;")
print("KiB intra/inter = bytes sent per step; comm ms = exposed / busy communication per step (rank 0)")
print("ref = PyTorch DLRM reference, gloo, barrier before its timer (its ms/it excludes batch generation, shardrec's includes it)")
over = sorted({v["W"] for v in res.values() if v["W"] > ncores})
if over:
    print("NOTE: W=%s oversubscribed: %s ranks on %d cores" % (",".join(map(str, over)), "/".join(map(str, over)), ncores))
hdr = "%-2s %-5s %-20s %9s %9s %5s %5s %9s %9s %13s | %9s %9s %5s %7s"
print(hdr % ("W", "trans", "plan/env", "ms/step", "samp/s", "eff", "coll", "KiB intra", "KiB inter", "comm ms", "ref ms", "ref s/s", "eff", "sr/ref"))
print("-" * 150)
refs = {v["W"]: v for v in res.values() if v["prog"] == "ref"}
for cid, v in res.items():
    if v["prog"] != "sr":
        continue
    tag = v["plan"] if not v["env"] else v["plan"] + " " + v["env"]
    rf = refs.get(v["W"]) if v["plan"] == "default" and not v["env"] else None
    eff = v["sps"] / (v["W"] * base("sr")) if v.get("sps") and base("sr") else None
    reff = rf["sps"] / (v["W"] * base("ref")) if rf and rf.get("sps") and base("ref") else None
    print(hdr % (v["W"], v["transport"], tag[:20], f(v.get("ms"), "%.1f"), f(v.get("sps"), "%.0f"), f(eff, "%.2f"),
                 f(v.get("coll"), "%.0f"), f(v.get("intra"), "%.1f"), f(v.get("inter"), "%.1f"),
                 ("%s / %s" % (f(v.get("exposed"), "%.1f"), f(v.get("busy"), "%.1f"))) if v.get("sps") else "-",
                 f(rf.get("ms") if rf else None, "%.1f"), f(rf.get("sps") if rf else None, "%.0f"), f(reff, "%.2f"),
                 f(v["sps"] / rf["sps"] if rf and rf.get("sps") and v.get("sps") else None, "%.2fx")))
print()
for w, rf in sorted(refs.items()):
    if not rf.get("sps"):
        print("reference W=%d: no result (%d of %d rounds parsed; see %s/ref_w%d_*.log)" % (w, rf["ok"], R, outdir, w))
    else:
        reff = rf["sps"] / (w * base("ref")) if base("ref") else None
        print("reference W=%d gloo: %.1f ms/it, %.0f samples/s, eff %s" % (w, rf["ms"], rf["sps"], f(reff, "%.2f")))
print()
print("per-round ms/step:")
for cid, v in res.items():
    print("  %-18s %s" % (cid, " ".join(f(x, "%.1f") for x in v["rounds_ms"])))
kinds = {cid: v.get("coll_kinds") for cid, v in res.items() if v.get("coll_kinds")}
print("collectives by kind (rank 0):")
for cid, k in kinds.items():
    print("  %-18s %s" % (cid, k))
json.dump(res, open(os.path.join(outdir, "summary.json"), "w"), indent=1)
PYEOF
echo "summary: $OUTDIR/summary.json"
