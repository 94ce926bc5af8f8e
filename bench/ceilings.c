/*
 * The device's two ceilings, measured in the same call as the numbers they
 * judge (BENCH.md): a large device-to-device copy (GB/s, bytes read plus
 * bytes written) and a large square GEMM through the dense ops' gemm, once
 * per math mode (TFLOP/s). Random data (the embedding ops' init_uniform),
 * device events, median of the repetitions after a warm-up.
 *
 * --wgrad adds the weight-gradient GEMMs of workload D (dW = dYᵀ X, reduced
 * over the batch of 16384: the DCN layers' 3456 x 512 and 512 x 3456, the top
 * MLP's 1024 x 3456) in each operand layout, per math mode: "batch-major" as
 * the step stores its activations (both operands (batch, features), so the
 * reduction runs along their rows), "K-major" with both stored transposed
 * (features, batch), and the two mixed. What a layout change of the step's
 * activations would gain, before making it.
 *
 *   ceilings [--device cuda|cpu] [--copy-mib N] [--gemm N] [--reps R] [--wgrad]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/device.h"
#include "shardrec/error.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median milliseconds of reps runs of fn between device events. */
static float time_ms(struct sr_device *dev, int reps, void (*fn)(void *), void *arg)
{
    sr_event_t e0 = sr_dev_event_create(dev), e1 = sr_dev_event_create(dev);
    float *ms = calloc((size_t)reps, sizeof *ms);
    fn(arg); /* warm-up */
    fn(arg);
    for (int r = 0; r < reps; r++) {
        sr_dev_event_record(dev, e0, NULL);
        fn(arg);
        sr_dev_event_record(dev, e1, NULL);
        sr_dev_event_sync(dev, e1);
        ms[r] = sr_dev_event_elapsed_ms(dev, e0, e1);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp_float);
    float med = ms[reps / 2];
    free(ms);
    sr_dev_event_destroy(dev, e0);
    sr_dev_event_destroy(dev, e1);
    return med;
}

struct copy_arg {
    struct sr_device *dev;
    void *dst, *src;
    size_t bytes;
};

static void do_copy(void *p)
{
    struct copy_arg *a = p;
    sr_dev_copy(a->dev, a->dst, a->src, a->bytes, NULL);
}

struct gemm_arg {
    struct sr_device *dev;
    float *a, *b, *c;
    int n;
};

static void do_gemm(void *p)
{
    struct gemm_arg *g = p;
    g->dev->dense->gemm(g->dev, NULL, SR_NO_TRANS, SR_NO_TRANS, g->n, g->n, g->n, 1.0f, g->a, g->n,
                        g->b, g->n, 0.0f, g->c, g->n);
}

/* dW (m, n) = Aᵀ B over k rows: A stored (k, m) or, transposed, (m, k); B
 * (k, n) or (n, k). */
struct wgrad_arg {
    struct sr_device *dev;
    float *a, *b, *c;
    int m, n, k, a_kmajor, b_kmajor;
};

static void do_wgrad(void *p)
{
    struct wgrad_arg *g = p;
    g->dev->dense->gemm(g->dev, NULL, g->a_kmajor ? SR_NO_TRANS : SR_TRANS,
                        g->b_kmajor ? SR_TRANS : SR_NO_TRANS, g->m, g->n, g->k, 1.0f, g->a,
                        g->a_kmajor ? g->k : g->m, g->b, g->b_kmajor ? g->k : g->n, 0.0f, g->c,
                        g->n);
}

static float *random_matrix(struct sr_device *dev, int64_t rows, int cols, uint64_t stream)
{
    float *p = sr_dev_alloc(dev, sizeof(float) * (size_t)rows * (size_t)cols);
    dev->emb->init_uniform(dev, p, SR_DTYPE_F32, rows, cols, 0, 0, cols, 7, stream, -1.0, 1.0,
                           NULL);
    return p;
}

/* Workload D's weight-gradient GEMMs in each operand layout, per math mode. */
static void wgrad_gemms(struct sr_device *dev, int reps)
{
    static const int shapes[][3] = {{3456, 512, 16384}, {512, 3456, 16384}, {1024, 3456, 16384}};
    static const char *const maths[] = {"fp32", "tf32", "bf16"};
    static const char *const layouts[] = {"batch-major", "A K-major", "B K-major", "K-major"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        struct wgrad_arg g = {dev, random_matrix(dev, k, m, 4), random_matrix(dev, k, n, 5),
                              sr_dev_alloc(dev, sizeof(float) * (size_t)m * (size_t)n), m, n, k,
                              0, 0};
        for (int mm = 0; mm < (dev->kind == SR_DEVICE_CUDA ? 3 : 1); mm++) {
            dev->math = (enum sr_math)mm;
            for (int l = 0; l < 4; l++) {
                g.a_kmajor = l & 1;
                g.b_kmajor = (l >> 1) & 1;
                const float ms = time_ms(dev, reps, do_wgrad, &g);
                printf("wgrad    %s %4d x %4d over %5d, %-11s %9.3f ms  %8.1f TFLOP/s\n",
                       maths[mm], m, n, k, layouts[l], ms,
                       2.0 * (double)m * n * k / (ms * 1e9));
            }
        }
        sr_dev_free(dev, g.a);
        sr_dev_free(dev, g.b);
        sr_dev_free(dev, g.c);
    }
}

int main(int argc, char **argv)
{
    const char *device = "cuda";
    long copy_mib = 4096, gemm_n = 8192, reps = 20;
    int wgrad = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "--wgrad")) {
            wgrad = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ceilings: %s needs a value\n", flag);
            return 2;
        }
        const char *value = argv[++i];
        if (!strcmp(flag, "--device"))
            device = value;
        else if (!strcmp(flag, "--copy-mib"))
            copy_mib = atol(value);
        else if (!strcmp(flag, "--gemm"))
            gemm_n = atol(value);
        else if (!strcmp(flag, "--reps"))
            reps = atol(value);
        else {
            fprintf(stderr, "ceilings: unknown flag %s\n", flag);
            return 2;
        }
    }
    struct sr_device *dev = !strcmp(device, "cpu") ? sr_device_cpu()
                                                   : sr_device_get(SR_DEVICE_CUDA, 0);
    if (!dev) {
        fprintf(stderr, "ceilings: %s\n", sr_error_message());
        return 2;
    }
    size_t bytes = (size_t)copy_mib << 20;
    struct copy_arg ca = {dev, sr_dev_alloc(dev, bytes), random_matrix(dev, (int64_t)(bytes / 4096), 1024, 1), bytes};
    float ms = time_ms(dev, (int)reps, do_copy, &ca);
    printf("ceiling  copy   %6ld MiB            %9.3f ms  %8.1f GB/s (read + write)\n", copy_mib,
           ms, 2.0 * (double)bytes / (ms * 1e6));
    sr_dev_free(dev, ca.dst);
    sr_dev_free(dev, ca.src);
    static const char *const names[] = {"fp32", "tf32", "bf16"};
    struct gemm_arg ga = {dev, random_matrix(dev, gemm_n, (int)gemm_n, 2),
                          random_matrix(dev, gemm_n, (int)gemm_n, 3),
                          sr_dev_alloc(dev, sizeof(float) * (size_t)gemm_n * (size_t)gemm_n),
                          (int)gemm_n};
    for (int m = 0; m < (dev->kind == SR_DEVICE_CUDA ? 3 : 1); m++) {
        dev->math = (enum sr_math)m;
        ms = time_ms(dev, (int)(reps < 10 ? reps : 10), do_gemm, &ga);
        printf("ceiling  gemm   %s %ld^3          %9.3f ms  %8.1f TFLOP/s\n", names[m], gemm_n, ms,
               2.0 * (double)gemm_n * gemm_n * gemm_n / (ms * 1e9));
    }
    sr_dev_free(dev, ga.a);
    sr_dev_free(dev, ga.b);
    sr_dev_free(dev, ga.c);
    if (wgrad)
        wgrad_gemms(dev, (int)(reps < 10 ? reps : 10));
    dev->math = SR_MATH_FP32;
    return 0;
}
