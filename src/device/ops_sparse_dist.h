/*
 * Device ops of the sharded EBC's sparse distribution (DESIGN.md steps 3, 5
 * and 8): route every id of a batch to the shard that owns its row, lay the
 * exchanged ids out as local lookup batches, and move pooled columns between
 * the (B, out_dim) pooled tensor and the per-rank blocks the collectives
 * carry, with the mean-pooling scale folded in. embed/input_dist.c and
 * embed/output_dist.c are the callers: they size and issue the collectives
 * and loop only over ranks and slots; every loop over ids, bag lengths or
 * pooled values is here. device/cpu/cpu_sparse_dist.c is the reference
 * backend; a CUDA backend implements the same table.
 *
 * A slot is one (feature, shard) pair, numbered feature-major, shards in plan
 * order; feature f's slots are [first_slot[f], first_slot[f] + num_shards[f]).
 * An id v of feature f goes to
 *
 *   block[f] == 0   every slot of f, as row v          (tw; cw: each piece)
 *   block[f] > 0    slot first_slot[f] + v / block[f], as row v % block[f]
 *                                                        (rw, twrw)
 *   first_slot < 0  nowhere: a dp feature, kept in this rank's dp batch
 *
 * Messages. Ranks own slots; rank r's slots in message order are
 * slot_at[r][0 .. n_r). Words of the counts message (int64):
 *
 *   [ r = 0: ids of each slot of r | flags ][ r = 1: ... ] ... [ dp counts ]
 *     ^count_displ[0]                        ^count_displ[1]    ^count_displ[W]
 *
 * rank r gets words [count_displ[r], count_displ[r + 1]) (n_r + 1 words); the
 * dp counts (ids of each dp feature, this rank's) stay here for the host. The
 * received counts are W blocks of n + 1 words (n = this rank's slots), source
 * rank ascending. The data message (int32 words), one region per destination,
 * regions back to back:
 *
 *   [ lengths: B per slot, slot order ][ ids: slot by slot, bag by bag ]
 *   [ weights (fp32 bits), same order, when the sender flags them ]
 *
 * ids are shard-local rows, 1 word (uint32) or 2 (int64: low, high). A
 * region's size follows from the counts alone, so the host sizes both
 * exchanges from the counts message and never reads lengths or offsets.
 *
 * Contract of every op: pointers are device pointers of `dev` unless marked
 * host; struct arguments are read before the op returns (a queued op keeps a
 * copy). Ops are stream-ordered on `s`, allocate nothing, and give the same
 * bits on every rerun and any thread count. Nothing validates user input:
 * ids are already in [0, E) and shapes checked (violations abort).
 */
#ifndef SHARDREC_OPS_SPARSE_DIST_H
#define SHARDREC_OPS_SPARSE_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"
#include "device/op_decl.h"

/* Bits of a flags word of the counts message. */
#define SR_SPARSE_DIST_WEIGHTS 1 /* per-id weights follow the ids */
#define SR_SPARSE_DIST_ERROR   2 /* the sender rejected its batch */
#define SR_SPARSE_DIST_END     4 /* the sender's data has ended */

/* Everything fixed by the plan, built and uploaded once at init. */
struct sr_sparse_dist_layout {
    int num_features;           /* F */
    int batch;                  /* B */
    int world;                  /* W */
    int num_slots;              /* S */
    int max_nslots;             /* most slots of one rank */
    int nslots_here;            /* n: this rank's slots */
    int num_dp;                 /* F_dp: dp features */
    int id_words;               /* 1 or 2 words per id on the wire */
    int64_t count_words;        /* count_displ[W] + F_dp: the counts message */
    const int32_t *first_slot;  /* (F) device; -1 for dp features */
    const int32_t *num_shards;  /* (F) device; 0 for dp features */
    const int64_t *block;       /* (F) device: rows per shard, 0: every slot gets every id */
    const int32_t *mean;        /* (F) device: 1 for mean pooling */
    const int32_t *dp_feature;  /* (F_dp) device: the dp features, ascending */
    const int32_t *slot_at;     /* (W, max_nslots) device: each rank's slots, message order */
    const int64_t *count_displ; /* (W + 1) device: each rank's first word of the counts */
    int64_t *work;              /* (sr_sparse_dist_work_words) device scratch of pack, unpack */
};

static inline int64_t sr_sparse_dist_work_words(const struct sr_sparse_dist_layout *l)
{
    return 2 * (int64_t)l->num_slots + (int64_t)l->world * (l->max_nslots + 2) + 1;
}

/* A batch's sparse input (shardrec/kjt.h), ids already in range. */
struct sr_sparse_dist_kjt {
    const int32_t *lengths; /* (F, B) device */
    const int64_t *offsets; /* (F*B + 1) device */
    const int64_t *values;  /* (N) device */
    const float *weights;   /* (N) device, or NULL */
    int64_t num_values;     /* N */
};

/* A local lookup batch an op fills (the offsets, values and weights of
 * ops_embedding.h's sr_emb_batch) and, for unpack, where it comes from. */
struct sr_sparse_dist_batch {
    int num_features;      /* F_g */
    int batch;             /* bags per feature: B (dp) or W*B */
    const int32_t *pos;    /* (F_g) device, unpack: my slot (message position) of feature j */
    const int32_t *row_of; /* (W) device, unpack: first batch row of source rank s's samples */
    int64_t *offsets;      /* (F_g * batch + 1) device, out */
    int64_t *values;       /* (num_values) device, out */
    float *weights;        /* (num_values) device, out; NULL: no weights this step */
    int64_t num_values;    /* ids of the batch this step (from the counts) */
};

/* cols columns of one feature between pooled and a (B, width) block.
 * A hybrid feature's columns come from two pieces, its hot rows' (a dp
 * block) and its cold rows' (an rw block): the cold one names the hot one
 * in `add` (its index + 1), and scatter writes (cold + hot) * scale from the
 * cold piece alone; the hot one, add = SR_PIECE_ADDED, is skipped by
 * scatter. Gather writes both blocks, each from dpooled. */
#define SR_PIECE_PLAIN 0    /* add: a piece of its own */
#define SR_PIECE_ADDED (-1) /* add: scatter adds it into its partner's columns */
struct sr_sparse_dist_piece {
    int64_t block;   /* first float of the block in the buffer */
    int32_t width;   /* floats per row of the block */
    int32_t gcol;    /* first column of the piece in the block */
    int32_t fcol;    /* first column in pooled */
    int32_t cols;    /* columns */
    int32_t feature; /* row of the scale */
    int32_t add;     /* SR_PIECE_PLAIN, SR_PIECE_ADDED, or 1 + the piece added */
};

/* A hybrid plan's hot rows, fixed at init (embed/sharded_hybrid.c). The KJT
 * of F features becomes one of F + F_h: feature f keeps its cold ids (all
 * of them when it has no hot rows), and hot feature k (F + k) gets the hot
 * ids of feature feature[k], each as its index in its table's hot rows:
 *
 *   id v of feature f, k = hot_of[f] >= 0, rows = hot[hot_begin[k] ..
 *   + num_hot[k]) ascending:   v in rows at i  ->  feature F + k, id i
 *                              else            ->  feature f, id v
 *
 * Ids keep their order within a bag. */
struct sr_sparse_dist_hybrid {
    int num_features;         /* F */
    int batch;                /* B */
    int num_hot_features;     /* F_h */
    const int32_t *hot_of;    /* (F) device: k of feature f, or -1 */
    const int32_t *feature;   /* (F_h) device: the feature of hot feature k, ascending */
    const int64_t *hot_begin; /* (F_h) device: its first hot row in hot */
    const int64_t *num_hot;   /* (F_h) device: its table's H */
    const int64_t *hot;       /* (Σ H) device: each hybrid table's hot rows, ascending */
    int64_t hot_words;        /* Σ H: hot's length */
};

#define SR_HYB_BAGS(h) ((size_t)((h)->num_features + (h)->num_hot_features) * (size_t)(h)->batch)

/* The cold rows of hybrid tables travel compact: a bag's pooled row (or its
 * gradient) crosses to or from an owner only when the bag has ids in the
 * owner's block. Every rank has one slot of each of the n_h hybrid features
 * (feature k's slot on rank r is slot0[k] + r) and the same columns for it
 * (gcol[k], cols[k] of out_dim). Between a sample's rank s and an owner r,
 * the rows of feature k are those of the bags b of s with ids in r's block
 * (lens of s, or the owner's local batch offsets: bag s*B + b), in b order,
 * k-major:
 *
 *   region (s, r)   [ k = 0: ne(0) rows of cols[0] | k = 1: ... ]
 *
 * ne(k) the number of such bags; regions are back to back by peer rank. */
struct sr_sparse_dist_compact {
    int batch;             /* B */
    int world;             /* W */
    int num_features;      /* n_h */
    int out_dim;           /* Σ cols */
    const int32_t *cols;   /* (n_h) device */
    const int32_t *gcol;   /* (n_h) device */
    const int32_t *slot0;  /* (n_h) device */
    int64_t *work;         /* (sr_sparse_dist_compact_words) device scratch */
};

static inline int64_t sr_sparse_dist_compact_words(const struct sr_sparse_dist_compact *c)
{
    return (int64_t)c->world * c->num_features * (c->batch + 1) + 1;
}

/* The column map of an output dist, fixed at init. Every column of pooled is
 * in exactly one piece; every float of the buffer that a collective carries
 * is in exactly one piece. */
struct sr_sparse_dist_cols {
    int num_pieces;
    const struct sr_sparse_dist_piece *pieces; /* (num_pieces) device */
    int batch;                                 /* B */
    int out_dim;                               /* pooled columns */
    int num_features;                          /* F: rows of the scale */
    int64_t buf_floats;                        /* extent of the buffer */
};

/* Regions the declarations below compute (ops.c): the plan arrays of l (all
 * but mean), read; the arrays of a KJT an op reads (kjt NULL: none; lengths
 * and weights when asked for); the local batches an op fills (n of them;
 * unpack: reading pos and row_of too). */
void sr_sparse_dist_layout_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l);
void sr_sparse_dist_kjt_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l,
                                const struct sr_sparse_dist_kjt *kjt, int lengths, int weights);
void sr_sparse_dist_batches_regions(struct sr_op_regions *r, const struct sr_sparse_dist_layout *l,
                                    const struct sr_sparse_dist_batch *batches, int n, int unpack);
/* The compact ops' plan arrays, read, and their scratch, written. */
void sr_sparse_dist_compact_regions(struct sr_op_regions *r, const struct sr_sparse_dist_compact *c);
/* hybrid_split's reads: h's arrays and in's lengths, offsets, values, weights. */
void sr_sparse_dist_hybrid_regions(struct sr_op_regions *r, const struct sr_sparse_dist_hybrid *h,
                                   const struct sr_sparse_dist_kjt *in);

#define SR_SD_LAYOUT(l)                                                                            \
    SR_HOST(const struct sr_sparse_dist_layout *, l, 1)
#define SR_SD_BAGS(l) ((size_t)(l)->num_features * (size_t)(l)->batch)

/* The ops, declared once (op_decl.h says how to read an entry). */
#define SR_OPS_SPARSE_DIST(OP)                                                                     \
    /* lens (S, B): ids of sample b of slot s's feature that go to slot s.                         \
     * counts (count_words): the counts message, `flags` in every flags word,                      \
     * then the ids of each dp feature. kjt NULL: a rank without a batch (every                    \
     * count 0). */                                                                                \
    OP(sparse_dist, bucketize,                                                                     \
       SR_SD_LAYOUT(l) SR_HOST(const struct sr_sparse_dist_kjt *, kjt, 1) SR_ARG(int64_t, flags)   \
       SR_OUT(int32_t *, lens, SR_I32((size_t)l->num_slots * l->batch))                            \
       SR_OUT(int64_t *, counts, SR_I64(l->count_words)) SR_STREAM(s)                              \
       SR_REGIONS(sr_sparse_dist_kjt_regions(r, l, kjt, 1, 0))                                     \
       SR_REGIONS(sr_sparse_dist_layout_regions(r, l)))                                            \
    /* scale (F, B): 1/len of a non-empty bag of a mean feature, else 1. */                        \
    OP(sparse_dist, mean_scales,                                                                   \
       SR_SD_LAYOUT(l) SR_IN(const int32_t *, lengths, SR_I32(SR_SD_BAGS(l)))                      \
       SR_OUT(float *, scale, SR_F32(SR_SD_BAGS(l))) SR_STREAM(s)                                  \
       SR_READS(l->mean, SR_I32(l->num_features)))                                                 \
    /* send: the data message of lens and counts (bucketize's), weights                            \
     * included when kjt->weights is set; send_words bounds it (the host's sum                     \
     * of its region sizes). dp: the dp features' bags as a local batch                            \
     * (dp->num_features = F_dp, dp->batch = B; weights set exactly when the                       \
     * KJT has them; may be NULL when F_dp = 0). */                                                \
    OP(sparse_dist, pack,                                                                          \
       SR_SD_LAYOUT(l) SR_HOST(const struct sr_sparse_dist_kjt *, kjt, 1)                          \
       SR_IN(const int32_t *, lens, SR_I32((size_t)l->num_slots * l->batch))                       \
       SR_IN(const int64_t *, counts, SR_I64(l->count_words))                                      \
       SR_OUT(int32_t *, send, SR_I32(send_words)) SR_ARG(int64_t, send_words)                     \
       SR_HOST(const struct sr_sparse_dist_batch *, dp, 1) SR_STREAM(s)                            \
       SR_REGIONS(sr_sparse_dist_kjt_regions(r, l, kjt, 0, 1))                                     \
       SR_REGIONS(sr_sparse_dist_layout_regions(r, l))                                             \
       SR_WRITES(l->work, SR_I64(2 * (size_t)l->num_slots))                                        \
       SR_REGIONS(sr_sparse_dist_batches_regions(r, l, dp, dp != NULL, 0)))                        \
    /* recv (recv_words): the data messages of every source, source rank                           \
     * ascending; counts_recv (W, n + 1): the counts they came with. Fills each                    \
     * of the num_batches batches (host array): local feature j, bag row_of[s]                     \
     * + b holds source s's sample b of my slot pos[j], ids widened to int64;                      \
     * weights, when asked for, are 1 for sources that sent none. */                               \
    OP(sparse_dist, unpack,                                                                        \
       SR_SD_LAYOUT(l) SR_IN(const int32_t *, recv, SR_I32(recv_words))                            \
       SR_ARG(int64_t, recv_words)                                                                 \
       SR_IN(const int64_t *, counts_recv, SR_I64((size_t)l->world * (l->nslots_here + 1)))        \
       SR_HOST(const struct sr_sparse_dist_batch *, batches, num_batches)                          \
       SR_ARG(int, num_batches) SR_STREAM(s)                                                       \
       SR_WRITES(l->work + 2 * (size_t)l->num_slots,                                               \
                 SR_I64((size_t)l->world * (l->nslots_here + 2)))                                  \
       SR_REGIONS(sr_sparse_dist_batches_regions(r, l, batches, num_batches, 1)))                  \
    /* pooled (B, out_dim): pooled[b, fcol + c] = buf[block + b*width + gcol + c]                  \
     * * scale[feature, b], for every piece, b and c < cols. */                                    \
    OP(sparse_dist, pooled_scatter,                                                                \
       SR_HOST(const struct sr_sparse_dist_cols *, m, 1)                                           \
       SR_IN(const float *, buf, SR_F32(m->buf_floats))                                            \
       SR_IN(const float *, scale, SR_F32((size_t)m->num_features * m->batch))                     \
       SR_OUT(float *, pooled, SR_F32((size_t)m->batch * m->out_dim)) SR_STREAM(s)                 \
       SR_READS(m->pieces, sizeof *m->pieces * (size_t)m->num_pieces))                             \
    /* The transpose: buf[block + b*width + gcol + c] = dpooled[b, fcol + c] *                     \
     * scale[feature, b]. */                                                                       \
    OP(sparse_dist, pooled_gather,                                                                 \
       SR_HOST(const struct sr_sparse_dist_cols *, m, 1)                                           \
       SR_IN(const float *, dpooled, SR_F32((size_t)m->batch * m->out_dim))                        \
       SR_IN(const float *, scale, SR_F32((size_t)m->num_features * m->batch))                     \
       SR_OUT(float *, buf, SR_F32(m->buf_floats)) SR_STREAM(s)                                    \
       SR_READS(m->pieces, sizeof *m->pieces * (size_t)m->num_pieces))                             \
    /* The KJT `in` (F features) as the KJT of h's F + F_h features (see                           \
     * struct sr_sparse_dist_hybrid): lengths, offsets, values and, when in                        \
     * has weights, weights (else untouched); full (F + F_h, B): the length of                     \
     * the bag of `in` each bag comes from (what mean pooling divides by). */                      \
    OP(sparse_dist, hybrid_split,                                                                  \
       SR_HOST(const struct sr_sparse_dist_hybrid *, h, 1)                                         \
       SR_HOST(const struct sr_sparse_dist_kjt *, in, 1)                                           \
       SR_OUT(int32_t *, lengths, SR_I32(SR_HYB_BAGS(h)))                                          \
       SR_OUT(int32_t *, full, SR_I32(SR_HYB_BAGS(h)))                                             \
       SR_OUT(int64_t *, offsets, SR_I64(SR_HYB_BAGS(h) + 1))                                      \
       SR_OUT(int64_t *, values, SR_I64(in->num_values))                                           \
       SR_OUT(float *, weights, SR_F32(in->weights ? in->num_values : 0)) SR_STREAM(s)             \
       SR_REGIONS(sr_sparse_dist_hybrid_regions(r, h, in)))                                        \
    /* Rows of width floats between a table and a list of rows: for k < n,                         \
     * scatter: dst row idx[k] = src row k; else dst row k = src row idx[k].                       \
     * src has src_rows rows, dst dst_rows (rows not named keep their values).                     \
     * The hybrid replicas' copies to and from their tables' shards. */                            \
    OP(sparse_dist, rows_copy,                                                                     \
       SR_ARG(int, scatter) SR_IN(const int64_t *, idx, SR_I64(n)) SR_ARG(int64_t, n)              \
       SR_ARG(int64_t, width) SR_IN(const float *, src, SR_F32(src_rows * width))                  \
       SR_ARG(int64_t, src_rows) SR_INOUT(float *, dst, SR_F32(dst_rows * width))                  \
       SR_ARG(int64_t, dst_rows) SR_STREAM(s))                                                     \
    /* ne (W, n_h): to each owner r, for each hybrid feature k, the bags of                        \
     * mine with ids in r's block (lens (S, B) of bucketize). */                                   \
    OP(sparse_dist, compact_counts,                                                                \
       SR_HOST(const struct sr_sparse_dist_compact *, c, 1)                                        \
       SR_IN(const int32_t *, lens, SR_I32((size_t)num_slots * c->batch))                          \
       SR_ARG(int, num_slots) SR_OUT(int64_t *, ne, SR_I64((size_t)c->world * c->num_features))    \
       SR_STREAM(s) SR_REGIONS(sr_sparse_dist_compact_regions(r, c)))                              \
    /* The owner's side. pack 1: buf (words floats) <- the rows (W*B,                              \
     * out_dim) of every source's bags that hold ids here (offsets: the                            \
     * local batch's, (n_h * W * B + 1)), regions by source; pack 0: those                         \
     * rows <- buf (the others untouched). */                                                      \
    OP(sparse_dist, compact_owner,                                                                 \
       SR_HOST(const struct sr_sparse_dist_compact *, c, 1)                                        \
       SR_IN(const int64_t *, offsets,                                                             \
             SR_I64((size_t)c->num_features * c->world * c->batch + 1))                            \
       SR_IO(float *, rows, SR_F32((size_t)c->world * c->batch * c->out_dim),                      \
             pack ? SR_OP_IN : SR_OP_INOUT)                                                        \
       SR_IO(float *, buf, SR_F32(words), pack ? SR_OP_OUT : SR_OP_IN) SR_ARG(int64_t, words)      \
       SR_ARG(int, pack) SR_STREAM(s) SR_REGIONS(sr_sparse_dist_compact_regions(r, c)))            \
    /* The samples' side (lens (S, B): mine). pack 0: block (B, out_dim) <-                        \
     * for each row, the sum over owners, rank ascending, of the rows buf                          \
     * holds for it (0 when none); pack 1: buf <- block's rows, regions by                         \
     * owner. */                                                                                   \
    OP(sparse_dist, compact_samples,                                                               \
       SR_HOST(const struct sr_sparse_dist_compact *, c, 1)                                        \
       SR_IN(const int32_t *, lens, SR_I32((size_t)num_slots * c->batch)) SR_ARG(int, num_slots)   \
       SR_IO(float *, block, SR_F32((size_t)c->batch * c->out_dim), pack ? SR_OP_IN : SR_OP_OUT)   \
       SR_IO(float *, buf, SR_F32(words), pack ? SR_OP_OUT : SR_OP_IN) SR_ARG(int64_t, words)      \
       SR_ARG(int, pack) SR_STREAM(s) SR_REGIONS(sr_sparse_dist_compact_regions(r, c)))

struct sr_sparse_dist_ops {
    SR_OPS_SPARSE_DIST(SR_OP_MEMBER)
};
SR_OPS_SPARSE_DIST(SR_OP_PROTO)

#endif
