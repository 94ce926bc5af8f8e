#!/bin/sh
# Distributed equivalence of the sharded EBC: $BUILD/tests/mpi_sharded_ebc
# (tests/mpi/mpi_sharded_ebc.c) under mpirun on 1, 2, 3 and 4 ranks, each run
# bounded by `timeout 300`. Inside, every ranks-per-node dividing W is tried
# (so 4 ranks also run as 2 nodes of 2: the twrw byte and lookup checks).
# Prints one line per run; exit 0 only if all passed. Skips (exit 77) when
# there is no MPI.
BUILD=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin="$root/$BUILD/tests/mpi_sharded_ebc"

if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    echo "check_mpi_sharded_ebc: skipped (no MPI)"
    exit 77
fi
if [ ! -x "$bin" ]; then
    echo "check_mpi_sharded_ebc: $bin is missing; build it with: make tests"
    exit 1
fi

as_root=""
[ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export LSAN_OPTIONS="suppressions=$here/lsan_openmpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
unset SR_RANKS_PER_NODE
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0

for np in 1 2 3 4; do
    timeout 300 mpirun $as_root --oversubscribe --bind-to none -np "$np" "$bin" >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q " 0 failed" "$out"; then
        grep '^topology\|^comm dtype' "$out"
        echo "np $np: $(grep '^mpi_sharded_ebc:' "$out")"
    else
        failed=$((failed + 1))
        tail -40 "$out"
        echo "np $np: FAILED (exit $rc)"
    fi
done

[ "$failed" -eq 0 ]
