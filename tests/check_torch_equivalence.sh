#!/bin/sh
# shardrec and PyTorch train the same DLRM to the same numbers (issue 3, item 5).
#
#   1. `shardrec gen` writes a small Criteo TSV (26 tables of 50..~2000 rows);
#   2. tools/torch_dlrm.py init writes initial weights (the reference's init);
#   3. shardrec trains on the TSV from those weights: SGD lr 0.1 for dense
#      layers and embeddings, 100 steps of batch 128 in file order, a metrics
#      line per step, final weights saved;
#   4. tools/torch_dlrm.py trains the same model on the same file from the
#      same weights;
#   5. per-step losses must agree within 1e-4 relative at every step, final
#      weights allclose(rtol=1e-4, atol=1e-6) for every tensor;
#   6. negative control: PyTorch again with one initial weight moved by 1e-2;
#      both comparisons must now FAIL, or the check proves nothing;
#   7. the final weights survive a rename to the reference's names and back.
#
# Needs PyTorch for Python 3 (Debian: python3-torch; TORCH_PYTHON picks the
# interpreter, default /usr/bin/python3 then python3). About 10 s on 2 idle cores.
# STEPS and BATCH override the run's size.
BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SHARDREC:-$root/$BUILD/shardrec}
tool="$root/tools/torch_dlrm.py"
steps=${STEPS:-100}
batch=${BATCH:-128}
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

die() {
    echo "FAIL: $*"
    exit 1
}

py=""
for p in ${TORCH_PYTHON:-} /usr/bin/python3 python3; do
    if "$p" -c "import torch, numpy" >/dev/null 2>&1; then
        py=$p
        break
    fi
done
[ -n "$py" ] || die "no Python 3 with torch and numpy; HINT: apt-get install python3-torch \
(tools/install-deps.sh), or set TORCH_PYTHON"
for flag in --data --init-weights --save-weights; do
    "$bin" train --help 2>&1 | grep -q -- "$flag" || die "shardrec train has no $flag flag"
done

# 26 tables, rows 50..~2000, one feature each; a model small enough to run in seconds
rows=$(awk 'BEGIN { for (i = 0; i < 26; i++) printf "%s%d", i ? "," : "", 50 + (i * 977) % 1950 }')
model="--embedding-dim 8 --bot-mlp 13-32-8 --top-mlp 32-1 --table-rows $rows"
sgd="--steps $steps --batch-size $batch --optimizer sgd --emb-optimizer sgd --lr 0.1"

"$bin" gen --out "$tmp/x.tsv" --samples $((steps * batch)) --seed 7 $model \
    >"$tmp/gen.log" 2>&1 || { cat "$tmp/gen.log"; die "shardrec gen"; }
"$py" "$tool" init --out "$tmp/init.st" --table-rows "$rows" --bot-mlp 13-32-8 --top-mlp 32-1 \
    --seed 1 || die "torch_dlrm.py init"

"$bin" train --data "$tmp/x.tsv" $model $sgd --seed 7 --init-weights "$tmp/init.st" \
    --save-weights "$tmp/sr_final.st" --metrics "$tmp/sr_losses.jsonl" --log-every 1 \
    --eval-samples 0 --no-progress >"$tmp/train.log" 2>&1 ||
    { tail -20 "$tmp/train.log"; die "shardrec train"; }

torch_train() { # losses-file final-weights-file [extra flags]
    losses=$1
    final=$2
    shift 2
    "$py" "$tool" train --weights "$tmp/init.st" --data "$tmp/x.tsv" --steps "$steps" \
        --batch-size "$batch" --lr 0.1 --losses "$losses" --save "$final" "$@"
}
torch_train "$tmp/pt_losses.jsonl" "$tmp/pt_final.st" || die "torch_dlrm.py train"

fail=0
"$py" "$tool" compare-losses "$tmp/sr_losses.jsonl" "$tmp/pt_losses.jsonl" --steps "$steps" \
    --rtol 1e-4 || fail=1
"$py" "$tool" compare-weights "$tmp/sr_final.st" "$tmp/pt_final.st" --rtol 1e-4 --atol 1e-6 ||
    fail=1
[ $fail -eq 0 ] || die "shardrec and PyTorch disagree"

echo "negative control: PyTorch with top_mlp.1.weight[0] += 1e-2 must disagree"
torch_train "$tmp/bad_losses.jsonl" "$tmp/bad_final.st" --perturb top_mlp.1.weight:0:0.01 ||
    die "torch_dlrm.py train --perturb"
if "$py" "$tool" compare-losses "$tmp/sr_losses.jsonl" "$tmp/bad_losses.jsonl" \
    --steps "$steps" --rtol 1e-4; then
    die "the loss comparison did not notice a perturbed weight"
fi
if "$py" "$tool" compare-weights "$tmp/sr_final.st" "$tmp/bad_final.st" --rtol 1e-4 \
    --atol 1e-6; then
    die "the weight comparison did not notice a perturbed weight"
fi

"$py" "$tool" convert --to reference "$tmp/sr_final.st" "$tmp/ref.st" &&
    "$py" "$tool" convert --to shardrec "$tmp/ref.st" "$tmp/back.st" &&
    "$py" "$tool" compare-weights "$tmp/sr_final.st" "$tmp/back.st" --rtol 0 --atol 0 \
        >/dev/null || die "names do not survive shardrec -> reference -> shardrec"
if "$py" -c "import safetensors" >/dev/null 2>&1; then
    "$py" -c "import sys, safetensors.torch as st; print(len(st.load_file(sys.argv[1])), \
'tensors read by safetensors.torch.load_file')" "$tmp/sr_final.st" ||
        die "safetensors.torch cannot read shardrec's file"
fi
echo "torch equivalence: ok ($steps steps of batch $batch, $(($(date +%s) - start)) s)"
