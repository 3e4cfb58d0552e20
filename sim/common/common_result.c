/* common_result.c -- the check of result.json; see common_result.h. */
#include "common_result.h"

#include <stdio.h>
#include <string.h>

static const char *str_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Why a parsed object is not a result under rules, or NULL.  The message
 * follows the path: "is ..." and "has ..." after a space, the type checks
 * of CW_RESULT_DRAWABLE after a colon. */
static const char *refusal(const cJSON *res, enum cw_result_rules rules)
{
    const char *tool = cJSON_IsObject(res) ? str_field(res, "tool") : NULL;
    if (!cJSON_IsObject(res))
        return " is not a JSON object";
    if (tool == NULL || strcmp(tool, "crashwindow") != 0)
        return " is not a crashwindow result (\"tool\" must be \"crashwindow\")";
    const cJSON *scenarios = cJSON_GetObjectItemCaseSensitive(res, "scenarios");
    if (rules == CW_RESULT_DRAWABLE) {
        const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(res, "verdict");
        if (scenarios != NULL && !cJSON_IsArray(scenarios))
            return ": \"scenarios\" must be an array";
        if (verdict != NULL && !cJSON_IsString(verdict))
            return ": \"verdict\" must be a string";
        return NULL;
    }
    if (str_field(res, "kind") == NULL)
        return " has no \"kind\"";
    if (str_field(res, "verdict") == NULL)
        return " has no \"verdict\"";
    if (!cJSON_IsArray(scenarios))
        return " has no \"scenarios\" array";
    return NULL;
}

cJSON *cw_result_parse(const char *path, const char *text, size_t len,
                       enum cw_result_rules rules, char *err, size_t errlen)
{
    if (len == 0) {
        snprintf(err, errlen, "%s is empty", path);
        return NULL;
    }
    const char *end = NULL;
    cJSON *res = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (res == NULL) {
        size_t at = end != NULL && end >= text ? (size_t)(end - text) : 0;
        /* A whole result.json ends with its closing brace; a copy or a
         * write that stopped early does not. */
        size_t last = len;
        while (last > 0 && (text[last - 1] == '\n' || text[last - 1] == ' ' ||
                            text[last - 1] == '\r' || text[last - 1] == '\t'))
            last--;
        int cut = last == 0 || text[last - 1] != '}';
        snprintf(err, errlen, "%s is not valid JSON (parsing stopped at byte %zu of %zu%s)",
                 path, at, len, cut ? "; the file is cut short: truncated or still being "
                 "written" : "; corrupt");
        return NULL;
    }
    const char *why = refusal(res, rules);
    if (why != NULL) {
        snprintf(err, errlen, "%s%s", path, why);
        cJSON_Delete(res);
        return NULL;
    }
    return res;
}
