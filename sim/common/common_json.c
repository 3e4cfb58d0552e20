/* common_json.c -- one field of a JSON file checked at a time, for every
 * file format of the harness (scenarios, target profiles): see
 * common_json.h. */
#include "common_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4)))
int jv_err(struct jv_ctx *v, const char *field, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (field != NULL && field[0] != '\0')
        snprintf(v->err, v->errlen, "%s: %s: %s", v->path, field, msg);
    else
        snprintf(v->err, v->errlen, "%s: %s", v->path, msg);
    return -1;
}

int jv_in_list(const char *s, const char *const *list)
{
    for (; *list != NULL; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

/* Every key of obj must be in allowed. */
int jv_only_fields(struct jv_ctx *v, const cJSON *obj, const char *field,
                   const char *const *allowed)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (!jv_in_list(it->string, allowed))
            return jv_err(v, field, "unknown field '%s'", it->string);
    }
    return 0;
}

/* A string field: 1 found, 0 absent (when optional), -1 error. */
int jv_str(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
               int required, const char **out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    char f[160];
    snprintf(f, sizeof(f), "%s%s%s", field, field[0] ? "." : "", key);
    if (it == NULL || cJSON_IsNull(it)) {
        if (required)
            return jv_err(v, f, "missing (a string is required)");
        return 0;
    }
    if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
        return jv_err(v, f, "must be a non-empty string");
    *out = it->valuestring;
    return 1;
}

/* An integer field within [lo, hi]. */
int jv_int(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
               int required, long long lo, long long hi, long long *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    char f[160];
    snprintf(f, sizeof(f), "%s%s%s", field, field[0] ? "." : "", key);
    if (it == NULL || cJSON_IsNull(it)) {
        if (required)
            return jv_err(v, f, "missing (an integer is required)");
        return 0;
    }
    if (!cJSON_IsNumber(it) || it->valuedouble != (double)(long long)it->valuedouble)
        return jv_err(v, f, "must be an integer");
    long long x = (long long)it->valuedouble;
    if (x < lo || x > hi)
        return jv_err(v, f, "%lld is out of range [%lld, %lld]", x, lo, hi);
    *out = x;
    return 1;
}

/* An optional integer field within [lo, hi] stored into an int: *out is set when the
 * field is given and left at the caller's default when it is absent or null.
 * 0 on success, -1 after reporting the error (not an integer, out of range). */
int jv_opt_int(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
               long long lo, long long hi, int *out)
{
    long long x;
    int r = jv_int(v, obj, key, field, 0, lo, hi, &x);
    if (r == 1)
        *out = (int)x;
    return r < 0 ? -1 : 0;
}

/* The index of name in names[0..n-1], -1 when it is not there. */
int jv_name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int jv_bool(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
                int *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (it == NULL)
        return 0;
    if (!cJSON_IsBool(it)) {
        char f[160];
        snprintf(f, sizeof(f), "%s.%s", field, key);
        return jv_err(v, f, "must be true or false");
    }
    *out = cJSON_IsTrue(it);
    return 1;
}
