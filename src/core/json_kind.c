/* What a parsed JSON value is, an integer field's check, and an object's keys' check
 * (core/json_kind.h). */
#include <math.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/nearest.h"
#include "core/json_kind.h"

const char *sr_json_kind(const cJSON *it)
{
    if (cJSON_IsNumber(it))
        return "a number";
    if (cJSON_IsString(it))
        return "a string";
    if (cJSON_IsArray(it))
        return "an array";
    if (cJSON_IsObject(it))
        return "an object";
    if (cJSON_IsBool(it))
        return "a boolean";
    return "null";
}

int sr_json_int(const cJSON *it, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
        it->valuedouble < (double)lo || it->valuedouble > (double)hi)
        return 0; /* NaN fails the first comparison */
    *out = (int64_t)it->valuedouble;
    return 1;
}

static int known(const char *key, const char *const *names, int n)
{
    for (int k = 0; k < n; k++)
        if (strcmp(key, names[k]) == 0)
            return 1;
    return 0;
}

int sr_json_check_keys(const cJSON *o, const char *const *names, int n, const char *kind,
                       const char *source, const char *where)
{
    const cJSON *it;
    char hint[256];
    cJSON_ArrayForEach(it, o)
    {
        if (!known(it->string, names, n)) {
            sr_name_hint(hint, sizeof hint, it->string, names, n);
            return sr_error_set(SR_ERR_INVALID_ARG, "%s '%s': %skey \"%s\" is unknown; HINT: %s",
                                kind, source, where, it->string, hint);
        }
        for (const cJSON *j = it->next; j; j = j->next)
            if (strcmp(j->string, it->string) == 0)
                return sr_error_set(SR_ERR_INVALID_ARG, "%s '%s': %skey \"%s\" is given twice",
                                    kind, source, where, it->string);
    }
    return SR_OK;
}
