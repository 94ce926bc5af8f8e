/*
 * What a parsed JSON value is, for messages ("a number", "a string", ...):
 * the readers of JSON files (configs, plans, topologies, checkpoint
 * manifests) name a value of the wrong type by its kind; their one check of
 * an integer field; and their one check of an object's keys.
 */
#ifndef SHARDREC_CORE_JSON_KIND_H
#define SHARDREC_CORE_JSON_KIND_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* "a number", "a string", "an array", "an object", "a boolean" or "null". */
const char *sr_json_kind(const cJSON *it);

/* The largest integer a JSON number (a double) holds exactly with no other
 * literal read onto it: 2^53 - 1 (2^53 + 1 reads as 2^53, so 2^53 could be
 * either and is refused rather than taken). */
#define SR_JSON_INT_MAX (((int64_t)1 << 53) - 1)

/* Whether `it` is a number holding an integer in [lo, hi] (lo and hi within
 * +-2^53, exact as doubles, so no cast of a huge or fractional value is
 * made); *out then holds it, else *out is left alone. Absent (NULL): 0. */
int sr_json_int(const cJSON *it, int64_t lo, int64_t hi, int64_t *out);

/* Every key of object o is one of names[0..n) and is given once: a misspelt
 * key is SR_ERR_INVALID_ARG with the nearest known one as the hint, never a
 * default silently taken. Messages read "KIND 'SOURCE': WHEREkey ..." (kind
 * "plan", "topology"; `where` locates o in the file, "" at the top level). */
int sr_json_check_keys(const cJSON *o, const char *const *names, int n, const char *kind,
                       const char *source, const char *where);

#endif
