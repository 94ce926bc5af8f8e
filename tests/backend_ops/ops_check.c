/* The backend-ops harness (ops_check.h): devices, seed, inputs, device
 * memory of a run, and the comparison of what two devices wrote. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardrec/error.h"
#include "shardrec/half.h"
#include "shardrec/rng.h"
#include "device/cpu/cpu_device.h"
#include "device/ops_cast.h"
#include "device/ops_dense.h"
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/ops_optim.h"
#include "device/ops_sparse_dist.h"
#include "ops_check.h"

static struct sr_device *dut, *ref;
static char dut_name[32];
static uint64_t seed;
static int failures, failures_seen;
static const char *running_op, *running_case; /* for the abort message */

/* A backend failure aborts (SR_ABORT): say which case was running. */
static void on_abort(int sig)
{
    static const char msg[] = "\ntest_backend_ops: aborted while running ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    if (running_op) {
        w += write(2, running_op, strlen(running_op));
        w += write(2, " / ", 3);
        w += write(2, running_case, strlen(running_case));
    }
    w += write(2, "\n", 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static struct sr_device *pick_dut(const char *want)
{
    if (strcmp(want, "deferred") == 0)
        return sr_cpu_deferred_device();
    if (strcmp(want, "opaque") == 0)
        return sr_cpu_opaque_device();
    if (strcmp(want, "cpu") == 0)
        return sr_cpu_device();
    if (strcmp(want, "cuda") == 0) {
        struct sr_device *d = sr_device_get(SR_DEVICE_CUDA, 0);
        if (!d)
            fprintf(stderr, "test_backend_ops: SR_TEST_DEVICE=cuda: no CUDA device: %s\n",
                    sr_error_message());
        return d;
    }
    fprintf(stderr, "test_backend_ops: SR_TEST_DEVICE=%s: expected cuda, deferred, opaque or cpu\n",
            want);
    return NULL;
}

int ops_init(void)
{
    const char *want = env("SR_TEST_DEVICE") ? env("SR_TEST_DEVICE") : "deferred";
    const char *s = env("SR_TEST_SEED");
    seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    snprintf(dut_name, sizeof dut_name, "%s", want);
    ref = sr_cpu_device();
    signal(SIGABRT, on_abort);
    dut = pick_dut(want);
    if (!dut)
        return -1;
    /* fp32 GEMMs on the device under test; SR_TEST_MATH picks another mode
     * (and ops_gemm_tol loosens the GEMM rule to match). */
    const char *math = env("SR_TEST_MATH");
    dut->math = !math || strcmp(math, "fp32") == 0 ? SR_MATH_FP32
                : strcmp(math, "tf32") == 0        ? SR_MATH_TF32
                                                   : SR_MATH_BF16;
    printf("test_backend_ops: seed %llu (SR_TEST_SEED=%llu reproduces this run)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    printf("test_backend_ops: device under test %s (SR_TEST_DEVICE=%s), reference cpu "
           "(immediate), GEMM math %s\n",
           dut->name, want, math ? math : "fp32");
    fflush(stdout);
    return 0;
}

struct sr_device *ops_dut(void)
{
    return dut;
}

struct sr_device *ops_ref(void)
{
    return ref;
}

const char *ops_dut_name(void)
{
    return dut_name;
}

uint64_t ops_seed(void)
{
    return seed;
}

double ops_gemm_tol(void)
{
    switch (dut ? dut->math : SR_MATH_FP32) {
    case SR_MATH_TF32:
        return 5e-3;
    case SR_MATH_BF16:
        return 2e-2;
    default:
        return 1e-5;
    }
}

int ops_big_wanted(void)
{
    const char *v = env("SR_TEST_BIG");
    if (v)
        return strcmp(v, "0") != 0;
    return dut && dut->kind == SR_DEVICE_CUDA;
}

size_t ops_host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* ---- inputs ------------------------------------------------------------- */

struct ops_rng ops_rng_of(const char *name)
{
    return (struct ops_rng){.stream = sr_rng_stream_of(name), .counter = 0};
}

double ops_uniform(struct ops_rng *r)
{
    return sr_rng_uniform(seed, r->stream, r->counter++);
}

float ops_uniform_in(struct ops_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)ops_uniform(r);
}

int64_t ops_below(struct ops_rng *r, int64_t n)
{
    return (int64_t)(sr_rng_u64(seed, r->stream, r->counter++) % (uint64_t)n);
}

void ops_fill(struct ops_rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ops_uniform_in(r, lo, hi);
}

/* ---- device memory of a run --------------------------------------------- */

void ops_arena_init(struct ops_arena *a, struct sr_device *dev)
{
    a->dev = dev;
    a->n = 0;
}

void *ops_alloc(struct ops_arena *a, size_t bytes)
{
    SR_ASSERT(a->n < OPS_MAX_ALLOC);
    void *p = sr_dev_alloc(a->dev, bytes < 64 ? 64 : bytes);
    a->p[a->n++] = p;
    return p;
}

void *ops_upload(struct ops_arena *a, const void *host, size_t bytes)
{
    void *p = ops_alloc(a, bytes);
    sr_dev_copy(a->dev, p, host, bytes, NULL);
    return p;
}

void *ops_poisoned(struct ops_arena *a, size_t bytes)
{
    void *p = ops_alloc(a, bytes);
    sr_dev_memset(a->dev, p, 0xFF, bytes, NULL);
    return p;
}

void ops_arena_free(struct ops_arena *a)
{
    sr_dev_sync(a->dev, NULL);
    for (int i = a->n - 1; i >= 0; i--)
        sr_dev_free(a->dev, a->p[i]);
    a->n = 0;
}

void ops_take(struct ops_case *c, int which, const char *name, int rule, double tol,
              struct sr_device *dev, const void *p, size_t bytes)
{
    struct ops_out *o = NULL;
    for (int i = 0; i < c->num_out && !o; i++)
        if (strcmp(c->out[i].name, name) == 0)
            o = &c->out[i];
    if (!o) {
        SR_ASSERT(which == 0 && c->num_out < OPS_MAX_OUT);
        o = &c->out[c->num_out++];
        snprintf(o->name, sizeof o->name, "%s", name);
        o->rule = rule;
        o->tol = tol;
        o->bytes = bytes;
    }
    SR_ASSERT(o->bytes == bytes && !o->got[which]);
    o->got[which] = malloc(bytes ? bytes : 1);
    SR_ASSERT(o->got[which]);
    sr_dev_copy(dev, o->got[which], p, bytes, NULL);
    sr_dev_sync(dev, NULL);
}

/* ---- declared regions ----------------------------------------------------- */

static void record_region(struct sr_op_regions *r, const struct sr_op_region *region)
{
    struct ops_regions *g = (struct ops_regions *)r;
    SR_ASSERT(g->n < OPS_MAX_REGIONS);
    g->reg[g->n++] = *region;
}

void ops_regions_init(struct ops_regions *g)
{
    g->r = (struct sr_op_regions){record_region, NULL};
    g->n = 0;
}

static const struct sr_op_region *region_named(const struct ops_regions *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->reg[i].name, name) == 0)
            return &g->reg[i];
    SR_ABORT("the op declares no operand %s", name);
}

size_t ops_bytes(const struct ops_regions *g, const char *name)
{
    return region_named(g, name)->bytes;
}

void ops_take_region(struct ops_case *c, int which, const struct ops_regions *g, const char *name,
                     int rule, double tol, struct sr_device *dev)
{
    const struct sr_op_region *r = region_named(g, name);
    ops_take(c, which, name, rule, tol, dev, r->p, r->bytes);
}

/* ---- comparison --------------------------------------------------------- */

static int compare_f32(int rule, double tol, const float *want, const float *got, size_t n,
                       double *err, char *detail, size_t len)
{
    double maxref = 0.0, maxdiff = 0.0, sq = 0.0, refsq = 0.0;
    size_t worst = 0, nan_ref = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = want[i], b = got[i];
        if (isfinite(a)) {
            maxref = fmax(maxref, fabs(a));
            refsq += a * a;
        }
        if (memcmp(&want[i], &got[i], sizeof(float)) == 0) {
            nan_ref += isnan(a) && !(rule & OPS_NAN_OK);
            continue;
        }
        const double d = isnan(a) || isnan(b) ? INFINITY : fabs(a - b);
        sq += d * d;
        if (!(d <= maxdiff)) {
            maxdiff = d;
            worst = i;
        }
    }
    if ((rule & 0xff) == OPS_F32_FROB)
        *err = sqrt(sq) / (refsq > 0.0 ? sqrt(refsq) : 1.0);
    else
        *err = maxdiff / fmax(1.0, maxref);
    if (nan_ref)
        *err = INFINITY;
    if (detail && nan_ref)
        snprintf(detail, len, "the reference left %zu NaN (an output it never wrote?)", nan_ref);
    else if (detail && maxdiff > 0.0)
        snprintf(detail, len, "worst at [%zu]: want %.9g got %.9g (max|ref| %.3g)", worst,
                 (double)want[worst], (double)got[worst], maxref);
    return *err <= tol;
}

static int compare_exact(const unsigned char *want, const unsigned char *got, size_t bytes,
                         double *err, char *detail, size_t len)
{
    size_t ndiff = 0, first = 0;
    for (size_t i = 0; i < bytes; i++)
        if (want[i] != got[i] && ndiff++ == 0)
            first = i;
    *err = (double)ndiff;
    if (detail && ndiff) {
        const size_t w = first & ~(size_t)3;
        uint32_t a = 0, b = 0;
        memcpy(&a, want + w, w + 4 <= bytes ? 4 : bytes - w);
        memcpy(&b, got + w, w + 4 <= bytes ? 4 : bytes - w);
        snprintf(detail, len,
                 "%zu of %zu bytes differ; first at byte %zu: word want 0x%08x got 0x%08x", ndiff,
                 bytes, first, a, b);
    }
    return ndiff == 0;
}

int ops_compare(int rule, double tol, const void *want, const void *got, size_t bytes, double *err,
                char *detail, size_t detail_len)
{
    if (detail)
        detail[0] = 0;
    if ((rule & 0xff) == OPS_EXACT)
        return compare_exact(want, got, bytes, err, detail, detail_len);
    if ((rule & 0xff) == OPS_BF16 || (rule & 0xff) == OPS_F16) {
        const size_t n = bytes / 2;
        float *a = malloc(sizeof(float) * (n + 1)), *b = malloc(sizeof(float) * (n + 1));
        const uint16_t *x = want, *y = got;
        for (size_t i = 0; i < n; i++) {
            a[i] = (rule & 0xff) == OPS_BF16 ? sr_bf16_to_fp32(x[i]) : sr_fp16_to_fp32(x[i]);
            b[i] = (rule & 0xff) == OPS_BF16 ? sr_bf16_to_fp32(y[i]) : sr_fp16_to_fp32(y[i]);
        }
        const int ok = compare_f32(rule & OPS_NAN_OK, tol, a, b, n, err, detail, detail_len);
        free(a);
        free(b);
        return ok;
    }
    return compare_f32(rule, tol, want, got, bytes / sizeof(float), err, detail, detail_len);
}

static void free_case(struct ops_case *c)
{
    for (int i = 0; i < c->num_out; i++)
        for (int w = 0; w < 3; w++)
            free(c->out[i].got[w]);
}

static void tol_text(int rule, double tol, char *buf, size_t len)
{
    if ((rule & 0xff) == OPS_EXACT)
        snprintf(buf, len, "exact");
    else
        snprintf(buf, len, "%.0e", tol);
}

void ops_report(const char *op, const char *case_name, int pass, double err, double tol,
                const char *rerun, const char *detail)
{
    char t[16];
    if (tol < 0.0)
        tol_text(OPS_EXACT, 0.0, t, sizeof t);
    else
        tol_text(OPS_F32, tol, t, sizeof t);
    printf("%-28s %-50s err %9.2e tol %-5s rerun %-9s %s\n", op, case_name, err, t, rerun,
           pass ? "PASS" : "FAIL");
    if (!pass && detail && *detail)
        printf("    %s\n", detail);
    fflush(stdout);
    failures += !pass;
}

int ops_check(const char *op, const char *case_name, ops_run_fn run, void *ctx)
{
    /* emb.backward.<optimizer> and emb_dp.apply.<optimizer> are one op each */
    const char *key = strncmp(op, "emb.backward", 12) == 0        ? "emb.backward+workspace"
                      : strncmp(op, "emb_dp.apply", 12) == 0      ? "emb_dp.apply"
                      : strcmp(op, "emb.forward") == 0            ? "emb.forward+workspace"
                      : strcmp(op, "emb_dp.accumulate") == 0      ? "emb_dp.accumulate+workspace"
                                                                  : op;
    if (ops_lacks(key))
        return 0;
    struct ops_case *c = calloc(1, sizeof *c);
    SR_ASSERT(c);
    running_op = op, running_case = case_name;
    run(ref, ctx, c, 0);
    run(dut, ctx, c, 1);
    run(dut, ctx, c, 2);
    int pass = c->num_out > 0, rerun_ok = 1, worst = 0;
    double worst_ratio = -1.0, worst_err = 0.0;
    char details[OPS_MAX_OUT][200];
    int bad[OPS_MAX_OUT] = {0};
    for (int i = 0; i < c->num_out; i++) {
        struct ops_out *o = &c->out[i];
        double err = 0.0;
        details[i][0] = 0;
        if (!o->got[1] || !o->got[2]) {
            pass = 0;
            bad[i] = 1;
            snprintf(details[i], sizeof details[i], "not taken on the device under test");
            continue;
        }
        const int ok = ops_compare(o->rule, o->tol, o->got[0], o->got[1], o->bytes, &err,
                                   details[i], sizeof details[i]);
        const int same = memcmp(o->got[1], o->got[2], o->bytes) == 0;
        if (!same && !details[i][0])
            snprintf(details[i], sizeof details[i], "a rerun gave different bits");
        const double ratio = o->tol > 0.0 ? err / o->tol : (err > 0.0 ? INFINITY : 0.0);
        if (!(ratio <= worst_ratio)) {
            worst_ratio = ratio;
            worst_err = err;
            worst = i;
        }
        bad[i] = !(ok && same);
        pass &= !bad[i];
        rerun_ok &= same;
    }
    char name[160], t[16];
    snprintf(name, sizeof name, "%s", case_name);
    tol_text(c->num_out ? c->out[worst].rule : OPS_EXACT, c->num_out ? c->out[worst].tol : 0.0, t,
             sizeof t);
    printf("%-28s %-50s err %9.2e tol %-5s rerun %-9s %s  (worst: %s)\n", op, name, worst_err, t,
           rerun_ok ? "identical" : "DIFFERS", pass ? "PASS" : "FAIL",
           c->num_out ? c->out[worst].name : "no output");
    for (int i = 0; i < c->num_out; i++)
        if (bad[i])
            printf("    %s: %s\n", c->out[i].name, details[i]);
    fflush(stdout);
    failures += !pass;
    free_case(c);
    free(c);
    running_op = running_case = NULL;
    return pass;
}

int ops_failures(void)
{
    return failures;
}

void ops_fail_if_any(const char *table)
{
    const int n = failures - failures_seen;
    failures_seen = failures;
    if (n)
        fail_msg("%s: %d case(s) failed (lines marked FAIL above)", table, n);
}

float *ops_floats(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---- ops a backend may not have yet -------------------------------------- */

int ops_lacks(const char *op)
{
    static char reported[64][48];
    static int num_reported;
    const struct sr_device *d = dut;
    const struct sr_embedding_ops *em = d->emb;
    const struct sr_sparse_dist_ops *sd = d->sparse_dist;
    const int emb_base = em && em->workspace_bytes && em->workspace_init;
#define PRESENT(family, name, operands) {#family "." #name, d->family && d->family->name},
    const struct {
        const char *name;
        int present;
    } ops[] = {
        /* every declared op; forward, backward and accumulate need the workspace too */
        SR_OPS_DENSE(PRESENT) SR_OPS_OPTIM(PRESENT) SR_OPS_EMB(PRESENT) SR_OPS_EMB_DP(PRESENT)
        SR_OPS_SPARSE_DIST(PRESENT) SR_OPS_CAST(PRESENT)
        {"emb.forward+workspace", emb_base && em->forward},
        {"emb.backward+workspace", emb_base && em->forward && em->backward},
        {"emb_dp.accumulate+workspace", emb_base && d->emb_dp && d->emb_dp->accumulate},
        {"sparse_dist.pooled_scatter+gather", sd && sd->pooled_scatter && sd->pooled_gather},
    };
#undef PRESENT
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(ops[i].name, op) != 0)
            continue;
        if (ops[i].present)
            return 0;
        for (int j = 0; j < num_reported; j++)
            if (strcmp(reported[j], op) == 0)
                return 1;
        if (num_reported < 64)
            snprintf(reported[num_reported++], sizeof reported[0], "%s", op);
        ops_report(op, "(every case)", 0, INFINITY, -1.0, "-",
                   "the device under test has no such op in its table");
        return 1;
    }
    SR_ABORT("ops_lacks: unknown op %s", op);
}
