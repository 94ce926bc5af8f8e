/*
 * Table statistics measured on a sample of the data (the planner's "stats",
 * docs/planner.md "Inputs"): for each table, the mean ids a sample takes from
 * it over all its features, and its hot share, the share of its lookups that
 * its hottest 1% of rows (ceil(E/100) rows) take; and for the hybrid
 * option its hot-set sizes (sr_planner_hot_sizes, within the distinct rows
 * seen), each with the share its hottest rows take, and the rows of the
 * largest, hottest first.
 *
 * The caller feeds KJTs whose ids are already rows, mapped exactly as
 * training maps them (the reader's reduction, then sr_batch_check_ids' id
 * policy). Counting is exact: per table, one count per distinct row seen,
 * in an open-addressing hash table that grows with the rows seen, so memory
 * is bounded by min(E, the sample's ids of that table) rows, never by E.
 * The result depends only on the samples fed and their order of arrival
 * does not matter, so ranks that feed the same samples get the same bits.
 *
 * A sample smaller than a table's rows overstates a hot share, the more so
 * the larger the hot set: with fewer lookups than ceil(E/100) rows, the
 * hottest 1% of rows take every lookup seen (hot share 1). A table no
 * sample looked up gets the uniform value ceil(E/100)/E, 0 ids a sample and
 * no hot sets.
 */
#ifndef SHARDREC_TABLE_STATS_H
#define SHARDREC_TABLE_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "shardrec/kjt.h"
#include "shardrec/planner.h"
#include "shardrec/table_config.h"

struct sr_table_stats;

/* An empty count for the tables and features of ec (copied; validated by
 * the caller). Aborts on allocation failure only. */
void sr_table_stats_init(struct sr_table_stats **out, const struct sr_ebc_config *ec);

/* Count samples [0, n) of kjt (n <= kjt->stride; kjt->num_keys = F and
 * feature f looks up ec's table feature_table[f]). Every id must be a row in
 * [0, E) of its table: an id outside aborts (the caller maps ids first).
 * Grows the hash tables as needed. */
void sr_table_stats_add(struct sr_table_stats *s, const struct sr_kjt *kjt, int n);

/* Samples counted so far. */
int64_t sr_table_stats_samples(const struct sr_table_stats *s);

/* out[0..T): ids_per_sample (a table's ids over the samples counted),
 * features (the features that look it up) and hot_share, as above. */
void sr_table_stats_finish(const struct sr_table_stats *s, struct sr_planner_table *out);

void sr_table_stats_free(struct sr_table_stats *s); /* NULL is a no-op */

/* One line a table: its name, rows, features, mean ids a sample and hot
 * share (the planner's inputs), under a header line; for `shardrec plan`
 * and train's log. */
void sr_table_stats_print(FILE *f, const struct sr_ebc_config *ec,
                          const struct sr_planner_table *stats);

#endif
