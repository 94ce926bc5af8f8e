/*
 * What a parsed JSON value is, for messages ("a number", "a string", ...):
 * the readers of JSON files (configs, plans, topologies) name a value of the
 * wrong type by its kind; and the readers' one check of an object's keys.
 */
#ifndef SHARDREC_CORE_JSON_KIND_H
#define SHARDREC_CORE_JSON_KIND_H

#include <cjson/cJSON.h>

/* "a number", "a string", "an array", "an object", "a boolean" or "null". */
const char *sr_json_kind(const cJSON *it);

/* Every key of object o is one of names[0..n) and is given once: a misspelt
 * key is SR_ERR_INVALID_ARG with the nearest known one as the hint, never a
 * default silently taken. Messages read "KIND 'SOURCE': WHEREkey ..." (kind
 * "plan", "topology"; `where` locates o in the file, "" at the top level). */
int sr_json_check_keys(const cJSON *o, const char *const *names, int n, const char *kind,
                       const char *source, const char *where);

#endif
