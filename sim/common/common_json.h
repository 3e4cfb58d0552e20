/* common_json.h -- checking a JSON file one field at a time, for the
 * harness's file formats (scenarios, target profiles): a field of the
 * wrong type, out of range, missing or unknown is an error naming the file
 * and the field ("scenarios/04.json: steps[3].ms: must be an integer").
 *
 * Every helper returns 0 or 1 as documented, or -1 with the message already
 * in the context's err (jv_err), so a failing check ends in one line. */
#ifndef CW_COMMON_JSON_H
#define CW_COMMON_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Validation context: the file name and where the message goes. */
struct jv_ctx {
    const char *path;
    char *err;
    size_t errlen;
    /* Scenario files only: the fault points a field may name (NULL: any). */
    const char *const *points;
};

/* Formats "PATH: FIELD: message" (or "PATH: message" when field is empty)
 * into v->err.  Always returns -1. */
__attribute__((format(printf, 3, 4)))
int jv_err(struct jv_ctx *v, const char *field, const char *fmt, ...);

/* 1 when s is in the NULL-terminated list, else 0. */
int jv_in_list(const char *s, const char *const *list);
/* Every key of obj must be in allowed (NULL-terminated): 0, or -1. */
int jv_only_fields(struct jv_ctx *v, const cJSON *obj, const char *field,
                   const char *const *allowed);
/* A string field: 1 found, 0 absent (when optional), -1 error (not a
 * string, or empty). */
int jv_str(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
           int required, const char **out);
/* An integer field within [lo, hi]: 1 found, 0 absent (when optional),
 * -1 error. */
int jv_int(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
           int required, long long lo, long long hi, long long *out);
/* An optional integer field within [lo, hi] stored into an int: *out is
 * set when the field is given and left at the caller's default when it is
 * absent or null.  0, or -1 (not an integer, out of range). */
int jv_opt_int(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
               long long lo, long long hi, int *out);
/* The index of name in names[0..n-1], -1 when it is not there. */
int jv_name_index(const char *const *names, int n, const char *name);
/* An optional true/false field into *out: 1 found, 0 absent, -1 error. */
int jv_bool(struct jv_ctx *v, const cJSON *obj, const char *key, const char *field,
            int *out);

#endif
