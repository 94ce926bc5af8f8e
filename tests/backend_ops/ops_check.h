/*
 * The harness of tests/test_backend_ops.c (ggml's test-backend-ops): run one
 * device op on the device under test and on the reference, the immediate CPU
 * device, from the same host inputs, and compare what each wrote.
 *
 * A case is a function run(dev, ctx, c, which) that, on `dev`, allocates
 * device memory through an arena, uploads its inputs from host arrays,
 * poisons its outputs (0xFF bytes: NaN as fp32, -1 as integers), issues the
 * op and hands every output to ops_take, which copies it back to the host
 * after sr_dev_sync. ops_check calls it three times:
 *
 *   which 0   reference (immediate CPU)       the expected values
 *   which 1   device under test               compared to 0 by the output's rule
 *   which 2   device under test, again        must equal 1 bit for bit
 *
 * and prints one line: op, case, the worst output's error against its
 * tolerance, whether the rerun was bit-identical, PASS or FAIL (with a
 * detail line per failing output). Rules, per output:
 *
 *   OPS_F32       max|a - b| <= tol * max(1, max|ref|)   (elementwise, pooling)
 *   OPS_F32_FROB  ||a - b||_F <= tol * ||ref||_F          (GEMM)
 *   OPS_EXACT     every byte equal                        (integers, casts, init)
 *   OPS_BF16, OPS_F16  16-bit elements, widened, then as OPS_F32 (16-bit tables)
 *
 * fp32 elements with identical bits count as equal (so NaN left in a region
 * the op must not write compares equal when both devices left it alone); a
 * NaN the reference did not write is a failure unless the output says
 * OPS_NAN_OK (GEMM's padding columns).
 *
 * The device under test: SR_TEST_DEVICE=cuda (sr_device_get(SR_DEVICE_CUDA,
 * 0)), cpu (the immediate CPU device against itself), opaque (the deferred
 * device whose memory the host cannot touch: proves the harness reaches
 * device memory only through copies) or deferred (the default: the deferred
 * CPU device, so that CI checks the harness and the deferred device's stream
 * contract). The seed: SR_TEST_SEED, else the clock;
 * it is printed first so a failure can be replayed.
 */
#ifndef SHARDREC_TEST_OPS_CHECK_H
#define SHARDREC_TEST_OPS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "device/op_decl.h"

#define OPS_TOL 1e-5 /* fp32 elementwise and pooling ops */

enum ops_cmp { OPS_F32, OPS_F32_FROB, OPS_EXACT, OPS_BF16, OPS_F16 };
#define OPS_NAN_OK 0x100 /* or-ed into the rule: NaN in the reference is expected */

#define OPS_MAX_OUT   48
#define OPS_MAX_ALLOC 96

struct ops_out {
    char name[32];
    int rule; /* enum ops_cmp, | OPS_NAN_OK */
    double tol;
    size_t bytes;
    void *got[3]; /* host copies: reference, device under test, its rerun */
};

struct ops_case {
    int num_out;
    struct ops_out out[OPS_MAX_OUT];
};

/* Device memory of one run, freed together. */
struct ops_arena {
    struct sr_device *dev;
    int n;
    void *p[OPS_MAX_ALLOC];
};

/* Reads the environment, picks the devices, prints the seed and the device;
 * returns 0, or -1 (with a message) when the device under test is missing. */
int ops_init(void);
struct sr_device *ops_dut(void);
struct sr_device *ops_ref(void);
const char *ops_dut_name(void);
uint64_t ops_seed(void);
/* GEMM's relative Frobenius tolerance: 1e-5 in fp32 math (SR_TEST_MATH=tf32:
 * 5e-3, bf16: 2e-2, for a device that computes GEMMs in those modes). */
double ops_gemm_tol(void);
/* 1 when the case over 2^31 elements runs: SR_TEST_BIG=1 or 0, else on for cuda. */
int ops_big_wanted(void);

/* Host memory available now (MemAvailable), 0 when unknown. */
size_t ops_host_available(void);

/* Test inputs: a counter-based stream of the run's seed. */
struct ops_rng {
    uint64_t stream, counter;
};
struct ops_rng ops_rng_of(const char *name);
double ops_uniform(struct ops_rng *r); /* [0, 1) */
float ops_uniform_in(struct ops_rng *r, float lo, float hi);
int64_t ops_below(struct ops_rng *r, int64_t n); /* [0, n) */
void ops_fill(struct ops_rng *r, float *x, size_t n, float lo, float hi);

/* Arena: alloc, upload (alloc + copy from host), poisoned (alloc + 0xFF). */
void ops_arena_init(struct ops_arena *a, struct sr_device *dev);
void *ops_alloc(struct ops_arena *a, size_t bytes);
void *ops_upload(struct ops_arena *a, const void *host, size_t bytes);
void *ops_poisoned(struct ops_arena *a, size_t bytes);
/* Syncs the device's default stream, then frees everything. */
void ops_arena_free(struct ops_arena *a);

/* Copy the output at device pointer p (bytes) back to the host (after a
 * sync) as output `name` of run `which`, compared by `rule` with `tol`. */
void ops_take(struct ops_case *c, int which, const char *name, int rule, double tol,
              struct sr_device *dev, const void *p, size_t bytes);

typedef void (*ops_run_fn)(struct sr_device *dev, void *ctx, struct ops_case *c, int which);

/* Run `run` on the reference and twice on the device under test; compare;
 * print the line. Returns 1 when the case passed; 0 when it failed or the
 * device under test lacks the op (ops_lacks). */
int ops_check(const char *op, const char *case_name, ops_run_fn run, void *ctx);

/* Compare host arrays got against want by `rule`; *err is the error in the
 * rule's units (ratio to tolerance is err / tol); returns 1 when within tol.
 * detail (may be NULL) gets a description of the worst element. */
int ops_compare(int rule, double tol, const void *want, const void *got, size_t bytes, double *err,
                char *detail, size_t detail_len);

/* Print a result line in the format of ops_check (for cases that compare by
 * hand, such as the table over 2^31 elements). */
void ops_report(const char *op, const char *case_name, int pass, double err, double tol,
                const char *rerun, const char *detail);

/* 1 when the device under test lacks op ("dense.gemm", "emb.forward", ...:
 * its table or the function is NULL, as while a backend is being written),
 * after one FAIL line per op; the caller then skips the op's cases. */
int ops_lacks(const char *op);

/* The regions one call of an op declares (device/op_decl.h), recorded so
 * that a case sizes and takes its operands by their declared names:
 *
 *   struct ops_regions g;
 *   OPS_REGIONS(&g, dense, bias_grad, dev, NULL, dy, R, C, dbias);
 *   dbias = ops_poisoned(&a, ops_bytes(&g, "dbias"));     (NULL pointers: sizes only)
 */
#define OPS_MAX_REGIONS 64
struct ops_regions {
    struct sr_op_regions r;
    int n;
    struct sr_op_region reg[OPS_MAX_REGIONS];
};
void ops_regions_init(struct ops_regions *g);
#define OPS_REGIONS(g, family, name, ...)                                                          \
    (ops_regions_init(g), sr_op_regions_##family##_##name(&(g)->r, __VA_ARGS__))
/* The declared bytes of operand `name` (aborts when the op has none such). */
size_t ops_bytes(const struct ops_regions *g, const char *name);
/* ops_take of operand `name`, at its declared pointer and size. */
void ops_take_region(struct ops_case *c, int which, const struct ops_regions *g, const char *name,
                     int rule, double tol, struct sr_device *dev);

/* Cases that failed so far. */
int ops_failures(void);
/* The end of a cmocka test: fails it (fail_msg) when a case line failed
 * since the last call. */
void ops_fail_if_any(const char *table);

/* n zeroed floats of host memory (free with free). */
float *ops_floats(size_t n);

#endif
