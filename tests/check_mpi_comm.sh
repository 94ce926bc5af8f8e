#!/bin/sh
# Multi-rank tests of the comm layer: $BUILD/tests/mpi_comm (tests/mpi/mpi_comm.c)
# under mpirun on 1, 2, 3 and 4 ranks, over shared memory (Open MPI's default
# transports) and over TCP on loopback (--mca btl tcp,self), each run bounded
# by `timeout 120` so a hang fails instead of blocking CI; then
# $BUILD/tests/mpi_comm_stream (streams and host waits) on 1 to 4 ranks. Then checks that a
# count above INT_MAX aborts with a message. Prints one line per run; exit 0
# only if all passed. Skips (exit 77) when there is no mpirun or no MPI build.
#
# Under ASan (make SANITIZE=1 tests; BUILD=build-asan sh tests/check_mpi_comm.sh,
# which `make SANITIZE=1 test` does) the same runs use Open MPI's leak
# suppressions (tests/lib.sh); by hand:
#   make SANITIZE=1 build-asan/tests/mpi_comm
#   LSAN_OPTIONS=suppressions=$PWD/tests/lsan_openmpi.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
#   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
#   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 build-asan/tests/mpi_comm
. "$(dirname "$0")/lib.sh"
bin="$sr_build/tests/mpi_comm"
sr_need_mpi
sr_need_built "$bin"
sr_timeout=120
out="$tmp/out"
failed=0

for np in 1 2 3 4; do
    for transport in shm tcp; do
        mca=""
        [ "$transport" = tcp ] && mca="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo"
        # shellcheck disable=SC2086
        sr_mpirun "$np" $mca "$bin" >"$out" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ] && grep -q " 0 failed" "$out"; then
            echo "np $np $transport: $(grep '^mpi_comm:' "$out")"
        else
            failed=$((failed + 1))
            tail -30 "$out"
            echo "np $np $transport: FAILED (exit $rc)"
        fi
    done
done

# streams through the comm layer (tests/mpi/mpi_comm_stream.c)
for np in 1 2 3 4; do
    sr_mpirun "$np" "$bin"_stream >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q " 0 failed" "$out"; then
        echo "np $np streams: $(grep '^mpi_comm_stream:' "$out")"
    else
        failed=$((failed + 1))
        tail -30 "$out"
        echo "np $np streams: FAILED (exit $rc)"
    fi
done

sr_mpirun 1 "$bin" --abort-large >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "exceed INT_MAX" "$out"; then
    echo "count above INT_MAX: aborts with a message"
else
    failed=$((failed + 1))
    tail -20 "$out"
    echo "count above INT_MAX: FAILED (exit $rc)"
fi

[ "$failed" -eq 0 ]
