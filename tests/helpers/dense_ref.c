/* Float64 references of the dense ops and the checks against them (dense_ref.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "shardrec/device.h"
#include "shardrec/rng.h"
#include "dense_ref.h"

void sr_test_fill(float *x, size_t n, uint64_t stream, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * (2.0 * sr_rng_uniform(42, stream, i) - 1.0));
}

void sr_test_to_double(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* |got - want| <= atol + rtol * |want|, with the index in the failure text. */
void sr_test_expect_close(const char *what, const float *got, const double *want, size_t n,
                          double atol, double rtol)
{
    sr_dev_sync(sr_device_cpu(), NULL); /* a host read: wait for the device first */
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= atol + rtol * fabs(want[i]))) {
            fail_msg("%s[%zu]: got %.9g want %.9g (err %.3g)", what, i, got[i], want[i], err);
        }
    }
}

/* Fail unless some value is clearly non-zero (a vacuous gradient check). */
void sr_test_expect_nonzero(const char *what, const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    if (!(m > 1e-4))
        fail_msg("%s is all (near) zero: the check would prove nothing", what);
}

void sr_test_fd_grad(double *p, size_t n, double (*objective)(const void *), const void *ctx,
                     double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + SR_TEST_FD_H;
        double up = objective(ctx);
        p[i] = keep - SR_TEST_FD_H;
        double down = objective(ctx);
        p[i] = keep;
        grad[i] = (up - down) / (2.0 * SR_TEST_FD_H);
    }
}

/* y (B, out) = act(x (B, in) W(out, in)ᵀ + b). */
void sr_test_ref_linear(const double *x, const double *w, const double *b, int B, int in, int out,
                        int relu, double *y)
{
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double acc = b[o];
            for (int i = 0; i < in; i++)
                acc += x[r * in + i] * w[o * in + i];
            y[r * out + o] = relu && acc < 0.0 ? 0.0 : acc;
        }
}

/* The dot interaction by its definition: full Gram matrix, then the strict
 * lower triangle read row by row. */
void sr_test_ref_interaction(const double *z, const double *e, int B, int F, int D, double *out)
{
    int N = F + 1, width = D + F * (F + 1) / 2;
    double *X = malloc(sizeof(double) * N * D), *G = malloc(sizeof(double) * N * N);
    for (int b = 0; b < B; b++) {
        for (int d = 0; d < D; d++)
            X[d] = z[b * D + d];
        for (int f = 0; f < F; f++)
            for (int d = 0; d < D; d++)
                X[(f + 1) * D + d] = e[(b * F + f) * D + d];
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                G[i * N + j] = 0.0;
                for (int d = 0; d < D; d++)
                    G[i * N + j] += X[i * D + d] * X[j * D + d];
            }
        double *o = out + (size_t)b * width;
        for (int d = 0; d < D; d++)
            o[d] = X[d];
        int k = D;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < i; j++)
                o[k++] = G[i * N + j];
    }
    free(X);
    free(G);
}

double sr_test_ref_bce(double x, double y)
{
    return fmax(x, 0.0) - x * y + log1p(exp(-fabs(x)));
}
