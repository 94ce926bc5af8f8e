/*
 * Every op of every device op table, on the device under test against the
 * immediate CPU device (ggml's test-backend-ops; the harness and its rules
 * are in backend_ops/ops_check.h, the cases of each table in backend_ops/). Each case draws fresh
 * random inputs from the run's seed, runs the op on the reference and twice on the device under
 * test (outputs poisoned with 0xFF bytes before each run, so an output an op
 * fails to write shows up as NaN or -1), and prints one line with the worst
 * error, the tolerance, whether the rerun was bit-identical, PASS or FAIL.
 *
 *   table        ops                                      rule
 *   dense        gemm (every transpose, alpha/beta,       relative Frobenius 1e-5, and
 *                padded strides, NaN in C when beta = 0)  elementwise 1e-4 max(1, max|ref|)
 *                linear_forward (bias aligned and not)    gemm's
 *                bias_relu_forward, relu fwd/bwd,         max|a-b| <= 1e-5 max(1, max|ref|)
 *                bias_grad, relu_bias_backward,
 *                interaction fwd/bwd, bce_with_logits
 *   optim        sgd, adagrad, adam steps                 1e-5 as above
 *   embedding    init_uniform, fill                       bit-equal
 *                forward (sum, mean, weighted),           1e-5 as above
 *                backward + SGD, Adagrad, row-wise        weights, state and pooled after
 *                Adagrad, Adam (two steps, weights and    a step: max(1e-5, 8 sqrt(n r)
 *                optimizer state of every table)          2^-24) as above, n the longest
 *                                                         run of a row, r its most equal
 *                                                         terms in a bag (embedding.c)
 *   emb_dp       accumulate, apply                        1e-5; touch counts bit-equal
 *   sparse_dist  bucketize, mean_scales, pack, unpack     bit-equal
 *                pooled_scatter, pooled_gather            1e-5
 *                hybrid_split, rows_copy, compact_counts, bit-equal
 *                compact_owner, compact_samples
 *                (backend_ops/hybrid.c)
 *   cast         pack, unpack, unpack_add (fp16, bf16,    bit-equal
 *                fp32 segments; specials, subnormals,
 *                ties, a 2-byte aligned fp32 segment)
 *
 * Hard cases: empty bags (and batches with no id at all), every id the same,
 * one-row tables, dims 1, 4, 16, 128, 130, weighted bags, mean pooling, ids at
 * the last row of every table; hot rows (one row filling a batch of 10^6 ids,
 * Zipf(1.2) ids, runs of split - 1, split, split + 1 and longer ids of a row
 * for split = sr_emb_run_split(max_dim), the wide rows' and the narrow rows', one
 * hot row index in two tables); and, when
 * SR_TEST_BIG=1 (on by default for SR_TEST_DEVICE=cuda), a table of more than
 * 2^31 elements (2^32 on a GPU) filled, initialised and compared whole, with
 * forward and backward on ids at its last rows (backend_ops/big_table.c).
 *
 * An op missing from the device's table (a NULL entry, while a backend is
 * being written) is one FAIL line and its cases are skipped; a backend abort
 * names the case that was running.
 *
 * Run: $BUILD/tests/test_backend_ops (device under test: the deferred CPU
 * device); SR_TEST_DEVICE=cuda for the GPU (make test-gpu); SR_TEST_SEED=N to
 * replay a run; SR_TEST_MATH=tf32|bf16 sets the device's GEMM math (and the
 * GEMM tolerance to 5e-3, 2e-2). Each table of ops is one cmocka case,
 * failing when any of its lines failed; the exit status is non-zero then.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "backend_ops/cases.h"
#include "backend_ops/ops_check.h"

int main(void)
{
    if (ops_init() != 0) /* the device under test is missing: a failure, not a skip */
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),        cmocka_unit_test(test_gemm_tf32),
        cmocka_unit_test(test_gemm_bf16),   cmocka_unit_test(test_dense),
        cmocka_unit_test(test_optim),       cmocka_unit_test(test_embedding_init),
        cmocka_unit_test(test_embedding),   cmocka_unit_test(test_embedding_dp),
        cmocka_unit_test(test_sparse_dist), cmocka_unit_test(test_cast),
        cmocka_unit_test(test_big_table),   cmocka_unit_test(test_hybrid),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("test_backend_ops: %d case line(s) failed on %s (seed %llu)\n", ops_failures(),
           ops_dut_name(), (unsigned long long)ops_seed());
    return failed || ops_failures() ? 1 : 0;
}
