/* rundir.c -- result.json of a run directory; see rundir.h. */
#include "rundir.h"
#include "bundle.h"
#include "common_fs.h"
#include "common_result.h"
#include "junit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* DIR/result.json's text, at most CW_RESULT_MAX_JSON bytes.  NULL with err. */
static char *read_result(const char *path, size_t *len, char *err, size_t errlen)
{
    enum cw_slurp_error why;
    char *data = cw_slurp(path, CW_RESULT_MAX_JSON, len, &why);
    if (data == NULL)
        snprintf(err, errlen, "%s: %s", path,
                 why == CW_SLURP_OPEN ? (errno == ENOENT ? "missing" : strerror(errno))
                 : why == CW_SLURP_NOMEM ? "out of memory"
                 : why == CW_SLURP_READ ? "cannot be read"
                 : "larger than the limit of result.json");
    return data;
}

cJSON *rundir_load(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/result.json", dir) >= (int)sizeof(path)) {
        snprintf(err, errlen, "%.200s...: path too long", dir);
        return NULL;
    }
    size_t len = 0;
    char *text = read_result(path, &len, err, errlen);
    if (text == NULL)
        return NULL;
    cJSON *res = cw_result_parse(path, text, len, CW_RESULT_WHOLE, err, errlen);
    free(text);
    return res;
}

int rundir_failed(const cJSON *sc)
{
    const char *v = jstr(sc, "verdict");
    const char *e = jstr(sc, "error");
    return v == NULL || strcmp(v, "pass") != 0 || (e != NULL && e[0] != '\0');
}

int rundir_check_failed(const cJSON *check)
{
    const char *v = jstr(check, "verdict");
    static const char *const held[] = {"pass", "hazard caught", "not examined",
                                       "finding reproduced"};
    for (size_t i = 0; v != NULL && i < sizeof(held) / sizeof(held[0]); i++)
        if (strcmp(v, held[i]) == 0)
            return 0;
    return 1;
}

static void put(char *out, size_t outlen, const char *a, const char *b)
{
    if (out != NULL)
        snprintf(out, outlen, "%s%s%s", a, b[0] ? ": " : "", b);
}

void rundir_first_witness(const cJSON *sc, char *out, size_t outlen, char *sig,
                          size_t siglen)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sc, "invariants")) {
        const char *name = jstr(it, "name");
        if (!rundir_check_failed(it) || name == NULL)
            continue;
        const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "witnesses"), 0);
        const cJSON *checked = cJSON_GetObjectItemCaseSensitive(it, "checked");
        const char *text = cJSON_IsString(w) ? w->valuestring
                           : cJSON_IsNumber(checked) && checked->valuedouble == 0
                               ? "vacuous: nothing checked" : "";
        put(out, outlen, name, text);
        if (sig != NULL)
            snprintf(sig, siglen, "%s", name);
        return;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sc, "expect")) {
        if (!rundir_check_failed(it))
            continue;
        char what[200];
        snprintf(what, sizeof(what), "expectation %s", jstr(it, "check") ? jstr(it, "check")
                                                                         : "?");
        put(out, outlen, what, jstr(it, "detail") ? jstr(it, "detail") : "");
        if (sig != NULL)
            snprintf(sig, siglen, "expectation");
        return;
    }
    const char *e = jstr(sc, "error");
    put(out, outlen, "error", e != NULL ? e : "the scenario did not pass");
    if (sig != NULL)
        snprintf(sig, siglen, "error");
}

int rundir_outputs(const char *dir, const char *junit, int bundles, const char *who)
{
    char err[1024];
    cJSON *res = rundir_load(dir, err, sizeof(err));
    if (res == NULL) {
        fprintf(stderr, "%s: %s\n", who, err);
        return -1;
    }
    int rc = 0;
    if (junit != NULL) {
        if (junit_write(res, junit, err, sizeof(err)) < 0) {
            fprintf(stderr, "%s: could not write the JUnit file: %s\n", who, err);
            rc = -1;
        } else {
            printf("junit: %s\n", junit);
        }
    }
    if (bundles) {
        int n = bundle_write_all(dir, res, err, sizeof(err));
        if (n < 0) {
            fprintf(stderr, "%s: could not write the failure bundles: %s\n", who, err);
            rc = -1;
        } else if (n > 0) {
            printf("bundles: %s/bundles (%d failure%s, each ready to attach to a bug "
                   "report)\n", dir, n, n == 1 ? "" : "s");
        }
    }
    fflush(stdout);
    cJSON_Delete(res);
    return rc;
}

int rundir_safe_rel(const char *d)
{
    if (d == NULL || d[0] == '\0' || d[0] == '/' || strlen(d) > 1024)
        return 0;
    for (const char *s = d; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e != NULL ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return 0;
        if (e == NULL)
            break;
        s = e + 1;
    }
    return 1;
}

