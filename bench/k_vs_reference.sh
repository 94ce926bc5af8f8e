#!/usr/bin/env bash
# Side-by-side throughput: shardrec vs the PyTorch DLRM reference
# (facebookresearch/dlrm, dlrm_s_pytorch.py) on BENCH.md's workload K (default)
# or M at CPU-reduced rows, one process each, on this machine's CPU.
#
#   DLRM_REF=/path/to/dlrm bench/k_vs_reference.sh            # workload K, 5 rounds
#   DLRM_REF=/path/to/dlrm WORKLOAD=M R=3 bench/k_vs_reference.sh
#
# Rounds are interleaved (reference, shardrec, shardrec, reference, ...: the
# order alternates each round) so that load from other jobs on a shared machine
# hits both alike; the table reports every round and the median.
#
# What is timed:
#   reference  the mean of its --print-time ms/it after WARMUP iterations. Its
#              timer covers copy, forward, loss, backward and update but NOT its
#              own batch generation (a slow Python loop, excluded by design).
#   shardrec   the mean `step_ms` of its --metrics JSON lines after WARMUP
#              steps: the end-to-end step, INCLUDING generating its own batch.
#   So the comparison is conservative for shardrec.
#
# Environment (all optional except DLRM_REF):
#   DLRM_REF        checkout of facebookresearch/dlrm (dlrm_s_pytorch.py in it);
#                   keep it outside this repository.
#   WORKLOAD        K (default) or M (M at CPU rows: 26 x 100000, dim 128,
#                   20 ids per feature fixed, batch 2048).
#   R               rounds (default 5).
#   STEPS           steps per run (default 60); WARMUP (default 10) are dropped.
#   PYTHON          interpreter with torch for the reference (default
#                   /usr/bin/python3, Debian's python3-torch).
#   SHARDREC        the shardrec binary (default build/shardrec of this repo).
#   REF_OMP, REF_BLAS   reference thread counts (default 2 and 1, as BENCH.md).
#   SR_OMP, SR_BLAS     shardrec OMP_NUM_THREADS / OPENBLAS_NUM_THREADS
#                       (default 2 and 1).
#   SR_EXTRA        extra flags appended to the shardrec command line.
#   SR_ENV          extra VAR=value settings for shardrec's environment,
#                   e.g. SR_ENV="OMP_WAIT_POLICY=passive".
#   REF_ONLY=1      run only the reference (no shardrec needed).
#   SR_ONLY=1       run only shardrec.
#   QUIET_WAIT      before each run, wait up to this many seconds (default 60;
#                   0: never) until other processes use < QUIET_BUSY cores
#                   (default 0.3), measured over 2 s. The table shows, per run,
#                   how many cores other processes used while it ran ("oth").
#   OUTDIR          where logs, metrics and summary.json go (default a new
#                   directory under ${TMPDIR:-/tmp}); kept after the run.
set -euo pipefail

die() { echo "k_vs_reference: $*" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib/dlrm_ref.sh
. "$here/lib/dlrm_ref.sh"

: "${DLRM_REF:=}"
[ -n "$DLRM_REF" ] || die "set DLRM_REF to a checkout of facebookresearch/dlrm, e.g.
  git clone https://github.com/facebookresearch/dlrm /work/peers/dlrm
  DLRM_REF=/work/peers/dlrm $0"
[ -f "$DLRM_REF/dlrm_s_pytorch.py" ] || die "DLRM_REF=$DLRM_REF has no dlrm_s_pytorch.py (want a checkout of facebookresearch/dlrm)"
DLRM_REF=$(cd "$DLRM_REF" && pwd)

WORKLOAD=${WORKLOAD:-K}
R=${R:-5}
STEPS=${STEPS:-60}
WARMUP=${WARMUP:-10}
PYTHON=${PYTHON:-/usr/bin/python3}
SHARDREC=${SHARDREC:-$repo/build/shardrec}
REF_OMP=${REF_OMP:-2}
REF_BLAS=${REF_BLAS:-1}
SR_OMP=${SR_OMP:-2}
SR_BLAS=${SR_BLAS:-1}
SR_EXTRA=${SR_EXTRA:-}
SR_ENV=${SR_ENV:-}
REF_ONLY=${REF_ONLY:-0}
SR_ONLY=${SR_ONLY:-0}
QUIET_WAIT=${QUIET_WAIT:-60}
QUIET_BUSY=${QUIET_BUSY:-0.3}
BATCH=2048
[ "$STEPS" -gt "$WARMUP" ] || die "STEPS ($STEPS) must exceed WARMUP ($WARMUP)"

case "$WORKLOAD" in
K|k)
    WORKLOAD=K
    rows_csv=1460,583,10131227,2202608,305,24,12517,633,3,93145,5683,8351593,3194,27,14992,5461306,10,5652,2173,4,7046547,18,15,286181,105,142572
    dim=16; ids=1; bot=13-512-256-64-16; top=512-256-1
    ;;
M|m)
    WORKLOAD=M
    rows_csv=$(printf '100000%.0s,' $(seq 26)); rows_csv=${rows_csv%,}
    dim=128; ids=20; bot=13-512-256-128; top=1024-1024-512-256-1
    ;;
*) die "WORKLOAD must be K or M (got '$WORKLOAD')" ;;
esac
rows_dash=${rows_csv//,/-}

ref_cmd=("$PYTHON" "$DLRM_REF/dlrm_s_pytorch.py"
    --arch-sparse-feature-size=$dim --arch-embedding-size=$rows_dash
    --arch-mlp-bot=$bot --arch-mlp-top=$top --arch-interaction-op=dot
    --data-generation=random --num-indices-per-lookup=$ids
    --num-indices-per-lookup-fixed=True --loss-function=bce --round-targets=True
    --optimizer=sgd --learning-rate=0.1 --mini-batch-size=$BATCH
    --num-batches=$STEPS --nepochs=1 --print-freq=1 --print-time)
# shellcheck disable=SC2206
sr_cmd=("$SHARDREC" train --table-rows "$rows_csv" --embedding-dim $dim
    --bot-mlp $bot --top-mlp $top --optimizer sgd --emb-optimizer sgd --lr 0.1
    --batch-size $BATCH --steps $STEPS --ids-per-feature $ids --id-dist uniform
    --eval-every 0 --log-every 1 $SR_EXTRA)

if [ "$SR_ONLY" != 1 ]; then
    "$PYTHON" -c 'import torch, numpy' 2>/dev/null ||
        die "$PYTHON cannot import torch and numpy (on Debian: apt-get install python3-torch python3-numpy; or set PYTHON)"
fi
if [ "$REF_ONLY" != 1 ]; then
    [ -x "$SHARDREC" ] || die "$SHARDREC not found: build it first (make -j2) or set SHARDREC"
    "$SHARDREC" train --help >/dev/null 2>&1 || die "'$SHARDREC train --help' fails: is the CLI built?"
fi

OUTDIR=${OUTDIR:-$(mktemp -d "${TMPDIR:-/tmp}/k_vs_reference.XXXXXX")}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)

# The reference's optional imports (tensorboard, sklearn) get do-nothing
# stand-ins from a sitecustomize.py on PYTHONPATH (bench/lib/dlrm_ref.sh);
# nothing in the reference's tree is touched.
stub=$OUTDIR/pystub
dlrm_ref_stub "$stub"

ref_commit=$(git -C "$DLRM_REF" rev-parse --short HEAD 2>/dev/null || echo unknown)
sr_commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
sr_dirty=$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null || true)
[ -z "$sr_dirty" ] || sr_dirty="+dirty"
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)

{
    echo "workload $WORKLOAD, batch $BATCH, $STEPS steps, mean after $WARMUP warm-up, $R rounds"
    echo "date     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine  $(nproc) cores, $cpu"
    echo "shardrec $sr_commit$sr_dirty  OMP_NUM_THREADS=$SR_OMP OPENBLAS_NUM_THREADS=$SR_BLAS $SR_ENV"
    echo "  ${sr_cmd[*]} --metrics FILE"
    echo "reference $DLRM_REF @ $ref_commit  OMP_NUM_THREADS=$REF_OMP OPENBLAS_NUM_THREADS=$REF_BLAS"
    echo "  ${ref_cmd[*]}"
    echo "logs     $OUTDIR"
} | tee "$OUTDIR/header.txt"

# Each run goes through runner.py, which records wall time, the run's own CPU
# time and how many cores OTHER processes kept busy meanwhile (from /proc/stat),
# so contended rounds show up in the table. With QUIET_WAIT > 0 it first waits
# (at most QUIET_WAIT seconds) until others use less than QUIET_BUSY cores.
cat >"$OUTDIR/runner.py" <<'EOF'
import json, os, resource, subprocess, sys, time

def busy():  # (busy jiffies over all cpus, total jiffies)
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)

def others_cores(seconds):
    b0, t0 = busy(); time.sleep(seconds); b1, t1 = busy()
    ncpu = os.cpu_count() or 1
    return ncpu * (b1 - b0) / max(1, t1 - t0)

info_path, log_path, quiet_wait, quiet_busy = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
cmd = sys.argv[5:]
waited, start_busy = 0.0, None
if quiet_wait > 0:
    t = time.time()
    while True:
        start_busy = others_cores(2.0)
        if start_busy < quiet_busy or time.time() - t >= quiet_wait:
            break
    waited = time.time() - t
hz = os.sysconf("SC_CLK_TCK")
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
b0, t0 = busy(); w0 = time.time()
with open(log_path, "w") as log:
    rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
w1 = time.time(); b1, t1 = busy()
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
ncpu = os.cpu_count() or 1
all_cores = ncpu * (b1 - b0) / max(1, t1 - t0)
wall = w1 - w0
json.dump({"rc": rc, "wall_s": wall, "own_cpu_s": own, "own_cores": own / wall if wall else 0,
           "others_cores": max(0.0, all_cores - (own / wall if wall else 0)),
           "waited_s": waited, "others_cores_before": start_busy}, open(info_path, "w"))
sys.exit(rc)
EOF

run_one() { # $1 = ref|sr, $2 = round, rest: env and command
    local who=$1 r=$2; shift 2
    local log=$OUTDIR/${who}_$r.log
    "$PYTHON" "$OUTDIR/runner.py" "$OUTDIR/${who}_$r.run.json" "$log" "$QUIET_WAIT" "$QUIET_BUSY" "$@" ||
        { tail -20 "$log" >&2; die "$who failed in round $r (log: $log)"; }
}
run_ref() { # $1 = round
    (cd "$OUTDIR" && run_one ref "$1" env PYTHONPATH="$stub${PYTHONPATH:+:$PYTHONPATH}" \
        OMP_NUM_THREADS=$REF_OMP OPENBLAS_NUM_THREADS=$REF_BLAS MKL_NUM_THREADS=$REF_BLAS \
        "${ref_cmd[@]}") || exit 2
    echo "  round $1 reference done: $(grep -c 'ms/it' "$OUTDIR/ref_$1.log") iterations logged" >&2
}
run_sr() { # $1 = round
    local met=$OUTDIR/sr_$1.jsonl
    rm -f "$met"
    # shellcheck disable=SC2086
    run_one sr "$1" env OMP_NUM_THREADS=$SR_OMP OPENBLAS_NUM_THREADS=$SR_BLAS $SR_ENV \
        "${sr_cmd[@]}" --metrics "$met"
    echo "  round $1 shardrec done: $(grep -c step_ms "$met" 2>/dev/null || true) steps logged" >&2
}

for r in $(seq 1 "$R"); do
    if [ $((r % 2)) -eq 1 ]; then
        [ "$SR_ONLY" = 1 ] || run_ref "$r"
        [ "$REF_ONLY" = 1 ] || run_sr "$r"
    else
        [ "$REF_ONLY" = 1 ] || run_sr "$r"
        [ "$SR_ONLY" = 1 ] || run_ref "$r"
    fi
done

"$PYTHON" - "$OUTDIR" "$R" "$WARMUP" "$BATCH" "$STEPS" "$WORKLOAD" <<'EOF'
import json, os, re, statistics, sys

outdir, R, warmup, batch, steps, workload = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
pat = re.compile(r"Finished training it (\d+)/\d+ of epoch \d+, ([0-9.]+) ms/it, loss ([0-9.eE+-]+|nan)")

def ref_round(r):
    p = os.path.join(outdir, "ref_%d.log" % r)
    if not os.path.exists(p):
        return None
    its = [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
           for m in map(pat.search, open(p)) if m]
    its.sort()
    timed = [ms for it, ms, _ in its if it > warmup]
    if len(its) != steps or not timed:
        sys.exit("reference round %d: %d iterations parsed from %s, expected %d" % (r, len(its), p, steps))
    return statistics.mean(timed), its[-1][2]

def sr_round(r):
    p = os.path.join(outdir, "sr_%d.jsonl" % r)
    if not os.path.exists(p):
        return None
    rows = []
    for ln in open(p):
        ln = ln.strip()
        if not ln:
            continue
        try:
            o = json.loads(ln)
        except ValueError:
            sys.exit("shardrec round %d: bad JSON line in %s: %s" % (r, p, ln[:120]))
        if "step" in o and "step_ms" in o:
            rows.append(o)
    rows.sort(key=lambda o: o["step"])
    if len(rows) != steps:
        sys.exit("shardrec round %d: %d step lines with step_ms in %s, expected %d (is it run with --log-every 1?)" % (r, len(rows), p, steps))
    timed = rows[warmup:]
    ms = statistics.mean(float(o["step_ms"]) for o in timed)
    sps = statistics.mean(float(o["samples_per_s"]) for o in timed if "samples_per_s" in o) if any("samples_per_s" in o for o in timed) else float("nan")
    return ms, rows[-1].get("loss", float("nan")), sps

ref = {r: ref_round(r) for r in range(1, R + 1)}
sr = {r: sr_round(r) for r in range(1, R + 1)}
sps = lambda ms: batch * 1000.0 / ms
fmt = lambda x, f: (f % x) if x is not None else "-"

def other(who, r):
    p = os.path.join(outdir, "%s_%d.run.json" % (who, r))
    try:
        return json.load(open(p))["others_cores"]
    except (OSError, ValueError, KeyError):
        return None

print()
print("workload %s, batch %d: ms/step = mean after %d warm-up steps; reference excludes its batch generation, shardrec includes it" % (workload, batch, warmup))
print("oth = cores kept busy by other processes during that run (of %d)" % (os.cpu_count() or 1))
hdr = "%-6s | %11s %10s %4s | %11s %10s %4s | %7s"
print(hdr % ("round", "ref ms/step", "ref samp/s", "oth", "sr ms/step", "sr samp/s", "oth", "sr/ref"))
print("-" * 80)
ratios = []
for r in range(1, R + 1):
    rm = ref[r][0] if ref[r] else None
    sm = sr[r][0] if sr[r] else None
    ratio = (rm / sm) if (rm and sm) else None
    if ratio:
        ratios.append(ratio)
    print(hdr % (r, fmt(rm, "%.1f"), fmt(sps(rm) if rm else None, "%.0f"), fmt(other("ref", r) if rm else None, "%.1f"),
          fmt(sm, "%.1f"), fmt(sps(sm) if sm else None, "%.0f"), fmt(other("sr", r) if sm else None, "%.1f"), fmt(ratio, "%.2fx")))
print("-" * 80)
rmed = statistics.median(v[0] for v in ref.values()) if all(ref.values()) else None
smed = statistics.median(v[0] for v in sr.values()) if all(sr.values()) else None
print(hdr % ("median", fmt(rmed, "%.1f"), fmt(sps(rmed) if rmed else None, "%.0f"), "",
      fmt(smed, "%.1f"), fmt(sps(smed) if smed else None, "%.0f"), "", fmt(rmed / smed if rmed and smed else None, "%.2fx")))
if ratios:
    print("ratio shardrec/reference samples/s: %.2fx (ratio of medians); median of per-round ratios %.2fx; range %.2f-%.2fx"
          % (rmed / smed, statistics.median(ratios), min(ratios), max(ratios)))
if all(ref.values()):
    print("reference final-step loss: " + " ".join("%.4f" % v[1] for v in ref.values()))
if all(sr.values()):
    print("shardrec  final-step loss: " + " ".join("%.4f" % float(v[1]) for v in sr.values()))
    print("shardrec  mean reported samples_per_s after warm-up: " + " ".join("%.0f" % v[2] for v in sr.values()))
json.dump({"workload": workload, "batch": batch, "steps": steps, "warmup": warmup,
           "reference_ms": [v[0] if v else None for v in ref.values()],
           "shardrec_ms": [v[0] if v else None for v in sr.values()],
           "reference_median_ms": rmed, "shardrec_median_ms": smed,
           "ratio_of_medians": (rmed / smed) if rmed and smed else None,
           "per_round_ratios": ratios,
           "reference_others_cores": [other("ref", r) for r in range(1, R + 1)],
           "shardrec_others_cores": [other("sr", r) for r in range(1, R + 1)]},
          open(os.path.join(outdir, "summary.json"), "w"), indent=1)
EOF
echo "summary: $OUTDIR/summary.json"
