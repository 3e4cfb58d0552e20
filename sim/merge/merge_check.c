/* merge_check.c -- everything `crashwindow merge` checks before it writes
 * anything; see merge.h for the list.  Each check stops at the first
 * problem and says which shard (its K/N and directory) and what is wrong. */
#include "merge_internal.h"
#include "rundir.h"
#include "shard.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The runner takes at most 256 scenario files and the matrix has a few
 * dozen mutants: a longer list is not a crashwindow result. */
#define MAX_WORK 4096

/* o[key] as a whole number in [lo, hi]: 0 with *out, or -1. */
static int jint(const cJSON *o, const char *key, long lo, long hi, long *out)
{
    const cJSON *v = rd_get(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return -1;
    *out = (long)v->valuedouble;
    return 0;
}

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(err, errlen, format, ap);
    va_end(ap);
    return -1;
}

int merge_find(const cJSON *arr, const char *name)
{
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (cJSON_IsString(it) && name != NULL && strcmp(it->valuestring, name) == 0)
            return i;
        i++;
    }
    return -1;
}

long merge_sim_index(const char *name, char *seed, size_t seedlen)
{
    if (name == NULL || strncmp(name, "sim-", 4) != 0)
        return -1;
    const char *s = name + 4, *dash = strchr(s, '-');
    if (dash == NULL || dash == s || dash - s > 20 || dash[1] == '\0' || strlen(dash + 1) > 9)
        return -1;
    for (const char *p = s; *p; p++)
        if (p != dash && (*p < '0' || *p > '9'))
            return -1;
    if (seed != NULL)
        snprintf(seed, seedlen, "%.*s", (int)(dash - s), s);
    return strtol(dash + 1, NULL, 10);
}

/* An array of distinct strings, at most MAX_WORK of them. */
static int string_list(const cJSON *a)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > MAX_WORK)
        return 0;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsString(it) || merge_find(a, it->valuestring) != i)
            return 0;
        i++;
    }
    return 1;
}

/* Reads shard s: its result.json and its "shard" object. */
static int load_one(struct mshard *s, char *err, size_t errlen)
{
    char why[1024];
    snprintf(s->label, sizeof(s->label), "%s", s->dir);
    struct stat st;
    if (stat(s->dir, &st) < 0)
        return fail(err, errlen, "%s: %s", s->dir, errno == ENOENT
                    ? "no such directory (a shard whose output never arrived?)"
                    : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return fail(err, errlen, "%s: not a directory", s->dir);
    if (realpath(s->dir, s->real) == NULL)
        return fail(err, errlen, "%s: %s", s->dir, strerror(errno));
    s->res = rundir_load(s->dir, why, sizeof(why));
    if (s->res == NULL)
        return fail(err, errlen, "shard %s: %s", s->dir, why);
    s->shard = rd_get(s->res, "shard");
    long k, n;
    if (!cJSON_IsObject(s->shard))
        return fail(err, errlen, "%s: not a shard (its result.json has no \"shard\"): run it "
                    "with --shard K/N", s->dir);
    if (jint(s->shard, "count", 1, SHARD_MAX, &n) < 0 || jint(s->shard, "index", 1, n, &k) < 0)
        return fail(err, errlen, "%s: its result.json has a bad \"shard\" (index from 1 to "
                    "count, count from 1 to %d)", s->dir, SHARD_MAX);
    s->index = (int)k;
    s->count = (int)n;
    snprintf(s->label, sizeof(s->label), "shard %d/%d (%s)", s->index, s->count, s->dir);
    return 0;
}

/* "X, Y only in A; Z only in B" for two name lists. */
static void diff_names(const cJSON *a, const cJSON *b, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    for (int side = 0; side < 2; side++) {
        const cJSON *x = side ? b : a, *y = side ? a : b;
        int shown = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, x) {
            if (!cJSON_IsString(it) || merge_find(y, it->valuestring) >= 0 || shown >= 5)
                continue;
            int w = snprintf(out + n, outlen - n, "%s%s", shown ? ", " : n ? "; " : "",
                             it->valuestring);
            if (w < 0 || (size_t)w >= outlen - n)
                return;
            n += (size_t)w;
            shown++;
        }
        if (shown > 0) {
            int w = snprintf(out + n, outlen - n, " only in %s", side ? "the second" : "the first");
            if (w < 0 || (size_t)w >= outlen - n)
                return;
            n += (size_t)w;
        }
    }
    if (n == 0)
        snprintf(out, outlen, "the same names in another order");
}

/* A plan: one share in 1..count per item of work. */
static int plan_ok(const cJSON *plan, const cJSON *work, int count)
{
    if (!cJSON_IsArray(plan) || cJSON_GetArraySize(plan) != cJSON_GetArraySize(work))
        return 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, plan) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            it->valuedouble < 1 || it->valuedouble > count)
            return 0;
    }
    return 1;
}

/* The share of item i of the work: from the plan, or round robin. */
static int in_share(const cJSON *plan, const struct shard *sh, long i)
{
    if (plan == NULL)
        return shard_mine(sh, i);
    const cJSON *p = cJSON_GetArrayItem(plan, (int)i);
    return cJSON_IsNumber(p) && (int)p->valuedouble == sh->index;
}

/* The work lists of s and f (the first shard) agree. */
static int same_list(const struct mshard *f, const struct mshard *s, const char *key,
                     const char *what, char *err, size_t errlen)
{
    const cJSON *a = rd_get(f->shard, key), *b = rd_get(s->shard, key);
    if (!string_list(b))
        return fail(err, errlen, "%s: its result.json's \"shard\" has no valid \"%s\" list "
                    "(distinct names)", s->label, key);
    if (cJSON_Compare(a, b, 1))
        return 0;
    char d[600];
    diff_names(a, b, d, sizeof(d));
    return fail(err, errlen, "%s and %s split different %s (%s): shards of different runs "
                "do not merge", f->label, s->label, what, d);
}

/* The work split by s is the work split by f. */
static int same_work(const struct merge *m, const struct mshard *f, const struct mshard *s,
                     char *err, size_t errlen)
{
    if (strcmp(m->kind, "sim") == 0) {
        long r1, r2;
        if (jint(s->shard, "runs", 1, 1000000, &r2) < 0 || jint(f->shard, "runs", 1, 1000000, &r1) < 0)
            return fail(err, errlen, "%s: its \"shard\" has no valid \"runs\"", s->label);
        if (!cJSON_Compare(rd_get(f->shard, "seed"), rd_get(s->shard, "seed"), 1) ||
            rd_get(s->shard, "seed") == NULL)
            return fail(err, errlen, "%s and %s ran different seeds: shards of different "
                        "simulations do not merge", f->label, s->label);
        if (r1 != r2)
            return fail(err, errlen, "%s and %s split different run counts (%ld and %ld)",
                        f->label, s->label, r1, r2);
        return 0;
    }
    if (same_list(f, s, "work", "scenario sets", err, errlen) < 0)
        return -1;
    if (strcmp(m->kind, "mutants") == 0 &&
        same_list(f, s, "mutants", "mutant lists", err, errlen) < 0)
        return -1;
    const cJSON *p = rd_get(s->shard, "plan");
    if (p != NULL && !plan_ok(p, rd_get(s->shard, "work"), s->count))
        return fail(err, errlen, "%s: its \"shard\" has a bad \"plan\" (a share from 1 to %d "
                    "for every scenario)", s->label, s->count);
    if (!cJSON_Compare(rd_get(f->shard, "plan"), p, 1) &&
        (p != NULL || rd_get(f->shard, "plan") != NULL))
        return fail(err, errlen, "%s and %s split the scenarios differently: give every shard "
                    "the same --shard-weights (or none)", f->label, s->label);
    const char *d1 = rd_str(f->shard, "digest"), *d2 = rd_str(s->shard, "digest");
    if (d1 == NULL || d2 == NULL || strcmp(d1, d2) != 0)
        return fail(err, errlen, "%s and %s ran scenario files of the same names but "
                    "different contents (digest %s and %s)", f->label, s->label,
                    d1 ? d1 : "missing", d2 ? d2 : "missing");
    long r1 = 1, r2 = 1;
    jint(f->shard, "repeat", 1, 10000, &r1);
    jint(s->shard, "repeat", 1, 10000, &r2);
    if (r1 != r2)
        return fail(err, errlen, "%s and %s repeat the scenarios %ld and %ld times",
                    f->label, s->label, r1, r2);
    return 0;
}

/* Every shard is of one split: kind, N, commit, version and work. */
static int same_split(struct merge *m, char *err, size_t errlen)
{
    const struct mshard *f = &m->sh[0];
    m->kind = rd_str(f->res, "kind");
    m->count = f->count;
    if (strcmp(m->kind, "run") != 0 && strcmp(m->kind, "mutants") != 0 &&
        strcmp(m->kind, "sim") != 0)
        return fail(err, errlen, "%s: a result of kind \"%s\" does not merge (run, mutants "
                    "and sim do)", f->label, m->kind);
    for (int i = 0; i < m->n; i++) {
        const struct mshard *s = &m->sh[i];
        const char *c1 = rd_str(f->res, "commit"), *c2 = rd_str(s->res, "commit");
        if (strcmp(rd_str(s->res, "kind"), m->kind) != 0)
            return fail(err, errlen, "%s is a %s result but %s is a %s result", s->label,
                        rd_str(s->res, "kind"), f->label, m->kind);
        if (s->count != m->count)
            return fail(err, errlen, "%s and %s are shards of different splits (of %d and of "
                        "%d)", f->label, s->label, m->count, s->count);
        if (c1 == NULL || c2 == NULL || strcmp(c1, c2) != 0)
            return fail(err, errlen, "%s ran commit %s but %s ran commit %s: shards of "
                        "different commits do not merge", f->label, c1 ? c1 : "(none)",
                        s->label, c2 ? c2 : "(none)");
        if (!cJSON_Compare(rd_get(f->res, "version"), rd_get(s->res, "version"), 1))
            return fail(err, errlen, "%s and %s have different result versions", f->label,
                        s->label);
        if (same_work(m, f, s, err, errlen) < 0)
            return -1;
    }
    if (strcmp(m->kind, "sim") == 0) {
        jint(f->shard, "runs", 1, 1000000, &m->runs);
    } else {
        m->work = rd_get(f->shard, "work");
        m->mwork = rd_get(f->shard, "mutants");
        m->plan = rd_get(f->shard, "plan");
        long r = 1;
        jint(f->shard, "repeat", 1, 10000, &r);
        m->repeat = (int)r;
    }
    return 0;
}

/* The work of share k, in words, into out. */
static void share_words(const struct merge *m, int k, char *out, size_t outlen)
{
    struct shard sh = { k, m->count };
    if (strcmp(m->kind, "sim") == 0) {
        long first, last;
        shard_range(&sh, m->runs, &first, &last);
        char *seed = cJSON_PrintUnformatted(rd_get(m->sh[0].shard, "seed"));
        snprintf(out, outlen, "runs %s:%ld to %s:%ld", seed ? seed : "?", first,
                 seed ? seed : "?", last);
        cJSON_free(seed);
        return;
    }
    size_t n = (size_t)snprintf(out, outlen, "scenarios");
    int shown = 0, more = 0;
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *list = pass ? m->mwork : m->work;
        const cJSON *plan = pass ? NULL : m->plan;
        long i = 0;
        const cJSON *it;
        if (pass && list != NULL && n < outlen)
            n += (size_t)snprintf(out + n, outlen - n, "; mutants");
        shown = 0;
        cJSON_ArrayForEach(it, list) {
            if (in_share(plan, &sh, i++) && cJSON_IsString(it)) {
                if (shown++ < 8 && n < outlen)
                    n += (size_t)snprintf(out + n, outlen - n, " %s", it->valuestring);
                else
                    more++;
            }
        }
    }
    if (more > 0 && n < outlen)
        snprintf(out + n, outlen - n, " and %d more", more);
}

/* No two directories are one shard; no shard of 1..N is absent. */
static int overlap_and_missing(struct merge *m, char *err, size_t errlen)
{
    m->by_index = calloc((size_t)m->count + 1, sizeof(*m->by_index));
    if (m->by_index == NULL)
        return fail(err, errlen, "out of memory");
    for (int i = 0; i < m->n; i++) {
        struct mshard *s = &m->sh[i];
        for (int j = 0; j < i; j++)
            if (strcmp(m->sh[j].real, s->real) == 0)
                return fail(err, errlen, "%s is given twice (as %s and %s)", s->label,
                            m->sh[j].dir, s->dir);
        if (m->by_index[s->index] != NULL)
            return fail(err, errlen, "shards overlap: %s and %s are both shard %d/%d (the "
                        "same work run twice)", m->by_index[s->index]->dir, s->dir, s->index,
                        s->count);
        m->by_index[s->index] = s;
    }
    size_t n = 0;
    int missing = 0;
    err[0] = '\0';
    for (int k = 1; k <= m->count; k++) {
        if (m->by_index[k] != NULL)
            continue;
        char words[700];
        share_words(m, k, words, sizeof(words));
        if (missing++ < 10 && n < errlen)
            n += (size_t)snprintf(err + n, errlen - n, "%sshard %d/%d is missing: its %s "
                                  "were not merged", n ? "; " : "", k, m->count, words);
    }
    if (missing > 10 && n < errlen)
        snprintf(err + n, errlen - n, "; and %d more shards are missing", missing - 10);
    return missing > 0 ? -1 : 0;
}

/* One scenario entry: the fields the merge and the report use, and its
 * files when it names a directory. */
static int check_entry(const struct mshard *s, const cJSON *sc, int at, char *err,
                       size_t errlen)
{
    const char *name = rd_str(sc, "name"), *v = rd_str(sc, "verdict"), *dir = rd_str(sc, "dir");
    if (!cJSON_IsObject(sc) || name == NULL || v == NULL ||
        (strcmp(v, "pass") != 0 && strcmp(v, "fail") != 0))
        return fail(err, errlen, "%s: scenario %d of its result.json has no name or no "
                    "verdict of pass or fail", s->label, at + 1);
    const cJSON *d = rd_get(sc, "dir");
    if (d != NULL && !cJSON_IsNull(d) && !rundir_safe_rel(dir))
        return fail(err, errlen, "%s: scenario %s has a \"dir\" outside its run directory",
                    s->label, name);
    if (dir != NULL) {
        char path[PATH_MAX * 2];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", s->dir, dir);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
            return fail(err, errlen, "%s: the files of scenario %s (%s) are missing: an "
                        "incomplete copy of the shard?", s->label, name, dir);
    }
    return 0;
}

static int named(const cJSON *entry, const char *name)
{
    return rd_str(entry, "name") != NULL && strcmp(rd_str(entry, "name"), name) == 0;
}

/* A run's or a baseline's scenarios are exactly the share's, each
 * repeat times; a scenario of the share its broker could not take
 * (skipped, listed once with its reason) stands for all its runs. */
static int check_share_list(const struct mshard *s, const cJSON *list, const cJSON *plan,
                            const cJSON *actual, const cJSON *skipped, const char *what,
                            int times, char *err, size_t errlen)
{
    struct shard sh = { s->index, s->count };
    long i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        int want = in_share(plan, &sh, i++) ? times : 0, have = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, actual) {
            have += named(a, it->valuestring);
        }
        cJSON_ArrayForEach(a, skipped) {
            if (named(a, it->valuestring) && want > 0)
                have = want;
        }
        if (have < want)
            return fail(err, errlen, "%s: its result.json lacks %s %s of its share (%d of %d "
                        "runs): the shard was cut short", s->label, what, it->valuestring,
                        have, want);
        if (have > want)
            return fail(err, errlen, "%s: its result.json holds %s %s %d times where its "
                        "share has it %d times: it overlaps another shard", s->label, what,
                        it->valuestring, have, want);
    }
    const cJSON *a;
    cJSON_ArrayForEach(a, actual) {
        if (merge_find(list, rd_str(a, "name")) < 0)
            return fail(err, errlen, "%s: its result.json holds %s %s, which is not in the "
                        "work it splits", s->label, what, rd_str(a, "name") ? rd_str(a, "name")
                                                                      : "(unnamed)");
    }
    return 0;
}

/* A simulator shard ran only runs of its range, each once. */
static int check_sim_share(const struct merge *m, const struct mshard *s, char *err,
                           size_t errlen)
{
    struct shard sh = { s->index, s->count };
    long first, last, f2, l2;
    shard_range(&sh, m->runs, &first, &last);
    if (jint(s->shard, "first", 1, 1000000, &f2) < 0 ||
        jint(s->shard, "last", 0, 1000000, &l2) < 0 || f2 != first || l2 != last)
        return fail(err, errlen, "%s: its \"shard\" does not hold runs %ld to %ld, the share "
                    "of %d/%d", s->label, first, last, s->index, s->count);
    char *seed = cJSON_PrintUnformatted(rd_get(s->shard, "seed"));
    /* One flag per run of the range: a run seen twice is an overlap. */
    char *seen = calloc((size_t)(last >= first ? last - first + 1 : 1), 1);
    const cJSON *sc;
    int rc = seen == NULL ? fail(err, errlen, "out of memory") : 0;
    cJSON_ArrayForEach(sc, rd_get(s->res, "scenarios")) {
        char sseed[32];
        long idx = merge_sim_index(rd_str(sc, "name"), sseed, sizeof(sseed));
        if (rc < 0)
            break;
        if (idx < first || idx > last || seed == NULL || strcmp(sseed, seed) != 0)
            rc = fail(err, errlen, "%s: its result.json holds %s, which is not one of its "
                      "runs (%s:%ld to %s:%ld)", s->label, rd_str(sc, "name") ? rd_str(sc, "name")
                      : "an unnamed run", seed ? seed : "?", first, seed ? seed : "?", last);
        else if (seen[idx - first]++)
            rc = fail(err, errlen, "%s: its result.json holds %s twice", s->label,
                      rd_str(sc, "name"));
    }
    free(seen);
    cJSON_free(seed);
    return rc;
}

/* Each shard holds exactly its share, in well-formed entries. */
static int check_contents(const struct merge *m, char *err, size_t errlen)
{
    for (int i = 0; i < m->n; i++) {
        const struct mshard *s = &m->sh[i];
        const cJSON *scs = rd_get(s->res, "scenarios"), *sc;
        int at = 0;
        cJSON_ArrayForEach(sc, scs) {
            if (check_entry(s, sc, at++, err, errlen) < 0)
                return -1;
        }
        if (strcmp(m->kind, "sim") == 0) {
            if (check_sim_share(m, s, err, errlen) < 0)
                return -1;
            continue;
        }
        if (check_share_list(s, m->work, m->plan, scs, rd_get(s->res, "skipped"), "scenario",
                             m->repeat, err, errlen) < 0)
            return -1;
        if (strcmp(m->kind, "mutants") != 0)
            continue;
        const cJSON *muts = rd_get(s->res, "mutants");
        if (!cJSON_IsArray(muts))
            return fail(err, errlen, "%s: its result.json has no \"mutants\" array: the "
                        "mutant matrix did not finish", s->label);
        if (check_share_list(s, m->mwork, NULL, muts, NULL, "mutant", 1, err, errlen) < 0)
            return -1;
    }
    return 0;
}

int merge_check(struct merge *m, char *err, size_t errlen)
{
    for (int i = 0; i < m->n; i++)
        if (load_one(&m->sh[i], err, errlen) < 0)
            return -1;
    if (same_split(m, err, errlen) < 0 || overlap_and_missing(m, err, errlen) < 0 ||
        check_contents(m, err, errlen) < 0)
        return -1;
    return 0;
}
