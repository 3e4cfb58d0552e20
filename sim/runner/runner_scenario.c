/* runner_scenario.c -- one scenario through the phases runner.h lists.
 *
 * One struct sctx holds everything about the scenario being run: its
 * processes, the faults armed in each incarnation, the HTTP log, counters
 * and the first error.  Steps are executed in order by the main thread; a
 * step that cannot do its job (a wait that timed out, a process that would
 * not start) records the error and skips the remaining steps, but the heal
 * phase and the checker still run, so a failed scenario still produces its
 * witnesses and its timeline.
 *
 * Layout of a scenario's directory:
 *   DIR/<scenario>/scenario.json        the file as run
 *   DIR/<scenario>/<proc>.events.jsonl  each process (restarts append)
 *   DIR/<scenario>/<proc>.log           its stdout and stderr
 *   DIR/<scenario>/broker.events.jsonl  the broker's log
 *   DIR/<scenario>/runner.events.jsonl  the runner's own decisions
 *   DIR/<scenario>/timeline.jsonl       all of the above, by ts_us
 *   DIR/<scenario>/metrics.jsonl        samples every ~250 ms
 *   DIR/<scenario>/history/             the checker's input (history.h) */
#include "runner_internal.h"
#include "brokerctl.h"
#include "cwlog.h"
#include "fstree.h"
#include "history.h"
#include "mutant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one scenario ------------------------------------------------------- */

/* A context for repetition rep of sc: its clock started, its directory and
 * broker socket named, its "[index/total]" line printed.  NULL when out of
 * memory. */
static struct sctx *sctx_new(struct runner *r, const struct scenario *sc, int rep, int index,
                             int total)
{
    struct sctx *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->run = r;
    s->sc = sc;
    s->rep = rep;
    s->step = -1;
    s->expects = cJSON_CreateArray();
    pthread_mutex_init(&s->lock, NULL);
    s->t0 = cw_mono_ms();
    s->started_us = cw_now_us();
    s->deadline = s->t0 + sc->timeout_ms;
    if (r->o->repeat > 1)
        snprintf(s->label, sizeof(s->label), "%s.r%d", sc->name, rep);
    else
        snprintf(s->label, sizeof(s->label), "%s", sc->name);
    cw_fmt(s->dir, sizeof(s->dir), "%s/%s", r->out, s->label);
    r->nsc++;
    cw_fmt(s->broker_sock, sizeof(s->broker_sock), "%s/b%d.sock", r->tmp, r->nsc);
    cw_fmt(s->broker_addr, sizeof(s->broker_addr), "%s", s->broker_sock);
    if (runner_rabbit(r))
        runner_rabbit_address(s);
    printf("[%d/%d] %s: %s\n", index, total, s->label, sc->title);
    fflush(stdout);
    return s;
}

/* The scenario's directory: scenario.json as run, the runner's events file
 * (open for the whole scenario), every process's file names; then the
 * scenario_start event. */
static void scenario_files(struct sctx *s)
{
    struct runner *r = s->run;
    const struct scenario *sc = s->sc;
    /* A fresh directory: the event logs are appended to, so the files of an
     * earlier run into the same --out would be read as this run's (a
     * passing scenario would fail on another run's publishes). */
    fstree_remove(s->dir);
    cw_mkdir_p(s->dir);
    char path[PATH_MAX + 64];
    char *text = cJSON_Print(sc->root);
    snprintf(path, sizeof(path), "%s/scenario.json", s->dir);
    char err[PATH_MAX + 128];
    if (text != NULL)
        cw_write_text(path, text, 1, err, sizeof(err));
    cJSON_free(text);
    cw_fmt(s->run_events_path, sizeof(s->run_events_path), "%s/runner.events.jsonl", s->dir);
    s->ev = fopen(s->run_events_path, "a");
    /* Read by a reach build alone (mutant.h): the hooks this scenario's
     * processes evaluate, for the mutants' full matrix. */
    snprintf(path, sizeof(path), "%s/%s", s->dir, RUNNER_REACH_FILE);
    setenv(CW_MUTANT_REACH_ENV, path, 1);

    snprintf(s->broker.name, sizeof(s->broker.name), "broker");
    cw_fmt(s->broker.events_path, sizeof(s->broker.events_path), "%s/broker.events.jsonl", s->dir);
    cw_fmt(s->broker.log_path, sizeof(s->broker.log_path), "%s/broker.log", s->dir);
    s->broker.fifo_prefix = r->fifo_prefix;
    for (int i = 0; i < sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        snprintf(p->name, sizeof(p->name), "%s", sc->procs[i].name);
        cw_fmt(p->events_path, sizeof(p->events_path), "%s/%s.events.jsonl", s->dir, p->name);
        cw_fmt(p->log_path, sizeof(p->log_path), "%s/%s.log", s->dir, p->name);
        p->fifo_prefix = r->fifo_prefix;
    }

    cJSON *ev = runner_rev_begin(s, "scenario_start");
    cJSON_AddStringToObject(ev, "scenario", sc->name);
    cJSON_AddStringToObject(ev, "crash_window", sc->crash_window);
    runner_rev_emit(s, ev);
}

/* The scenario's own database, cloned from the run's template, and the
 * runner's connection to it.  On failure the error is recorded. */
static void open_database(struct sctx *s)
{
    char err[1024];
    if (s->sc->standby) {
        /* Always a pair of its own, even with --pg: a failover must not
         * leave a dead primary behind for the scenarios that follow. */
        runner_open_standby_db(s);
        return;
    }
    const char *dir = s->run->db.cluster_dir[0] != '\0' ? s->run->db.cluster_dir
                      : s->run->o->pg_dir != NULL ? s->run->o->pg_dir : "";
    cw_fmt(s->pg.dir, sizeof(s->pg.dir), "%s", dir);
    if (s->run->target != NULL) {
        runner_target_open_db(s);
        return;
    }
    s->db.conninfo = rdb_create_db(&s->run->db, s->label, s->db.name, err, sizeof(err));
    if (s->db.conninfo != NULL)
        s->db.env = conninfo_env(s->db.conninfo);
    if (s->db.conninfo == NULL || s->db.env == NULL) {
        runner_fail(s, "database: %s", s->db.conninfo == NULL ? err : "out of memory");
    } else {
        if (runner_connect(s, err, sizeof(err)) < 0)
            runner_fail(s, "database: %s", err);
    }
}

/* With the broker up: the scenario's broker switches, the metrics sampler
 * and every autostart process, up to the first error. */
static void start_processes(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    char err[1024];
    if (sc->broker_control != NULL) {
        cJSON *sw = cJSON_Duplicate(sc->broker_control, 1);
        /* Start-up settings, not switches: the broker's command line has them. */
        cJSON_DeleteItemFromObjectCaseSensitive(sw, "visibility_timeout_ms");
        cJSON_DeleteItemFromObjectCaseSensitive(sw, "durable");
        if (brokerctl_control(s->broker_sock, sw, 3000, err, sizeof(err)) < 0)
            runner_fail(s, "broker switches: %s", err);
        else
            runner_rev_broker_control(s, sw);
        cJSON_Delete(sw);
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", s->dir);
    s->metrics = metrics_start(s->db.conninfo, path, 250);
    for (int i = 0; i < sc->nprocs && s->error[0] == '\0'; i++) {
        if (!sc->procs[i].autostart)
            continue;
        if (runner_start_proc(s, i, sc->procs[i].faults) == 0)
            runner_progress(s, "started %s (pid %d%s%s)", sc->procs[i].name,
                            (int)s->procs[i].pid,
                            sc->procs[i].faults ? ", CW_FAULTS=" : "",
                            sc->procs[i].faults ? sc->procs[i].faults : "");
    }
}

/* The steps in order, up to the first error, an interruption or the
 * scenario's deadline; a step's error ends the steps, not the scenario. */
static void drive_steps(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    for (int i = 0; i < sc->nsteps && s->error[0] == '\0'; i++) {
        char d[512];
        s->step = i;
        scenario_step_describe(sc, &sc->steps[i], d, sizeof(d));
        runner_progress(s, "step %d/%d %s", i + 1, sc->nsteps, d);
        cJSON *ev = runner_rev_begin(s, "step");
        cJSON_AddStringToObject(ev, "do", sc_verb_name(sc->steps[i].verb));
        cJSON_AddStringToObject(ev, "what", d);
        runner_rev_emit(s, ev);
        runner_run_step(s, &sc->steps[i]);
        runner_reap_all(s);
        if (runner_interrupted())
            runner_fail(s, "interrupted");
        if (cw_mono_ms() >= s->deadline)
            runner_fail(s, "the scenario ran past its %d ms deadline", sc->timeout_ms);
    }
    if (s->error[0] != '\0')
        runner_progress(s, "error: %s", s->error);
    s->step = -1;
}

/* Invariants whose violation no later event can undo: a second effect, a
 * second payment for a key, a version applied out of order, a publish
 * after its lease, two live leases, a retry before its backoff, an ACK
 * before its COMMIT, a payload changed between publishes, a payment's
 * change committed without its event.  (nothing_lost and the heal's own
 * checks wait for the heal; a hazard's invariants are judged against what
 * the heal accepts.) */
static int inv_permanent(enum sc_invariant inv)
{
    switch (inv) {
    case INV_PAYMENT_ONE_CREATION_EVENT:
    case INV_EFFECT_ONCE:
    case INV_ONE_PAYMENT_PER_KEY:
    case INV_VERSIONS_IN_ORDER:
    case INV_PUBLISH_WITHIN_LEASE:
    case INV_NO_TWO_LIVE_LEASES:
    case INV_RETRY_RESPECTS_BACKOFF:
    case INV_ACK_AFTER_COMMIT:
    case INV_REPUBLISH_SAME_PAYLOAD:
        return 1;
    default:
        return 0;
    }
}

int runner_verdict_decided(struct sctx *s, char *why, size_t whylen)
{
    const struct scenario *sc = s->sc;
    char err[512];
    if (s->decided[0] != '\0') {
        cw_fmt(why, whylen, "%s", s->decided);
        return 1;
    }
    if (!s->run->o->stop_when_decided || runner_interrupted() ||
        s->run->target != NULL || sc->nhazard > 0 || s->db.conn == NULL ||
        history_save(s->db.conn, s->dir, s->http.recs, s->http.n, err, sizeof(err)) < 0)
        return 0;
    struct history h;
    if (history_read(sc, s->dir, &h, err, sizeof(err)) < 0)
        return 0;
    struct chk_result res;
    memset(&res, 0, sizeof(res));
    cJSON *expects = cJSON_CreateArray();
    int decided = 0;
    if (history_check(sc, &h, s->db.conn, &res, expects) == 0) {
        for (int i = 0; i < sc->ninvariants && !decided; i++) {
            enum sc_invariant inv = sc->invariants[i];
            if (!inv_permanent(inv) || res.inv[inv].violations == 0)
                continue;
            const cJSON *w = cJSON_GetArrayItem(res.inv[inv].witnesses, 0);
            cw_fmt(s->decided, sizeof(s->decided), "%s: %s", sc_invariant_name(inv),
                   cJSON_IsString(w) ? w->valuestring : "violated");
            cw_fmt(why, whylen, "%s", s->decided);
            decided = 1;
        }
    }
    cJSON_Delete(expects);
    checker_free(&res);
    history_free(&h);
    return decided;
}

/* The invariant checker and the scenario's expectations, over the database
 * and every events file; nothing to check without a database connection
 * (oc->checked stays 0). */
static void check_scenario(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    char err[512];
    /* After a database fault the runner's connection may be gone (a crash,
     * a failover): one probe, and a new connection when it fails. */
    if (s->db.conninfo == NULL)
        return; /* the database was never created */
    if (runner_sql_value(s, "SELECT 1", 0, NULL, err, sizeof(err)) < 0 &&
        runner_sql_value(s, "SELECT 1", 0, NULL, err, sizeof(err)) < 0)
        runner_fail(s, "check: database: %s", err);
    if (s->db.conn == NULL)
        return;
    /* The sampler's last line is the state the checker sees, and its file
     * is complete before it is read as evidence. */
    if (s->metrics != NULL)
        metrics_stop(s->metrics);
    s->metrics = NULL;
    if (s->run->target != NULL) {
        runner_target_check(s, oc);
        return;
    }
    /* The history is the input: saved first, then read back and checked
     * exactly as `crashwindow check` checks a stored run. */
    if (history_save(s->db.conn, s->dir, s->http.recs, s->http.n, err, sizeof(err)) < 0) {
        runner_fail(s, "check: saving the history: %s", err);
        return;
    }
    struct history h;
    if (history_read(sc, s->dir, &h, err, sizeof(err)) < 0) {
        runner_fail(s, "check: %s", err);
        return;
    }
    cJSON *expects = cJSON_CreateArray();
    if (history_check(sc, &h, s->db.conn, &oc->res, expects) < 0 && s->error[0] == '\0')
        runner_fail(s, "%s", oc->res.error);
    const cJSON *x;
    cJSON_ArrayForEach(x, expects)
        runner_add_expect(s, cJSON_GetObjectItemCaseSensitive(x, "check")->valuestring,
                          strcmp(cJSON_GetObjectItemCaseSensitive(x, "verdict")->valuestring,
                                 "pass") == 0,
                          cJSON_GetObjectItemCaseSensitive(x, "detail")->valuestring);
    cJSON_Delete(expects);
    for (int i = 0; i < sc->nprocs; i++) {
        oc->proc_events[i] = h.proc_events[i];
        h.proc_events[i] = NULL;
    }
    oc->broker_events = h.broker_events;
    h.broker_events = NULL;
    history_free(&h);
    oc->checked = 1;
    oc->recovery = runner_recovery_json(s, (const cJSON *const *)oc->proc_events);
}

static void outcome_free(struct outcome *oc, int nprocs)
{
    cJSON_Delete(oc->recovery);
    checker_free(&oc->res);
    for (int i = 0; i < nprocs; i++)
        cJSON_Delete(oc->proc_events[i]);
    cJSON_Delete(oc->broker_events);
}

/* Closes the scenario's connection and drops its database (kept with
 * --keep), then frees the context. */
static void sctx_free(struct sctx *s)
{
    char err[1024];
    PQfinish(s->db.conn);
    if (s->sc->standby)
        runner_close_own_cluster(s);
    else if (!s->run->o->keep && s->db.name[0] != '\0')
        rdb_drop_db(&s->run->db, s->db.name, err, sizeof(err));
    for (int i = 0; i < s->http.n; i++)
        free(s->http.recs[i].body);
    free(s->http.recs);
    free(s->db.conninfo);
    free(s->db.env);
    runner_net_free(s);
    cJSON_Delete(s->expects);
    if (s->ev != NULL)
        fclose(s->ev);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Runs one scenario through the phases runner.h lists and returns its
 * entry in result.json (NULL when out of memory).  A phase that fails
 * records the error; the steps stop there, but whatever can still run
 * does, so a failed scenario is still healed, checked and reported. */
cJSON *runner_run_scenario(struct runner *r, const struct scenario *sc, int rep, int index,
                           int total)
{
    struct sctx *s = sctx_new(r, sc, rep, index, total);
    if (s == NULL)
        return NULL;
    scenario_files(s);
    open_database(s);
    if (s->error[0] == '\0' && runner_start_netproxy(s) == 0 && runner_start_broker(s) == 0) {
        start_processes(s);
        /* A target's queues exist once its processes run: only then can
         * the node's registry of them be flushed before a broker crash. */
        if (s->run->target != NULL && s->error[0] == '\0')
            runner_rabbit_settle(s);
        drive_steps(s);
        char why[400];
        if (s->error[0] != '\0' && runner_verdict_decided(s, why, sizeof(why))) {
            cJSON *ev = runner_rev_begin(s, "decided");
            cJSON_AddStringToObject(ev, "invariant", why);
            runner_rev_emit(s, ev);
            runner_progress(s, "decided without the heal: %s", why);
        } else if (!runner_interrupted()) {
            runner_heal(s);
        }
    }
    runner_payments_join(s); /* when the heal did not run */
    runner_db_lock_release(s, 0);
    runner_db_refusals_end(s, 0);

    /* The checker runs whatever happened above: a failed scenario still
     * gets its witnesses. */
    /* An interrupt is not a verdict: whatever state the steps were cut
     * off in, nothing is judged (the processes are still stopped and the
     * files written, as after any scenario). */
    struct outcome oc;
    memset(&oc, 0, sizeof(oc));
    oc.interrupted = runner_interrupted();
    if (!oc.interrupted) {
        check_scenario(s, &oc);
        runner_net_check(s);
    }
    runner_stop_scenario(s);
    runner_collect_faults(s, &oc);
    runner_decide_verdict(s, &oc);
    oc.nevents = runner_write_timeline(s);
    cJSON *o = runner_scenario_json(s, &oc);
    runner_print_summary(s, &oc, o);
    runner_add_totals(r, s, &oc);
    outcome_free(&oc, sc->nprocs);
    sctx_free(s);
    return o;
}
