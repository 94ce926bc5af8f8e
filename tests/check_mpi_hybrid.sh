#!/bin/sh
# Hybrid tables in the sharded EBC: $BUILD/tests/mpi_hybrid
# (tests/mpi/mpi_hybrid.c) under mpirun on 1, 2, 3 and 4 ranks, each run
# bounded by `timeout 300`; inside, every ranks-per-node dividing W. Against
# the unsharded EBC (every optimizer, weights), an all-rw plan over 20
# steps, reruns and a save/load of the shards. Prints one line per run;
# exit 0 only if all passed. Skips (exit 77) when there is no MPI.
. "$(dirname "$0")/lib.sh"
bin="$sr_build/tests/mpi_hybrid"
sr_need_mpi
sr_need_built "$bin"
out="$tmp/out"
failed=0

for np in 1 2 3 4; do
    sr_mpirun "$np" "$bin" >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q " 0 failed" "$out"; then
        echo "np $np: $(grep '^mpi_hybrid:' "$out")"
    else
        failed=$((failed + 1))
        tail -40 "$out"
        echo "np $np: FAILED (exit $rc)"
    fi
done

[ "$failed" -eq 0 ]
