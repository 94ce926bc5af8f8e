#!/usr/bin/env bash
# Where a GPU step's time goes, kernel by kernel: runs a short shardrec job
# under Nsight Compute (duration only, clocks left alone) and prints the
# kernels grouped by name with their total time per step, largest first.
#
#   tools/gpu_kernels.sh STEPS SKIP_KERNELS COUNT -- shardrec train flags...
#
# SKIP_KERNELS launches are skipped (warm-up), then COUNT are timed; the
# per-step figure divides by the number of timed steps the caller states in
# STEPS (or, when the loss kernel was timed, the number of its launches). ncu serialises kernels, so the sum is the device's busy time without
# overlap. ORDER=N also lists the last N timed launches in launch order
# (time, stream, grid, block, name), to tell one step's GEMMs apart. Needs
# ncu (the GPU image has it) and python3.
set -euo pipefail
steps=$1 skip=$2 count=$3
shift 3
[ "${1:-}" = "--" ] && shift
BUILD=${BUILD:-build-gpu}
csv=${TMPDIR:-/tmp}/gpu_kernels.$$.csv
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
[ -n "$NCU" ] || { echo "gpu_kernels: ncu not found (set NCU)"; exit 1; }
"$NCU" --clock-control none --metrics gpu__time_duration.sum --launch-skip "$skip" \
    --launch-count "$count" --csv "$BUILD/shardrec" train "$@" >"$csv" 2>"$csv.err" || true
grep -q '^"' "$csv" || { echo "gpu_kernels: ncu gave no rows:"; tail -n 5 "$csv.err"; tail -n 5 "$csv"; exit 1; }
python3 - "$csv" "$steps" "${ORDER:-0}" <<'PY'
import csv, sys, collections, re
rows = []
order = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "nsecond")
    ns = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
    name = re.sub(r"\(.*", "", r["Kernel Name"])[:70]
    rows.append((name, ns))
    order.append((ns, r.get("Stream", "?"), r.get("Grid Size", "?"), r.get("Block Size", "?"),
                  r["Kernel Name"][:110]))
tot = collections.defaultdict(float); cnt = collections.Counter()
for n, ns in rows:
    tot[n] += ns; cnt[n] += 1
# steps: the loss kernel runs once a step; else the caller's figure
steps = float(sum(c for n, c in cnt.items() if "bce" in n) or sys.argv[2])
all_ns = sum(tot.values())
print(f"{len(rows)} kernels timed, {all_ns/1e6/steps:.3f} ms of kernels per step")
for n, ns in sorted(tot.items(), key=lambda x: -x[1])[:25]:
    print(f"{ns/1e6/steps:8.3f} ms/step {cnt[n]/steps:5.1f}/step  {n}")
n_order = int(sys.argv[3])
if n_order:
    print(f"last {min(n_order, len(order))} launches in order: us, stream, grid, block, kernel")
    for ns, st, grid, block, name in order[-n_order:]:
        print(f"{ns/1e3:9.1f} {st:>4} {grid:>16} {block:>12}  {name}")
PY
