/*
 * Model weights to and from safetensors, under DESIGN.md's names, so that a
 * PyTorch DLRM can read what shardrec writes and the other way round:
 *
 *   bot_mlp.K.weight [out, in]   bot_mlp.K.bias [out]    (the reference's bot_l.2K)
 *   top_mlp.K.weight [out, in]   top_mlp.K.bias [out]    (the reference's top_l.2K)
 *   emb.TABLE.weight [rows, D]                           (the reference's emb_l.i)
 *
 * K counts Linear layers from 0; TABLE is the table's configured name.
 * tools/torch_dlrm.py convert maps these names to and from the reference's.
 * Only parameters travel: optimizer state and the step count are not saved.
 *
 * Beside the tensors, the file's __metadata__ records each table's pooling
 * (below); loading refuses a file whose record differs from the model's.
 *
 * The model and EBC are the caller's (on one device) and are not resized. On
 * a device the host cannot address, the tensors travel through a pinned host
 * buffer and both functions wait for the device's default stream.
 */
#ifndef SHARDREC_WEIGHTS_IO_H
#define SHARDREC_WEIGHTS_IO_H

#include <stdint.h>

#include "shardrec/table_config.h"
#include "shardrec/tensor.h"

struct sr_dlrm;
struct sr_st_file;
struct sr_ebc;
struct sr_ebc_config;

/* Write every parameter of m and ebc to `path` atomically (sr_st_write).
 * Errors: SR_ERR_IO naming the path, SR_ERR_INVALID_ARG for a table name that
 * cannot be written. */
int sr_weights_save(const char *path, const struct sr_dlrm *m, struct sr_ebc *ebc);

/* Replace every parameter of m and ebc with the tensors of `path`. The file
 * is verified in full before anything is copied, so on error the model is
 * unchanged. Errors (SR_ERR_DATA unless said), each naming the file and
 * tensor with a HINT: the file's own problems (sr_st_open's errors); a tensor
 * the model needs that is missing (the first few are listed, with the count);
 * a shape different from the model's ("tensor emb.t3.weight has shape
 * [100, 8], the model needs [100, 16]"); a tensor the model does not have;
 * a NaN or infinite value (SR_ERR_NUMERIC, with its index); a recorded
 * pooling other than the table's ("table t0 has pooling mean in the file,
 * sum in this job"), or a malformed record (sr_weights_pooling_read).
 * Optimizer state is left as it is. */
int sr_weights_load(const char *path, struct sr_dlrm *m, struct sr_ebc *ebc);

/* The same for tables that are not an sr_ebc's: ec's tables, table t's (E,
 * D) weights at tables[t] on m's device (a one-rank sharded EBC in local
 * mode: sr_sharded_ebc_local_weights). */
int sr_weights_save_tables(const char *path, const struct sr_dlrm *m,
                           const struct sr_ebc_config *ec, float *const *tables);
int sr_weights_load_tables(const char *path, struct sr_dlrm *m, const struct sr_ebc_config *ec,
                           float *const *tables);

/* One block of a table this rank holds under a plan: rows [row_offset,
 * +rows) and columns [col_offset, +cols) of table `table`, at `weight`
 * ((rows, cols) row-major, m's device). */
struct sr_weights_shard {
    int table;
    int64_t row_offset, rows;
    int col_offset, cols;
    float *weight;       /* device; elements of dtype (2-byte ones for 16-bit) */
    enum sr_dtype dtype; /* F32 (0), or F16/BF16: the file's fp32 rounded to nearest */
};

/* As sr_weights_load_tables for a sharded model, per rank and without a
 * gather: the file must hold exactly the whole model's tensors and shapes
 * (emb.TABLE.weight [rows, D] whole, the --save-weights format), and each
 * rank copies the dense parameters and only its blocks of each table (the
 * file is mapped: the other rows are not read). Finite values are checked
 * for the dense tensors and this rank's blocks; nothing is copied until all
 * of them hold. Not collective: the caller makes the ranks agree. */
int sr_weights_load_shards(const char *path, struct sr_dlrm *m, const struct sr_ebc_config *ec,
                           const struct sr_weights_shard *shards, int n_shards);

/* ---- what the file records beside its tensors (docs/weights.md, "Metadata") ---------- */

/* A table's pooling as a weights file records it: __metadata__
 * "shardrec.emb.TABLE.pooling" = "sum" | "mean". Every writer here
 * (sr_weights_save*, --save-weights of a sharded model, shardrec export of a
 * checkpoint that records its pooling) records every table; files of older
 * versions and of tools/torch_dlrm.py record none, and load as before. */
struct sr_weights_pooling {
    char table[SR_NAME_MAX];
    enum sr_pooling pooling;
};

/* The records of an open file, in its header's order, into *out (*n of them;
 * the caller frees *out with sr_free; NULL when there are none). Other
 * __metadata__ keys are not records and are skipped. Errors, SR_ERR_DATA
 * naming the file and the key (then *out is NULL, *n 0): a value other than
 * "sum" or "mean", a TABLE empty or longer than SR_NAME_MAX - 1 bytes, a
 * table recorded twice. */
int sr_weights_pooling_read(const struct sr_st_file *f, struct sr_weights_pooling **out, int *n);

/* Every record of rec[0..n) (sr_weights_pooling_read of f) names a table
 * whose tensor emb.TABLE.weight f holds: SR_OK, else SR_ERR_DATA naming the
 * file and the key (the header contradicts the file's own tensors). */
int sr_weights_pooling_check_held(const struct sr_st_file *f, const struct sr_weights_pooling *rec,
                                  int n);

/* `shardrec eval` of a weights file, before the model is built: adopt = 1
 * gives each of tables[0..T) the pooling `path` records for it (the job gave
 * none); adopt = 0 refuses a difference as loading does (SR_ERR_DATA naming
 * the file, the table and both poolings, with a HINT). A table the file
 * does not record keeps its pooling; records of tables not in `tables` are
 * left to loading, which names the tensors that differ. *recorded (NULL
 * ok): how many of the tables the file records. Errors: sr_st_open's and
 * sr_weights_pooling_read's; then tables are unchanged. */
int sr_weights_pooling_apply(const char *path, struct sr_table_config *tables, int T, int adopt,
                             int *recorded);

#endif
