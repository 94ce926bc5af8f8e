/*
 * What a weights file records beside its tensors (weights_meta.c;
 * docs/weights.md, "Metadata"), for the writers and readers of src/train:
 *
 *   __metadata__ "shardrec.emb.TABLE.pooling": "sum" | "mean"   (one per table)
 *
 * The public half (reading the records, eval's adoption) is in
 * shardrec/weights_io.h.
 */
#ifndef SHARDREC_TRAIN_WEIGHTS_META_H
#define SHARDREC_TRAIN_WEIGHTS_META_H

#include "shardrec/safetensors.h"
#include "shardrec/table_config.h"

#define SR_WEIGHTS_META_KEY_CAP (SR_NAME_MAX + 32)

/* The __metadata__ entries a writer gives sr_st_write_meta or sr_st_layout
 * for tables[0..T): meta[t].key points into keys[t], meta[t].value is static. */
struct sr_weights_meta {
    int n;
    struct sr_st_meta *meta;               /* (n) */
    char (*keys)[SR_WEIGHTS_META_KEY_CAP]; /* (n) */
};

/* T = 0 gives no entries (a file that records nothing: an old checkpoint's
 * export). Free with sr_weights_meta_free (NULL or zeroed ok). */
void sr_weights_meta_init(struct sr_weights_meta *m, const struct sr_table_config *tables, int T);
void sr_weights_meta_free(struct sr_weights_meta *m);

/* sr_st_write_meta of n tensors with tables[0..T)'s pooling records (T = 0:
 * none), as every whole-file writer of weights does. */
int sr_weights_write(const char *path, int n, const struct sr_st_tensor *tensors,
                     const struct sr_table_config *tables, int T);

/* The open file's pooling records against tables[0..T) (a model's tables,
 * by name). A difference is SR_ERR_DATA naming the file, the table, the
 * file's pooling and the job's, with a HINT; when `strict` (the file's
 * tensors already matched the model), a record of a table the file's
 * tensors do not hold is sr_weights_pooling_check_held's error; records of
 * tables not in `tables` are ignored otherwise. `adopt` (T entries) not NULL: a recorded table's pooling is
 * written there instead of being compared. *recorded (NULL ok): the tables
 * the file records. A file without records: SR_OK. Malformed records:
 * sr_weights_pooling_read's errors. */
int sr_weights_pooling_match(const struct sr_st_file *f, const struct sr_table_config *tables,
                             int T, int strict, enum sr_pooling *adopt, int *recorded);

#endif
