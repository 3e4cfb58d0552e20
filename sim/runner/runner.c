/* runner.c -- `crashwindow run`: the run and its command line; see
 * runner.h for the phases.
 *
 * A run loads and validates its scenario files (keeping its share with
 * --shard), finds the binaries, makes its output directory and its short
 * per-run directory for sockets and FIFOs, starts PostgreSQL (and with
 * --broker rabbitmq a RabbitMQ node), runs every scenario
 * (runner_scenario.c) the --repeat times over, rewriting DIR/result.json
 * after each, and ends with the summary, the HTML report, JUnit XML and
 * the bundles of what failed. */
#include "runner.h"
#include "runner_internal.h"
#include "target.h"
#include "cliutil.h"
#include "cwlog.h"
#include "evlog.h"
#include "fstree.h"
#include "pgx.h"
#include "report.h"
#include "rundir.h"
#include "shard.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the run ------------------------------------------------------------ */

static int find_exe(const char *bin, const char *name, char *out, size_t outlen)
{
    static const char *const subs[] = { "src/", "sim/", "", NULL };
    for (int i = 0; subs[i] != NULL; i++) {
        cw_fmt(out, outlen, "%s/%s%s", bin, subs[i], name);
        if (access(out, X_OK) == 0)
            return 0;
    }
    cw_fmt(out, outlen, "%s/src/%s", bin, name);
    return -1;
}

/* The source's commit: CW_SOURCE_COMMIT when a --jobs parent pinned it for
 * its shards (shards of one command are of one commit even when HEAD moves
 * while they run), else HEAD now, else "unknown". */
static void git_commit(char *out, size_t outlen)
{
    const char *pinned = getenv(RUNNER_COMMIT_ENV);
    if (pinned != NULL && strlen(pinned) == 40 && strspn(pinned, "0123456789abcdef") == 40) {
        snprintf(out, outlen, "%s", pinned);
        return;
    }
    char buf[256];
    char *argv[] = { (char *)"/usr/bin/git", (char *)"-C", (char *)runner_source_dir(),
                     (char *)"rev-parse", (char *)"HEAD", NULL };
    snprintf(out, outlen, "unknown");
    if (access(argv[0], X_OK) != 0)
        return;
    if (proc_run_capture(argv, NULL, 5000, buf, sizeof(buf)) == 0 && strlen(buf) >= 40) {
        buf[40] = '\0';
        snprintf(out, outlen, "%s", buf);
    }
}

void runner_pin_commit(void)
{
    char commit[64];
    git_commit(commit, sizeof(commit));
    if (strcmp(commit, "unknown") != 0)
        setenv(RUNNER_COMMIT_ENV, commit, 1);
}

static void write_result(struct runner *r, int64_t t0, int pass)
{
    cJSON *res = r->result;
    cJSON_ReplaceItemInObjectCaseSensitive(res, "duration_ms",
                                           cJSON_CreateNumber((double)(cw_mono_ms() - t0)));
    const char *verdict = runner_interrupted() ? "interrupted" : pass ? "pass" : "fail";
    cJSON_ReplaceItemInObjectCaseSensitive(res, "verdict", cJSON_CreateString(verdict));
    cJSON *tot = cJSON_CreateObject();
    cJSON_AddNumberToObject(tot, "scenarios", (double)r->t_scen);
    cJSON_AddNumberToObject(tot, "passed", (double)r->t_passed);
    cJSON_AddNumberToObject(tot, "invariants_checked", (double)r->t_inv);
    cJSON_AddNumberToObject(tot, "faults_fired", (double)r->t_faults);
    cJSON_AddNumberToObject(tot, "kills", (double)r->t_kills);
    cJSON_AddNumberToObject(tot, "pauses", (double)r->t_pauses);
    cJSON_AddNumberToObject(tot, "restarts", (double)r->t_restarts);
    cJSON_AddNumberToObject(tot, "events", (double)r->t_events);
    cJSON_ReplaceItemInObjectCaseSensitive(res, "totals", tot);
    char path[PATH_MAX + 32], err[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/result.json", r->out);
    char *text = cJSON_Print(res);
    /* Written whole then renamed: a reader never sees half a result.  A
     * result that cannot be written is not reported here: the run's end
     * (rundir_outputs) finds it missing and says so. */
    if (text != NULL)
        cw_write_text(path, text, 1, err, sizeof(err));
    cJSON_free(text);
}

/* The scenarios of a run. */
struct run_list {
    char **files;
    int nfiles;
    int owned_files;            /* runner_all_scenarios made the list: free it */
    struct scenario *scs[256];
    int nsc;
    cJSON *shard;               /* --shard: result.json's "shard" (NULL: not sharded) */
};

/* --shard-weights DIR: each scenario's mean duration in DIR's result.json
 * (any earlier run or merge); one DIR lacks weighs the mean of the others.
 * 0, or -1 with the reason printed. */
static int load_weights(const char *dir, const struct run_list *l, double *w)
{
    char err[1024];
    cJSON *res = rundir_load(dir, err, sizeof(err));
    if (res == NULL) {
        fprintf(stderr, "crashwindow run: --shard-weights: %s\n", err);
        return -1;
    }
    double sum = 0;
    int known = 0;
    for (int i = 0; i < l->nsc; i++) {
        double total = 0;
        int n = 0;
        const cJSON *sc;
        cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(res, "scenarios")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(sc, "name");
            const cJSON *ms = cJSON_GetObjectItemCaseSensitive(sc, "duration_ms");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, l->scs[i]->name) == 0 &&
                cJSON_IsNumber(ms) && ms->valuedouble >= 0 && ms->valuedouble < 1e9) {
                total += ms->valuedouble;
                n++;
            }
        }
        w[i] = n > 0 ? total / n : -1;
        if (n > 0) {
            sum += w[i];
            known++;
        }
    }
    for (int i = 0; i < l->nsc; i++)
        if (w[i] < 0)
            w[i] = known > 0 ? sum / known : 1;
    cJSON_Delete(res);
    return 0;
}

/* --shard K/N: keeps share K of the loaded scenarios and describes the
 * whole list in l->shard: every name in order, the share of each ("plan"),
 * and a digest of names and contents, so that a merge refuses shards of
 * other scenario files or of another split.  0, or -1 with the reason
 * printed. */
static int select_share(const struct run_opts *o, struct run_list *l)
{
    struct shard sh = { o->shard_index, o->shard_count };
    if (sh.count > l->nsc && !o->share_may_be_empty) {
        fprintf(stderr, "crashwindow run: --shard %d/%d: only %d scenario%s to share, so at "
                "most %d shards\n", sh.index, sh.count, l->nsc, l->nsc == 1 ? "" : "s", l->nsc);
        return -1;
    }
    double weights[256];
    int plan[256];
    if (o->shard_weights != NULL && load_weights(o->shard_weights, l, weights) < 0)
        return -1;
    shard_plan(o->shard_weights != NULL ? weights : NULL, l->nsc, sh.count, plan);
    l->shard = shard_json(&sh);
    cJSON *work = cJSON_AddArrayToObject(l->shard, "work");
    cJSON *pj = cJSON_AddArrayToObject(l->shard, "plan");
    cJSON_AddBoolToObject(l->shard, "weighted", o->shard_weights != NULL);
    uint64_t digest = SHARD_DIGEST_INIT;
    int kept = 0;
    for (int i = 0; i < l->nsc; i++) {
        char *text = cJSON_PrintUnformatted(l->scs[i]->root);
        digest = shard_digest(shard_digest(digest, l->scs[i]->name), text ? text : "");
        cJSON_free(text);
        cJSON_AddItemToArray(work, cJSON_CreateString(l->scs[i]->name));
        cJSON_AddItemToArray(pj, cJSON_CreateNumber(plan[i]));
        if (plan[i] == sh.index)
            l->scs[kept++] = l->scs[i];
        else
            scenario_free(l->scs[i]);
    }
    l->nsc = kept;
    char hex[24];
    shard_digest_hex(digest, hex, sizeof(hex));
    cJSON_AddStringToObject(l->shard, "digest", hex);
    cJSON_AddNumberToObject(l->shard, "repeat", o->repeat > 0 ? o->repeat : 1);
    return 0;
}

/* Loads the run's scenario files (--all: every one of the source tree),
 * each validated against the fault catalogue points.  0, or -1 with the
 * reason printed. */
static int load_scenarios(const struct run_opts *o, char **points, struct run_list *l)
{
    char err[1024];
    if (o->all) {
        l->nfiles = runner_all_scenarios(&l->files);
        l->owned_files = 1;
        if (l->nfiles <= 0) {
            fprintf(stderr, "crashwindow: no scenario files in %s/scenarios\n",
                    runner_source_dir());
            return -1;
        }
    } else {
        l->files = (char **)o->files;
        l->nfiles = o->nfiles;
    }
    if (l->nfiles > 256) {
        fprintf(stderr, "crashwindow: more than 256 scenario files\n");
        return -1;
    }
    for (int i = 0; i < l->nfiles; i++) {
        l->scs[l->nsc] = scenario_load(l->files[i], (const char *const *)points, err,
                                       sizeof(err));
        if (l->scs[l->nsc] == NULL) {
            fprintf(stderr, "crashwindow: %s\n", err);
            return -1;
        }
        l->nsc++;
        const struct scenario *sc = l->scs[l->nsc - 1];
        for (int k = 0; k < sc->nsteps && o->target == NULL; k++) {
            if (sc->steps[k].verb == V_NET && sc->steps[k].net_producer_broker) {
                fprintf(stderr, "crashwindow: %s: steps[%d].link: our API does not talk to the "
                        "broker: '%s' carries nothing a fault could hit (a target whose "
                        "producer publishes may: run it with --target)\n", sc->path, k,
                        sc->steps[k].link);
                return -1;
            }
        }
    }
    return o->shard_count > 0 ? select_share(o, l) : 0;
}

static void run_list_free(struct run_list *l)
{
    cJSON_Delete(l->shard);
    for (int i = 0; i < l->nsc; i++)
        scenario_free(l->scs[i]);
    if (l->owned_files) {
        for (int i = 0; i < l->nfiles; i++)
            free(l->files[i]);
        free(l->files);
    }
}

/* The binaries and tools: each from --bin (or this build tree), else from
 * the fallback directory.  A binary no scenario runs may be missing.  0, or
 * -1 with the missing one printed. */
static int find_binaries(struct runner *r, const struct run_list *l)
{
    const struct run_opts *o = r->o;
    if (o->bin != NULL)
        snprintf(r->bin, sizeof(r->bin), "%s", o->bin);
    else if (runner_build_dir(r->bin, sizeof(r->bin)) < 0)
        snprintf(r->bin, sizeof(r->bin), ".");
    int need[3] = { 0 };
    /* A target's processes are its own: none of our programs runs. */
    for (int i = 0; i < l->nsc && r->target == NULL; i++)
        for (int j = 0; j < l->scs[i]->nprocs; j++)
            need[l->scs[i]->procs[j].kind] = 1;
    /* harness: the fake broker and the RabbitMQ adapter are the harness's,
     * not the system's under test: from --bin when it holds them, else from
     * this build (a reach build holds only the programs under test). */
    struct { char *path; const char *name; int needed, harness; } exes[] = {
        { r->exe_api, "payments-api", need[SC_API], 0 },
        { r->exe_relay, "outbox-relay", need[SC_RELAY], 0 },
        { r->exe_consumer, "accounting-consumer", need[SC_CONSUMER], 0 },
        { r->exe_outboxctl, "outboxctl", 1, 0 },
        { r->exe_broker, "fakebroker", 1, 1 },
        { r->exe_bridge, "rabbit-bridge", runner_rabbit(r), 1 },
    };
    /* The fault proxy is the harness's own, like crashwindow: from this
     * build, whatever --bin names as the binaries under test. */
    char own[PATH_MAX];
    if (runner_build_dir(own, sizeof(own)) < 0 ||
        find_exe(own, "netproxy", r->exe_netproxy, PATH_MAX) < 0) {
        fprintf(stderr, "crashwindow: netproxy not found in %s (build it)\n", own);
        return -1;
    }
    for (size_t i = 0; i < sizeof(exes) / sizeof(exes[0]); i++) {
        if (find_exe(r->bin, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (o->bin_fallback != NULL &&
            find_exe(o->bin_fallback, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (exes[i].harness && find_exe(own, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (exes[i].needed) {
            fprintf(stderr, "crashwindow: %s not found in %s (build it, or give --bin DIR)\n",
                    exes[i].name, r->bin);
            return -1;
        }
    }
    snprintf(r->pg_script, sizeof(r->pg_script), "%s/scripts/pg-cluster", runner_source_dir());
    snprintf(r->rabbit_script, sizeof(r->rabbit_script), "%s/scripts/rabbit-node",
             runner_source_dir());
    return 0;
}

/* The output directory (--out, or reports/run-<UTC timestamp>) and the
 * short per-run directory for sockets and FIFOs.  0, or -1 with the reason
 * printed. */
static int make_dirs(struct runner *r)
{
    if (r->o->out != NULL) {
        snprintf(r->out, sizeof(r->out), "%s", r->o->out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        snprintf(r->out, sizeof(r->out), "%s/reports/run-%s", runner_source_dir(), stamp);
    }
    if (cw_mkdir_p(r->out) < 0) {
        fprintf(stderr, "crashwindow: cannot create %s: %s\n", r->out, strerror(errno));
        return -1;
    }
    snprintf(r->tmp, sizeof(r->tmp), "/tmp/cwrunXXXXXX");
    if (mkdtemp(r->tmp) == NULL) {
        fprintf(stderr, "crashwindow: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    cw_fmt(r->fifo_prefix, sizeof(r->fifo_prefix), "%s/fiu", r->tmp);
    return 0;
}

/* PostgreSQL for the run: --pg's server or a throwaway cluster, and the
 * migrated template every scenario's database is cloned from.  0, or the
 * exit code with the reason printed: 2 when --pg's server cannot be used
 * (bad usage), 1 otherwise. */
static int start_postgres(struct runner *r, int64_t t0)
{
    const struct run_opts *o = r->o;
    char err[1024];
    if (o->pg != NULL) {
        if (rdb_use(&r->db, o->pg, err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow: %s\n", err);
            return 2;
        }
    } else if (rdb_start_cluster(&r->db, r->pg_script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        return 1;
    }
    char tag[32];
    snprintf(tag, sizeof(tag), "%d_%lld", (int)getpid(), (long long)(cw_now_us() % 1000000));
    if (rdb_make_template(&r->db, r->exe_outboxctl, tag, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        rdb_finish(&r->db, r->pg_script, o->keep);
        return 1;
    }
    printf("postgres %s ready in %.1f s\n", r->db.server_version,
           (double)(cw_mono_ms() - t0) / 1000.0);
    return 0;
}

/* result.json before the first scenario: what runs where; the verdict,
 * totals and scenarios are filled in as scenarios finish. */
static void result_new(struct runner *r, const char *iso, const char *commit, const char *host)
{
    r->result = cJSON_CreateObject();
    cJSON_AddStringToObject(r->result, "tool", "crashwindow");
    cJSON_AddStringToObject(r->result, "kind", "run");
    cJSON_AddNumberToObject(r->result, "version", 1);
    cJSON_AddStringToObject(r->result, "started_at", iso);
    cJSON_AddNumberToObject(r->result, "duration_ms", 0);
    cJSON_AddStringToObject(r->result, "commit", commit);
    cJSON *machine = cJSON_AddObjectToObject(r->result, "machine");
    cJSON_AddStringToObject(machine, "hostname", host);
    cJSON_AddNumberToObject(machine, "cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddStringToObject(machine, "postgres", r->db.server_version);
    cJSON_AddStringToObject(r->result, "bin", r->bin);
    cJSON_AddStringToObject(r->result, "broker", runner_rabbit(r) ? "rabbitmq" : "fake");
    if (r->target != NULL) {
        /* What was tested: someone else's pipeline, named everywhere the
         * verdict is shown (console, report, JUnit). */
        cJSON *t = cJSON_AddObjectToObject(r->result, "target");
        cJSON_AddStringToObject(t, "name", r->target->name);
        cJSON_AddStringToObject(t, "title", r->target->title);
        cJSON_AddStringToObject(t, "profile", r->target->path);
        cJSON *fs = cJSON_AddArrayToObject(t, "findings");
        for (int i = 0; i < r->target->nfindings; i++) {
            const struct tg_finding *f = &r->target->findings[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "scenario", f->scenario);
            cJSON_AddStringToObject(o, "invariant", f->invariant);
            cJSON_AddStringToObject(o, "witness", f->witness);
            cJSON_AddStringToObject(o, "why", f->why);
            cJSON_AddStringToObject(o, "source", f->source);
            cJSON_AddItemToArray(fs, o);
        }
    }
    if (r->o->mutant != NULL)
        cJSON_AddStringToObject(r->result, "mutant", r->o->mutant);
    else
        cJSON_AddNullToObject(r->result, "mutant");
    cJSON_AddStringToObject(r->result, "verdict", "fail");
    cJSON_AddObjectToObject(r->result, "totals");
    r->scenarios = cJSON_AddArrayToObject(r->result, "scenarios");
}

/* A scenario the broker cannot take: said on the console and recorded in
 * result.json's "skipped" list with its reason (never counted as run). */
static void skip_scenario(struct runner *r, const struct scenario *sc, const char *why)
{
    printf("  skip %s: %s\n", sc->name, why);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(r->result, "skipped");
    if (list == NULL)
        list = cJSON_AddArrayToObject(r->result, "skipped");
    cJSON *one = cJSON_CreateObject();
    cJSON_AddStringToObject(one, "name", sc->name);
    cJSON_AddStringToObject(one, "reason", why);
    cJSON_AddItemToArray(list, one);
}

/* Why this run's broker cannot take sc, or NULL. */
static const char *broker_skip(const struct runner *r, const struct scenario *sc, char *why,
                               size_t whylen)
{
    if (r->target != NULL) {
        /* runner_target_refuses turned away whatever RabbitMQ cannot do;
         * what is left is whether the target's design opens the scenario's
         * window at all, and whether this machine has its toolchain. */
        const char *na = target_not_applicable(r->target, sc->name);
        if (na != NULL) {
            snprintf(why, whylen, "not applicable to %.60s: %.200s", r->target->name, na);
            return why;
        }
        snprintf(why, whylen, "%.250s", r->target_skip);
        return r->target_skip[0] != '\0' ? why : NULL;
    }
    return runner_rabbit(r) ? runner_rabbit_skip(sc, why, whylen)
                            : runner_fake_skip(sc, why, whylen);
}

/* Every scenario, the list repeated --repeat times, result.json rewritten
 * after each so an interrupted run still leaves one.  Returns 1 when every
 * scenario ran and passed. */
static int run_scenarios(struct runner *r, const struct run_list *l, int64_t t0)
{
    const struct run_opts *o = r->o;
    int runnable = 0;
    char why[320];
    for (int i = 0; i < l->nsc; i++) {
        if (broker_skip(r, l->scs[i], why, sizeof(why)) != NULL) {
            skip_scenario(r, l->scs[i], why);
            continue;
        }
        runnable++;
    }
    int total = runnable * (o->repeat > 0 ? o->repeat : 1);
    int index = 0;
    for (int rep = 1; rep <= (o->repeat > 0 ? o->repeat : 1) && !runner_interrupted(); rep++) {
        for (int i = 0; i < l->nsc && !runner_interrupted(); i++) {
            if (broker_skip(r, l->scs[i], why, sizeof(why)) != NULL)
                continue;
            cJSON *one = runner_run_scenario(r, l->scs[i], rep, ++index, total);
            if (one != NULL)
                cJSON_AddItemToArray(r->scenarios, one);
            write_result(r, t0, r->t_passed == r->t_scen);
        }
    }
    return r->t_scen == total && r->t_passed == r->t_scen && !runner_interrupted();
}

/* The end of a run: result.json with its verdict, PostgreSQL stopped (or
 * kept), the summary lines and the HTML report.  Returns the exit code. */
static int finish_run(struct runner *r, int64_t t0, int pass)
{
    const struct run_opts *o = r->o;
    write_result(r, t0, pass);
    if (o->keep) {
        printf("--keep: sockets and fault FIFOs stay in %s (mode 0700: yours alone)\n", r->tmp);
        if (r->db.cluster_dir[0] != '\0')
            printf("--keep: the cluster stays up; stop it with: %s stop %s\n", r->pg_script,
                   r->db.cluster_dir);
    }
    rdb_finish(&r->db, r->pg_script, o->keep);
    runner_rabbit_stop(r);
    if (runner_interrupted()) {
        /* Cleaned up as after any run, but an interrupt is not a verdict:
         * no PASS or FAIL, no report, JUnit or failure bundle to read as
         * one; the shell's convention for SIGINT, 128 + 2. */
        printf("crashwindow run: interrupted after %.1f s: %ld scenarios finished before it "
               "(%ld passed); nothing judged after it, no report or bundle written\n",
               (double)(cw_mono_ms() - t0) / 1000.0, r->t_scen, r->t_passed);
        printf("result: %s/result.json\n", r->out);
        fflush(stdout);
        return RUNNER_EXIT_INTERRUPTED;
    }
    printf("crashwindow run: %s: %ld/%ld scenarios passed in %.1f s; %ld invariants checked, "
           "%ld faults fired, %ld kills, %ld pauses, %ld restarts, %ld events\n",
           pass ? "PASS" : "FAIL", r->t_passed, r->t_scen, (double)(cw_mono_ms() - t0) / 1000.0,
           r->t_inv, r->t_faults, r->t_kills, r->t_pauses, r->t_restarts, r->t_events);
    printf("result: %s/result.json\n", r->out);
    int rc = pass ? 0 : 1;
    if (o->report != NULL) {
        char rerr[512];
        if (report_write(r->out, o->report, rerr, sizeof(rerr)) < 0) {
            fprintf(stderr, "crashwindow run: could not write the report: %s\n", rerr);
            rc = 1;
        } else {
            printf("report: %s\n", o->report);
        }
    }
    if ((o->junit != NULL || o->bundles) &&
        rundir_outputs(r->out, o->junit, o->bundles, "crashwindow run") < 0)
        rc = 1;
    fflush(stdout);
    return rc;
}

int runner_target_env(const struct target *t)
{
    char settings[2048] = "";
    for (int i = 0; i < t->nsettings; i++)
        snprintf(settings + strlen(settings), sizeof(settings) - strlen(settings), "%s%s=%s",
                 i ? " " : "", t->setting_name[i], t->setting_value[i]);
    if (t->nsettings > 0 && setenv("CW_PG_SETTINGS", settings, 1) != 0) {
        fprintf(stderr, "crashwindow: cannot set CW_PG_SETTINGS\n");
        return -1;
    }
    return 0;
}

/* The profile of --target, and every scenario of the run checked against
 * it (one a target cannot run is a bad file for this run).  0, or -1 with
 * the reason printed. */
static int load_target(const struct run_opts *o, const struct run_list *l,
                       struct target **out)
{
    char err[1024];
    *out = target_load(o->target, err, sizeof(err));
    if (*out == NULL) {
        fprintf(stderr, "crashwindow: %s\n", err);
        return -1;
    }
    for (int i = 0; i < l->nsc; i++) {
        if (runner_target_refuses(*out, l->scs[i], err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow: %s\n", err);
            return -1;
        }
    }
    return 0;
}

int runner_preflight(const struct run_opts *o)
{
    struct run_list l;
    memset(&l, 0, sizeof(l));
    struct target *target = NULL;
    char **points = runner_load_points();
    int rc = 2;
    if (load_scenarios(o, points, &l) == 0 &&
        (o->target == NULL ||
         (load_target(o, &l, &target) == 0 && runner_target_env(target) == 0)))
        rc = runner_net_isolate(o, l.scs, l.nsc) < 0 ? 1 : 0;
    target_free(target);
    run_list_free(&l);
    runner_free_points(points);
    return rc;
}

int runner_run(const struct run_opts *o, cJSON **result_out)
{
    int rc = 2;
    struct run_list l;
    memset(&l, 0, sizeof(l));
    struct target *target = NULL;
    char **points = runner_load_points();
    struct runner *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 2;
    r->o = o;
    if (result_out != NULL)
        *result_out = NULL;
    /* The witness is not the system under test: its own database calls
     * (creating databases, checking invariants) get a minute, not the
     * programs' few seconds, so that a loaded machine does not fail a run. */
    pgx_set_deadline_ms(60000);

    if (load_scenarios(o, points, &l) < 0)
        goto out;
    if (o->target != NULL && load_target(o, &l, &target) < 0)
        goto out;
    if (o->dry_run) {
        if (target != NULL) {
            target_describe(target, stdout);
            /* Its ${bin:PROGRAM} as a run would fill them (a missing one is
             * named, and its requirement then fails below). */
            r->target = target;
            (void)find_binaries(r, &l);
            const char *const paths[] = { r->exe_api, r->exe_relay, r->exe_consumer,
                                          r->exe_outboxctl };
            const char *const *prog = target_build_programs();
            for (int i = 0; prog[i] != NULL; i++)
                printf("  ${%s%s} = %s\n", TG_BIN_PREFIX, prog[i], paths[i]);
            char why[512];
            if (runner_target_requirement(r, why, sizeof(why)))
                printf("  (this machine lacks it: every scenario would be skipped: %s)\n", why);
            printf("\n");
        }
        for (int i = 0; i < l.nsc; i++) {
            scenario_print(l.scs[i], stdout);
            printf("\n");
        }
        rc = 0;
        goto out;
    }
    r->target = target;
    if (target != NULL && runner_target_env(target) < 0)
        goto out;
    if (find_binaries(r, &l) < 0 || make_dirs(r) < 0)
        goto out;
    if (target != NULL)
        runner_target_requirement(r, r->target_skip, sizeof(r->target_skip));

    int64_t t0 = cw_mono_ms();
    char iso[40], commit[64], host[128] = "unknown";
    us_to_iso(cw_now_us(), iso, sizeof(iso));
    git_commit(commit, sizeof(commit));
    gethostname(host, sizeof(host) - 1);
    char share[64] = "";
    if (o->shard_count > 0)
        snprintf(share, sizeof(share), " (shard %d/%d)", o->shard_index, o->shard_count);
    printf("crashwindow run: %d scenario%s%s%s%s%s, output in %s\n", l.nsc,
           l.nsc == 1 ? "" : "s", o->repeat > 1 ? " (repeated)" : "", share,
           target ? " against target " : "", target ? target->name : "", r->out);
    fflush(stdout);
    if (runner_net_isolate(o, l.scs, l.nsc) < 0) {
        rc = 1;
        goto out_tmp;
    }
    rc = start_postgres(r, t0);
    if (rc != 0)
        goto out_tmp;
    if (runner_rabbit(r) && runner_rabbit_start(r) < 0) {
        rdb_finish(&r->db, r->pg_script, o->keep);
        rc = 1;
        goto out_tmp;
    }
    result_new(r, iso, commit, host);
    if (l.shard != NULL) {
        cJSON_AddItemToObject(r->result, "shard", l.shard);
        l.shard = NULL;
    }
    int pass = run_scenarios(r, &l, t0);
    rc = finish_run(r, t0, pass);
    if (result_out != NULL) {
        *result_out = r->result;
        r->result = NULL;
    }
out_tmp:
    if (!o->keep)
        fstree_remove(r->tmp);
out:
    target_free(target);
    run_list_free(&l);
    runner_free_points(points);
    cJSON_Delete(r->result);
    free(r);
    return rc;
}

/* A cluster directory of scripts/pg-cluster with a running server. */
static int pg_dir_valid(const char *dir)
{
    char path[PATH_MAX + 32];
    cw_fmt(path, sizeof(path), "%s/data/postmaster.pid", dir);
    return access(path, R_OK) == 0;
}

static void run_usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow run [SCENARIO.json...|--all] [--pg CONNINFO [--pg-dir DIR]]\n"
        "                       [--out DIR] [--keep] [--dry-run] [--repeat N] [--bin DIR]\n"
        "                       [--report FILE.html] [--shard K/N|env] [--junit FILE]\n"
        "                       [--shard-weights DIR] [--broker fake|rabbitmq]\n"
        "                       [--target PROFILE.json] [--jobs N [--shares M]]\n"
        "  --all        every scenario in scenarios/\n"
        "  --pg         use this PostgreSQL server instead of a throwaway cluster\n"
        "  --pg-dir     with --pg: the directory scripts/pg-cluster started it in; \"db\"\n"
        "               steps may then crash, restart and freeze it (without it they fail)\n"
        "  --out        run directory (default reports/run-<timestamp>)\n"
        "  --keep       leave the cluster, broker and processes running; print how to poke them\n"
        "  --dry-run    print what each scenario will do, do nothing\n"
        "  --repeat N   run the whole list N times\n"
        "  --bin DIR    where the binaries are (default: this build tree); the fake broker\n"
        "               and rabbit-bridge, the harness's, come from this build when DIR\n"
        "               lacks them\n"
        "  --brief      one line per scenario, no step lines\n"
        "  --report     write the self-contained HTML report of the run to FILE.html\n"
        "  --shard K/N  run share K of N of the scenarios (K from 1); 'env' takes K/N from\n"
        "               CW_SHARD, JOB_COMPLETION_INDEX + CW_SHARD_COUNT, or CI_NODE_INDEX +\n"
        "               CI_NODE_TOTAL; crashwindow merge joins the shards' directories\n"
        "  --jobs N     the N shards side by side on this machine, each with its own\n"
        "               cluster, merged into --out (refused with --pg, --keep, --shard)\n"
        "  --shares M   with --jobs: split into M shards, N at a time (default N)\n"
        "  --shard-weights DIR  split by the scenario durations of an earlier run directory\n"
        "               (longest first, each to the least loaded shard) instead of round\n"
        "               robin; every shard must be given the same DIR\n"
        "  --junit FILE write JUnit XML (one test case per scenario) to FILE\n"
        "  --broker B   fake (default: the embedded fake broker) or rabbitmq (a throwaway\n"
        "               node of scripts/rabbit-node; scenarios that need a fake-broker\n"
        "               switch are skipped, each with its reason)\n"
        "  --target P   run the scenarios against the system target profile P describes\n"
        "               (targets/NAME/profile.json; sim/target/target.h) instead of this\n"
        "               repository's pipeline; with --dry-run it shows the profile and\n"
        "               checks every scenario against it\n"
        "failing scenarios leave a bundle each in DIR/bundles/ (summary, replay, logs)\n"
        "exit status: 0 every invariant held, 1 one did not, 2 bad usage or scenario file,\n"
        "130 interrupted (SIGINT or SIGTERM: torn down, nothing judged, no bundle)\n");
}

/* --broker: fake or rabbitmq. */
static int take_broker(const char *value, void *ctx, char *err, size_t errlen)
{
    if (strcmp(value, "fake") != 0 && strcmp(value, "rabbitmq") != 0) {
        snprintf(err, errlen, "--broker takes fake or rabbitmq, not '%s'", value);
        return -1;
    }
    ((struct run_opts *)ctx)->broker = value;
    return 0;
}

/* --shard K/N or env (shard_arg's forms and messages). */
static int take_shard(const char *value, void *ctx, char *err, size_t errlen)
{
    struct run_opts *o = ctx;
    struct shard sh;
    /* shard_arg's message was always cut at 512 bytes */
    if (shard_arg(value, &sh, err, errlen < 512 ? errlen : 512) < 0)
        return -1;
    o->shard_index = sh.index;
    o->shard_count = sh.count;
    return 0;
}

/* --repeat N, N from 1 to 10000. */
static int take_repeat(const char *value, void *ctx, char *err, size_t errlen)
{
    char *end;
    long n = strtol(value, &end, 10);
    if (*end != '\0' || n < 1 || n > 10000) {
        snprintf(err, errlen, "--repeat takes a number from 1 to 10000");
        return -1;
    }
    ((struct run_opts *)ctx)->repeat = (int)n;
    return 0;
}

/* The scenario files of the command line, in the room runner_main made. */
struct file_list {
    const char **files;
    int *nfiles;
};

static int take_file(const char *value, void *ctx, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct file_list *l = ctx;
    l->files[(*l->nfiles)++] = value;
    return 0;
}

/* run's options, one table for parsing (runner_main) and for telling an
 * option's value from a scenario file (runner_share_count). */
#define RUN_NOPTS 15
static void run_option_table(struct run_opts *o, struct cw_opt out[RUN_NOPTS])
{
    const struct cw_opt opts[RUN_NOPTS] = {
        CW_OPT_FLAG("--all", &o->all),
        CW_OPT_FLAG("--keep", &o->keep),
        CW_OPT_FLAG("--dry-run", &o->dry_run),
        CW_OPT_FLAG("--brief", &o->brief),
        CW_OPT_STRING("--pg", &o->pg),
        CW_OPT_STRING("--pg-dir", &o->pg_dir),
        CW_OPT_STRING("--out", &o->out),
        CW_OPT_STRING("--bin", &o->bin),
        CW_OPT_STRING("--report", &o->report),
        CW_OPT_STRING("--junit", &o->junit),
        CW_OPT_CALL("--broker", take_broker, o),
        CW_OPT_STRING("--target", &o->target),
        CW_OPT_STRING("--shard-weights", &o->shard_weights),
        CW_OPT_CALL("--shard", take_shard, o),
        CW_OPT_CALL("--repeat", take_repeat, o),
    };
    memcpy(out, opts, sizeof(opts));
}

int runner_share_count(int argc, char **argv)
{
    /* Which options take a value: run's own, from its table, and --jobs'. */
    struct run_opts scratch;
    struct cw_opt opts[RUN_NOPTS];
    memset(&scratch, 0, sizeof(scratch));
    run_option_table(&scratch, opts);
    static const char *const jobs_valued[] = { "--jobs", "--shares", NULL };
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0) {
            char **all = NULL;
            int k = runner_all_scenarios(&all);
            for (int f = 0; f < k; f++)
                free(all[f]);
            free(all);
            return k > 0 ? k : 0;
        }
        int takes_value = 0;
        for (int v = 0; jobs_valued[v] != NULL; v++)
            takes_value |= strcmp(argv[i], jobs_valued[v]) == 0;
        for (int v = 0; v < RUN_NOPTS; v++)
            takes_value |= strcmp(argv[i], opts[v].name) == 0 && opts[v].kind != CW_KIND_FLAG;
        if (takes_value)
            i++;
        else if (argv[i][0] != '-')
            n++;
    }
    return n;
}

int runner_main(int argc, char **argv)
{
    struct run_opts o;
    memset(&o, 0, sizeof(o));
    o.repeat = 1;
    o.bundles = 1;
    const char **files = calloc((size_t)argc + 1, sizeof(char *));
    if (files == NULL)
        return 2;
    struct file_list list = { files, &o.nfiles };
    struct cw_opt opts[RUN_NOPTS];
    run_option_table(&o, opts);
    /* Anything starting with '-' is an option; the rest are scenario files. */
    const struct cw_opts_style style = {
        .prefix = "-",
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unknown option or missing value: '%s'",
        .missing = "unknown option or missing value: '%s'",
        .positional = take_file,
        .positional_ctx = &list,
    };
    char err[8192]; /* the offending argument in full, as it always was */
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, err, sizeof(err));
    if (rc != CW_OPTS_OK) {
        if (rc == CW_OPTS_HELP) {
            run_usage(stdout);
        } else {
            fprintf(stderr, "crashwindow run: %s\n", err);
            /* A mistake of form shows the usage; a refused value says why. */
            if (rc == CW_OPTS_USAGE)
                run_usage(stderr);
        }
        free(files);
        return rc == CW_OPTS_HELP ? 0 : 2;
    }
    if (o.shard_weights != NULL && o.shard_count == 0) {
        fprintf(stderr, "crashwindow run: --shard-weights weighs a --shard K/N split; give both\n");
        free(files);
        return 2;
    }
    if (o.all == (o.nfiles > 0)) {
        fprintf(stderr, "crashwindow run: give scenario files or --all (not both)\n");
        run_usage(stderr);
        free(files);
        return 2;
    }
    if (o.pg_dir != NULL && (o.pg == NULL || !pg_dir_valid(o.pg_dir))) {
        fprintf(stderr, "crashwindow run: --pg-dir %s: %s\n", o.pg_dir,
                o.pg == NULL ? "only with --pg (without it the runner starts its own cluster)"
                             : "not a directory scripts/pg-cluster started a server in "
                               "(no data/postmaster.pid)");
        free(files);
        return 2;
    }
    if (o.target != NULL) {
        if (o.broker != NULL && strcmp(o.broker, "rabbitmq") != 0) {
            fprintf(stderr, "crashwindow run: a target speaks AMQP: --target runs on RabbitMQ, "
                    "not --broker %s\n", o.broker);
            free(files);
            return 2;
        }
        o.broker = "rabbitmq";
    }
    o.files = files;
    runner_install_signals();
    rc = runner_run(&o, NULL);
    free(files);
    return rc;
}
