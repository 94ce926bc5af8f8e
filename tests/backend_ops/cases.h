/* The cases of tests/test_backend_ops.c, one cmocka test per op table; each
 * prints a line per case (ops_check.h) and fails when any line failed. */
#ifndef SHARDREC_TEST_BACKEND_OPS_CASES_H
#define SHARDREC_TEST_BACKEND_OPS_CASES_H

void test_gemm(void **state);           /* dense.c */
void test_gemm_tf32(void **state);      /* dense.c */
void test_gemm_bf16(void **state);      /* dense.c */
void test_dense(void **state);          /* dense.c */
void test_optim(void **state);          /* dense.c */
void test_embedding_init(void **state); /* emb_init.c */
void test_embedding(void **state);      /* embedding.c */
void test_embedding_dp(void **state);   /* embedding.c */
void test_sparse_dist(void **state);    /* sparse_dist.c */
void test_cast(void **state);           /* cast.c */
void test_big_table(void **state);      /* big_table.c */
void test_hybrid(void **state);         /* hybrid.c */

#endif
