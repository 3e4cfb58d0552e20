/* merge.c -- `crashwindow merge`: the command, the merged result and the
 * merged directory; merge_check.c holds the checks that run first.  See
 * merge.h for what is merged and what is refused. */
#include "merge.h"
#include "merge_internal.h"
#include "bundle.h"
#include "cliutil.h"
#include "common_fs.h"
#include "cwlog.h"
#include "fstree.h"
#include "junit.h"
#include "report.h"
#include "rundir.h"
#include "shard.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void set_item(cJSON *o, const char *key, cJSON *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    cJSON_AddItemToObject(o, key, v);
}

/* o[key] (a relative path) becomes "shards/K/<path>". */
static void rebase(cJSON *o, const char *key, int k)
{
    const char *p = rd_str(o, key);
    if (p == NULL)
        return;
    if (!rundir_safe_rel(p)) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
        return;
    }
    char buf[1200];
    cw_fmt(buf, sizeof(buf), "shards/%d/%s", k, p);
    set_item(o, key, cJSON_CreateString(buf));
}

/* ---- the merged result ---------------------------------------------------- */

struct keyed {
    double key;
    cJSON *item;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Where an entry stands in the unsharded run: its place in the work list
 * (then its repetition), or its run index for the simulator. */
static double order_key(const struct merge *m, const cJSON *list, const cJSON *it)
{
    if (list == NULL)
        return (double)merge_sim_index(rd_str(it, "name"), NULL, 0);
    return (double)merge_find(list, rd_str(it, "name")) * 100000.0 + rd_num(it, "repeat");
}

/* The entries of array key of every shard, rebased and in the unsharded
 * order (list: the work list giving the order; NULL for simulator runs). */
static cJSON *gather(const struct merge *m, const char *key, const cJSON *list)
{
    int total = 0;
    for (int i = 0; i < m->n; i++)
        total += cJSON_GetArraySize(rd_get(m->sh[i].res, key));
    struct keyed *v = calloc((size_t)total + 1, sizeof(*v));
    cJSON *out = cJSON_CreateArray();
    if (v == NULL || out == NULL) {
        free(v);
        return out;
    }
    int n = 0;
    for (int k = 1; k <= m->count; k++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, rd_get(m->by_index[k]->res, key)) {
            cJSON *d = cJSON_Duplicate(it, 1);
            if (d == NULL)
                continue;
            rebase(d, "dir", k);
            set_item(d, "shard", cJSON_CreateNumber(k));
            v[n].key = order_key(m, list, it);
            v[n++].item = d;
        }
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_keyed);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(out, v[i].item);
    free(v);
    return out;
}

/* Sums of every number in obj[key] across the shards. */
static cJSON *sum_object(const struct merge *m, const char *key)
{
    cJSON *sum = cJSON_CreateObject();
    for (int k = 1; k <= m->count; k++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, rd_get(m->by_index[k]->res, key)) {
            if (c->string == NULL || !cJSON_IsNumber(c))
                continue;
            cJSON *have = cJSON_GetObjectItemCaseSensitive(sum, c->string);
            if (have == NULL)
                cJSON_AddNumberToObject(sum, c->string, c->valuedouble);
            else
                cJSON_SetNumberValue(have, have->valuedouble + c->valuedouble);
        }
    }
    return sum;
}

/* The simulator's statistics of every shard as one. */
static cJSON *merge_simulator(const struct merge *m)
{
    cJSON *sim = cJSON_Duplicate(rd_get(m->by_index[1]->res, "simulator"), 1);
    if (sim == NULL)
        sim = cJSON_CreateObject();
    static const char *const sums[] = { "runs", "runs_asked", "failures", "kills", "pauses",
                                        "redeliveries",
                                        "duplicates_absorbed", "invariant_checks",
                                        "run_seconds", "shrink_runs" };
    /* What stopped a shard's runs short stopped the merged run's too. */
    for (int k = 1; k <= m->count; k++) {
        const char *why = rd_str(rd_get(m->by_index[k]->res, "simulator"), "stopped_by");
        if (why != NULL) {
            set_item(sim, "stopped_by", cJSON_CreateString(why));
            break;
        }
    }
    cJSON *ff = cJSON_CreateObject(), *failing = cJSON_CreateArray(), *shrunk = cJSON_CreateArray();
    for (size_t i = 0; i < sizeof(sums) / sizeof(sums[0]); i++) {
        double t = 0;
        for (int k = 1; k <= m->count; k++)
            t += rd_num(rd_get(m->by_index[k]->res, "simulator"), sums[i]);
        set_item(sim, sums[i], cJSON_CreateNumber(t));
    }
    for (int k = 1; k <= m->count; k++) {
        const cJSON *s = rd_get(m->by_index[k]->res, "simulator"), *c;
        cJSON_ArrayForEach(c, rd_get(s, "faults_fired")) {
            cJSON *have = c->string ? cJSON_GetObjectItemCaseSensitive(ff, c->string) : NULL;
            if (c->string != NULL && cJSON_IsNumber(c) && have == NULL)
                cJSON_AddNumberToObject(ff, c->string, c->valuedouble);
            else if (have != NULL && cJSON_IsNumber(c))
                cJSON_SetNumberValue(have, have->valuedouble + c->valuedouble);
        }
        cJSON_ArrayForEach(c, rd_get(s, "failing")) {
            cJSON *d = cJSON_Duplicate(c, 1);
            rebase(d, "dir", k);
            rebase(d, "shrunk", k);
            cJSON_AddItemToArray(failing, d);
        }
        cJSON_ArrayForEach(c, rd_get(s, "shrunk")) {
            cJSON *d = cJSON_Duplicate(c, 1);
            rebase(d, "file", k);
            cJSON_AddItemToArray(shrunk, d);
        }
    }
    set_item(sim, "faults_fired", ff);
    set_item(sim, "failing", failing);
    set_item(sim, "shrunk", shrunk);
    double secs = rd_num(sim, "run_seconds");
    set_item(sim, "runs_per_minute", cJSON_CreateNumber(
        secs > 0 ? floor(rd_num(sim, "runs") * 600.0 / secs) / 10.0 : 0));
    cJSON_DeleteItemFromObjectCaseSensitive(sim, "bin");
    return sim;
}

/* "merged": the shards, where each ran and how long it took. */
static cJSON *merged_info(const struct merge *m, double *wall_ms, const char **started)
{
    cJSON *info = cJSON_CreateObject();
    cJSON_AddNumberToObject(info, "count", m->count);
    cJSON *list = cJSON_AddArrayToObject(info, "shards");
    double total = 0;
    *wall_ms = 0;
    *started = NULL;
    for (int k = 1; k <= m->count; k++) {
        const struct mshard *s = m->by_index[k];
        double ms = rd_num(s->res, "duration_ms");
        const char *st = rd_str(s->res, "started_at");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", k);
        cJSON_AddStringToObject(o, "dir", s->dir);
        cJSON_AddStringToObject(o, "verdict", rd_str(s->res, "verdict"));
        cJSON_AddStringToObject(o, "hostname", rd_str(rd_get(s->res, "machine"), "hostname")
                                ? rd_str(rd_get(s->res, "machine"), "hostname") : "unknown");
        cJSON_AddStringToObject(o, "started_at", st ? st : "");
        cJSON_AddNumberToObject(o, "duration_ms", ms);
        cJSON_AddNumberToObject(o, "scenarios", cJSON_GetArraySize(rd_get(s->res, "scenarios")));
        cJSON_AddItemToArray(list, o);
        total += ms;
        if (ms > *wall_ms)
            *wall_ms = ms;
        if (st != NULL && (*started == NULL || strcmp(st, *started) < 0))
            *started = st;
    }
    cJSON_AddNumberToObject(info, "shard_time_ms", total);
    return info;
}

/* The verdict: every shard passed, and nothing in the merged lists failed. */
static int merged_pass(const struct merge *m, const cJSON *res)
{
    for (int k = 1; k <= m->count; k++) {
        const char *v = rd_str(m->by_index[k]->res, "verdict");
        if (v == NULL || strcmp(v, "pass") != 0)
            return 0;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, rd_get(res, "scenarios")) {
        if (rundir_failed(it))
            return 0;
    }
    cJSON_ArrayForEach(it, rd_get(res, "mutants")) {
        if (!cJSON_IsTrue(rd_get(it, "killed")) || rd_str(it, "error") != NULL)
            return 0;
    }
    return 1;
}

/* Not a pass only because a shard was stopped short (a simulator's time
 * budget): every shard passed or said "incomplete", and nothing failed. */
static int merged_incomplete(const struct merge *m, const cJSON *res)
{
    int short_shard = 0;
    for (int k = 1; k <= m->count; k++) {
        const char *v = rd_str(m->by_index[k]->res, "verdict");
        if (v != NULL && strcmp(v, "incomplete") == 0)
            short_shard = 1;
        else if (v == NULL || strcmp(v, "pass") != 0)
            return 0;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, rd_get(res, "scenarios")) {
        if (rundir_failed(it))
            return 0;
    }
    return short_shard;
}

/* The kind's own parts: a mutant matrix's mutants and baseline verdict, a
 * simulation's statistics and completeness. */
static void merge_kind_parts(const struct merge *m, cJSON *res)
{
    if (strcmp(m->kind, "mutants") == 0) {
        int base = 1;
        for (int k = 1; k <= m->count; k++) {
            const char *b = rd_str(m->by_index[k]->res, "baseline_verdict");
            base &= b != NULL && strcmp(b, "pass") == 0;
        }
        cJSON_AddStringToObject(res, "baseline_verdict", base ? "pass" : "fail");
        cJSON_AddItemToObject(res, "mutants", gather(m, "mutants", m->mwork));
    } else if (strcmp(m->kind, "sim") == 0) {
        int complete = 1;
        for (int k = 1; k <= m->count; k++)
            complete &= cJSON_IsTrue(rd_get(m->by_index[k]->res, "complete"));
        cJSON_AddBoolToObject(res, "complete", complete);
        cJSON_AddItemToObject(res, "simulator", merge_simulator(m));
    }
}

/* The merged result.json (caller frees). */
static cJSON *build_result(const struct merge *m)
{
    cJSON *res = cJSON_Duplicate(m->by_index[1]->res, 1);
    if (res == NULL)
        return NULL;
    static const char *const drop[] = { "shard", "scenarios", "totals", "mutants", "simulator",
                                        "complete", "baseline_verdict", "duration_ms",
                                        "started_at", "verdict", "merged", "skipped" };
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        cJSON_DeleteItemFromObjectCaseSensitive(res, drop[i]);
    double wall;
    const char *started;
    cJSON *info = merged_info(m, &wall, &started);
    cJSON_AddStringToObject(res, "started_at", started ? started : "");
    /* The wall time of N machines side by side: the longest shard. */
    cJSON_AddNumberToObject(res, "duration_ms", wall);
    cJSON_AddStringToObject(res, "verdict", "fail");
    cJSON_AddItemToObject(res, "totals", sum_object(m, "totals"));
    cJSON_AddItemToObject(res, "merged", info);
    cJSON_AddItemToObject(res, "scenarios", gather(m, "scenarios",
                                                   strcmp(m->kind, "sim") == 0 ? NULL : m->work));
    /* Each shard skips, with its reason, the scenarios of its own share
     * that the broker cannot take: the merged run lists them all. */
    int skipped = 0;
    for (int k = 1; k <= m->count; k++)
        skipped += cJSON_GetArraySize(rd_get(m->by_index[k]->res, "skipped"));
    if (skipped > 0)
        cJSON_AddItemToObject(res, "skipped", gather(m, "skipped", m->work));
    merge_kind_parts(m, res);
    set_item(res, "verdict", cJSON_CreateString(merged_pass(m, res) ? "pass"
                                                 : merged_incomplete(m, res) ? "incomplete"
                                                 : "fail"));
    return res;
}

/* ---- the merged directory ------------------------------------------------- */

static int dir_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n == 0;
}

/* out's real path (its parent must exist), and the refusals: out inside a
 * shard or a shard inside out, out a non-empty directory or a file.
 * *exists tells that out is an empty directory.  0, or -1 with err. */
static int check_out(const struct merge *m, const char *out, char *real, size_t reallen,
                     int *exists, char *err, size_t errlen)
{
    char a[PATH_MAX], b[PATH_MAX], parent[PATH_MAX];
    cw_fmt(a, sizeof(a), "%s", out);
    cw_fmt(b, sizeof(b), "%s", out);
    const char *base = basename(a);
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strcmp(base, "/") == 0)
        return cw_fmt(err, errlen, "--out %s: name a new directory", out), -1;
    if (realpath(dirname(b), parent) == NULL)
        return cw_fmt(err, errlen, "--out %s: its parent: %s", out, strerror(errno)), -1;
    if (cw_fmt(real, reallen, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, base) >=
        (int)reallen)
        return cw_fmt(err, errlen, "--out %s: path too long", out), -1;
    size_t rl = strlen(real);
    for (int i = 0; i < m->n; i++) {
        const char *s = m->sh[i].real;
        size_t sl = strlen(s);
        if ((strncmp(real, s, sl) == 0 && (real[sl] == '\0' || real[sl] == '/')) ||
            (strncmp(s, real, rl) == 0 && s[rl] == '/'))
            return cw_fmt(err, errlen, "--out %s and %s lie one inside the other: the "
                            "merged directory must be apart from every shard", out,
                            m->sh[i].label), -1;
    }
    struct stat st;
    *exists = 0;
    if (lstat(real, &st) == 0) {
        if (!S_ISDIR(st.st_mode) || !dir_empty(real))
            return cw_fmt(err, errlen, "--out %s exists and is not an empty directory",
                            out), -1;
        *exists = 1;
    }
    return 0;
}

/* Everything of the merged directory inside dir (the staging directory). */
static int fill(const struct merge *m, const cJSON *res, const char *dir, int *nbundles,
                char *err, size_t errlen)
{
    char path[PATH_MAX + 64];
    for (int k = 1; k <= m->count; k++) {
        cw_fmt(path, sizeof(path), "%s/shards/%d", dir, k);
        if (fstree_copy_dir(m->by_index[k]->dir, path, 1, "bundles", err, errlen) < 0)
            return -1;
    }
    char *text = cJSON_Print(res);
    cw_fmt(path, sizeof(path), "%s/result.json", dir);
    int rc = text != NULL ? cw_write_text(path, text, 0, err, errlen) : -1;
    cJSON_free(text);
    if (rc < 0)
        return -1;
    cw_fmt(path, sizeof(path), "%s/report.html", dir);
    if (report_write(dir, path, err, errlen) < 0)
        return -1;
    cw_fmt(path, sizeof(path), "%s/junit.xml", dir);
    if (junit_write(res, path, err, errlen) < 0)
        return -1;
    *nbundles = bundle_write_all(dir, res, err, errlen);
    return *nbundles < 0 ? -1 : 0;
}

/* Builds the merged directory beside out and renames it into place. */
static int write_out(const struct merge *m, const cJSON *res, const char *out, int *nbundles,
                     char *err, size_t errlen)
{
    char real[PATH_MAX], stage[PATH_MAX + 64];
    int exists;
    if (check_out(m, out, real, sizeof(real), &exists, err, errlen) < 0)
        return -1;
    char copy[PATH_MAX], copy2[PATH_MAX];
    cw_fmt(copy, sizeof(copy), "%s", real);
    cw_fmt(copy2, sizeof(copy2), "%s", real);
    cw_fmt(stage, sizeof(stage), "%s/.%s.merging.%ld", dirname(copy), basename(copy2),
             (long)getpid());
    if (mkdir(stage, 0755) < 0)
        return cw_fmt(err, errlen, "cannot create %s: %s", stage, strerror(errno)), -1;
    err[0] = '\0';
    if (fill(m, res, stage, nbundles, err, errlen) < 0 || (exists && rmdir(real) < 0) ||
        rename(stage, real) < 0) {
        if (err[0] == '\0')
            cw_fmt(err, errlen, "cannot move the merged directory to %s: %s", out,
                     strerror(errno));
        fstree_remove(stage);
        return -1;
    }
    return 0;
}

/* ---- the command ---------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow merge DIR... --out DIR [--junit FILE]\n"
        "  DIR...        the run directories of every shard of one run (--shard K/N of\n"
        "                run, mutants or sim), in any order\n"
        "  --out DIR     the merged run directory: result.json, report.html, junit.xml,\n"
        "                bundles/ and shards/K/ (a new or empty directory)\n"
        "  --junit FILE  also write the JUnit file here\n"
        "exit status: 0 merged and everything passed, 1 merged and something failed,\n"
        "             2 nothing merged (bad usage, bad or missing shards)\n");
}

/* The merged run in one line. */
static void print_summary(const struct merge *m, const cJSON *res, int pass, double secs)
{
    const cJSON *tot = rd_get(res, "totals");
    const char *v = rd_str(res, "verdict");
    printf("crashwindow merge: %s: %d shard%s of a %s merged in %.2f s: %.0f/%.0f scenarios "
           "passed, %.0f invariants checked, %.0f faults fired",
           pass ? "PASS" : v != NULL && strcmp(v, "incomplete") == 0 ? "INCOMPLETE" : "FAIL",
           m->count, m->count == 1 ? "" : "s", m->kind, secs, rd_num(tot, "passed"),
           rd_num(tot, "scenarios"), rd_num(tot, "invariants_checked"), rd_num(tot, "faults_fired"));
    if (strcmp(m->kind, "mutants") == 0) {
        int n = 0, killed = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, rd_get(res, "mutants")) {
            n++;
            killed += cJSON_IsTrue(rd_get(it, "killed"));
        }
        printf("; baseline %s, %d/%d mutants killed", rd_str(res, "baseline_verdict"), killed, n);
    }
    if (strcmp(m->kind, "sim") == 0)
        printf("; %.0f runs, %.0f failed (%.0f runs asked)",
               rd_num(rd_get(res, "simulator"), "runs"),
               rd_num(rd_get(res, "simulator"), "failures"),
               rd_num(rd_get(res, "simulator"), "runs_asked"));
    printf("\n");
}

static void free_merge(struct merge *m)
{
    for (int i = 0; i < m->n; i++)
        cJSON_Delete(m->sh[i].res);
    free(m->sh);
    free(m->by_index);
}

/* A shard's directory: a positional argument. */
static int take_dir(const char *arg, void *ctx, char *err, size_t errlen)
{
    struct merge *m = ctx;
    if (m->n >= SHARD_MAX) {
        snprintf(err, errlen, "more than %d directories", SHARD_MAX);
        return -1;
    }
    m->sh[m->n++].dir = arg;
    return 0;
}

/* DIRs, --out and --junit.  0, 1 after --help, -1 on bad usage (printed). */
static int parse_args(int argc, char **argv, struct merge *m, const char **out,
                      const char **junit)
{
    *out = *junit = NULL;
    m->sh = calloc((size_t)argc, sizeof(*m->sh));
    if (m->sh == NULL)
        return -1;
    const struct cw_opt opts[] = {
        CW_OPT_STRING("--out", out),
        CW_OPT_STRING("--junit", junit),
    };
    const struct cw_opts_style style = {
        .prefix = "-",
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unknown option or missing value: '%s'",
        .missing = "unknown option or missing value: '%s'",
        .positional = take_dir,
        .positional_ctx = m,
    };
    char err[4096];
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, err, sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "crashwindow merge: %s\n", err);
        return -1;
    }
    if (m->n == 0 || *out == NULL) {
        fprintf(stderr, "crashwindow merge: give the shards' directories and --out DIR\n");
        return -1;
    }
    return 0;
}

int merge_main(int argc, char **argv)
{
    struct merge m;
    memset(&m, 0, sizeof(m));
    const char *out, *junit;
    int pr = parse_args(argc, argv, &m, &out, &junit);
    if (pr != 0) {
        if (pr < 0)
            usage(stderr);
        free_merge(&m);
        return pr < 0 ? 2 : 0;
    }
    int64_t t0 = cw_mono_ms();
    char err[4096] = "";
    cJSON *res = NULL;
    int nbundles = 0, rc = 2;
    if (merge_check(&m, err, sizeof(err)) < 0)
        goto out;
    res = build_result(&m);
    if (res == NULL) {
        cw_fmt(err, sizeof(err), "out of memory");
        goto out;
    }
    if (write_out(&m, res, out, &nbundles, err, sizeof(err)) < 0)
        goto out;
    int pass = strcmp(rd_str(res, "verdict"), "pass") == 0;
    rc = pass ? 0 : 1;
    print_summary(&m, res, pass, (double)(cw_mono_ms() - t0) / 1000.0);
    printf("result: %s/result.json\nreport: %s/report.html\njunit: %s/junit.xml\n", out, out,
           out);
    if (nbundles > 0)
        printf("bundles: %s/bundles (%d failure%s)\n", out, nbundles, nbundles == 1 ? "" : "s");
    if (junit != NULL && junit_write(res, junit, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow merge: could not write %s: %s\n", junit, err);
        rc = 1;
    } else if (junit != NULL) {
        printf("junit: %s\n", junit);
    }
out:
    if (rc == 2)
        fprintf(stderr, "crashwindow merge: %s\ncrashwindow merge: nothing merged\n", err);
    cJSON_Delete(res);
    free_merge(&m);
    return rc;
}
