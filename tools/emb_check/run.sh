#!/bin/sh
# Build and run the embedding-ops check (test_emb.cpp) against the CPU ops:
#   tools/emb_check/run.sh sim [quick|many]   kernels on the host simulator (no GPU)
#   tools/emb_check/run.sh gpu [quick|many]   kernels on GPU 0 (nvcc)
# Builds a CPU-only libshardrec (NO_CUDA NO_MPI NO_BLAS NO_OMP) and the test
# into $EMB_CHECK_BUILD (default build-emb-check/); exit status is the test's.
set -e
MODE=${1:-sim}
[ $# -gt 0 ] && shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${EMB_CHECK_BUILD:-$ROOT/build-emb-check}
NVCC=${NVCC:-nvcc}
mkdir -p "$OUT"
make -s -C "$ROOT" NO_CUDA=1 NO_MPI=1 NO_BLAS=1 NO_OMP=1 BUILD="$OUT/lib" lib >/dev/null
CXX="g++ -std=c++20 -O1 -g -ffp-contract=off -pthread -I$ROOT/include -I$ROOT/src -DSR_USE_CUDA"
CUS="cuda_embedding cuda_embedding_dp"
case "$MODE" in
sim)
    for f in $CUS; do
        python3 "$HERE/sim/xform.py" "$ROOT/src/device/cuda/$f.cu" "$OUT/sim_$f.cpp"
        $CXX -w -I"$HERE/sim" -c "$OUT/sim_$f.cpp" -o "$OUT/sim_$f.o"
    done
    $CXX -I"$HERE/sim" -c "$HERE/sim/sim.cpp" -o "$OUT/sim.o"
    $CXX -DEMB_CHECK_SIM -I"$HERE/sim" -c "$HERE/test_emb.cpp" -o "$OUT/test_sim.o"
    g++ -pthread -o "$OUT/emb_check_sim" "$OUT/test_sim.o" "$OUT/sim.o" "$OUT"/sim_cuda_*.o \
        "$OUT/lib/libshardrec.a" -lcjson -lm
    exec "$OUT/emb_check_sim" "$@"
    ;;
gpu)
    CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v $NVCC)")")}
    for f in $CUS; do
        $NVCC -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -Xcompiler -fPIC -I"$ROOT/include" \
            -I"$ROOT/src" -DSR_USE_CUDA -lineinfo --expt-relaxed-constexpr -fmad=false \
            -c "$ROOT/src/device/cuda/$f.cu" -o "$OUT/gpu_$f.o"
    done
    $CXX -I"$CUDA_HOME/include" -c "$HERE/test_emb.cpp" -o "$OUT/test_gpu.o"
    g++ -pthread -o "$OUT/emb_check_gpu" "$OUT/test_gpu.o" "$OUT"/gpu_cuda_*.o "$OUT/lib/libshardrec.a" \
        -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart -lstdc++ -lcjson -lm
    exec "$OUT/emb_check_gpu" "$@"
    ;;
*)
    echo "usage: $0 sim|gpu [quick|many]" >&2
    exit 2
    ;;
esac
