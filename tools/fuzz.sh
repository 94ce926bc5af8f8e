#!/bin/sh
# Build and run the libFuzzer targets of the data readers under ASan + UBSan:
#   tests/fuzz/fuzz_criteo_line.c   the Criteo TSV line parser
#   tests/fuzz/fuzz_binfmt.c        the binary format's header/chunk checks and batch copy
#   tests/fuzz/fuzz_safetensors.c   the safetensors reader's header and offset checks, and the
#                                   weights' pooling records
#   tests/fuzz/fuzz_config.c        the --config JSON reader, config check and memory estimate
#   tests/fuzz/fuzz_plan.c          the plan file reader (and a write/read round trip)
#   tests/fuzz/fuzz_line_stream.c   the line stream over plain and gzip text (lines equal
#                                   the text's; a cut gzip file is an error)
#   tests/fuzz/fuzz_topology.c      the topology reader, and the planner's search on what it accepts
#   tests/fuzz/fuzz_ckpt.c          a checkpoint's manifest, as inspect and export read it (the
#                                   other files: tests/fuzz/ckpt_fixture)
#   tests/fuzz/fuzz_npy.c           the .npy header reader (convert --npy)
#   tests/fuzz/fuzz_npz.c           the .npz archive reader (zip, zip64; convert --npy multi-hot)
# Usage: sh tools/fuzz.sh [SECONDS]   (default 30; each target gets SECONDS)
# FUZZ_TARGETS="fuzz_config fuzz_plan" builds and runs only those; FUZZ_OUT=DIR puts the
# binaries and corpora there instead of build-fuzz/.
# Needs clang with libFuzzer. Exit status is non-zero if a target finds a
# crash (its reproducer is kept in the output folder).
set -e
secs=${1:-30}
cd "$(dirname "$0")/.."
CC=${FUZZ_CC:-clang}
out=${FUZZ_OUT:-build-fuzz}
mkdir -p "$out"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc"
core="src/core/error.c src/core/alloc.c src/core/log.c src/core/nearest.c"
# Whether FUZZ_TARGETS (if set) names the target.
wanted() {
    [ -z "${FUZZ_TARGETS:-}" ] && return 0
    case " $FUZZ_TARGETS " in *" $1 "*) return 0 ;; esac
    return 1
}
build() { # name, sources...
    name=$1
    shift
    wanted "$name" || return 0
    echo "== building $name"
    $CC $flags -o "$out/$name" "$@" $core -lm -lpthread
}
build fuzz_criteo_line tests/fuzz/fuzz_criteo_line.c src/data/criteo_tsv.c
targets=fuzz_criteo_line
if [ -f tests/fuzz/fuzz_binfmt.c ]; then
    build fuzz_binfmt tests/fuzz/fuzz_binfmt.c src/data/binfmt.c src/core/kjt.c src/data/batch.c
    targets="$targets fuzz_binfmt"
fi
if [ -f tests/fuzz/fuzz_safetensors.c ]; then
    build fuzz_safetensors tests/fuzz/fuzz_safetensors.c src/core/safetensors.c src/core/atomic_file.c \
        src/core/fault.c src/core/json_kind.c src/train/weights_meta.c src/core/table_config.c \
        src/core/tensor.c -lcjson
    targets="$targets fuzz_safetensors"
fi
if [ -f tests/fuzz/fuzz_config.c ]; then
    build fuzz_config tests/fuzz/fuzz_config.c src/train/train_config.c src/train/train_memory.c \
        src/train/train_settings.c \
        src/plan/plan.c src/core/table_config.c src/core/rng.c src/core/optim_config.c src/core/half.c \
        src/core/tensor.c src/data/zipf.c src/data/synthetic.c src/data/teacher.c \
        src/model/dlrm_config.c src/model/interaction.c src/train/metrics.c \
        src/device/ops.c src/device/device.c src/core/files.c src/core/json_kind.c -lcjson
    targets="$targets fuzz_config"
fi
if [ -f tests/fuzz/fuzz_plan.c ]; then
    build fuzz_plan tests/fuzz/fuzz_plan.c src/plan/plan_io.c src/plan/plan.c \
        src/core/table_config.c src/core/rng.c src/core/atomic_file.c src/core/fault.c src/core/files.c \
        src/core/json_kind.c -lcjson
    targets="$targets fuzz_plan"
fi
if [ -f tests/fuzz/fuzz_line_stream.c ]; then
    build fuzz_line_stream tests/fuzz/fuzz_line_stream.c src/data/line_stream.c -ldl -lz
    targets="$targets fuzz_line_stream"
fi
if [ -f tests/fuzz/fuzz_topology.c ]; then
    build fuzz_topology tests/fuzz/fuzz_topology.c src/plan/topology.c src/plan/cost_model.c \
        src/plan/planner.c src/plan/plan.c src/core/table_config.c src/core/rng.c src/core/files.c \
        src/core/json_kind.c src/core/tensor.c -lcjson
    targets="$targets fuzz_topology"
fi
if [ -f tests/fuzz/fuzz_ckpt.c ]; then
    build fuzz_ckpt tests/fuzz/fuzz_ckpt.c src/train/checkpoint_inspect.c \
        src/train/checkpoint_format.c src/plan/plan.c src/plan/plan_io.c src/core/safetensors.c \
        src/core/atomic_file.c src/core/fault.c src/core/files.c src/core/half.c \
        src/core/optim_config.c src/core/tensor.c src/core/table_config.c src/core/rng.c \
        src/core/json_kind.c src/train/weights_meta.c -lcjson
    targets="$targets fuzz_ckpt"
fi
if [ -f tests/fuzz/fuzz_npy.c ]; then
    build fuzz_npy tests/fuzz/fuzz_npy.c src/data/npy.c src/core/files.c
    targets="$targets fuzz_npy"
fi
if [ -f tests/fuzz/fuzz_npz.c ]; then
    build fuzz_npz tests/fuzz/fuzz_npz.c src/data/npz.c src/data/npy.c src/core/files.c
    targets="$targets fuzz_npz"
fi
if [ -n "${FUZZ_TARGETS:-}" ]; then
    for t in $FUZZ_TARGETS; do
        case " $targets " in
        *" $t "*) ;;
        *) echo "fuzz.sh: FUZZ_TARGETS names '$t', which is not one of: $targets" >&2; exit 2 ;;
        esac
    done
    targets=$FUZZ_TARGETS
fi
status=0
for t in $targets; do
    mkdir -p "$out/corpus_$t"
    [ -d "tests/fuzz/seeds_$t" ] && cp -n tests/fuzz/seeds_$t/* "$out/corpus_$t/" 2>/dev/null || true
    dict=""
    [ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
    echo "== running $t for $secs s"
    if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$out/$t" $dict -max_total_time="$secs" -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$out/$t-" "$out/corpus_$t" >"$out/$t.log" 2>&1; then
        grep DONE "$out/$t.log" | tail -1
        echo "$t: clean"
    else
        tail -40 "$out/$t.log"
        echo "$t: FAILED (log $out/$t.log, reproducer $out/$t-*)"
        status=1
    fi
done
exit $status
