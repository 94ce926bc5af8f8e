/*
 * CPU dense ops (the table of device/ops_dense.h): GEMM through OpenBLAS's
 * cblas_sgemm (a plain C loop when the build has no BLAS), the linear layer's
 * fused epilogues, ReLU, the DLRM dot interaction, the DCNv2 cross layer's
 * elementwise parts and the fused BCE loss.
 *
 * Layout: row-major fp32 throughout; the interaction's X for sample b is
 * [z_b, e_b1, ..., e_bF], rows of D floats, z_b in z and the e_bf contiguous
 * in emb (feature order).
 *
 * Determinism: loops split with schedule(static); a reduction across rows
 * (bias gradient) is split by columns so each sum runs in row order on one
 * thread, and the loss is summed serially in sample order. Results therefore
 * do not depend on thread timing, and the bias gradient not even on the
 * thread count.
 */
#include <math.h>
#include <string.h>

#ifdef SR_USE_BLAS
#include <cblas.h>
#endif

#include "shardrec/error.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_dense.h"

#ifdef _OPENMP
#include <omp.h>
#define OMP_FOR _Pragma("omp parallel for schedule(static)")
#else
#define OMP_FOR
#endif

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 16384

/* Below this many multiply-adds a GEMM runs on one thread. */
#define GEMM_PAR_MIN (1 << 18)

/* C = alpha * op(A) op(B) + beta * C on the calling thread. */
static void gemm_serial(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
#ifdef SR_USE_BLAS
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        for (int j = 0; j < n; j++)
            ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
        for (int p = 0; p < k; p++) {
            float aip = alpha * (ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]);
            for (int j = 0; j < n; j++)
                ci[j] += aip * (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
        }
    }
#endif
}

/* Start of thread t's share of [0, dim) among T threads, on a multiple of 16. */
static int split_point(int dim, int t, int T)
{
    if (t >= T)
        return dim;
    int p = (int)(((int64_t)dim * t / T + 8) / 16 * 16);
    return p < dim ? p : dim;
}

/* Thread t of T computes its slab of C's rows (split_m) or columns: a GEMM
 * with the whole k, so every element of C is one thread's sum in BLAS's own
 * order and no thread reduces another's work. */
static void gemm_slab(int t, int T, int split_m, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    int dim = split_m ? m : n;
    int lo = split_point(dim, t, T), hi = split_point(dim, t + 1, T);
    if (lo >= hi)
        return;
    if (split_m)
        gemm_serial(ta, tb, hi - lo, n, k, alpha, a + (ta ? (size_t)lo : (size_t)lo * lda), lda, b,
                    ldb, beta, c + (size_t)lo * ldc, ldc);
    else
        gemm_serial(ta, tb, m, hi - lo, k, alpha, a, lda, b + (tb ? (size_t)lo * ldb : (size_t)lo),
                    ldb, beta, c + lo, ldc);
}

/* BLAS runs single-threaded inside our OpenMP threads: one pool of threads,
 * no oversubscription of the cores, and a split that never depends on timing. */
static void blas_threads_once(void)
{
#if defined(SR_USE_BLAS) && defined(_OPENMP)
    static int done;
    if (!done) {
        openblas_set_num_threads(1);
        done = 1;
    }
#endif
}

static void cpu_gemm(struct sr_device *dev, sr_stream_t s, enum sr_transpose trans_a,
                     enum sr_transpose trans_b, int m, int n, int k, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    SR_ASSERT(m >= 0 && n >= 0 && k >= 0);
    if (m == 0 || n == 0)
        return;
    blas_threads_once();
#ifdef _OPENMP
    if ((int64_t)m * n * k >= GEMM_PAR_MIN && omp_get_max_threads() > 1) {
        int split_m = m >= n;
#pragma omp parallel
        gemm_slab(omp_get_thread_num(), omp_get_num_threads(), split_m, trans_a, trans_b, m, n, k,
                  alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_bias_relu_forward(struct sr_device *dev, sr_stream_t s, float *y, const float *bias,
                                  int rows, int cols, int relu)
{
    if (cols == 1) { /* the logit layer: one column, keep it serial */
        for (int r = 0; r < rows; r++) {
            float v = y[r] + bias[0];
            y[r] = relu && v < 0.0f ? 0.0f : v;
        }
        return;
    }
    OMP_FOR
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * cols;
        if (relu) {
            for (int c = 0; c < cols; c++) {
                float v = yr[c] + bias[c];
                yr[c] = v > 0.0f ? v : 0.0f;
            }
        } else {
            for (int c = 0; c < cols; c++)
                yr[c] += bias[c];
        }
    }
}

static void cpu_linear_forward(struct sr_device *dev, sr_stream_t s, const float *x, const float *w,
                               const float *bias, int B, int in, int out, int relu, float *y)
{
    cpu_gemm(dev, s, SR_NO_TRANS, SR_TRANS, B, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    cpu_bias_relu_forward(dev, s, y, bias, B, out, relu);
}

static void cpu_relu_forward(struct sr_device *dev, sr_stream_t s, const float *x, float *y,
                             size_t n)
{
    OMP_FOR
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cpu_relu_backward(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                              size_t n)
{
    OMP_FOR
    for (size_t i = 0; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* Mask (when relu) and sum columns [c0, c1) of dy over all rows, in row order. */
static void mask_and_sum_columns(const float *y, float *dy, int rows, int cols, int relu, int c0,
                                 int c1, float *dbias)
{
    for (int c = c0; c < c1; c++)
        dbias[c] = 0.0f;
    for (int r = 0; r < rows; r++) {
        float *dyr = dy + (size_t)r * cols;
        if (relu) {
            const float *yr = y + (size_t)r * cols;
            for (int c = c0; c < c1; c++)
                dyr[c] = yr[c] > 0.0f ? dyr[c] : 0.0f;
        }
        for (int c = c0; c < c1; c++)
            dbias[c] += dyr[c];
    }
}

/* Each thread owns a contiguous range of columns (whole cache lines) and
 * walks all rows: every column sum runs in row order on one thread, so the
 * result does not depend on the thread count. */
static void cpu_relu_bias_backward(struct sr_device *dev, sr_stream_t s, const float *y, float *dy,
                                   int rows, int cols, int relu, float *dbias)
{
#ifdef _OPENMP
    if ((size_t)rows * cols >= PAR_MIN && cols >= 32) {
#pragma omp parallel
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            mask_and_sum_columns(y, dy, rows, cols, relu, split_point(cols, t, T),
                                 split_point(cols, t + 1, T), dbias);
        }
        return;
    }
#endif
    mask_and_sum_columns(y, dy, rows, cols, relu, 0, cols, dbias);
}

static void cpu_bias_grad(struct sr_device *dev, sr_stream_t s, const float *dy, int rows, int cols,
                          float *dbias)
{
    cpu_relu_bias_backward(dev, s, NULL, (float *)dy, rows, cols, 0, dbias);
}

/* A dot product in 8 independent lanes (the compiler maps them onto one
 * vector register), combined in a fixed order: fast and still bit-exact. */
static inline float dot(const float *a, const float *b, int D)
{
    float lane[8] = {0};
    int d = 0;
    for (; d + 8 <= D; d += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += a[d + l] * b[d + l];
    float acc =
        ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (; d < D; d++)
        acc += a[d] * b[d];
    return acc;
}

/* Row i of X = [z_b, e_b1..e_bF] for one sample. */
static inline const float *x_row(const float *zb, const float *eb, int i, int D)
{
    return i == 0 ? zb : eb + (size_t)(i - 1) * D;
}

static void cpu_interaction_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                                    const float *emb, int B, int F, int D, float *out)
{
    int width = D + F * (F + 1) / 2;
    OMP_FOR
    for (int b = 0; b < B; b++) {
        const float *zb = z + (size_t)b * D;
        const float *eb = emb + (size_t)b * F * D;
        float *ob = out + (size_t)b * width;
        memcpy(ob, zb, sizeof(float) * D);
        int k = D;
        for (int i = 1; i <= F; i++) {
            const float *xi = x_row(zb, eb, i, D);
            for (int j = 0; j < i; j++)
                ob[k++] = dot(xi, x_row(zb, eb, j, D), D);
        }
    }
}

static inline void axpy(float *restrict y, float a, const float *restrict x, int D)
{
    for (int d = 0; d < D; d++)
        y[d] += a * x[d];
}

/* Each pair's gradient g flows to both of its rows: dX_i += g X_j and
 * dX_j += g X_i, pairs in output order. */
static void cpu_interaction_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                                     const float *emb, const float *dout, int B, int F, int D,
                                     float *dz, float *demb)
{
    int width = D + F * (F + 1) / 2;
    OMP_FOR
    for (int b = 0; b < B; b++) {
        const float *zb = z + (size_t)b * D;
        const float *eb = emb + (size_t)b * F * D;
        const float *gb = dout + (size_t)b * width;
        float *dzb = dz + (size_t)b * D;
        float *deb = demb + (size_t)b * F * D;
        memcpy(dzb, gb, sizeof(float) * D);
        memset(deb, 0, sizeof(float) * F * D);
        int k = D;
        for (int i = 1; i <= F; i++) {
            const float *xi = x_row(zb, eb, i, D);
            float *dxi = deb + (size_t)(i - 1) * D;
            for (int j = 0; j < i; j++) {
                float g = gb[k++];
                float *dxj = j == 0 ? dzb : deb + (size_t)(j - 1) * D;
                axpy(dxi, g, x_row(zb, eb, j, D), D);
                axpy(dxj, g, xi, D);
            }
        }
    }
}

/* x0's element c of sample b, x0 = [z_b | emb_b]. */
static inline float x0_at(const float *zb, const float *eb, int D, int c)
{
    return c < D ? zb[c] : eb[c - D];
}

static void cpu_dcn_cross_forward(struct sr_device *dev, sr_stream_t s, const float *z,
                                  const float *emb, const float *u, const float *bias,
                                  const float *xl, int B, int F, int D, float *y)
{
    const int n = (F + 1) * D;
    OMP_FOR
    for (int b = 0; b < B; b++) {
        const float *zb = z + (size_t)b * D, *eb = emb + (size_t)b * F * D;
        const float *ub = u + (size_t)b * n;
        float *yb = y + (size_t)b * n;
        for (int c = 0; c < n; c++) {
            float x0 = x0_at(zb, eb, D, c);
            yb[c] = x0 * (ub[c] + bias[c]) + (xl ? xl[(size_t)b * n + c] : x0);
        }
    }
}

/* du and x0's share of the gradient, row by row; then dbias, the column
 * sums of du in row order (bias_grad's split: the same bits for any thread
 * count). */
static void cpu_dcn_cross_backward(struct sr_device *dev, sr_stream_t s, const float *z,
                                   const float *emb, const float *u, const float *bias,
                                   const float *dy, int B, int F, int D, int residual,
                                   int accumulate, float *du, float *dbias, float *dz, float *demb)
{
    const int n = (F + 1) * D;
    OMP_FOR
    for (int b = 0; b < B; b++) {
        const float *zb = z + (size_t)b * D, *eb = emb + (size_t)b * F * D;
        const float *ub = u + (size_t)b * n, *dyb = dy + (size_t)b * n;
        float *dub = du + (size_t)b * n, *dzb = dz + (size_t)b * D, *deb = demb + (size_t)b * F * D;
        for (int c = 0; c < n; c++) {
            float g = dyb[c] * (ub[c] + bias[c]) + (residual ? dyb[c] : 0.0f);
            float *dx0 = c < D ? dzb + c : deb + (c - D);
            *dx0 = accumulate ? *dx0 + g : g;
            dub[c] = dyb[c] * x0_at(zb, eb, D, c);
        }
    }
    cpu_bias_grad(dev, s, du, B, n, dbias);
}

static inline float sigmoid(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static void cpu_bce_with_logits(struct sr_device *dev, sr_stream_t s, const float *logits,
                                const float *labels, const float *mask, int n, float scale,
                                float *dlogits, float *loss_sum)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float m = mask ? mask[i] : 1.0f;
        double x = logits[i], y = labels[i];
        if (m == 0.0f) {
            dlogits[i] = 0.0f;
            continue;
        }
        sum += m * (fmax(x, 0.0) - x * y + log1p(exp(-fabs(x))));
        dlogits[i] = m * (sigmoid(logits[i]) - labels[i]) * scale;
    }
    *loss_sum = (float)sum; /* summed in double, rounded once */
}

const struct sr_dense_ops sr_cpu_dense_ops = {
    .gemm = cpu_gemm,
    .linear_forward = cpu_linear_forward,
    .bias_relu_forward = cpu_bias_relu_forward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .bias_grad = cpu_bias_grad,
    .relu_bias_backward = cpu_relu_bias_backward,
    .interaction_forward = cpu_interaction_forward,
    .interaction_backward = cpu_interaction_backward,
    .dcn_cross_forward = cpu_dcn_cross_forward,
    .dcn_cross_backward = cpu_dcn_cross_backward,
    .bce_with_logits = cpu_bce_with_logits,
};
