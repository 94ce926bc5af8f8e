# Sourced by tests/run.sh and tests/lib.sh: the BLAS every test runs with.
# OpenBLAS's kernel pinned where the CPU has AVX (a DYNAMIC_ARCH build reads
# it; others ignore it). The tests compare runs over different world sizes
# bit for bit, which needs a GEMM whose rounding of a row of C does not depend
# on the row's place in the call. OpenBLAS's Haswell sgemm kernel (chosen on
# AVX2 CPUs: Zen, Haswell and later) rounds a row by its place in a 12-row
# tile, so the rows of a batch split over ranks round otherwise: within
# DESIGN's 1e-5 between world sizes, not bit for bit. The Sandybridge kernel
# (AVX) rounds every row alike. OPENBLAS_CORETYPE set by the caller wins.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Sandybridge
fi
