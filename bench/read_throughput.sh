#!/bin/sh
# Reading throughput on one core: TSV lines/s and binary samples/s
# (bench/read_bench.c). Usage: sh bench/read_throughput.sh [SAMPLES] [DIR]
# Builds the library (make lib) if needed; pins the run to one core.
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ -f "$BUILD/libshardrec.a" ] || make -j2 lib >/dev/null
LIBS=$(make -s -f Makefile --eval 'print-libs: ; @echo $(LDFLAGS) $(LDLIBS)' print-libs 2>/dev/null | tail -1)
cc -std=c11 -D_GNU_SOURCE -O3 -march=native -Iinclude -o "$BUILD/read_bench" bench/read_bench.c \
    "$BUILD/libshardrec.a" $LIBS
OMP_NUM_THREADS=1 taskset -c 0 "$BUILD/read_bench" "${1:-1000000}" "${2:-/tmp}"
