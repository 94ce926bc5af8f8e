# Sourced by tests/run.sh and tests/lib.sh: the BLAS every test runs with.
# OpenBLAS's kernel pinned where the CPU has AVX (a DYNAMIC_ARCH build reads
# it; others ignore it). The tests compare runs over different world sizes
# bit for bit, which needs a GEMM whose rounding of a row of C does not depend
# on the row's place in the call. OpenBLAS's Haswell sgemm kernel (Debian's
# 0.3.21; this project's machines set OPENBLAS_CORETYPE=Haswell) was seen on
# an AMD EPYC (Zen 5) to round a row by its place in a 12-row tile, so the
# rows of a batch split over ranks rounded otherwise: within DESIGN's 1e-5
# between world sizes, not bit for bit. The Sandybridge kernel (AVX) rounded
# every row alike there. The pin replaces the environment's core type.
# SR_BLAS_ENV_CORETYPE keeps the environment's for a test comparing with
# another program over the same BLAS (check_torch_equivalence).
if [ -z "${SR_BLAS_PINNED:-}" ]; then
    export SR_BLAS_ENV_CORETYPE="${OPENBLAS_CORETYPE:-}" SR_BLAS_PINNED=1
fi
if grep -qw avx /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Sandybridge
fi
