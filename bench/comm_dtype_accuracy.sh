#!/bin/sh
# Accuracy cost of compressed exchanges (issue 4 item 9): the default job on 2
# ranks, rw sharding, global batch 4096, trained in fp32, bf16 and fp16 (both
# --comm-dtype and --dense-comm-dtype), final evaluation on 2^20 held-back
# samples. Prints a table: eval logloss and AUC, their change against fp32
# (target: logloss within 0.2% relative, AUC within 0.001), and the bytes per
# step from the run summary. Exit 0 only if both targets hold.
#
#   bench/comm_dtype_accuracy.sh [extra train flags]   (STEPS=600 NP=2 BUILD=build)
#
# Takes minutes on 2 cores; no timing is asserted.
BUILD=${BUILD:-build}
STEPS=${STEPS:-600}
NP=${NP:-2}
bin="$BUILD/shardrec"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
JOB="--steps $STEPS --sharding rw --global-batch-size 4096 --eval-samples 1048576 --eval-every 0
     --log-every 100 --no-progress"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
for d in fp32 bf16 fp16; do
    if ! mpirun $root --oversubscribe --bind-to none -np "$NP" "$bin" train $JOB "$@" \
        --comm-dtype $d --dense-comm-dtype $d --metrics "$tmp/$d.jsonl" >"$tmp/$d.err" 2>&1; then
        echo "comm_dtype_accuracy: the $d run failed:"; tail -20 "$tmp/$d.err"; exit 1
    fi
done

echo "commit $commit; $NP ranks; flags: $(echo $JOB "$@")"
/usr/bin/python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
def last_eval(d):
    rows = [json.loads(l) for l in open(f"{tmp}/{d}.jsonl")]
    return [r for r in rows if "eval_logloss" in r][-1]
def summary(d):
    text = open(f"{tmp}/{d}.err").read()
    b = re.search(r"bytes sent per step: intra-node ([\d.]+) KiB, inter-node ([\d.]+) KiB", text)
    c = re.search(r"collectives per step \(rank 0\):(.*)\| total ([\d.]+)", text)
    return float(b.group(1)) + float(b.group(2)), c.group(2)
ref = last_eval("fp32")
ok = True
print(f"{'dtype':6} {'eval logloss':>13} {'rel diff':>9} {'eval AUC':>9} {'AUC diff':>9} "
      f"{'KiB/step':>9} {'calls/step':>10}  verdict")
for d in ("fp32", "bf16", "fp16"):
    e = last_eval(d)
    kib, calls = summary(d)
    rel = (e["eval_logloss"] - ref["eval_logloss"]) / ref["eval_logloss"]
    dauc = e["eval_auc"] - ref["eval_auc"]
    good = abs(rel) <= 0.002 and abs(dauc) <= 0.001
    ok &= good
    print(f"{d:6} {e['eval_logloss']:13.6f} {100 * rel:+8.3f}% {e['eval_auc']:9.5f} "
          f"{dauc:+9.5f} {kib:9.1f} {calls:>10}  {'ok' if good else 'FAIL'}")
print("targets: logloss within 0.2% relative, AUC within 0.001 of fp32")
sys.exit(0 if ok else 1)
PY
