/*
 * The tables of an embedding bag collection and the map from features to
 * them (TorchRec's EmbeddingBagConfig list): the description every layer
 * shares, from the config reader and the planner to the EBC itself. Plain
 * data, no device memory.
 */
#ifndef SHARDREC_TABLE_CONFIG_H
#define SHARDREC_TABLE_CONFIG_H

#include <stdint.h>

#include "shardrec/kjt.h"
#include "shardrec/tensor.h"

enum sr_pooling { SR_POOLING_SUM = 0, SR_POOLING_MEAN = 1 };

#define SR_NAME_MAX 64

struct sr_table_config {
    char name[SR_NAME_MAX];
    int64_t num_embeddings; /* E */
    int embedding_dim;      /* D */
    enum sr_pooling pooling;
    enum sr_id_policy id_policy; /* from kjt.h */
    enum sr_dtype storage;       /* the weights' dtype: SR_DTYPE_F32 (0, the default),
                                    F16 or BF16 (--emb-dtype; device/ops_embedding.h) */
};

struct sr_ebc_config {
    int num_tables;                     /* T */
    struct sr_table_config *tables;     /* (T) */
    int num_features;                   /* F */
    char (*feature_names)[SR_NAME_MAX]; /* (F) */
    int *feature_table;                 /* (F) index of the table each feature looks up */
    int stochastic_rounding;            /* 16-bit tables: updates rounded stochastically */
};

/* Check a config without allocating anything: at least one table and one
 * feature; every table with a non-empty unique name, rows >= 1, dim >= 1, a
 * known pooling and id policy; every feature with a non-empty unique name and
 * a table index in [0, T). Returns SR_ERR_INVALID_ARG naming the table or
 * feature otherwise. */
int sr_ebc_config_validate(const struct sr_ebc_config *cfg);

/* "sum" / "mean" and back; parse returns SR_ERR_INVALID_ARG listing choices. */
const char *sr_pooling_name(enum sr_pooling pooling);
int sr_pooling_parse(const char *s, enum sr_pooling *out);

/* Deep copy of a validated cfg into dst (dst owns its arrays), and its release. */
void sr_ebc_config_copy(struct sr_ebc_config *dst, const struct sr_ebc_config *cfg);
void sr_ebc_config_release(struct sr_ebc_config *cfg);

#endif
