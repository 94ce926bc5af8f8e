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
# Every tests/fuzz/fuzz_*.c is a target. Each links against the whole CPU library, which the
# Makefile builds once with the fuzz flags (coverage, ASan, UBSan; no CUDA) into
# lib/libshardrec.a of the output folder, and the libraries `make link-flags` names; so a
# parser that starts calling into another file needs no change here. make rebuilds only the
# objects whose sources or headers changed (after changing FUZZ_CC, remove the folder).
# Usage: sh tools/fuzz.sh [SECONDS]   (default 30; each target gets SECONDS)
# FUZZ_TARGETS="fuzz_config fuzz_plan" builds and runs only those; FUZZ_OUT=DIR puts the
# binaries, the library and corpora there instead of build-fuzz/.
# Needs clang with libFuzzer. Exit status is non-zero if a target finds a
# crash (its reproducer is kept in the output folder).
set -e
secs=${1:-30}
cd "$(dirname "$0")/.."
CC=${FUZZ_CC:-clang}
out=${FUZZ_OUT:-build-fuzz}
mkdir -p "$out"
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc"
targets=""
for src in tests/fuzz/fuzz_*.c; do
    name=${src#tests/fuzz/}
    targets="$targets ${name%.c}"
done
if [ -n "${FUZZ_TARGETS:-}" ]; then
    for t in $FUZZ_TARGETS; do
        case " $targets " in
        *" $t "*) ;;
        *) echo "fuzz.sh: FUZZ_TARGETS names '$t', which is not one of:$targets" >&2; exit 2 ;;
        esac
    done
    targets=$FUZZ_TARGETS
fi
# The Makefile with the fuzz build's settings: its output folder, compiler and flags.
lib_make() {
    make --no-print-directory CC="$CC" BUILD="$out/lib" OPT=-O1 SAN="$san" NO_CUDA=1 "$@"
}
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
echo "== building $out/lib/libshardrec.a"
lib_make -s -j"$jobs" "$out/lib/libshardrec.a"
# -lz: fuzz_line_stream's harness gzips its input itself (the library dlopens zlib).
libs="$(lib_make -s link-flags) -lz"
for t in $targets; do
    echo "== building $t"
    $CC $flags -o "$out/$t" "tests/fuzz/$t.c" "$out/lib/libshardrec.a" $libs
done
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
