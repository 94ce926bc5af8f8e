#!/bin/sh
# A shorter version of the default job learns: after 300 steps the eval AUC is
# within 0.025 of the teacher's ceiling and at least 0.05 above the dense-only
# floor; the loop allocated nothing after step 1; the summary's memory
# estimate adds up and its tables fit in the measured peak resident memory;
# the metrics file has one JSON line per interval with the documented fields.
sr_threads=keep
. "$(dirname "$0")/lib.sh"
sr_need_built "$sr_shardrec"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OPENBLAS_NUM_THREADS=1 "$sr_shardrec" train \
    --steps 300 --eval-every 150 --eval-samples 65536 --log-every 25 \
    --metrics "$tmp/m.jsonl" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/err"
line=$(grep '^AUC: model' "$tmp/err") || { echo "no AUC line"; exit 1; }
set -- $(echo "$line" | sed 's/[^0-9. ]//g')
model=$1 ceiling=$2 floor=$3
echo "model $model ceiling $ceiling floor $floor"
awk -v m="$model" -v c="$ceiling" -v f="$floor" 'BEGIN {
    if (c - m > 0.025) { print "FAIL: AUC " m " more than 0.025 below ceiling " c; exit 1 }
    if (m - f < 0.05) { print "FAIL: AUC " m " less than 0.05 above floor " f; exit 1 }
}' || exit 1
grep -q 'allocations in the training loop after step 1: 0$' "$tmp/err" || {
    echo "FAIL: the training loop allocated"; exit 1; }
# the summary's memory: the parts add up to the estimate, and the tables
# (initialised, so resident) fit in the measured peak resident memory
/usr/bin/python3 - "$tmp/err" <<'PY' || exit 1
import re, sys
text = open(sys.argv[1]).read()
unit = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
def b(v, u):
    return float(v) * unit[u]
m = re.search(r"memory per rank \(estimated before the run\): rank 0 ([0-9.]+) (\w+) \(tables "
              r"([0-9.]+) (\w+), MLPs ([0-9.]+) (\w+), batch ([0-9.]+) (\w+), evaluation "
              r"([0-9.]+) (\w+)\)", text)
r = re.search(r"peak resident host memory ([0-9.]+) (\w+)", text)
assert m and r, "no memory lines in the summary"
total, tables, mlps, batch, ev = (b(m.group(i), m.group(i + 1)) for i in range(1, 11, 2))
assert abs(tables + mlps + batch + ev - total) <= 0.002 * total, "parts do not add up"
assert b(*r.groups()) >= tables, "peak resident below the tables' size"
print("memory: estimate %.1f MiB (tables %.1f MiB), peak resident %.1f MiB" %
      (total / 2**20, tables / 2**20, b(*r.groups()) / 2**20))
PY
n=$(wc -l <"$tmp/m.jsonl")
[ "$n" -eq 12 ] || { echo "FAIL: $n metrics lines, expected 12"; exit 1; }
/usr/bin/python3 - "$tmp/m.jsonl" <<'PY' || exit 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == list(range(25, 301, 25)), "steps"
for r in rows:
    for k in ("step", "loss", "samples_per_s", "step_ms", "lr"):
        assert k in r, k
    assert r["loss"] > 0 and r["samples_per_s"] > 0
assert "eval_auc" in rows[5] and "eval_auc" in rows[11] and "eval_auc" not in rows[0]
assert rows[-1]["loss_avg"] < rows[0]["loss_avg"], "loss did not fall"
PY
