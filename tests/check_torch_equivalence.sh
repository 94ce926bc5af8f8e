#!/bin/sh
# shardrec and PyTorch train the same DLRM to the same numbers (issue 3, item 5;
# issue 7, item 6), for each optimizer:
#
#   1. `shardrec gen` writes a small Criteo TSV (26 tables of 50..~2000 rows);
#   2. tools/torch_dlrm.py init writes initial weights (the reference's init);
#   3. for each case below, shardrec trains on the TSV from those weights (STEPS
#      steps of batch 128 in file order, a metrics line per step, final weights
#      saved) and tools/torch_dlrm.py trains the same model on the same file from
#      the same weights with PyTorch's optimizers (or, for row-wise Adagrad and
#      the tables' Adam, the update written out in PyTorch):
#        case      --optimizer  --emb-optimizer   lr (dense, tables)  weights
#        sgd       sgd          sgd               0.1, 0.1            atol 1e-6
#        adagrad   adagrad      adagrad           0.02, 0.05          float64 reference
#        rowwise   adagrad      rowwise_adagrad   0.02, 0.05          atol 1e-6
#        adam      adam         adam              0.002, 0.005        float64 reference
#   4. per-step losses must agree within 1e-4 relative at every step; final
#      weights: sgd and rowwise allclose(rtol=1e-4, atol=1e-6) to PyTorch's
#      float32 run for every tensor. Adagrad's and Adam's first updates are
#      about lr * sign(g), so an element whose gradient is mostly rounding moves
#      by rounding, by an amount no fixed atol can know (it depends on the
#      machine's and the library's rounding and on the data). So those two are
#      judged against the same run in float64 (torch_dlrm.py train --dtype
#      float64), element by element: |sr - pt64| <= 3 * spread + 1e-6, where
#      spread = max |pt32 - pt64| over 4 float32 PyTorch runs (the plain one and
#      --jitter 1 2 3: initial weights moved by -1/0/+1 ulp, which redraws every
#      rounding). An element may be far from float64 only where float32 PyTorch
#      is too. Measured on an AMD EPYC (AVX2; 3 runs of the check, identical):
#        case      pt32-pt64 (plain, 4 runs)  sr-pt64   max per tensor      max per element
#                                                       sr / spread         |sr-pt64| / limit
#        adagrad   5.4e-4, 1.44e-3            1.94e-3   1.39 (plain: 4.1)   0.63
#        adam      8.3e-6, 8.3e-6             4.1e-6    1.28 (plain: 2.9)   0.55
#        sgd       2.8e-7                     2.8e-7    1.00                0.17
#        rowwise   1.8e-6                     2.5e-6    1.59                0.54
#      (sgd and rowwise are well conditioned: compared directly, sr-pt32 is
#      1.2e-7 and 1.7e-6, so they keep atol 1e-6.) Against the plain float32
#      run alone the ratio is luck: over 4 more data/init seeds it reached 9.8
#      per tensor, and pt32-pt64 reached 1.65e-2 (adagrad); with the 4 runs the
#      worst per element was 0.68 of this limit (0.92 of 2 * spread + 1e-6,
#      too close, hence the factor 3; the floor, about 16 ulp at |w| = 1,
#      covers elements that float32 happens to hit exactly). The previous fixed
#      atol (5e-4) failed here: sr-pt32 1.4e-3 in emb.t3.weight, where PyTorch's
#      own float32 runs are up to 1.44e-3 from float64. A real bug fails by far:
#      scratch builds with Adagrad's eps 1e-9 or 2e-10, or lr * 1.001 or
#      * 1.00001, land 0.1..0.46 from float64, 1e5 times the limit (their
#      losses fail too, by 2e-3..2e-2);
#   5. negative controls, which must FAIL, or the check proves nothing:
#      PyTorch (the first case's optimizers) with the output bias
#      top_mlp.1.bias moved by 1e-2, and shardrec's row-wise Adagrad judged
#      against the element-wise Adagrad reference. The bias moves every
#      sample's logit, so the loss differs from step 1 on, whatever the
#      optimizer, and the control holds for any STEPS: 3.1e-3 relative at
#      step 1 (dcn: 4.2e-3), 31 times the tolerance; at least 2.0e-3 for any
#      BATCH up to 512. The final weights stay apart (9.6e-3 after 10 steps,
#      8.9e-3 after 100). The control used to move top_mlp.1.weight[0], whose
#      hidden unit (top MLP unit 0, behind a ReLU) is active for 1 sample of
#      the first batch's 128: the loss moved by 4e-6 at step 1 and crossed the
#      tolerance only by drift, at step 46 of 100, so with STEPS=10 the
#      control failed;
#   6. the final weights survive a rename to the reference's names and back,
#      and the tool's writers (convert --to shardrec, train --save) record
#      every table's pooling (sum; docs/weights.md, "Metadata");
#   7. --interaction dcn (issue 18): the same model with 2 DCNv2 cross layers of
#      rank 16 in place of the dot interaction (n = 27 x 8 = 216), initial
#      weights from tools/torch_dlrm.py init --interaction dcn (TorchRec's
#      LowRankCrossNet init), per-step losses within 1e-5 relative:
#        case         --optimizer  --emb-optimizer  lr (dense, tables)  weights
#        dcn-sgd      sgd          sgd              0.1, 0.1            atol 1e-6
#        dcn-adagrad  adagrad      sgd              0.02, 0.05          float64 reference
#      dcn-adagrad trains the cross layers and MLPs with element-wise Adagrad.
#      (With --emb-optimizer rowwise_adagrad shardrec is within 1.5e-6 of the
#      float64 run and PyTorch float32 drifts 6e-4 from it.)
#      With Adagrad on the tables too, this DCN problem is ill-conditioned in
#      float32: PyTorch against itself with initial weights moved by 1 ulp
#      (--jitter 1) differs by 9.5e-3 in the loss over 100 steps (float32
#      against float64: 4.4e-3), so no implementation can meet 1e-5 there.
#      Measured (losses): dcn-sgd 2.1e-7 (weights 1.2e-7), dcn-adagrad 8.6e-7;
#      dcn-adagrad's weights are judged against float64 as adagrad's (step 4:
#      worst element 0.52 of the limit), element-wise Adagrad moving elements
#      whose gradient is mostly rounding by about lr.
# For information the adam case also prints how far torch.optim.SparseAdam
# itself lands: it adds eps before the bias correction, eps / sqrt(1 - b2^t)
# in effect, which DESIGN.md's Adam (torch.optim.Adam's formula) does not.
#
# Needs PyTorch for Python 3 (Debian: python3-torch; TORCH_PYTHON picks the
# interpreter, default /usr/bin/python3 then python3); without it the check
# is skipped (exit 77), never passed. About 50 s of CPU time (30 s before the
# float64 reference; wall time grows when the 2 cores are shared). STEPS and
# BATCH override the run's size; CASES="sgd adam" runs only those cases;
# JITTERS (default "1 2 3"), REF_FACTOR (3) and REF_FLOOR (1e-6) set step 4;
# KEEP_TMP=1 keeps (and names) the folder of data, weights and losses.
# SHARDREC_TRAIN_FLAGS are added to every `shardrec train` (the GPU suite's
# tests/gpu/check_gpu_torch.sh passes --device cuda --math fp32).
sr_threads=keep
. "$(dirname "$0")/lib.sh"
# Both sides on the environment's BLAS kernel, not the suite's pin
# (tests/blas_env.sh, for bit-for-bit comparisons over world sizes): PyTorch
# multiplies through the same OpenBLAS, and dcn-adagrad's 1e-5 on the losses
# holds where both round alike. Under the pin on this project's Zen 5 machine
# PyTorch's own float32 runs with weights moved by 1 ulp spread 1e-3 there,
# and shardrec, within that spread of float64, missed 1e-5 (1.3e-3).
if [ -n "${SR_BLAS_ENV_CORETYPE:-}" ]; then
    export OPENBLAS_CORETYPE="$SR_BLAS_ENV_CORETYPE"
elif [ -n "${SR_BLAS_PINNED:-}" ]; then
    unset OPENBLAS_CORETYPE
fi
bin=${SHARDREC:-$sr_shardrec}
tool="$sr_root/tools/torch_dlrm.py"
steps=${STEPS:-100}
batch=${BATCH:-128}
cases=${CASES:-sgd adagrad rowwise adam dcn-sgd dcn-adagrad}
jitters=${JITTERS:-1 2 3}
ref_factor=${REF_FACTOR:-3}
ref_floor=${REF_FLOOR:-1e-6}
train_flags=${SHARDREC_TRAIN_FLAGS:-}
start=$(date +%s)

die() {
    echo "FAIL: $*"
    exit 1
}

for n in "STEPS=$steps" "BATCH=$batch"; do
    case "${n#*=}" in
    '' | *[!0-9]* | 0*) die "$n: STEPS and BATCH must be positive integers (digits, no leading 0)" ;;
    esac
done

sr_need_torch
py=$sr_python
for flag in --data --init-weights --save-weights --optimizer --emb-optimizer --emb-lr; do
    "$bin" train --help 2>&1 | grep -q -- "$flag" || die "shardrec train has no $flag flag"
done

# 26 tables, rows 50..~2000, one feature each; a model small enough to run in seconds
rows=$(awk 'BEGIN { for (i = 0; i < 26; i++) printf "%s%d", i ? "," : "", 50 + (i * 977) % 1950 }')
model="--embedding-dim 8 --bot-mlp 13-32-8 --top-mlp 32-1 --table-rows $rows"

"$bin" gen --out "$tmp/x.tsv" --samples $((steps * batch)) --seed 7 $model \
    >"$tmp/gen.log" 2>&1 || { cat "$tmp/gen.log"; die "shardrec gen"; }
"$py" "$tool" init --out "$tmp/init.st" --table-rows "$rows" --bot-mlp 13-32-8 --top-mlp 32-1 \
    --seed 1 || die "torch_dlrm.py init"
dcn_model="--interaction dcn --dcn-layers 2 --dcn-rank 16"
"$py" "$tool" init --out "$tmp/init_dcn.st" --table-rows "$rows" --bot-mlp 13-32-8 --top-mlp 32-1 \
    --seed 1 $dcn_model || die "torch_dlrm.py init --interaction dcn"

# the initial weights and extra shardrec flags of a case
case_init() {
    case "$1" in
    dcn-*) echo "$tmp/init_dcn.st" ;;
    *) echo "$tmp/init.st" ;;
    esac
}
case_model() {
    case "$1" in
    dcn-*) echo "$dcn_model" ;;
    esac
}

# case -> dense optimizer, tables' optimizer, dense lr, tables' lr, weights atol
# against PyTorch float32 (or "reference": judged against the float64 run, step 4)
case_flags() {
    case "$1" in
    sgd) echo "sgd sgd 0.1 0.1 1e-6" ;;
    adagrad) echo "adagrad adagrad 0.02 0.05 reference" ;;
    rowwise) echo "adagrad rowwise_adagrad 0.02 0.05 1e-6" ;;
    adam) echo "adam adam 0.002 0.005 reference" ;;
    dcn-sgd) echo "sgd sgd 0.1 0.1 1e-6" ;;
    dcn-adagrad) echo "adagrad sgd 0.02 0.05 reference" ;;
    *) die "unknown case $1 in CASES" ;;
    esac
}

torch_train() { # case losses-file final-weights-file [extra flags]
    tc=$1 losses=$2 final=$3
    shift 3
    set -- $(case_flags "$tc") "$@"
    opt=$1 emb_opt=$2 lr=$3 emb_lr=$4
    shift 5
    "$py" "$tool" train --weights "$(case_init "$tc")" --data "$tmp/x.tsv" --steps "$steps" \
        --batch-size "$batch" --optimizer "$opt" --emb-optimizer "$emb_opt" --lr "$lr" \
        --emb-lr "$emb_lr" --losses "$losses" --save "$final" "$@"
}

shardrec_train() { # case
    set -- $1 $(case_flags "$1")
    "$bin" train --data "$tmp/x.tsv" $model $(case_model "$1") --steps "$steps" \
        --batch-size "$batch" --optimizer "$2" --emb-optimizer "$3" --lr "$4" --emb-lr "$5" \
        --seed 7 --init-weights "$(case_init "$1")" --save-weights "$tmp/sr_$1.st" \
        --metrics "$tmp/sr_$1.jsonl" --log-every 1 --eval-samples 0 --no-progress $train_flags \
        >"$tmp/train_$1.log" 2>&1
}

fail=0
for c in $cases; do
    echo "== $c: $(case_flags "$c" | awk '{ printf "--optimizer %s --emb-optimizer %s --lr %s --emb-lr %s", $1, $2, $3, $4 }')"
    shardrec_train "$c" || { tail -20 "$tmp/train_$c.log"; die "shardrec train ($c)"; }
    torch_train "$c" "$tmp/pt_$c.jsonl" "$tmp/pt_$c.st" || die "torch_dlrm.py train ($c)"
    rtol=1e-4
    case "$c" in dcn-*) rtol=1e-5 ;; esac
    "$py" "$tool" compare-losses "$tmp/sr_$c.jsonl" "$tmp/pt_$c.jsonl" --steps "$steps" \
        --rtol "$rtol" || fail=1
    atol=$(case_flags "$c" | awk '{ print $5 }')
    if [ "$atol" = reference ]; then
        torch_train "$c" "$tmp/pt64_$c.jsonl" "$tmp/pt64_$c.st" --dtype float64 ||
            die "torch_dlrm.py train --dtype float64 ($c)"
        for j in $jitters; do
            torch_train "$c" "$tmp/ptj${j}_$c.jsonl" "$tmp/ptj${j}_$c.st" --jitter "$j" ||
                die "torch_dlrm.py train --jitter $j ($c)"
        done
        "$py" "$tool" compare-reference "$tmp/sr_$c.st" "$tmp/pt64_$c.st" "$tmp/pt_$c.st" \
            $(for j in $jitters; do echo "$tmp/ptj${j}_$c.st"; done) \
            --factor "$ref_factor" --floor "$ref_floor" || fail=1
    else
        "$py" "$tool" compare-weights "$tmp/sr_$c.st" "$tmp/pt_$c.st" --rtol 1e-4 --atol "$atol" ||
            fail=1
    fi
    if [ "$c" = adam ]; then
        echo "for information, torch.optim.SparseAdam itself for the tables (eps before bias correction):"
        torch_train adam "$tmp/spa.jsonl" "$tmp/spa.st" --emb-optimizer sparse_adam ||
            die "torch_dlrm.py train --emb-optimizer sparse_adam"
        "$py" "$tool" compare-losses "$tmp/sr_adam.jsonl" "$tmp/spa.jsonl" --steps "$steps" \
            --rtol 1e-4 | sed 's/: FAIL$/: differs/; s/: ok$/: agrees/'
    fi
done
[ $fail -eq 0 ] || die "shardrec and PyTorch disagree"

if [ -f "$tmp/sr_rowwise.st" ] && [ -f "$tmp/pt_adagrad.st" ]; then
    echo "negative control: shardrec's row-wise Adagrad against PyTorch's element-wise Adagrad must disagree"
    if [ -f "$tmp/pt64_adagrad.st" ]; then
        set -- compare-reference "$tmp/sr_rowwise.st" "$tmp/pt64_adagrad.st" "$tmp/pt_adagrad.st" \
            $(for j in $jitters; do echo "$tmp/ptj${j}_adagrad.st"; done) \
            --factor "$ref_factor" --floor "$ref_floor"
    else
        set -- compare-weights "$tmp/sr_rowwise.st" "$tmp/pt_adagrad.st" --rtol 1e-4 --atol 1e-6
    fi
    if "$py" "$tool" "$@"; then
        die "the weight comparison did not tell row-wise from element-wise Adagrad"
    fi
fi

first=${cases%% *}
echo "negative control ($first): PyTorch with top_mlp.1.bias[0] += 1e-2 must disagree (from step 1)"
torch_train "$first" "$tmp/bad_losses.jsonl" "$tmp/bad_final.st" \
    --perturb top_mlp.1.bias:0:0.01 || die "torch_dlrm.py train --perturb"
if "$py" "$tool" compare-losses "$tmp/sr_$first.jsonl" "$tmp/bad_losses.jsonl" \
    --steps "$steps" --rtol 1e-4; then
    die "the loss comparison did not notice a perturbed weight"
fi
if "$py" "$tool" compare-weights "$tmp/sr_$first.st" "$tmp/bad_final.st" --rtol 1e-4 \
    --atol 1e-6; then
    die "the weight comparison did not notice a perturbed weight"
fi

final="$tmp/sr_$first.st"
"$py" "$tool" convert --to reference "$final" "$tmp/ref.st" &&
    "$py" "$tool" convert --to shardrec "$tmp/ref.st" "$tmp/back.st" &&
    "$py" "$tool" compare-weights "$final" "$tmp/back.st" --rtol 0 --atol 0 \
        >/dev/null || die "names do not survive shardrec -> reference -> shardrec"
for f in "$tmp/back.st" "$tmp/pt_$first.st"; do # convert --to shardrec's and train --save's
    "$py" "$tool" list "$f" | grep -q "^pooling: sum, recorded for 26 tables$" ||
        die "$f does not record the tables' pooling"
done
if "$py" -c "import safetensors" >/dev/null 2>&1; then
    "$py" -c "import sys, safetensors.torch as st; print(len(st.load_file(sys.argv[1])), \
'tensors read by safetensors.torch.load_file')" "$final" ||
        die "safetensors.torch cannot read shardrec's file"
fi
echo "torch equivalence: ok ($cases; $steps steps of batch $batch, $(($(date +%s) - start)) s)"
