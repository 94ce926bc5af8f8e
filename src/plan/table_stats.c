/*
 * Table statistics measured on a sample (shardrec/table_stats.h): exact
 * lookup counts per row, a hash table per table.
 *
 * Layout: table t's counts are an open-addressing hash table with linear
 * probing, keyed by row:
 *
 *   rows   [cap]  the row + 1 in a used slot, 0 in an empty one
 *   counts [cap]  its lookups
 *
 * cap is a power of two and at most half full; it doubles when half full,
 * so a table holds at most 4 x (distinct rows seen) slots of 16 bytes. A
 * table's hot share sorts its counts, largest first, and sums the first
 * ceil(E/100); the hybrid option's hot-set sizes (sr_planner_hot_sizes,
 * those the distinct rows seen back) take the sums of their prefixes, and its
 * hot list is the prefix of the largest, hottest first.
 */
#include <stdlib.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/table_stats.h"

#define INITIAL_CAP 64

struct row_counts {
    uint64_t *rows;  /* (cap) row + 1, or 0: empty */
    int64_t *counts; /* (cap) */
    int64_t cap, used;
    int shift; /* 64 - log2(cap) */
};

struct sr_table_stats {
    int num_tables, num_features;
    int64_t *table_rows;       /* (T) E */
    int *feature_table;        /* (F) */
    int64_t *lookups;          /* (T) ids counted */
    struct row_counts *counts; /* (T) */
    int64_t samples;
};

static void counts_alloc(struct row_counts *c, int64_t cap)
{
    int log2 = 0;
    while (((int64_t)1 << log2) < cap)
        log2++;
    c->cap = (int64_t)1 << log2;
    c->shift = 64 - log2;
    c->used = 0;
    c->rows = sr_calloc((size_t)c->cap, sizeof *c->rows);
    c->counts = sr_calloc((size_t)c->cap, sizeof *c->counts);
}

static int64_t slot_of(const struct row_counts *c, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ULL; /* Fibonacci hashing: the top bits */
    int64_t i = (int64_t)(h >> c->shift);
    while (c->rows[i] && c->rows[i] != key)
        i = (i + 1) & (c->cap - 1);
    return i;
}

static void counts_grow(struct row_counts *c)
{
    struct row_counts old = *c;
    counts_alloc(c, 2 * old.cap);
    for (int64_t i = 0; i < old.cap; i++) {
        if (!old.rows[i])
            continue;
        int64_t j = slot_of(c, old.rows[i]);
        c->rows[j] = old.rows[i];
        c->counts[j] = old.counts[i];
        c->used++;
    }
    sr_free(old.rows);
    sr_free(old.counts);
}

static void counts_add(struct row_counts *c, int64_t row)
{
    uint64_t key = (uint64_t)row + 1;
    int64_t i = slot_of(c, key);
    if (!c->rows[i]) {
        if (2 * (c->used + 1) > c->cap) {
            counts_grow(c);
            i = slot_of(c, key);
        }
        c->rows[i] = key;
        c->used++;
    }
    c->counts[i]++;
}

void sr_table_stats_init(struct sr_table_stats **out, const struct sr_ebc_config *ec)
{
    struct sr_table_stats *s = sr_calloc(1, sizeof *s);
    s->num_tables = ec->num_tables;
    s->num_features = ec->num_features;
    s->table_rows = sr_calloc((size_t)ec->num_tables, sizeof *s->table_rows);
    s->feature_table = sr_calloc((size_t)ec->num_features, sizeof *s->feature_table);
    s->lookups = sr_calloc((size_t)ec->num_tables, sizeof *s->lookups);
    s->counts = sr_calloc((size_t)ec->num_tables, sizeof *s->counts);
    for (int t = 0; t < ec->num_tables; t++) {
        s->table_rows[t] = ec->tables[t].num_embeddings;
        counts_alloc(&s->counts[t], INITIAL_CAP);
    }
    memcpy(s->feature_table, ec->feature_table, sizeof(int) * (size_t)ec->num_features);
    *out = s;
}

void sr_table_stats_add(struct sr_table_stats *s, const struct sr_kjt *kjt, int n)
{
    SR_ASSERT(kjt->num_keys == s->num_features && n >= 0 && n <= kjt->stride);
    for (int f = 0; f < s->num_features; f++) {
        int t = s->feature_table[f];
        int64_t begin = sr_kjt_bag_begin(kjt, f, 0), end = sr_kjt_bag_begin(kjt, f, n);
        for (int64_t i = begin; i < end; i++) {
            int64_t row = kjt->values[i];
            if (row < 0 || row >= s->table_rows[t])
                SR_ABORT("table stats: feature %d: id %lld outside [0, %lld) (ids must be "
                         "mapped to rows first)",
                         f, (long long)row, (long long)s->table_rows[t]);
            counts_add(&s->counts[t], row);
        }
        s->lookups[t] += end - begin;
    }
    s->samples += n;
}

int64_t sr_table_stats_samples(const struct sr_table_stats *s)
{
    return s->samples;
}

/* A counted row: its count and its row. */
struct counted {
    int64_t count, row;
};

static int by_count_then_row(const void *a, const void *b)
{
    const struct counted *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* The share of t's lookups its ceil(E/100) most counted rows take (ties: the
 * lower row); the hot-set sizes the rows counted back (sr_planner_hot_sizes),
 * each with the share of its prefix, and the largest one's rows, hottest
 * first, into out->hot. */
static double hot_share(const struct sr_table_stats *s, int t, struct sr_planner_table *out)
{
    const struct row_counts *c = &s->counts[t];
    const double lookups = (double)s->lookups[t];
    int64_t E = s->table_rows[t], hot = (E + 99) / 100, top = 0, n = 0, sum = 0;
    if (s->lookups[t] == 0)
        return (double)hot / (double)E;
    struct counted *v = sr_malloc(sizeof *v * (size_t)(c->used + 1));
    for (int64_t i = 0; i < c->cap; i++)
        if (c->rows[i])
            v[n++] = (struct counted){c->counts[i], c->rows[i] - 1};
    qsort(v, (size_t)n, sizeof *v, by_count_then_row);
    for (int64_t i = 0; i < n && i < hot; i++)
        top += v[i].count;
    out->num_sizes = sr_planner_hot_sizes(E, n, out->hot_size);
    for (int64_t i = 0, k = 0; k < out->num_sizes; i++) {
        sum += v[i].count;
        if (i + 1 == out->hot_size[k])
            out->hot_size_share[k++] = (double)sum / lookups;
    }
    out->num_hot = out->num_sizes ? out->hot_size[out->num_sizes - 1] : 0;
    out->hot = sr_malloc(sizeof *out->hot * (size_t)(out->num_hot + 1));
    for (int64_t i = 0; i < out->num_hot; i++)
        out->hot[i] = v[i].row;
    sr_free(v);
    return (double)top / lookups;
}

void sr_table_stats_finish(const struct sr_table_stats *s, struct sr_planner_table *out)
{
    for (int t = 0; t < s->num_tables; t++) {
        out[t] = (struct sr_planner_table){0};
        out[t].ids_per_sample = s->samples > 0 ? (double)s->lookups[t] / (double)s->samples : 0;
        out[t].hot_share = hot_share(s, t, &out[t]);
    }
    for (int f = 0; f < s->num_features; f++)
        out[s->feature_table[f]].features++;
}

void sr_table_stats_free(struct sr_table_stats *s)
{
    if (!s)
        return;
    for (int t = 0; t < s->num_tables; t++) {
        sr_free(s->counts[t].rows);
        sr_free(s->counts[t].counts);
    }
    sr_free(s->counts);
    sr_free(s->lookups);
    sr_free(s->feature_table);
    sr_free(s->table_rows);
    sr_free(s);
}

void sr_table_stats_print(FILE *f, const struct sr_ebc_config *ec,
                          const struct sr_planner_table *stats)
{
    fprintf(f, "  %-16s %12s %8s %12s %10s\n", "table", "rows", "features", "ids/sample",
            "hot share");
    for (int t = 0; t < ec->num_tables; t++)
        fprintf(f, "  %-16s %12lld %8d %12.3f %10.4f\n", ec->tables[t].name,
                (long long)ec->tables[t].num_embeddings, stats[t].features, stats[t].ids_per_sample,
                stats[t].hot_share);
}
