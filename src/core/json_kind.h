/*
 * What a parsed JSON value is, for messages ("a number", "a string", ...):
 * the readers of JSON files (configs, plans) name a value of the wrong type
 * by its kind.
 */
#ifndef SHARDREC_CORE_JSON_KIND_H
#define SHARDREC_CORE_JSON_KIND_H

#include <cjson/cJSON.h>

/* "a number", "a string", "an array", "an object", "a boolean" or "null". */
const char *sr_json_kind(const cJSON *it);

#endif
