/* Float64 references of the dense ops and the checks that compare the fp32
 * kernels to them, shared by tests/test_dense.c (ops and layers) and
 * tests/test_dlrm.c (the whole model). The references are float64, so their
 * central differences are accurate to ~1e-9 and a gradient check measures
 * only the fp32 kernels' error. */
#ifndef SHARDREC_TEST_DENSE_REF_H
#define SHARDREC_TEST_DENSE_REF_H

#include <stddef.h>
#include <stdint.h>

/* The step of the central differences. */
#define SR_TEST_FD_H 1e-6

/* x[0..n) uniform in [-scale, scale), from seed 42 and `stream`. */
void sr_test_fill(float *x, size_t n, uint64_t stream, double scale);
void sr_test_to_double(double *dst, const float *src, size_t n);
/* cmocka failure unless |got - want| <= atol + rtol * |want| everywhere (the
 * index in the failure text); waits for the host CPU device first. */
void sr_test_expect_close(const char *what, const float *got, const double *want, size_t n,
                          double atol, double rtol);
/* cmocka failure unless some value is clearly non-zero (a vacuous gradient check). */
void sr_test_expect_nonzero(const char *what, const double *x, size_t n);
/* Central difference of objective(ctx) w.r.t. each element of p (n) into grad
 * (n); p is perturbed in place and restored. */
void sr_test_fd_grad(double *p, size_t n, double (*objective)(const void *), const void *ctx,
                     double *grad);

/* y (B, out) = act(x (B, in) W(out, in)ᵀ + b). */
void sr_test_ref_linear(const double *x, const double *w, const double *b, int B, int in, int out,
                        int relu, double *y);
/* The dot interaction by its definition: full Gram matrix, then the strict
 * lower triangle read row by row. z (B, D), e (B, F, D), out (B, D + F(F+1)/2). */
void sr_test_ref_interaction(const double *z, const double *e, int B, int F, int D, double *out);
/* Binary cross-entropy of logit x against label y, stable for large |x|. */
double sr_test_ref_bce(double x, double y);

#endif
