/* shard.c -- parsing K/N, the environment of CI matrices and Indexed Jobs,
 * and the split itself; see shard.h. */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole decimal number of 1 to 9 digits, nothing else (no sign, no
 * blanks): 0 with *out, or -1. */
static int parse_count(const char *s, size_t n, long *out)
{
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int shard_parse(const char *text, struct shard *sh, char *err, size_t errlen)
{
    const char *slash = text != NULL ? strchr(text, '/') : NULL;
    long k, n;
    if (slash == NULL || parse_count(text, (size_t)(slash - text), &k) < 0 ||
        parse_count(slash + 1, strlen(slash + 1), &n) < 0) {
        snprintf(err, errlen, "'%.40s' is not K/N: K and N must be whole numbers, "
                 "e.g. 2/3 for the second of three shards", text != NULL ? text : "");
        return -1;
    }
    if (n < 1 || n > SHARD_MAX) {
        snprintf(err, errlen, "%ld/%ld: N must be from 1 to %d", k, n, SHARD_MAX);
        return -1;
    }
    if (k < 1) {
        snprintf(err, errlen, "%ld/%ld: K counts from 1; the shards of %ld are 1/%ld to "
                 "%ld/%ld", k, n, n, n, n, n);
        return -1;
    }
    if (k > n) {
        snprintf(err, errlen, "%ld/%ld: K is past N; the shards of %ld are 1/%ld to "
                 "%ld/%ld", k, n, n, n, n, n);
        return -1;
    }
    sh->index = (int)k;
    sh->count = (int)n;
    return 0;
}

/* The pair of variables that name an index and a count: base is what the
 * index counts from (0 for Kubernetes).  1 with sh set, 0 when idx_var is
 * not set, -1 with the reason in err. */
static int from_pair(const char *idx_var, const char *count_var, int base, struct shard *sh,
                     char *err, size_t errlen)
{
    const char *iv = getenv(idx_var);
    if (iv == NULL || iv[0] == '\0')
        return 0;
    const char *cv = getenv(count_var);
    if (cv == NULL || cv[0] == '\0') {
        snprintf(err, errlen, "%s=%.20s is set but %s is not (it must say how many shards "
                 "there are)", idx_var, iv, count_var);
        return -1;
    }
    long i, n;
    if (parse_count(iv, strlen(iv), &i) < 0 || parse_count(cv, strlen(cv), &n) < 0) {
        snprintf(err, errlen, "%s=%.20s, %s=%.20s: both must be whole numbers", idx_var, iv,
                 count_var, cv);
        return -1;
    }
    char text[48], why[200];
    snprintf(text, sizeof(text), "%ld/%ld", i + (base == 0 ? 1 : 0), n);
    if (shard_parse(text, sh, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "%s=%s, %s=%s (counting from %d) make shard %s", idx_var, iv,
                 count_var, cv, base, why);
        return -1;
    }
    return 1;
}

int shard_arg(const char *arg, struct shard *sh, char *err, size_t errlen)
{
    char why[300];
    if (arg == NULL || strcmp(arg, "env") != 0) {
        if (shard_parse(arg, sh, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "--shard %s", why);
            return -1;
        }
        return 0;
    }
    const char *cw = getenv("CW_SHARD");
    if (cw != NULL && cw[0] != '\0') {
        if (shard_parse(cw, sh, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "--shard env: CW_SHARD %s", why);
            return -1;
        }
        return 0;
    }
    static const struct { const char *idx, *count; int base; } pairs[] = {
        { "JOB_COMPLETION_INDEX", "CW_SHARD_COUNT", 0 },
        { "CI_NODE_INDEX", "CI_NODE_TOTAL", 1 },
    };
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        int rc = from_pair(pairs[p].idx, pairs[p].count, pairs[p].base, sh, why, sizeof(why));
        if (rc < 0) {
            snprintf(err, errlen, "--shard env: %s", why);
            return -1;
        }
        if (rc > 0)
            return 0;
    }
    snprintf(err, errlen, "--shard env: none of CW_SHARD, JOB_COMPLETION_INDEX (with "
             "CW_SHARD_COUNT) or CI_NODE_INDEX (with CI_NODE_TOTAL) is set");
    return -1;
}

int shard_mine(const struct shard *sh, long i)
{
    if (sh == NULL || sh->count <= 0)
        return 1;
    return i % sh->count == sh->index - 1;
}

void shard_plan(const double *weights, int n, int count, int *plan)
{
    if (weights == NULL || count <= 1) {
        for (int i = 0; i < n; i++)
            plan[i] = count > 0 ? i % count + 1 : 1;
        return;
    }
    /* n and count are small (scenarios, shards): quadratic is fine and
     * keeps the order rules plain. */
    double *load = calloc((size_t)count, sizeof(double));
    char *done = calloc((size_t)n + 1, 1);
    if (load == NULL || done == NULL) {
        free(load);
        free(done);
        shard_plan(NULL, n, count, plan);
        return;
    }
    for (int placed = 0; placed < n; placed++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && (best < 0 || weights[i] > weights[best]))
                best = i;
        int to = 0;
        for (int k = 1; k < count; k++)
            if (load[k] < load[to])
                to = k;
        done[best] = 1;
        load[to] += weights[best];
        plan[best] = to + 1;
    }
    free(load);
    free(done);
}

void shard_range(const struct shard *sh, long total, long *first, long *last)
{
    if (sh == NULL || sh->count <= 0) {
        *first = 1;
        *last = total;
        return;
    }
    /* (K-1)*R/N + 1 .. K*R/N: the sizes differ by one at most, and the
     * ranges of 1..N tile 1..R. */
    long long r = total, n = sh->count, k = sh->index;
    *first = (long)((k - 1) * r / n + 1);
    *last = (long)(k * r / n);
}

void shard_name(const struct shard *sh, char *out, size_t outlen)
{
    snprintf(out, outlen, "%d/%d", sh->index, sh->count);
}

uint64_t shard_digest(uint64_t h, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; p != NULL && *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    /* A separator, so that ("ab", "c") and ("a", "bc") differ. */
    h ^= 0xff;
    h *= 0x100000001b3ULL;
    return h;
}

void shard_digest_hex(uint64_t h, char *out, size_t outlen)
{
    snprintf(out, outlen, "%016llx", (unsigned long long)h);
}

cJSON *shard_json(const struct shard *sh)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    cJSON_AddNumberToObject(o, "index", sh->index);
    cJSON_AddNumberToObject(o, "count", sh->count);
    return o;
}
