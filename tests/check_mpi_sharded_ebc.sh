#!/bin/sh
# Distributed equivalence of the sharded EBC: $BUILD/tests/mpi_sharded_ebc
# (tests/mpi/mpi_sharded_ebc.c) under mpirun on 1, 2, 3 and 4 ranks, each run
# bounded by `timeout 300`. Inside, every ranks-per-node dividing W is tried
# (so 4 ranks also run as 2 nodes of 2: the twrw byte and lookup checks).
# Prints one line per run; exit 0 only if all passed. Skips (exit 77) when
# there is no MPI.
. "$(dirname "$0")/lib.sh"
bin="$sr_build/tests/mpi_sharded_ebc"
sr_need_mpi
sr_need_built "$bin"
out="$tmp/out"
failed=0

for np in 1 2 3 4; do
    sr_mpirun "$np" "$bin" >"$out" 2>&1
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
