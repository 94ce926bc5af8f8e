/*
 * File readers: Criteo TSV (plain or gzip) and shardrec's binary format, in
 * one stream of samples, batched for rank r of W.
 *
 * The files are read in the order given, as one stream; each file's format is
 * detected by its magic (binfmt.h), so TSV and binary files may even be mixed.
 * TSV streams through a large buffer (files of any size); binary files are
 * mapped. A sample is a good line (or a binary sample); bad lines skipped under
 * skip_bad_lines do not count, so sample indices agree on every rank.
 *
 * Global batches, the same for every world size (issue 4, item 7):
 *
 *   stream   | g = 0                  | g = 1                  | ...
 *            | rank 0 | rank 1 | ...  | rank 0 | rank 1 | ...  |
 *            |<- B  ->|<- B  ->|      |<------- G = W * B ---->|
 *
 * rank r's batch g holds samples [g*G + r*B, g*G + (r+1)*B). Every rank reads
 * (and checks) the whole stream of a TSV file, so every rank meets a bad line
 * at the same place and stops with the same message; binary readers jump
 * straight to their slice. A partial last global batch is dropped (training);
 * with keep_partial it is returned (evaluation): then batch_size = kjt.stride
 * = B_valid, the rank's count of real samples, 0 <= B_valid <= B — a rank past
 * the data gets an empty batch and still returns 1, so that every rank takes
 * the same number of steps.
 *
 * Shuffling (shuffle = 1, binary files only): the stream is cut into record
 * blocks of block_samples consecutive samples (the last may be partial), and
 * the blocks are visited in the order of a permutation that depends only on
 * (seed, epoch, number of blocks) -- epoch 0 at open, one more at each rewind.
 * Global batches are then sliced from that reordered stream exactly as above,
 * so every world size sees the same global batches. TSV files, which stream,
 * are refused (SR_ERR_UNSUPPORTED): convert them first.
 *
 * Not thread-safe: one reader per thread. After an error the reader may only be
 * rewound or freed.
 */
#ifndef SHARDREC_READER_H
#define SHARDREC_READER_H

#include <stdint.h>
#include <stdio.h>

#include "shardrec/batch.h"
#include "shardrec/criteo.h"

struct sr_reader_options {
    int rank, world;    /* r in [0, W) */
    int batch_size;     /* B, per rank */
    int skip_bad_lines; /* count bad TSV lines by kind instead of failing */
    int keep_partial;   /* return the last partial global batch (evaluation) */
    int64_t max_line;   /* longest TSV line in bytes; 0 = SR_CRITEO_MAX_LINE_DEFAULT */
    int shuffle;        /* visit record blocks in a seeded order (binary files only) */
    uint64_t seed;      /* of the block permutation */
    int block_samples;  /* samples per record block; 0 = SR_READER_BLOCK_DEFAULT */
};

#define SR_READER_BLOCK_DEFAULT 4096

struct sr_reader;

/* Open a reader over paths[0..n_paths) (copied) for F features whose ids are
 * reduced mod rows[f] (copied). Binary files are mapped and verified here, and
 * must have been written with the same F and rows; TSV files are opened as the
 * stream reaches them (the first is opened here, to fail early). Returns
 * SR_ERR_INVALID_ARG for bad options (rank outside [0, world), B < 1, no paths,
 * F < 1, rows < 1, block_samples < 0), SR_ERR_UNSUPPORTED for shuffle over a
 * TSV file, SR_ERR_IO / SR_ERR_DATA naming the file; *out is NULL then. */
int sr_reader_open(struct sr_reader **out, const char *const *paths, int n_paths, int num_features,
                   const int64_t *rows, const struct sr_reader_options *opt);

/* Allocate a batch big enough for any batch of this reader (B samples,
 * sr_reader_max_values ids, weights when a file has them). keys borrowed. */
void sr_reader_batch_init(const struct sr_reader *r, struct sr_batch *batch,
                          const char *const *keys);
int sr_reader_num_dense(const struct sr_reader *r);      /* 13 unless binary files say otherwise */
int64_t sr_reader_max_values(const struct sr_reader *r); /* most ids in one batch */
/* Most ids of feature f in one batch: B times its most in one sample (TSV 1;
 * a binary file's fixed bag length, or where bags vary its most ids in one
 * sample), at most sr_reader_max_values. */
int64_t sr_reader_feature_max_values(const struct sr_reader *r, int f);
int sr_reader_has_weights(const struct sr_reader *r);

/* Fill batch with this rank's slice of the next global batch: dense, labels,
 * KJT lengths/offsets/values (weights 1 for data without weights), batch_size,
 * kjt.stride and first_index (the global index of the slice's first sample).
 * Returns 1 when filled, 0 at the end of the data (and again until rewound),
 * or an error: SR_ERR_DATA "file:line: what; HINT: ..." for a bad line (unless
 * skip_bad_lines) or a corrupt binary file, SR_ERR_IO for a read failure,
 * SR_ERR_INVALID_ARG if the batch is too small (use sr_reader_batch_init).
 * Does not allocate. */
int sr_reader_next(struct sr_reader *r, struct sr_batch *batch);

/* Start again from the first sample of the first file (epochs, repeated
 * evaluation), or under shuffle from the first block of the next epoch's
 * permutation; bad-line counts restart too. Returns an error if the first file
 * cannot be reopened. */
int sr_reader_rewind(struct sr_reader *r);

/* Where the stream stands, in terms that survive the process: the pass
 * (epoch: 0 at open, one more at each rewind; under shuffle it also picks
 * the block order) and the global batches returned in that pass. A batch
 * returned by sr_reader_next is counted once it is returned. */
struct sr_reader_position {
    uint64_t epoch;
    int64_t batches;
};
void sr_reader_tell(const struct sr_reader *r, struct sr_reader_position *pos);

/* Put the reader where sr_reader_tell said it was (a checkpoint's data
 * position): start pass pos->epoch (its permutation under shuffle) and skip
 * pos->batches global batches. Binary files move cursors; TSV lines are
 * read and checked again (not stored), so bad lines are found and counted
 * as in the first pass. SR_ERR_DATA naming the first file when the data
 * ends before the position (the files changed), or a reading error. */
int sr_reader_seek(struct sr_reader *r, const struct sr_reader_position *pos);

/* Bad lines skipped so far in this pass, of one kind, or of all kinds for
 * SR_CRITEO_OK. */
int64_t sr_reader_bad_lines(const struct sr_reader *r, enum sr_criteo_fault kind);

/* Print one summary line of skipped bad lines by kind, with the first place
 * each kind was seen, or nothing if there were none. */
void sr_reader_report(const struct sr_reader *r, FILE *f);

/* How far the stream has read, for a progress line: *total the files' sizes
 * at open, *done the sizes of the files behind the cursor plus the bytes read
 * of the current one (a gzip file's compressed bytes; a binary file's share
 * of samples passed). In file order; under shuffle only a rough guide. */
void sr_reader_progress(const struct sr_reader *r, int64_t *done, int64_t *total);

void sr_reader_free(struct sr_reader *r); /* NULL is a no-op */

#endif
