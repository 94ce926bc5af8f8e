/* What a parsed JSON value is, for messages (core/json_kind.h). */
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
