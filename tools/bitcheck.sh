#!/bin/sh
# Bit-identity of training between two builds of shardrec: a refactor of the
# step must leave every loss, evaluation and saved weight unchanged.
#
#   tools/bitcheck.sh OLD_BIN NEW_BIN [cpu|cuda] [quick]
#
# runs the same jobs with both binaries and compares, case by case, the
# metrics lines (losses, learning rate, evaluation; the timing fields left
# out) and the saved safetensors file byte for byte. One line per case, then
# "bitcheck: N identical, N differ"; exit status 1 when any case differs or
# fails to run.
#
# cpu (default): 1 rank (both pipelines, every embedding optimizer, adam and
# adagrad dense), 2, 3 and 4 ranks (4 as 2 emulated nodes of 2) under every
# sharding type and a mixed plan, both pipelines, fp32 and bf16/fp16 wires.
# Run it once per device: plain, SR_CPU_DEFERRED=1 and SR_CPU_DEFERRED=opaque
# in the environment. cuda: the same on --device cuda with graphs on and off
# (ranks share the GPU). quick: a shorter list (1 and 2 ranks). Both run the
# DCNv2 interaction too (1 rank).
set -u
old=$1 new=$2 dev=${3:-cpu} quick=${4:-}
sr_threads=keep
. "$(dirname "$0")/../tests/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=1
sr_btl=tcp,self,vader
JOB="--table-rows 1,7,50,333,1000,5 --embedding-dim 8 --bot-mlp 13-16-8 --top-mlp 16-1
     --ids-per-feature 0-3 --id-dist zipf:1.05 --global-batch-size 48 --steps 12
     --lr 0.05 --eval-samples 200 --eval-every 6 --log-every 1 --no-progress --device $dev"
same=0 differ=0

run_one() { # bin tag np args...
    bin=$1 tag=$2 np=$3
    shift 3
    if [ "$np" -eq 1 ]; then
        "$bin" train $JOB "$@" --metrics "$tmp/$tag.jsonl" --save-weights "$tmp/$tag.st" \
            >"$tmp/$tag.err" 2>&1
    else
        sr_mpirun "$np" "$bin" train $JOB "$@" --metrics "$tmp/$tag.jsonl" \
            --save-weights "$tmp/$tag.st" >"$tmp/$tag.err" 2>&1
    fi
}

strip_timing() {
    sed -e 's/"samples_per_s": [^,}]*,\{0,1\} *//' -e 's/"step_ms": [^,}]*,\{0,1\} *//' "$1"
}

case_() { # name np args...
    name=$1 np=$2
    shift 2
    if ! run_one "$old" "$name.old" "$np" "$@"; then
        echo "ERROR    $name (old binary failed: $(tail -1 "$tmp/$name.old.err"))"
        differ=$((differ + 1))
        return
    fi
    if ! run_one "$new" "$name.new" "$np" "$@"; then
        echo "ERROR    $name (new binary failed: $(tail -1 "$tmp/$name.new.err"))"
        differ=$((differ + 1))
        return
    fi
    strip_timing "$tmp/$name.old.jsonl" >"$tmp/a"
    strip_timing "$tmp/$name.new.jsonl" >"$tmp/b"
    if [ ! -s "$tmp/a" ]; then
        echo "ERROR    $name (no metrics)"
        differ=$((differ + 1))
    elif ! cmp -s "$tmp/a" "$tmp/b"; then
        echo "DIFFER   $name (metrics: $(diff "$tmp/a" "$tmp/b" | sed -n 2p | cut -c1-120))"
        differ=$((differ + 1))
    elif ! cmp -s "$tmp/$name.old.st" "$tmp/$name.new.st"; then
        echo "DIFFER   $name (saved weights)"
        differ=$((differ + 1))
    else
        echo "same     $name"
        same=$((same + 1))
    fi
}

pipes="none sparse-dist"
# DCNv2 cross layers: D 8 (the GPU's float4 path) and D 6 (its scalar path)
for d in 8 6; do
    case_ "1r-dcn-d$d" 1 --interaction dcn --dcn-layers 2 --dcn-rank 8 --embedding-dim $d --bot-mlp 13-16-$d \
        --optimizer adagrad
done
if [ "$dev" = cuda ]; then
    case_ "1r-dcn-tf32" 1 --interaction dcn --dcn-layers 3 --dcn-rank 8 --math tf32
    for g in --cuda-graphs --no-cuda-graphs; do
        for o in sgd rowwise_adagrad; do
            case_ "1r-sparse-dist-$o$g" 1 --pipeline sparse-dist --emb-optimizer $o $g
        done
    done
fi
for p in $pipes; do
    for o in sgd adagrad rowwise_adagrad adam; do
        case_ "1r-$p-emb-$o" 1 --pipeline $p --emb-optimizer $o
    done
    case_ "1r-$p-dense-adam" 1 --pipeline $p --optimizer adam
    case_ "1r-$p-dense-adagrad-mean" 1 --pipeline $p --optimizer adagrad --pooling mean
done
if ! command -v mpirun >/dev/null 2>&1; then
    echo "bitcheck: no mpirun; multi-rank cases not run"
else
    ranks="2 3 4"
    [ -n "$quick" ] && ranks=2
    for W in $ranks; do
        L=$W extra=""
        [ "$W" -eq 4 ] && L=2 extra="--ranks-per-node 2"
        sr_mixed_plan "$W" "$L" >"$tmp/mixed$W.json"
        for p in $pipes; do
            for s in dp tw rw cw twrw; do
                case_ "${W}r-$p-$s" "$W" --pipeline $p --sharding $s --emb-optimizer adagrad $extra
            done
            case_ "${W}r-$p-mixed" "$W" --pipeline $p --plan "$tmp/mixed$W.json" --emb-optimizer adam $extra
            case_ "${W}r-$p-mixed-bf16" "$W" --pipeline $p --plan "$tmp/mixed$W.json" $extra \
                --emb-optimizer sgd --optimizer adagrad \
                --comm-dtype bf16 --dense-comm-dtype fp16
        done
    done
fi
echo "bitcheck: $same identical, $differ differ"
[ "$differ" -eq 0 ]
