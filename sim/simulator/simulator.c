/* simulator.c -- `crashwindow sim`: the run loop, the failing-seed store,
 * the statistics and the shrinking driver; see simulator.h.
 *
 * Runs are scenario files the generator wrote, handed to runner_run() a
 * batch at a time (up to MAX_BATCH: the runner's fixed cost per call is a
 * good part of a short run), against one PostgreSQL cluster started here
 * for all runs (or the server given with --pg).  The simulator never
 * evaluates an invariant itself, so a failure it reports is exactly what
 * `crashwindow run` reports for the same file.  The runner's chatter goes
 * to a log file; the terminal gets one line per run saying what it does
 * (printed before the batch starts), one with its verdict, and, for a
 * failure, the one line that replays it.
 *
 * Output directory:
 *   DIR/result.json       runner-format result: "scenarios" (one per run)
 *                         plus "simulator" (statistics, failing runs)
 *   DIR/failing.jsonl     one line per failing run: the store of seeds
 *   DIR/runs/sim-S-I/     a failing run's files (passing runs' are removed
 *                         unless --keep-passing)
 *   DIR/shrunk-S-I.json   with --shrink: the smallest failing schedule found
 *   DIR/shrink/           the shrinker's candidate runs (failing ones kept)
 *   DIR/sim.events.jsonl  the simulator's own decisions
 *   DIR/bundles/sim-S-I/  a failure bundle per failing run (bundle.h)
 *
 * --shard K/N runs a contiguous share of runs 1..R of the seed (shard.h);
 * result.json's "shard" says which, so that `crashwindow merge` can check
 * the shards of one simulation fit.
 *
 * --broker rabbitmq runs every run against a real RabbitMQ node (the
 * runner's, one per batch).  Generation stays the same, so S:I names one
 * schedule on both brokers; what of it a real broker cannot take is left
 * out of the rendered scenario, step by step, by the runner's own rule
 * (runner_rabbit_setup_skip, runner_rabbit_step_skip in runner.h): where
 * `run --broker rabbitmq` skips a whole hand-written scenario, a generated
 * one keeps the rest of its schedule.  A run's printed line counts what
 * was left out, and sim.events.jsonl says what and why.
 *
 * Without --pg the whole simulation moves into a network namespace of its
 * own before its cluster starts (runner_net_unshare), so that a generated
 * kernel partition adds its nftables rules there and never on the host. */
#include "simulator.h"
#include "target.h"
#include "cliutil.h"
#include "common_fs.h"
#include "fstree.h"
#include "cwlog.h"
#include "runner.h"
#include "rundir.h"
#include "runner_db.h"
#include "scenario.h"
#include "shard.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RUNS 100
#define DEFAULT_BUDGET_S 300
#define DEFAULT_SHRINK_BUDGET_S 300

struct sim_opts {
    uint64_t seed;
    int have_seed;
    long runs;
    int have_runs;
    long budget_s;           /* 0: none (--runs without --time-budget) */
    int have_budget;
    long shrink_budget_s;
    const char *out;
    int replay;
    uint64_t replay_seed, replay_run;
    int shrink;
    const char *bin;
    const char *pg;
    const char *pg_dir;      /* with pg: where scripts/pg-cluster started it */
    int dry_run;
    int keep_passing;
    long max_failures;       /* stop after this many failing runs; 0: never */
    struct shard shard;      /* --shard, or 0/0 */
    const char *junit;       /* --junit, or NULL */
    int rabbit;              /* --broker rabbitmq (and every --target run) */
    const char *target;      /* --target PROFILE, or NULL: our pipeline */
    int fidelity;            /* --fidelity N: replays of the first failing run */
};

/* What one run came to. */
struct outcome {
    int ran;                 /* the runner produced a verdict */
    int pass;
    int primary;             /* first failed invariant, or -1 */
    unsigned failed;         /* bit per failed invariant */
    char sig[64];            /* invariant name, "heal" or "error" */
    char witness[768];
    int64_t ms;
    cJSON *scenario;         /* owned: its object of result.json */
};

struct sim {
    struct sim_opts o;
    struct target *target;   /* --target's profile, loaded once */
    struct sim_catalogue cat;
    char out[PATH_MAX];
    char runs_dir[PATH_MAX];
    char shrink_dir[PATH_MAX];
    char fidelity_dir[PATH_MAX];
    char own_build[PATH_MAX];
    char script[PATH_MAX];
    struct rdb db;
    int own_cluster;
    const char *pg;
    long runs, failures, kills, pauses, redeliveries, dups, inv_checks, shrink_runs;
    long restarts, faults_total, passed;
    int64_t run_ms;
    int64_t t0;
    char started_at[40];
    cJSON *faults_fired;     /* point -> count */
    cJSON *failing;          /* array */
    cJSON *shrunk;           /* array */
    cJSON *fidelity;         /* object, once measured */
    cJSON *scenarios;        /* array */
    cJSON *base;             /* header fields of the first runner result */
    long first, last;        /* the run indexes of this invocation's loop */
    const char *stopped_by;  /* what ended the runs before s->last: "time_budget",
                              * "max_failures", "interrupt"; NULL when none did */
};

/* A seed or run index: a whole number in [0, 2^64). */
static int parse_u64(const char *s, uint64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    if (s == NULL)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Seeds go into JSON as numbers while a double holds them exactly. */
static cJSON *u64_json(uint64_t v)
{
    if (v <= (1ULL << 53))
        return cJSON_CreateNumber((double)v);
    char buf[24];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    return cJSON_CreateString(buf);
}

static void replay_cmd(const struct sim *s, uint64_t seed, uint64_t run, char *out,
                       size_t outlen)
{
    char broker[PATH_MAX + 32];
    if (s->o.target != NULL)
        cw_fmt(broker, sizeof(broker), " --target %s", s->o.target);
    else
        cw_fmt(broker, sizeof(broker), "%s", s->o.rabbit ? " --broker rabbitmq" : "");
    if (s->o.bin != NULL)
        cw_fmt(out, outlen, "crashwindow sim --replay %llu:%llu%s --bin %s",
            (unsigned long long)seed, (unsigned long long)run, broker, s->o.bin);
    else
        cw_fmt(out, outlen, "crashwindow sim --replay %llu:%llu%s", (unsigned long long)seed,
            (unsigned long long)run, broker);
}

/* ---- a real broker -------------------------------------------------------- */

/* Parses the scenario object sc as the runner will.  NULL with err. */
static struct scenario *parse_rendered(const cJSON *sc, const char *name, char *err,
                                       size_t errlen)
{
    char *text = cJSON_PrintUnformatted(sc);
    if (text == NULL) {
        cw_fmt(err, errlen, "out of memory");
        return NULL;
    }
    struct scenario *parsed = scenario_parse(text, name, NULL, err, errlen);
    cJSON_free(text);
    return parsed;
}

static void log_left_out(const char *name, const char *what, const char *why)
{
    cJSON *ev = cwlog_begin("rabbitmq_left_out");
    cJSON_AddStringToObject(ev, "scenario", name);
    cJSON_AddStringToObject(ev, "what", what);
    cJSON_AddStringToObject(ev, "reason", why);
    cwlog_emit(ev);
}

/* Takes out of the rendered scenario sc what a real broker cannot take, as
 * the runner's rule judges it: each step it refuses, then, while it
 * refuses the "broker" settings, the fake broker's switches and then its
 * visibility timeout ("durable" is RabbitMQ's own nature and stays).
 * Returns how many parts went, or -1 with err when the scenario cannot be
 * parsed or the rule still refuses what is left. */
static int fit_rabbit(cJSON *sc, const char *name, int quiet, char *err, size_t errlen)
{
    char why[256];
    int left = 0;
    struct scenario *parsed = parse_rendered(sc, name, err, errlen);
    if (parsed == NULL)
        return -1;
    cJSON *steps = cJSON_GetObjectItemCaseSensitive(sc, "steps");
    for (int i = parsed->nsteps - 1; i >= 0; i--) {
        if (runner_rabbit_step_skip(parsed, &parsed->steps[i], why, sizeof(why)) == NULL)
            continue;
        char what[32];
        cw_fmt(what, sizeof(what), "step %d", i + 1);
        if (!quiet)
            log_left_out(name, what, why);
        cJSON_DeleteItemFromArray(steps, i);
        left++;
    }
    if (left > 0) {
        scenario_free(parsed);
        parsed = parse_rendered(sc, name, err, errlen);
        if (parsed == NULL)
            return -1;
    }
    /* The "broker" object: settings and switches (sc_broker_is_setting). */
    cJSON *broker = cJSON_GetObjectItemCaseSensitive(sc, "broker");
    while (broker != NULL && runner_rabbit_setup_skip(parsed, why, sizeof(why)) != NULL) {
        int switches = parsed->broker_control != NULL && parsed->broker_control->child != NULL;
        if (!switches && !cJSON_HasObjectItem(broker, "visibility_timeout_ms"))
            break;
        if (!quiet)
            log_left_out(name, switches ? "broker switches" : "visibility timeout", why);
        cJSON *item = broker->child;
        while (item != NULL) {
            cJSON *next = item->next;
            int setting = sc_broker_is_setting(item->string);
            if (switches ? !setting : strcmp(item->string, "visibility_timeout_ms") == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(broker, item->string);
            item = next;
        }
        left++;
        scenario_free(parsed);
        parsed = parse_rendered(sc, name, err, errlen);
        if (parsed == NULL)
            return -1;
    }
    int rc = left;
    if (runner_rabbit_skip(parsed, why, sizeof(why)) != NULL) {
        cw_fmt(err, errlen, "%s still needs the fake broker: %s", name, why);
        rc = -1;
    }
    scenario_free(parsed);
    return rc;
}

/* The scenario of plan as this simulation runs it: sim_render, fitted to a
 * real broker with --broker rabbitmq.  *left_out (may be NULL) receives how
 * many parts were left out, which are logged unless left_out is given.
 * NULL (message printed) when it cannot be. */
static cJSON *render_run(const struct sim *s, const struct sim_plan *plan, const char *name,
                         const char *title, int *left_out)
{
    if (left_out != NULL)
        *left_out = 0;
    cJSON *sc = sim_render(plan, name, title);
    if (sc == NULL || !s->o.rabbit)
        return sc;
    char err[512];
    /* A target: what cannot be done from outside goes (the same plan, so
     * the same fitted scenario: replay and shrinking hold). */
    int n = s->target != NULL ? runner_target_fit(s->target, sc, err, sizeof(err))
                              : fit_rabbit(sc, name, left_out != NULL, err, sizeof(err));
    if (n < 0) {
        fprintf(stderr, "crashwindow sim: %s\n", err);
        cJSON_Delete(sc);
        return NULL;
    }
    if (left_out != NULL)
        *left_out = n;
    return sc;
}

/* ---- one run ------------------------------------------------------------- */

static void outcome_free(struct outcome *oc)
{
    cJSON_Delete(oc->scenario);
    oc->scenario = NULL;
}

/* Reads the verdict of the scenario object into oc. */
static void read_verdict(struct outcome *oc)
{
    const cJSON *sc = oc->scenario;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sc, "verdict");
    oc->pass = cJSON_IsString(v) && strcmp(v->valuestring, "pass") == 0;
    oc->primary = -1;
    oc->failed = 0;
    oc->sig[0] = oc->witness[0] = '\0';
    if (oc->pass)
        return;
    const cJSON *inv;
    cJSON_ArrayForEach(inv, cJSON_GetObjectItemCaseSensitive(sc, "invariants")) {
        const cJSON *iv = cJSON_GetObjectItemCaseSensitive(inv, "verdict");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(inv, "name");
        if (!cJSON_IsString(iv) || strcmp(iv->valuestring, "fail") != 0 || !cJSON_IsString(nm))
            continue;
        int idx = sc_invariant_from_name(nm->valuestring);
        if (idx < 0)
            continue;
        oc->failed |= 1u << idx;
        if (oc->primary >= 0)
            continue;
        oc->primary = idx;
        snprintf(oc->sig, sizeof(oc->sig), "%s", nm->valuestring);
        const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(inv, "witnesses"), 0);
        if (cJSON_IsString(w))
            snprintf(oc->witness, sizeof(oc->witness), "%s", w->valuestring);
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(sc, "error");
    /* An invariant that had nothing to check because the run stopped
     * before it made anything (a set-up that failed) says less than the
     * error that stopped it. */
    if (oc->primary >= 0 && !(cJSON_IsString(err) && strncmp(oc->witness, "vacuous", 7) == 0))
        return;
    /* An expectation of a step (the reused key's 422). */
    const cJSON *x;
    const cJSON *expect = oc->primary < 0 ? cJSON_GetObjectItemCaseSensitive(sc, "expect") : NULL;
    cJSON_ArrayForEach(x, expect) {
        const cJSON *xv = cJSON_GetObjectItemCaseSensitive(x, "verdict");
        const cJSON *detail = cJSON_GetObjectItemCaseSensitive(x, "detail");
        if (!cJSON_IsString(xv) || strcmp(xv->valuestring, "fail") != 0)
            continue;
        snprintf(oc->sig, sizeof(oc->sig), "expectation");
        snprintf(oc->witness, sizeof(oc->witness), "%s",
                 cJSON_IsString(detail) ? detail->valuestring : "an expectation failed");
        return;
    }
    /* No invariant failed: the pipeline did not converge, or a step or the
     * checker could not do its job. */
    const char *e = cJSON_IsString(err) ? err->valuestring : "no verdict";
    snprintf(oc->sig, sizeof(oc->sig), "%s", strncmp(e, "heal:", 5) == 0 ? "heal" : "error");
    snprintf(oc->witness, sizeof(oc->witness), "%s", e);
}

/* Does cand fail the way orig did: the same invariant, or the same kind of
 * error when no invariant failed? */
static int same_failure(const struct outcome *orig, const struct outcome *cand)
{
    if (!cand->ran || cand->pass)
        return 0;
    if (orig->primary >= 0)
        return (cand->failed & (1u << orig->primary)) != 0;
    return strcmp(orig->sig, cand->sig) == 0;
}

#define MAX_BATCH 8

/* Runs plans[0..n) as scenarios names[0..n) in one call of the runner, with
 * their files under dir.  One call per run would repeat the runner's fixed
 * cost (template database, catalogue, binaries) every time; a batch pays it
 * once.  Returns 0 with oc[0..n) filled (each oc->ms the run's share of the
 * wall time), or -1 when the runner could not run them (message printed). */
static int run_batch(struct sim *s, const struct sim_plan *plans, const char *const *names,
                     int n, const char *dir, struct outcome *oc)
{
    char paths[MAX_BATCH][PATH_MAX + 64];
    const char *files[MAX_BATCH];
    char logp[PATH_MAX + 32];
    int rc = -1;
    for (int i = 0; i < n; i++) {
        memset(&oc[i], 0, sizeof(oc[i]));
        oc[i].primary = -1;
        cw_fmt(paths[i], sizeof(paths[i]), "%s/%s.json", dir, names[i]);
        files[i] = paths[i];
    }
    int written = 0;
    for (; written < n; written++) {
        cJSON *sc = render_run(s, &plans[written], names[written], NULL, NULL);
        char *text = sc ? cJSON_PrintUnformatted(sc) : NULL;
        cJSON_Delete(sc);
        int ok = text != NULL && cw_write_text(paths[written], text, 1, NULL, 0) == 0;
        cJSON_free(text);
        if (!ok) {
            fprintf(stderr, "crashwindow sim: cannot write %s\n", paths[written]);
            goto out;
        }
    }

    struct run_opts ro;
    memset(&ro, 0, sizeof(ro));
    ro.files = files;
    ro.nfiles = n;
    ro.pg = s->pg;
    ro.pg_dir = s->own_cluster ? s->db.cluster_dir : s->o.pg_dir;
    ro.out = dir;
    ro.bin = s->o.bin;
    ro.bin_fallback = s->o.bin != NULL ? s->own_build : NULL;
    ro.repeat = 1;
    ro.brief = 1;
    ro.broker = s->o.rabbit ? "rabbitmq" : NULL;
    ro.target = s->o.target;

    /* The runner's progress lines go to a log: a long simulation would
     * otherwise bury its own verdicts. */
    cw_fmt(logp, sizeof(logp), "%s/runner.log", dir);
    fflush(stdout);
    int saved = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (saved >= 0 && fd >= 0)
        dup2(fd, STDOUT_FILENO);
    if (fd >= 0)
        close(fd);
    int64_t t0 = cw_mono_ms();
    cJSON *res = NULL;
    int rrc = runner_run(&ro, &res);
    int64_t wall = cw_mono_ms() - t0;
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }

    cJSON *scs = cJSON_GetObjectItemCaseSensitive(res, "scenarios");
    for (int i = 0; i < n; i++) {
        cJSON *sc = NULL;
        int at = 0;
        cJSON_ArrayForEach(sc, scs) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(sc, "name");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, names[i]) == 0)
                break;
            at++;
        }
        if (sc == NULL) {
            fprintf(stderr, "crashwindow sim: the runner could not run %s (exit %d; see %s)\n",
                    names[i], rrc, logp);
            for (int j = 0; j < i; j++)
                outcome_free(&oc[j]);
            cJSON_Delete(res);
            goto out;
        }
        oc[i].scenario = cJSON_DetachItemFromArray(scs, at);
        oc[i].ran = 1;
        oc[i].ms = wall / n;
        read_verdict(&oc[i]);
    }
    if (s->base == NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(res, "scenarios");
        s->base = res;
    } else {
        cJSON_Delete(res);
    }
    rc = 0;
out:
    for (int i = 0; i < written; i++)
        unlink(paths[i]);
    return rc;
}

/* ---- statistics and result.json ------------------------------------------ */

static double jnum(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void count_run(struct sim *s, const struct outcome *oc)
{
    const cJSON *sc = oc->scenario;
    s->runs++;
    s->passed += oc->pass;
    s->run_ms += oc->ms;
    s->kills += (long)jnum(sc, "kills");
    s->pauses += (long)jnum(sc, "pauses");
    s->restarts += (long)jnum(sc, "restarts");
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(sc, "counts");
    s->redeliveries += (long)jnum(counts, "redeliveries");
    s->dups += (long)jnum(counts, "duplicates_absorbed");
    s->inv_checks += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sc, "invariants"));
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(sc, "faults_fired")) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(f, "point");
        if (!cJSON_IsString(pt))
            continue;
        s->faults_total++;
        cJSON *c = cJSON_GetObjectItemCaseSensitive(s->faults_fired, pt->valuestring);
        if (c == NULL)
            cJSON_AddNumberToObject(s->faults_fired, pt->valuestring, 1);
        else
            cJSON_SetNumberValue(c, c->valuedouble + 1);
    }
}

static double runs_per_minute(const struct sim *s)
{
    return s->run_ms > 0 ? (double)s->runs * 60000.0 / (double)s->run_ms : 0;
}

/* How many runs this invocation was asked for (its shard's share). */
static long runs_asked(const struct sim *s)
{
    return s->last - s->first + 1;
}

/* The verdict: "fail" when a run failed (or none could run), "interrupted",
 * "incomplete" when fewer runs were done than asked and none failed (a time
 * budget stopped them: that is not a pass of the runs asked), else "pass". */
static const char *sim_verdict(const struct sim *s, int broken)
{
    if (s->failures > 0 || broken || s->runs == 0)
        return runner_interrupted() && s->failures == 0 && !broken ? "interrupted" : "fail";
    if (runner_interrupted())
        return "interrupted";
    if (s->runs < runs_asked(s) && !s->o.replay)
        return "incomplete";
    return "pass";
}

static void write_result(struct sim *s, int done)
{
    cJSON *r = s->base ? cJSON_Duplicate(s->base, 1) : cJSON_CreateObject();
    if (r == NULL)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(r, "tool");
    cJSON_AddStringToObject(r, "tool", "crashwindow");
    cJSON_DeleteItemFromObjectCaseSensitive(r, "kind");
    cJSON_AddStringToObject(r, "kind", "sim");
    cJSON_DeleteItemFromObjectCaseSensitive(r, "started_at");
    cJSON_AddStringToObject(r, "started_at", s->started_at);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "duration_ms");
    cJSON_AddNumberToObject(r, "duration_ms", (double)(cw_mono_ms() - s->t0));
    cJSON_DeleteItemFromObjectCaseSensitive(r, "verdict");
    cJSON_AddStringToObject(r, "verdict", sim_verdict(s, 0));
    cJSON_AddBoolToObject(r, "complete", done);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "totals");
    cJSON *tot = cJSON_AddObjectToObject(r, "totals");
    cJSON_AddNumberToObject(tot, "scenarios", (double)s->runs);
    cJSON_AddNumberToObject(tot, "passed", (double)s->passed);
    cJSON_AddNumberToObject(tot, "invariants_checked", (double)s->inv_checks);
    cJSON_AddNumberToObject(tot, "faults_fired", (double)s->faults_total);
    cJSON_AddNumberToObject(tot, "kills", (double)s->kills);
    cJSON_AddNumberToObject(tot, "pauses", (double)s->pauses);
    cJSON_AddNumberToObject(tot, "restarts", (double)s->restarts);

    cJSON *sim = cJSON_AddObjectToObject(r, "simulator");
    uint64_t seed = s->o.replay ? s->o.replay_seed : s->o.seed;
    cJSON_AddItemToObject(sim, "seed", u64_json(seed));
    cJSON_AddNumberToObject(sim, "runs", (double)s->runs);
    cJSON_AddNumberToObject(sim, "runs_asked", (double)runs_asked(s));
    if (s->stopped_by != NULL)
        cJSON_AddStringToObject(sim, "stopped_by", s->stopped_by);
    else
        cJSON_AddNullToObject(sim, "stopped_by");
    cJSON_AddNumberToObject(sim, "failures", (double)s->failures);
    cJSON_AddNumberToObject(sim, "runs_per_minute", (double)(long)(runs_per_minute(s) * 10) / 10);
    cJSON_AddItemReferenceToObject(sim, "faults_fired", s->faults_fired);
    cJSON_AddNumberToObject(sim, "kills", (double)s->kills);
    cJSON_AddNumberToObject(sim, "pauses", (double)s->pauses);
    cJSON_AddNumberToObject(sim, "redeliveries", (double)s->redeliveries);
    cJSON_AddNumberToObject(sim, "duplicates_absorbed", (double)s->dups);
    cJSON_AddNumberToObject(sim, "invariant_checks", (double)s->inv_checks);
    cJSON_AddItemReferenceToObject(sim, "failing", s->failing);
    cJSON_AddItemReferenceToObject(sim, "shrunk", s->shrunk);
    if (s->fidelity != NULL)
        cJSON_AddItemReferenceToObject(sim, "fidelity", s->fidelity);
    if (s->o.budget_s > 0)
        cJSON_AddNumberToObject(sim, "time_budget_s", (double)s->o.budget_s);
    else
        cJSON_AddNullToObject(sim, "time_budget_s");
    cJSON_AddNumberToObject(sim, "run_seconds", (double)s->run_ms / 1000.0);
    cJSON_AddNumberToObject(sim, "shrink_runs", (double)s->shrink_runs);
    if (s->o.replay)
        cJSON_AddItemToObject(sim, "replay_run", u64_json(s->o.replay_run));
    if (s->o.bin != NULL)
        cJSON_AddStringToObject(sim, "bin", s->o.bin);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "scenarios");
    cJSON_AddItemReferenceToObject(r, "scenarios", s->scenarios);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "shard");
    if (s->o.shard.count > 0) {
        cJSON *sh = shard_json(&s->o.shard);
        cJSON_AddItemToObject(sh, "seed", u64_json(s->o.seed));
        cJSON_AddNumberToObject(sh, "runs", (double)s->o.runs);
        cJSON_AddNumberToObject(sh, "first", (double)s->first);
        cJSON_AddNumberToObject(sh, "last", (double)s->last);
        cJSON_AddItemToObject(r, "shard", sh);
    }

    char path[PATH_MAX + 32];
    cw_fmt(path, sizeof(path), "%s/result.json", s->out);
    char *text = cJSON_Print(r);
    if (text == NULL || cw_write_text(path, text, 1, NULL, 0) < 0)
        fprintf(stderr, "crashwindow sim: cannot write %s\n", path);
    cJSON_free(text);
    cJSON_Delete(r);
}

/* Appends the failing run to DIR/failing.jsonl and to the statistics. */
static void record_failure(struct sim *s, const struct sim_plan *p, const struct outcome *oc,
                           const char *dir_rel)
{
    char run[64], replay[PATH_MAX + 96], iso[40];
    cw_fmt(run, sizeof(run), "%llu:%llu", (unsigned long long)p->seed, (unsigned long long)p->run);
    replay_cmd(s, p->seed, p->run, replay, sizeof(replay));
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "run", run);
    cJSON_AddStringToObject(f, "replay", replay);
    cJSON_AddStringToObject(f, "invariant", oc->sig);
    cJSON_AddStringToObject(f, "witness", oc->witness);
    cJSON_AddStringToObject(f, "dir", dir_rel);
    cJSON_AddNumberToObject(f, "size", (double)sim_plan_size(p));
    cJSON_AddItemToArray(s->failing, f);

    cJSON *line = cJSON_Duplicate(f, 1);
    cJSON_AddItemToObject(line, "seed", u64_json(p->seed));
    cJSON_AddItemToObject(line, "index", u64_json(p->run));
    if (s->o.bin != NULL)
        cJSON_AddStringToObject(line, "bin", s->o.bin);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(line, "at", iso);
    char *text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    char path[PATH_MAX + 32];
    cw_fmt(path, sizeof(path), "%s/failing.jsonl", s->out);
    FILE *fp = text ? fopen(path, "a") : NULL;
    if (fp != NULL) {
        fprintf(fp, "%s\n", text);
        fclose(fp);
    } else {
        fprintf(stderr, "crashwindow sim: cannot append to %s\n", path);
    }
    cJSON_free(text);
}

/* ---- the run loop -------------------------------------------------------- */

static void log_run(const char *event, const struct sim_plan *p, const struct outcome *oc)
{
    cJSON *ev = cwlog_begin(event);
    char run[64];
    cw_fmt(run, sizeof(run), "%llu:%llu", (unsigned long long)p->seed, (unsigned long long)p->run);
    cJSON_AddStringToObject(ev, "run", run);
    cJSON_AddNumberToObject(ev, "size", (double)sim_plan_size(p));
    if (oc != NULL) {
        cJSON_AddStringToObject(ev, "verdict", oc->pass ? "pass" : "fail");
        if (!oc->pass)
            cJSON_AddStringToObject(ev, "invariant", oc->sig);
        cJSON_AddNumberToObject(ev, "duration_ms", (double)oc->ms);
    } else {
        cJSON_AddNumberToObject(ev, "faults", p->nfaults);
        cJSON_AddNumberToObject(ev, "actions", p->nacts);
    }
    cwlog_emit(ev);
}

/* Reports the outcome of a finished run: its verdict line, and for a
 * failure the line that replays it and an entry in the seed store.  Takes
 * oc's scenario object into the results.  Returns 1 failed, 0 passed. */
static int finish_run(struct sim *s, const struct sim_plan *p, struct outcome *oc)
{
    char name[64], dir[PATH_MAX + 80], rel[96];
    sim_scenario_name(p->seed, p->run, name, sizeof(name));
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(oc->scenario, "verdict");
    if (cJSON_IsString(v) && strcmp(v->valuestring, "interrupted") == 0) {
        /* Cut off by the interrupt: neither done nor failed, not counted. */
        printf("    %llu:%llu interrupted\n", (unsigned long long)p->seed,
               (unsigned long long)p->run);
        outcome_free(oc);
        return 0;
    }
    log_run("run_end", p, oc);
    count_run(s, oc);
    cw_fmt(dir, sizeof(dir), "%s/%s", s->runs_dir, name);
    cw_fmt(rel, sizeof(rel), "runs/%s", name);
    cJSON_ReplaceItemInObjectCaseSensitive(oc->scenario, "dir", cJSON_CreateString(rel));
    const cJSON *sc = oc->scenario;
    int nfired = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sc, "faults_fired"));
    double secs = jnum(sc, "duration_ms") / 1000.0;
    if (oc->pass) {
        printf("    %llu:%llu pass in %.1f s (%d faults fired, %.0f kills, %.0f pauses, "
               "%.0f redeliveries)\n", (unsigned long long)p->seed, (unsigned long long)p->run,
               secs, nfired, jnum(sc, "kills"), jnum(sc, "pauses"),
               jnum(cJSON_GetObjectItemCaseSensitive(sc, "counts"), "redeliveries"));
        if (!s->o.keep_passing) {
            fstree_remove(dir);
            cJSON_DeleteItemFromObjectCaseSensitive(oc->scenario, "dir");
        }
    } else {
        char replay[PATH_MAX + 96];
        replay_cmd(s, p->seed, p->run, replay, sizeof(replay));
        s->failures++;
        printf("    %llu:%llu FAIL in %.1f s: %s: %s\n", (unsigned long long)p->seed,
               (unsigned long long)p->run, secs, oc->sig, oc->witness);
        printf("    replay: %s\n", replay);
        record_failure(s, p, oc, rel);
    }
    fflush(stdout);
    cJSON_AddItemToArray(s->scenarios, oc->scenario);
    oc->scenario = NULL;
    return !oc->pass;
}

/* Runs first..first+n-1 of seed in one batch: prints what each run does
 * before any starts, then each verdict.  Failed run indexes are appended to
 * failed[*nfailed] (up to cap).  0, or -1 when the runner could not run. */
static int run_runs(struct sim *s, uint64_t seed, uint64_t first, int n, long index, long total,
                    uint64_t *failed, int *nfailed, int cap)
{
    struct sim_plan plans[MAX_BATCH];
    char namebuf[MAX_BATCH][64];
    const char *names[MAX_BATCH];
    struct outcome oc[MAX_BATCH];
    for (int i = 0; i < n; i++) {
        char desc[2048];
        sim_generate(&s->cat, seed, first + (uint64_t)i, &plans[i]);
        sim_scenario_name(seed, first + (uint64_t)i, namebuf[i], sizeof(namebuf[i]));
        names[i] = namebuf[i];
        sim_describe(&plans[i], desc, sizeof(desc));
        if (s->o.rabbit) {
            /* Rendered once more here only to say what RabbitMQ leaves out. */
            int left = 0;
            cJSON_Delete(render_run(s, &plans[i], names[i], NULL, &left));
            size_t dl = strlen(desc);
            if (left > 0 && dl < sizeof(desc))
                snprintf(desc + dl, sizeof(desc) - dl, " | rabbitmq: %d part%s left out", left,
                         left == 1 ? "" : "s");
        }
        if (total > 0)
            printf("[%ld/%ld] run %llu:%llu  %s\n", index + i, total, (unsigned long long)seed,
                   (unsigned long long)(first + (uint64_t)i), desc);
        else
            printf("run %llu:%llu  %s\n", (unsigned long long)seed,
                   (unsigned long long)(first + (uint64_t)i), desc);
        log_run("run_start", &plans[i], NULL);
    }
    fflush(stdout);
    if (run_batch(s, plans, names, n, s->runs_dir, oc) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (finish_run(s, &plans[i], &oc[i]) && *nfailed < cap)
            failed[(*nfailed)++] = plans[i].run;
    }
    write_result(s, 0);
    return 0;
}

/* ---- shrinking ----------------------------------------------------------- */

/* What one shrink came to, for the file it writes and the records. */
struct shrink_tally {
    long size0, size1;       /* plan size before and after */
    int tries, kept;         /* candidates run, edits kept */
    int64_t t0;              /* when the shrink began */
};

/* Runs candidate number try_no of orig's shrink and says whether it fails
 * the way fail did.  Only a kept candidate's run files stay: a dropped one
 * explains nothing. */
static int try_candidate(struct sim *s, const struct sim_plan *orig, const struct sim_plan *cand,
                         const char *what, const struct outcome *fail, int try_no)
{
    char name[96], base[64];
    sim_scenario_name(orig->seed, orig->run, base, sizeof(base));
    cw_fmt(name, sizeof(name), "%s-s%d", base, try_no);
    struct outcome oc;
    const char *names[1] = { name };
    int rc = run_batch(s, cand, names, 1, s->shrink_dir, &oc);
    s->shrink_runs++;
    int keep = rc == 0 && same_failure(fail, &oc);
    cJSON *ev = cwlog_begin(keep ? "shrink_keep" : "shrink_drop");
    cJSON_AddStringToObject(ev, "candidate", name);
    cJSON_AddStringToObject(ev, "edit", what);
    cJSON_AddNumberToObject(ev, "size", (double)sim_plan_size(cand));
    cJSON_AddStringToObject(ev, "outcome", rc < 0 ? "not run" : oc.pass ? "pass" : oc.sig);
    cwlog_emit(ev);
    printf("    %-5s %-44s -> %s (size %ld)\n", keep ? "keep" : "undo", what,
           rc < 0 ? "could not run" : oc.pass ? "passes" : oc.sig, sim_plan_size(cand));
    fflush(stdout);
    char dir[PATH_MAX + 100];
    cw_fmt(dir, sizeof(dir), "%s/%s", s->shrink_dir, name);
    if (!keep)
        fstree_remove(dir);
    outcome_free(&oc);
    return keep;
}

/* The smallest failing plan as a scenario: title and description say where
 * it came from, so that the file stands on its own.  NULL when it cannot be
 * rendered. */
static cJSON *shrunk_scenario(const struct sim *s, const struct sim_plan *orig,
                              const struct sim_plan *best, const struct outcome *fail,
                              const struct shrink_tally *t)
{
    char name[96], title[256];
    cw_fmt(name, sizeof(name), "sim-%llu-%llu-shrunk", (unsigned long long)orig->seed,
        (unsigned long long)orig->run);
    cw_fmt(title, sizeof(title), "Shrunk from randomized run %llu of seed %llu: %s fails "
        "(size %ld, from %ld)", (unsigned long long)orig->run,
        (unsigned long long)orig->seed, fail->sig, t->size1, t->size0);
    cJSON *sc = render_run(s, best, name, title, NULL);
    if (sc == NULL)
        return NULL;
    char desc[1024], replay[PATH_MAX + 96];
    replay_cmd(s, orig->seed, orig->run, replay, sizeof(replay));
    cw_fmt(desc, sizeof(desc), "Found by crashwindow sim (replay: %s) failing %s: %.300s. "
        "Shrunk by %d of %d edits tried.", replay, fail->sig, fail->witness, t->kept, t->tries);
    cJSON_ReplaceItemInObjectCaseSensitive(sc, "description", cJSON_CreateString(desc));
    /* List the invariant it breaks, so that the file states what it proves. */
    cJSON *invs = cJSON_GetObjectItemCaseSensitive(sc, "invariants");
    int listed = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, invs) {
        listed |= cJSON_IsString(it) && strcmp(it->valuestring, fail->sig) == 0;
    }
    if (!listed && fail->primary >= 0)
        cJSON_AddItemToArray(invs, cJSON_CreateString(fail->sig));
    return sc;
}

/* Records a written shrunk file (rel under DIR, at path): in the "shrunk"
 * statistics, on the failing run it came from, as an event and a line. */
static void record_shrunk(struct sim *s, const struct sim_plan *orig, const struct outcome *fail,
                          const char *rel, const char *path, const struct shrink_tally *t)
{
    char run[64];
    cw_fmt(run, sizeof(run), "%llu:%llu", (unsigned long long)orig->seed,
        (unsigned long long)orig->run);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", run);
    cJSON_AddStringToObject(o, "file", rel);
    cJSON_AddStringToObject(o, "invariant", fail->sig);
    cJSON_AddNumberToObject(o, "size_before", (double)t->size0);
    cJSON_AddNumberToObject(o, "size_after", (double)t->size1);
    cJSON_AddNumberToObject(o, "tries", t->tries);
    cJSON_AddNumberToObject(o, "kept", t->kept);
    cJSON_AddNumberToObject(o, "seconds", (double)(cw_mono_ms() - t->t0) / 1000.0);
    cJSON_AddItemToArray(s->shrunk, o);
    const cJSON *f;
    cJSON_ArrayForEach(f, s->failing) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(f, "run");
        if (cJSON_IsString(r) && strcmp(r->valuestring, run) == 0)
            cJSON_AddStringToObject((cJSON *)f, "shrunk", rel);
    }
    cJSON *ev = cwlog_begin("shrunk");
    cJSON_AddStringToObject(ev, "run", run);
    cJSON_AddStringToObject(ev, "file", path);
    cJSON_AddNumberToObject(ev, "size_before", (double)t->size0);
    cJSON_AddNumberToObject(ev, "size_after", (double)t->size1);
    cwlog_emit(ev);
    printf("shrunk %s: size %ld -> %ld in %d runs (%d edits kept): %s\n", run, t->size0,
           t->size1, t->tries, t->kept, path);
    fflush(stdout);
}

/* Greedy delta debugging: walk the one-edit-smaller variants in order and
 * keep each edit whose run still fails the same way.  After a kept edit the
 * walk goes on at the same index (the list shifted under it: that index now
 * names the next edit of the same kind); a pass that kept anything is
 * followed by another, since an edit refused earlier may work on the smaller
 * plan.  Ends when a whole pass keeps nothing, or at the deadline.  Writes
 * DIR/shrunk-S-I.json. */
static void shrink_one(struct sim *s, const struct sim_plan *orig, const struct outcome *fail,
                       int64_t deadline)
{
    struct sim_plan best = *orig, cand;
    struct shrink_tally t;
    memset(&t, 0, sizeof(t));
    t.size0 = sim_plan_size(orig);
    t.t0 = cw_mono_ms();
    printf("shrink %llu:%llu: size %ld, failing on %s; budget %lld s\n",
           (unsigned long long)orig->seed, (unsigned long long)orig->run, t.size0, fail->sig,
           (long long)((deadline - t.t0) / 1000));
    fflush(stdout);
    int k = 0, kept_in_pass = 0;
    while (cw_mono_ms() < deadline && !runner_interrupted()) {
        char what[160];
        if (!sim_shrink_variant(&best, k, &cand, what, sizeof(what))) {
            if (!kept_in_pass)
                break;
            k = 0;
            kept_in_pass = 0;
            continue;
        }
        if (try_candidate(s, orig, &cand, what, fail, ++t.tries)) {
            best = cand;
            t.kept++;
            kept_in_pass = 1;
        } else {
            k++;
        }
    }
    t.size1 = sim_plan_size(&best);
    cJSON *sc = shrunk_scenario(s, orig, &best, fail, &t);
    if (sc == NULL)
        return;
    char *text = cJSON_Print(sc);
    cJSON_Delete(sc);
    char path[PATH_MAX + 64], rel[96];
    cw_fmt(rel, sizeof(rel), "shrunk-%llu-%llu.json", (unsigned long long)orig->seed,
        (unsigned long long)orig->run);
    cw_fmt(path, sizeof(path), "%s/%s", s->out, rel);
    if (text == NULL || cw_write_text(path, text, 1, NULL, 0) < 0) {
        fprintf(stderr, "crashwindow sim: cannot write %s\n", path);
        cJSON_free(text);
        return;
    }
    cJSON_free(text);
    record_shrunk(s, orig, fail, rel, path, &t);
}

/* ---- command line -------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow sim [--seed S] [--runs N] [--time-budget SECONDS] [--out DIR]\n"
        "                       [--replay S:I] [--shrink] [--shrink-budget SECONDS]\n"
        "                       [--bin DIR] [--pg CONNINFO] [--max-failures N] [--dry-run]\n"
        "                       [--keep-passing] [--shard K/N|env] [--junit FILE]\n"
        "                       [--broker fake|rabbitmq] [--fidelity N] [--pg-dir DIR]\n"
        "                       [--target PROFILE.json] [--jobs N [--shares M]]\n"
        "  --seed S            runs S:1, S:2, ... (default: a seed from the clock, printed)\n"
        "  --runs N            how many runs (default %d); all of them unless a\n"
        "                      --time-budget is given too\n"
        "  --time-budget SEC   start no run after this many seconds (default %d without\n"
        "                      --runs); runs it stops make the verdict INCOMPLETE, not PASS\n"
        "  --out DIR           failing runs, failing.jsonl, result.json, shrunk scenarios\n"
        "                      (default reports/sim-<timestamp>)\n"
        "  --replay S:I        run I of seed S again: the same schedule\n"
        "  --shrink            shrink failing runs to a smallest failing scenario file\n"
        "  --shrink-budget SEC time for all shrinking (default %d)\n"
        "  --bin DIR           the binaries under test (a binary missing there is taken\n"
        "                      from this build)\n"
        "  --pg CONNINFO       use this PostgreSQL server instead of a throwaway cluster\n"
        "  --pg-dir DIR        with --pg: the directory scripts/pg-cluster started it in;\n"
        "                      database faults are drawn only with a cluster of our own\n"
        "                      (kernel partitions only without --pg: the runs then live in\n"
        "                      a network namespace of their own, which needs root)\n"
        "  --max-failures N    stop after N failing runs\n"
        "  --fidelity N        replay the first failing run N times and count how many\n"
        "                      fail again (result.json and the report show it)\n"
        "  --dry-run           print the generated scenarios, run nothing\n"
        "  --keep-passing      keep the files of passing runs too\n"
        "  --shard K/N         runs (K-1)*R/N+1 .. K*R/N of the seed's R runs (needs --seed;\n"
        "                      'env' as in crashwindow run --help); crashwindow merge joins them\n"
        "  --jobs N            the N shards side by side on this machine, merged into --out\n"
        "  --shares M          with --jobs: split into M shards, N at a time (default N)\n"
        "  --junit FILE        write JUnit XML (one test case per run) to FILE\n"
        "  --broker B          fake (default) or rabbitmq: a throwaway RabbitMQ node, and\n"
        "                      each schedule without what a real broker cannot take\n"
        "                      (crashwindow run --help: the same rule skips a scenario)\n"
        "  --target P          every run against the target profile P describes (on\n"
        "                      RabbitMQ), each schedule without what cannot be done from\n"
        "                      outside (fault points, program flags, white-box steps)\n"
        "exit status: 0 every run asked for ran and passed, 1 a run failed or fewer ran\n"
        "(INCOMPLETE), 2 bad usage, 130 interrupted\n",
        DEFAULT_RUNS, DEFAULT_BUDGET_S, DEFAULT_SHRINK_BUDGET_S);
}

/* The checks of the options that take a number or a form of their own:
 * each stores into struct sim_opts (ctx) and words its own refusal. */
static int opt_seed(const char *v, void *ctx, char *err, size_t errlen)
{
    struct sim_opts *o = ctx;
    if (parse_u64(v, &o->seed) < 0) {
        snprintf(err, errlen, "--seed takes a whole number below 2^64, not '%s'", v);
        return -1;
    }
    o->have_seed = 1;
    return 0;
}

static int opt_runs(const char *v, void *ctx, char *err, size_t errlen)
{
    struct sim_opts *o = ctx;
    if (parse_long(v, 1, 1000000, &o->runs) < 0) {
        snprintf(err, errlen, "--runs takes a number from 1 to 1000000");
        return -1;
    }
    o->have_runs = 1;
    return 0;
}

static int opt_fidelity(const char *v, void *ctx, char *err, size_t errlen)
{
    long n;
    if (parse_long(v, 1, 100, &n) < 0) {
        snprintf(err, errlen, "--fidelity takes a number of replays from 1 to 100, not '%s'", v);
        return -1;
    }
    ((struct sim_opts *)ctx)->fidelity = (int)n;
    return 0;
}

static int opt_max_failures(const char *v, void *ctx, char *err, size_t errlen)
{
    if (parse_long(v, 1, 1000000, &((struct sim_opts *)ctx)->max_failures) < 0) {
        snprintf(err, errlen, "--max-failures takes a number from 1 to 1000000");
        return -1;
    }
    return 0;
}

static int opt_seconds(const char *flag, const char *v, long *dst, char *err, size_t errlen)
{
    if (parse_long(v, 1, 604800, dst) < 0) {
        snprintf(err, errlen, "%s takes seconds from 1 to 604800", flag);
        return -1;
    }
    return 0;
}

static int opt_time_budget(const char *v, void *ctx, char *err, size_t errlen)
{
    ((struct sim_opts *)ctx)->have_budget = 1;
    return opt_seconds("--time-budget", v, &((struct sim_opts *)ctx)->budget_s, err, errlen);
}

static int opt_shrink_budget(const char *v, void *ctx, char *err, size_t errlen)
{
    return opt_seconds("--shrink-budget", v, &((struct sim_opts *)ctx)->shrink_budget_s, err,
                       errlen);
}

static int opt_replay(const char *v, void *ctx, char *err, size_t errlen)
{
    struct sim_opts *o = ctx;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", v);
    char *colon = strchr(buf, ':');
    if (colon != NULL)
        *colon = '\0';
    if (colon == NULL || parse_u64(buf, &o->replay_seed) < 0 ||
        parse_u64(colon + 1, &o->replay_run) < 0 || o->replay_run < 1) {
        snprintf(err, errlen, "--replay takes SEED:RUN (whole numbers, RUN from 1), not '%s'", v);
        return -1;
    }
    o->replay = 1;
    return 0;
}

static int opt_broker(const char *v, void *ctx, char *err, size_t errlen)
{
    if (strcmp(v, "fake") != 0 && strcmp(v, "rabbitmq") != 0) {
        snprintf(err, errlen, "--broker takes fake or rabbitmq, not '%s'", v);
        return -1;
    }
    ((struct sim_opts *)ctx)->rabbit = strcmp(v, "rabbitmq") == 0;
    return 0;
}

static int opt_shard(const char *v, void *ctx, char *err, size_t errlen)
{
    return shard_arg(v, &((struct sim_opts *)ctx)->shard, err, errlen);
}

/* Returns 0, 1 after --help (usage printed), -1 after a message about the
 * command line's form (the caller adds the usage), or -2 after a message
 * that says all (a refused value, options that do not go together). */
static int parse_args(struct sim_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->runs = DEFAULT_RUNS;
    o->budget_s = DEFAULT_BUDGET_S;
    o->shrink_budget_s = DEFAULT_SHRINK_BUDGET_S;
    const struct cw_opt opts[] = {
        CW_OPT_FLAG("--shrink", &o->shrink),
        CW_OPT_FLAG("--dry-run", &o->dry_run),
        CW_OPT_FLAG("--keep-passing", &o->keep_passing),
        CW_OPT_CALL("--seed", opt_seed, o),
        CW_OPT_CALL("--runs", opt_runs, o),
        CW_OPT_CALL("--fidelity", opt_fidelity, o),
        CW_OPT_CALL("--max-failures", opt_max_failures, o),
        CW_OPT_CALL("--time-budget", opt_time_budget, o),
        CW_OPT_CALL("--shrink-budget", opt_shrink_budget, o),
        CW_OPT_CALL("--replay", opt_replay, o),
        CW_OPT_STRING("--out", &o->out),
        CW_OPT_STRING("--bin", &o->bin),
        CW_OPT_STRING("--pg", &o->pg),
        CW_OPT_STRING("--pg-dir", &o->pg_dir),
        CW_OPT_STRING("--junit", &o->junit),
        CW_OPT_CALL("--broker", opt_broker, o),
        CW_OPT_STRING("--target", &o->target),
        CW_OPT_CALL("--shard", opt_shard, o),
    };
    /* every argument is an option: a stray word is an unknown one */
    const struct cw_opts_style style = {
        .prefix = NULL,
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unknown option '%s'",
        .missing = "unknown option or missing value: '%s'",
    };
    char err[512];
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, err, sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout);
        return 1;
    }
    if (rc != CW_OPTS_OK) {
        fprintf(stderr, "crashwindow sim: %s\n", err);
        return rc == CW_OPTS_USAGE ? -1 : -2;
    }
    if (o->target != NULL)
        o->rabbit = 1; /* a target speaks AMQP */
    /* Runs asked for are run: a budget stops them only when one is given
     * (the default budget bounds the default runs alone). */
    if (o->have_runs && !o->have_budget)
        o->budget_s = 0;
    if (o->replay && (o->have_seed || o->have_runs)) {
        fprintf(stderr, "crashwindow sim: --replay S:I runs one run; it takes no --seed "
                "or --runs\n");
        return -2;
    }
    if (o->fidelity > 0 && o->shard.count > 0) {
        fprintf(stderr, "crashwindow sim: --fidelity replays one run in one process; it takes "
                "no --shard\n");
        return -2;
    }
    if (o->shard.count > 0 && (o->replay || !o->have_seed)) {
        fprintf(stderr, "crashwindow sim: --shard needs --seed (every shard must run the same "
                "seed) and takes no --replay\n");
        return -2;
    }
    if (o->shard.count > o->runs) {
        fprintf(stderr, "crashwindow sim: --shard %d/%d: only %ld runs to share, so at most %ld "
                "shards\n", o->shard.index, o->shard.count, o->runs, o->runs);
        return -2;
    }
    if (o->bin != NULL && access(o->bin, F_OK) != 0) {
        fprintf(stderr, "crashwindow sim: --bin %s: no such directory\n", o->bin);
        return -2;
    }
    return 0;
}

static int dry_run(struct sim *s)
{
    uint64_t seed = s->o.replay ? s->o.replay_seed : s->o.seed;
    long lo, hi;
    shard_range(&s->o.shard, s->o.runs, &lo, &hi);
    uint64_t first = s->o.replay ? s->o.replay_run : (uint64_t)lo;
    uint64_t last = s->o.replay ? s->o.replay_run : (uint64_t)hi;
    for (uint64_t i = first; i <= last; i++) {
        struct sim_plan p;
        char name[64];
        sim_generate(&s->cat, seed, i, &p);
        sim_scenario_name(seed, i, name, sizeof(name));
        int left_out;
        cJSON *sc = render_run(s, &p, name, NULL, &left_out);
        char *text = sc ? cJSON_Print(sc) : NULL;
        if (text == NULL) {
            cJSON_Delete(sc);
            return 1;
        }
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(sc);
    }
    return 0;
}

static void sim_free(struct sim *s)
{
    target_free(s->target);
    s->target = NULL;
    cJSON_Delete(s->faults_fired);
    cJSON_Delete(s->failing);
    cJSON_Delete(s->shrunk);
    cJSON_Delete(s->fidelity);
    cJSON_Delete(s->scenarios);
    cJSON_Delete(s->base);
}

/* The output directory and its subfolders, the event log and the
 * statistics' containers.  0, or -1 when DIR cannot be made (message
 * printed). */
static int open_output(struct sim *s)
{
    char path[PATH_MAX];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->started_at, sizeof(s->started_at), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (s->o.out != NULL) {
        cw_fmt(s->out, sizeof(s->out), "%s", s->o.out);
    } else {
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        cw_fmt(s->out, sizeof(s->out), "%s/reports/sim-%s", runner_source_dir(), stamp);
    }
    cw_fmt(s->runs_dir, sizeof(s->runs_dir), "%s/runs", s->out);
    cw_fmt(s->shrink_dir, sizeof(s->shrink_dir), "%s/shrink", s->out);
    cw_fmt(s->fidelity_dir, sizeof(s->fidelity_dir), "%s/fidelity", s->out);
    if (cw_mkdir_p(s->runs_dir) < 0 || (s->o.shrink && cw_mkdir_p(s->shrink_dir) < 0) ||
        (s->o.fidelity > 0 && cw_mkdir_p(s->fidelity_dir) < 0)) {
        fprintf(stderr, "crashwindow sim: cannot create %s: %s\n", s->out, strerror(errno));
        return -1;
    }
    cw_fmt(path, sizeof(path), "%s/sim.events.jsonl", s->out);
    if (cwlog_open(path, "sim") < 0)
        fprintf(stderr, "crashwindow sim: cannot open %s; events go to stderr\n", path);
    if (runner_build_dir(s->own_build, sizeof(s->own_build)) < 0)
        snprintf(s->own_build, sizeof(s->own_build), ".");
    cw_fmt(s->script, sizeof(s->script), "%s/scripts/pg-cluster", runner_source_dir());
    s->faults_fired = cJSON_CreateObject();
    s->failing = cJSON_CreateArray();
    s->shrunk = cJSON_CreateArray();
    s->scenarios = cJSON_CreateArray();
    return 0;
}

/* One cluster for every run: starting one costs more than a run.  0, or -1
 * when the throwaway cluster would not start (message printed). */
static int open_cluster(struct sim *s)
{
    char err[1024];
    if (s->o.pg != NULL) {
        s->pg = s->o.pg;
        return 0;
    }
    if (rdb_start_cluster(&s->db, s->script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow sim: %s\n", err);
        return -1;
    }
    s->own_cluster = 1;
    s->pg = s->db.admin;
    return 0;
}

/* Runs s->first..s->last of seed (the one replayed run with --replay) until the
 * time budget, --max-failures or an interrupt stops it.  Failed run
 * indexes go to failed[*nfailed] (up to cap).  0, or -1 when the runner
 * could not run a batch. */
static int run_all(struct sim *s, uint64_t seed, long total, uint64_t *failed, int *nfailed,
                   int cap)
{
    int64_t budget_end = s->t0 + s->o.budget_s * 1000;
    for (long i = s->first; i <= s->last && !runner_interrupted();) {
        if (s->o.max_failures > 0 && s->failures >= s->o.max_failures) {
            s->stopped_by = "max_failures";
            printf("crashwindow sim: stopping after %ld failing run%s (--max-failures)\n",
                   s->failures, s->failures == 1 ? "" : "s");
            break;
        }
        int64_t left = s->o.budget_s > 0 ? budget_end - cw_mono_ms() : INT64_MAX;
        if (left <= 0) {
            s->stopped_by = "time_budget";
            printf("crashwindow sim: time budget of %ld s used up after %ld of %ld runs\n",
                   s->o.budget_s, i - s->first, s->last - s->first + 1);
            break;
        }
        /* Batches of up to MAX_BATCH runs, fewer when the budget is nearly
         * used up (judged by the runs so far; one run when none yet). */
        long n = s->last - i + 1;
        if (n > MAX_BATCH)
            n = MAX_BATCH;
        if (s->runs == 0)
            n = 1;
        else if (s->o.budget_s > 0 && s->run_ms / s->runs > 0 &&
                 left / (s->run_ms / s->runs) < n)
            n = left / (s->run_ms / s->runs) > 0 ? left / (s->run_ms / s->runs) : 1;
        uint64_t first = s->o.replay ? s->o.replay_run : (uint64_t)i;
        if (run_runs(s, seed, first, (int)n, i, s->o.replay ? 0 : total, failed, nfailed,
                     cap) < 0)
            return -1;
        i += n;
    }
    if (runner_interrupted())
        s->stopped_by = "interrupt";
    return 0;
}

/* The failure recorded for failing run k (its invariant and witness), as an
 * outcome to compare a rerun of it with. */
static void recorded_failure(const struct sim *s, int k, struct outcome *fo)
{
    const cJSON *f = cJSON_GetArrayItem(s->failing, k);
    const char *inv = cJSON_GetObjectItemCaseSensitive(f, "invariant")->valuestring;
    const char *wit = cJSON_GetObjectItemCaseSensitive(f, "witness")->valuestring;
    memset(fo, 0, sizeof(*fo));
    snprintf(fo->sig, sizeof(fo->sig), "%s", inv);
    snprintf(fo->witness, sizeof(fo->witness), "%s", wit);
    fo->primary = sc_invariant_from_name(inv);
    fo->ran = 1;
}

/* With --shrink: shrinks failed[0..nfailed) of seed in turn, within one
 * shared budget, rewriting result.json after each. */
static void shrink_all(struct sim *s, uint64_t seed, const uint64_t *failed, int nfailed)
{
    int64_t deadline = cw_mono_ms() + s->o.shrink_budget_s * 1000;
    for (int k = 0; k < nfailed && cw_mono_ms() < deadline && !runner_interrupted(); k++) {
        struct sim_plan p;
        sim_generate(&s->cat, seed, failed[k], &p);
        /* The failure to preserve is the one recorded for this run. */
        struct outcome fo;
        recorded_failure(s, k, &fo);
        shrink_one(s, &p, &fo, deadline);
        write_result(s, 0);
    }
}

/* With --fidelity N: replays the first failing run N times, the same plan
 * each time, and counts the replays that fail again and those that fail on
 * the same invariant (FoundationDB's unseed check: a failure that does not
 * come back is one nobody can debug).  Only failing replays keep their
 * files. */
static void measure_fidelity(struct sim *s, uint64_t seed, uint64_t run)
{
    struct sim_plan p;
    sim_generate(&s->cat, seed, run, &p);
    struct outcome fo;
    recorded_failure(s, 0, &fo);
    char base[64];
    sim_scenario_name(seed, run, base, sizeof(base));
    printf("fidelity %llu:%llu: %d replays of the same schedule\n", (unsigned long long)seed,
           (unsigned long long)run, s->o.fidelity);
    fflush(stdout);
    int done = 0, again = 0, same = 0;
    for (int k = 1; k <= s->o.fidelity && !runner_interrupted(); k++) {
        char name[96], dir[PATH_MAX + 100];
        cw_fmt(name, sizeof(name), "%s-r%d", base, k);
        const char *names[1] = { name };
        struct outcome oc;
        if (run_batch(s, &p, names, 1, s->fidelity_dir, &oc) < 0)
            break;
        done++;
        again += !oc.pass;
        same += same_failure(&fo, &oc);
        cw_fmt(dir, sizeof(dir), "%s/%s", s->fidelity_dir, name);
        if (oc.pass)
            fstree_remove(dir);
        outcome_free(&oc);
    }
    char id[64];
    cw_fmt(id, sizeof(id), "%llu:%llu", (unsigned long long)seed, (unsigned long long)run);
    cJSON_Delete(s->fidelity);
    s->fidelity = cJSON_CreateObject();
    cJSON_AddStringToObject(s->fidelity, "run", id);
    cJSON_AddStringToObject(s->fidelity, "invariant", fo.sig);
    cJSON_AddNumberToObject(s->fidelity, "replays", done);
    cJSON_AddNumberToObject(s->fidelity, "failed_again", again);
    cJSON_AddNumberToObject(s->fidelity, "same_failure", same);
    cJSON *ev = cwlog_begin("fidelity");
    cJSON_AddStringToObject(ev, "run", id);
    cJSON_AddNumberToObject(ev, "replays", done);
    cJSON_AddNumberToObject(ev, "failed_again", again);
    cJSON_AddNumberToObject(ev, "same_failure", same);
    cwlog_emit(ev);
    printf("fidelity %s: failed again in %d of %d replays (%d on %s)\n", id, again, done, same,
           fo.sig);
    fflush(stdout);
}

/* The closing event, the cleanup of what the runner left behind, and the
 * summary with one replay line per failing run. */
static void finish(struct sim *s, double rpm, int broken)
{
    char path[PATH_MAX];
    cJSON *ev = cwlog_begin("sim_end");
    cJSON_AddNumberToObject(ev, "runs", (double)s->runs);
    cJSON_AddNumberToObject(ev, "failures", (double)s->failures);
    cJSON_AddNumberToObject(ev, "runs_per_minute", rpm);
    cwlog_emit(ev);
    /* The runner's result.json of the last run is superseded by ours. */
    cw_fmt(path, sizeof(path), "%s/result.json", s->runs_dir);
    unlink(path);
    cw_fmt(path, sizeof(path), "%s/result.json", s->shrink_dir);
    unlink(path);
    cw_fmt(path, sizeof(path), "%s/result.json", s->fidelity_dir);
    unlink(path);
    if (s->own_cluster)
        rdb_finish(&s->db, s->script, 0);

    char verdict[16];
    snprintf(verdict, sizeof(verdict), "%s", sim_verdict(s, broken));
    for (char *c = verdict; *c != '\0'; c++)
        *c = (char)toupper((unsigned char)*c);
    printf("crashwindow sim: %s: %ld of %ld run%s done, %ld failed, %.1f runs/minute; %ld faults "
           "fired, %ld kills, %ld pauses, %ld redeliveries, %ld duplicates absorbed, %ld "
           "invariant checks\n", verdict, s->runs, runs_asked(s), runs_asked(s) == 1 ? "" : "s",
           s->failures, rpm, s->faults_total, s->kills, s->pauses, s->redeliveries, s->dups,
           s->inv_checks);
    if (s->stopped_by != NULL && strcmp(s->stopped_by, "time_budget") == 0)
        printf("  the time budget of %ld s stopped the other %ld runs (--runs without "
               "--time-budget runs them all)\n", s->o.budget_s, runs_asked(s) - s->runs);
    const cJSON *f;
    cJSON_ArrayForEach(f, s->failing) {
        printf("  failed %s on %s: replay with: %s\n",
               cJSON_GetObjectItemCaseSensitive(f, "run")->valuestring,
               cJSON_GetObjectItemCaseSensitive(f, "invariant")->valuestring,
               cJSON_GetObjectItemCaseSensitive(f, "replay")->valuestring);
    }
    printf("result: %s/result.json\n", s->out);
    fflush(stdout);
}

int simulator_main(int argc, char **argv)
{
    struct sim sim, *s = &sim;
    memset(s, 0, sizeof(*s));
    int pr = parse_args(&s->o, argc, argv);
    if (pr != 0) {
        if (pr == -1)
            usage(stderr);
        return pr < 0 ? 2 : 0;
    }
    char err[1024], path[PATH_MAX];
    cw_fmt(path, sizeof(path), "%s/fault-points/catalogue.json", runner_source_dir());
    if (sim_catalogue_load(&s->cat, path, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow sim: %s\n", err);
        return 2;
    }
    /* Database faults crash and freeze the server: only one of our own
     * (decided from the options, so that --dry-run shows the same plans). */
    s->cat.infra = s->o.pg == NULL || s->o.pg_dir != NULL;
    /* Kernel partitions need the runs in a network namespace of their own,
     * where only a cluster of our own (started there) can be reached. */
    s->cat.partitions = s->o.pg == NULL;
    if (!s->o.have_seed && !s->o.replay) {
        /* The only use of the clock: choosing a seed nobody gave.  It is
         * printed, and everything after depends on the seed alone. */
        s->o.seed = (uint64_t)(cw_now_us() / 1000) % 1000000000ULL;
        if (!s->o.dry_run)
            printf("crashwindow sim: no --seed given; using seed %llu\n",
                   (unsigned long long)s->o.seed);
    }
    if (s->o.target != NULL) {
        s->target = target_load(s->o.target, err, sizeof(err));
        if (s->target == NULL) {
            fprintf(stderr, "crashwindow sim: %s\n", err);
            return 2;
        }
        /* A target's database is its own: no failover pair, no standby.
         * Its server settings go to the cluster opened below. */
        if (runner_target_env(s->target) < 0) {
            target_free(s->target);
            return 2;
        }
    }
    if (s->o.dry_run) {
        int rc = dry_run(s);
        target_free(s->target);
        return rc;
    }

    runner_install_signals();
    if (s->cat.partitions && runner_net_unshare() < 0) {
        fprintf(stderr, "crashwindow sim: the runs may draw kernel partitions and need a "
                "network namespace of their own; run as root, or give --pg\n");
        return 2;
    }
    s->t0 = cw_mono_ms();
    if (open_output(s) < 0)
        return 2;
    if (open_cluster(s) < 0) {
        sim_free(s);
        return 1;
    }

    uint64_t seed = s->o.replay ? s->o.replay_seed : s->o.seed;
    long total = s->o.replay ? 1 : s->o.runs;
    s->first = 1;
    s->last = total;
    char share[96] = "";
    if (!s->o.replay && s->o.shard.count > 0) {
        shard_range(&s->o.shard, total, &s->first, &s->last);
        snprintf(share, sizeof(share), " (shard %d/%d: runs %ld to %ld)", s->o.shard.index,
                 s->o.shard.count, s->first, s->last);
    }
    char budget[48] = "no time budget";
    if (s->o.budget_s > 0)
        snprintf(budget, sizeof(budget), "time budget %ld s", s->o.budget_s);
    printf("crashwindow sim: seed %llu, %ld run%s%s, %s, output in %s\n",
           (unsigned long long)seed, total, total == 1 ? "" : "s", share, budget, s->out);
    fflush(stdout);
    cJSON *ev = cwlog_begin("sim_start");
    cJSON_AddItemToObject(ev, "seed", u64_json(seed));
    cJSON_AddNumberToObject(ev, "runs", (double)total);
    if (s->o.budget_s > 0)
        cJSON_AddNumberToObject(ev, "time_budget_s", (double)s->o.budget_s);
    if (s->o.bin != NULL)
        cJSON_AddStringToObject(ev, "bin", s->o.bin);
    cwlog_emit(ev);

    uint64_t failed_runs[64];
    int nfailed = 0;
    int broken = run_all(s, seed, total, failed_runs, &nfailed, 64) < 0;
    double rpm = runs_per_minute(s);
    if (s->o.fidelity > 0 && nfailed > 0 && !broken)
        measure_fidelity(s, seed, failed_runs[0]);
    if (s->o.shrink && nfailed > 0 && !broken)
        shrink_all(s, seed, failed_runs, nfailed);

    write_result(s, !broken && !runner_interrupted());
    finish(s, rpm, broken);
    const char *verdict = sim_verdict(s, broken);
    int rc = strcmp(verdict, "pass") == 0 ? 0
             : strcmp(verdict, "interrupted") == 0 ? RUNNER_EXIT_INTERRUPTED : 1;
    if (rundir_outputs(s->out, s->o.junit, 1, "crashwindow sim") < 0)
        rc = 1;
    sim_free(s);
    return rc;
}
