/* runner_heal.c -- the heal phase: after the steps, the pipeline is made
 * whole again and the runner waits until it has drained.
 *
 * Healing turns every armed fault off, resets the broker's switches, clears
 * every link's network faults, records that instant in the database, wakes
 * the paused and restarts the dead (without faults); then the pipeline must
 * go quiet -- nothing pending in the outbox, nothing published but not
 * consumed, nothing in flight at the broker -- within the scenario's heal
 * timeout, and then each running relay is given the time a healthy one
 * needs to show a database session again, which is recorded for the
 * checker.  That is the liveness half of a scenario: a fault may delay
 * delivery, never stop it for good.  "Quiet" is also what a wait step with
 * until "quiet" polls, so both share runner_pipeline_quiet. */
#include "runner_internal.h"
#include "brokerctl.h"
#include "checker.h"
#include "cwlog.h"
#include "evlog.h"
#include "pgx.h"
#include "target.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* ---- quiet -------------------------------------------------------------- */

/* 1 when no outbox row is pending, else 0 with why.  A version that
 * per-aggregate relays hold back behind its aggregate's dead letter is not
 * pending: nothing will publish it before an operator acts. */
static int outbox_drained(struct sctx *s, char *why, size_t whylen)
{
    if (s->run->target != NULL)
        return runner_target_drained(s, why, whylen);
    char err[256];
    const char *held[1] = { scenario_relays_hold_order(s->sc) ? "t" : "f" };
    long long pending = runner_sql_value(s,
        "SELECT count(*) FROM outbox_messages o"
        " WHERE published_at IS NULL AND dead_lettered_at IS NULL"
        "   AND NOT ($1::boolean AND EXISTS (SELECT 1 FROM outbox_messages d"
        "                                    WHERE d.aggregate_id = o.aggregate_id"
        "                                      AND d.aggregate_version < o.aggregate_version"
        "                                      AND d.dead_lettered_at IS NOT NULL))",
        1, held, err, sizeof(err));
    if (pending == 0)
        return 1;
    if (pending < 0)
        snprintf(why, whylen, "database: %s", err);
    else
        snprintf(why, whylen, "%lld outbox rows still pending", pending);
    return 0;
}

/* Is every committed event published or dead-lettered, and every published
 * one applied (or parked) by every consumer group that runs, with nothing
 * left in flight at the broker?  1 yes, 0 no (why says what is missing). */
int runner_pipeline_quiet(struct sctx *s, char *why, size_t whylen)
{
    char err[256];
    if (!outbox_drained(s, why, whylen))
        return 0;
    const char *seen[SC_MAX_PROCS];
    int nseen = 0;
    int have_consumers = 0;
    for (int i = 0; i < s->sc->nprocs; i++) {
        const struct sc_proc *sp = &s->sc->procs[i];
        if (sp->kind != SC_CONSUMER)
            continue;
        have_consumers = 1;
        int dup = 0;
        for (int k = 0; k < nseen; k++)
            dup |= strcmp(seen[k], sp->consumer_name) == 0;
        if (dup)
            continue;
        seen[nseen++] = sp->consumer_name;
        const char *p[1] = { sp->consumer_name };
        /* The checker's own definition of "not consumed yet": heal waits
         * for exactly what nothing_lost will judge. */
        long long missing = s->run->target != NULL
            ? runner_target_unconsumed(s, sp->consumer_name, err, sizeof(err))
            : runner_sql_value(s, checker_unconsumed_count_sql(), 1, p, err, sizeof(err));
        if (missing != 0) {
            if (missing < 0)
                snprintf(why, whylen, "database: %s", err);
            else
                snprintf(why, whylen, "%lld published events not yet consumed by %s", missing,
                         sp->consumer_name);
            return 0;
        }
    }
    if (!have_consumers)
        return 1;
    cJSON *stats = brokerctl_stats(s->broker_sock, 2000, err, sizeof(err));
    if (stats == NULL) {
        snprintf(why, whylen, "broker stats: %s", err);
        return 0;
    }
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(stats, "groups");
    const cJSON *g;
    int quiet = 1;
    cJSON_ArrayForEach(g, groups) {
        double unacked = 0, ready = 0, delayed = 0;
        ev_num(g, "unacked", &unacked);
        ev_num(g, "ready", &ready);
        ev_num(g, "delayed", &delayed);
        if (unacked + ready + delayed > 0) {
            snprintf(why, whylen, "broker group %s: %.0f unacked, %.0f ready, %.0f delayed",
                     g->string, unacked, ready, delayed);
            quiet = 0;
            break;
        }
    }
    cJSON_Delete(stats);
    return quiet;
}
/* A hazard scenario's heal may end with published events some consumer
 * group never applied, but only those its hazard explains
 * (checker_hazard_explains_unconsumed: held only in the memory of the
 * broker that was killed): 1 when every such event left is one, else 0
 * with why naming the first that is not.  An event the database still
 * holds that the hazard cannot explain is a pipeline that stopped, not a
 * loss of the setting. */
static int hazard_explains_leftovers(struct sctx *s, char *why, size_t whylen)
{
    if (s->db.conn == NULL || PQstatus(s->db.conn) != CONNECTION_OK) {
        char err[256];
        if (runner_connect(s, err, sizeof(err)) < 0) {
            snprintf(why, whylen, "database: %s", err);
            return 0;
        }
    }
    cJSON *broker = evlog_read(s->broker.events_path, NULL);
    cJSON *mine = evlog_read(s->run_events_path, NULL);
    int ok = broker != NULL && mine != NULL;
    if (!ok)
        snprintf(why, whylen, "could not read the broker's or the runner's log");
    long explained = 0;
    for (int i = 0; i < s->sc->nprocs && ok; i++) {
        const struct sc_proc *sp = &s->sc->procs[i];
        if (sp->kind != SC_CONSUMER)
            continue;
        const char *p[1] = { sp->consumer_name };
        char err[256];
        PGresult *r = pgx_exec(s->db.conn, checker_unconsumed_sql(), 1, p, NULL, err, sizeof(err));
        if (r == NULL) {
            snprintf(why, whylen, "database: %s", err);
            ok = 0;
            break;
        }
        for (int k = 0; k < PQntuples(r) && ok; k++) {
            const char *id = PQgetvalue(r, k, 0);
            if (checker_hazard_explains_unconsumed(s->sc, broker, mine, id, sp->consumer_name)) {
                explained++;
                continue;
            }
            snprintf(why, whylen, "event %s (%s v%s) is published but %s never applied it, and "
                     "the hazard (%s) does not explain it", id, PQgetvalue(r, k, 1),
                     PQgetvalue(r, k, 2), sp->consumer_name,
                     sc_hazard_kind_name(s->sc->hazard_explains));
            ok = 0;
        }
        PQclear(r);
    }
    if (ok)
        snprintf(why, whylen, "%ld published events never consumed, each one the hazard "
                 "explains", explained);
    cJSON_Delete(broker);
    cJSON_Delete(mine);
    return ok;
}

/* The running relays' names as a text[] literal ('{"relay-1","relay-2"}'),
 * or 0 when no relay runs.  Scenario names are [A-Za-z0-9_-], so nothing
 * inside needs escaping. */
static int running_relays(struct sctx *s, char *out, size_t outlen)
{
    int n = 0;
    size_t len = (size_t)snprintf(out, outlen, "{");
    for (int i = 0; i < s->sc->nprocs && len < outlen; i++) {
        if (s->sc->procs[i].kind != SC_RELAY || !proc_poll(&s->procs[i]))
            continue;
        len += (size_t)snprintf(out + len, outlen - len, "%s\"%s\"", n > 0 ? "," : "",
                                s->procs[i].name);
        n++;
    }
    if (len < outlen)
        snprintf(out + len, outlen - len, "}");
    return n;
}

/* Of the running relays, the sessions the database lists: those without
 * one, in order.  The same statement, as an INSERT, is the record. */
#define RELAY_SESSIONS_SQL(head)                                                              \
    head " FROM unnest($1::text[]) AS u(name)"                                                \
         " CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM pg_stat_activity a"               \
         "                                     WHERE a.datname = current_database()"          \
         "                                       AND a.application_name = u.name)) AS x(on_db)"

/* The relays' reconnect pauses grow to 5 s (relay_loop.c). */
#define RELAY_RECONNECT_CAP_MS 5000

/* When a healthy relay has a session again at the latest, counted from the
 * moment every fault was off: a connection attempt begun under the fault
 * gives up within the relay's database deadline, the pause after it ends
 * within the reconnect cap, and the next attempt meets no fault; plus a
 * second of slack. */
static int64_t relay_session_deadline(struct sctx *s, int64_t faults_off_ms)
{
    int longest = 0;
    for (int i = 0; i < s->sc->nprocs; i++) {
        const struct sc_proc *sp = &s->sc->procs[i];
        int dl = sp->db_deadline_ms > 0 ? sp->db_deadline_ms : PGX_DEFAULT_DEADLINE_MS;
        if (sp->kind == SC_RELAY && dl > longest)
            longest = dl;
    }
    return faults_off_ms + longest + RELAY_RECONNECT_CAP_MS + 1000;
}

/* 1 when every running relay has a session in the scenario's database, 0
 * when one has none (why names it), -1 when the database could not say. */
static int relays_connected(struct sctx *s, char *why, size_t whylen)
{
    char names[SC_MAX_PROCS * (SC_NAME_MAX + 3) + 3];
    if (running_relays(s, names, sizeof(names)) == 0)
        return 1;
    const char *p[1] = { names };
    char err[256];
    long long missing = runner_sql_value(s,
        RELAY_SESSIONS_SQL("SELECT count(*) FILTER (WHERE NOT x.on_db)"), 1, p, err,
        sizeof(err));
    if (missing < 0) {
        snprintf(why, whylen, "database: %s", err);
        return -1;
    }
    if (missing > 0) {
        snprintf(why, whylen, "%lld running relay%s without a database session", missing,
                 missing == 1 ? "" : "s");
        return 0;
    }
    for (int i = 0; i < s->sc->nprocs; i++) {
        if (s->sc->procs[i].kind != SC_RELAY || !proc_poll(&s->procs[i]))
            continue;
        if (runner_net_link_open(s, i) == 0) {
            snprintf(why, whylen, "%s holds no connection to the broker", s->procs[i].name);
            return 0;
        }
    }
    return 1;
}

/* A relay that lost its connection must open a new one; one that keeps the
 * dead handle never claims again, and another relay draining the outbox
 * would hide it for ever.  So the heal ends by recording, for each relay
 * still running, whether the database lists a session of it (each process's
 * application_name is its scenario name, see runner_start_proc);
 * relay_recovers_after_heal judges the records.  The evidence is the
 * database's list of sessions, never the relay's word. */
/* The same for the broker, witnessed by the fault proxy: one record per
 * relay and consumer still running, connected when its broker link holds
 * an open connection.  A relay that lost the broker and never reconnects
 * stays unseen otherwise while another relay drains the outbox. */
static void record_broker_sessions(struct sctx *s)
{
    for (int i = 0; i < s->sc->nprocs; i++) {
        enum sc_kind k = s->sc->procs[i].kind;
        if (k == SC_API || !proc_poll(&s->procs[i]))
            continue;
        int open = runner_net_link_open(s, i);
        if (open < 0)
            continue; /* no link of its own: nothing witnesses it */
        const char *p[2] = { s->procs[i].name, open > 0 ? "t" : "f" };
        char err[256];
        if (runner_sql_value(s, "WITH r AS (INSERT INTO crashwindow_claims"
                             " (kind, message_id, attempts, claimed_at, proc, connected)"
                             " VALUES ('broker_session', '00000000-0000-0000-0000-000000000000',"
                             "         0, now(), $1, $2::boolean) RETURNING 1)"
                             " SELECT count(*) FROM r", 2, p, err, sizeof(err)) < 0)
            runner_progress(s, "heal: %s's broker session could not be recorded: %s",
                            s->procs[i].name, err);
    }
}

static void record_relay_sessions(struct sctx *s)
{
    char names[SC_MAX_PROCS * (SC_NAME_MAX + 3) + 3];
    if (running_relays(s, names, sizeof(names)) == 0)
        return;
    const char *p[1] = { names };
    char err[256];
    long long n = runner_sql_value(s,
        RELAY_SESSIONS_SQL("WITH r AS (INSERT INTO crashwindow_claims"
                           "           (kind, message_id, attempts, claimed_at, proc, connected)"
                           "  SELECT 'session', '00000000-0000-0000-0000-000000000000', 0,"
                           "         now(), u.name, x.on_db")
        " RETURNING 1) SELECT count(*) FROM r", 1, p, err, sizeof(err));
    if (n < 0)
        runner_progress(s, "heal: the relays' sessions could not be recorded: %s", err);
    record_broker_sessions(s);
}

/* ---- heal --------------------------------------------------------------- */

/* Turns off every fault still armed in the running incarnation of idx.
 * fiu-ctrl cannot reach a stopped process, so it is woken first; a process
 * that parks again before the command lands is woken and asked again, a
 * bounded number of times, and finally replaced by a fresh incarnation. */
static void heal_faults(struct sctx *s, int idx)
{
    struct proc *p = &s->procs[idx];
    for (int i = 0; i < s->armed.n; i++) {
        struct armed *a = &s->armed.list[i];
        if (a->proc != idx || a->pid != p->pid || a->disabled || !proc_poll(p))
            continue;
        char cmd[192], err[1200];
        snprintf(cmd, sizeof(cmd), "disable name=%s", a->point);
        int done = 0;
        for (int attempt = 0; attempt < 5 && !done && proc_poll(p); attempt++) {
            kill(p->pid, SIGCONT);
            done = runner_fiu_ctrl(p, cmd, 1000, err, sizeof(err)) == 0;
        }
        if (done) {
            a->disabled = 1;
            runner_rev_proc(s, "fault_off", p->name, p->pid, "point", a->point);
        } else if (proc_poll(p)) {
            runner_rev_proc(s, "kill", p->name, p->pid, "why", "its fault could not be turned off");
            proc_kill(p);
            runner_reap_all(s);
        }
    }
}

/* The instant every fault is off, in the database's clock (the clock of
 * the claim history), as a record of kind 'faults_off' in
 * crashwindow_claims: relay_recovers_after_heal judges the claims made
 * after it.  Libfiu points are disabled, the broker reset, the links
 * cleared; paused processes are resumed right after.  A database that
 * cannot take the record (it is down) leaves that invariant vacuous. */
static void record_faults_off(struct sctx *s)
{
    char err[256] = "";
    long long n = -1;
    for (int attempt = 0; attempt < 3 && n != 1; attempt++) {
        if (attempt > 0)
            nap(200);
        n = runner_sql_value(s,
            "WITH r AS (INSERT INTO crashwindow_claims (kind, message_id, attempts, claimed_at)"
            "           VALUES ('faults_off', '00000000-0000-0000-0000-000000000000', 0, now())"
            "           RETURNING 1)"
            " SELECT count(*) FROM r", 0, NULL, err, sizeof(err));
    }
    cJSON *ev = runner_rev_begin(s, "faults_off");
    if (n != 1)
        cJSON_AddStringToObject(ev, "error", err);
    runner_rev_emit(s, ev);
}

static const char *exit_text(struct proc *p)
{
    static char how[64];
    proc_exit_text(p, how, sizeof(how));
    return how;
}

int runner_heal(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    int saved_step = s->step;
    s->step = -1;
    int64_t start = cw_mono_ms();
    int heal_ms = sc->heal_timeout_ms;
    if (s->run->o->heal_cap_ms > 0 && heal_ms > s->run->o->heal_cap_ms)
        heal_ms = s->run->o->heal_cap_ms;
    int64_t deadline = start + heal_ms;
    runner_rev_proc(s, "heal_start", "pipeline", 0, NULL, NULL);
    runner_progress(s, "heal: faults off, broker reset, every process running (deadline %d ms)",
                    heal_ms);
    char err[512];
    runner_payments_join(s);
    if (runner_db_lock_release(s, 1) < 0 || runner_db_refusals_end(s, 1) < 0)
        return -1;
    runner_reap_all(s);
    if (!proc_poll(&s->broker) && runner_start_broker(s) < 0)
        return -1;
    if (proc_stopped(&s->broker))
        kill(s->broker.pid, SIGCONT);
    if (brokerctl_reset(s->broker_sock, 3000, err, sizeof(err)) < 0)
        return runner_fail(s, "heal: broker reset: %s", err);
    for (int i = 0; i < sc->nprocs; i++)
        heal_faults(s, i);
    runner_net_clear_all(s);
    if (s->run->target == NULL)
        record_faults_off(s); /* our pipeline's claim history; a target has none */
    /* Paused processes resume only now: what they claim from here on was
     * claimed with every fault off. */
    for (int i = 0; i < sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        if (proc_poll(p) && proc_stopped(p)) {
            runner_rev_proc(s, "resume", p->name, p->pid, "signal", "SIGCONT");
            kill(p->pid, SIGCONT);
        }
    }
    runner_reap_all(s);
    int restarts[SC_MAX_PROCS] = { 0 };
    char why[512] = "";
    int quiet_since = 0;
    int64_t ask_at = start + RUNNER_DECIDE_AFTER_MS;
    struct progress_watch progress = { .mark = -2 };
    int64_t sessions_by = relay_session_deadline(s, cw_mono_ms());
    for (;;) {
        for (int i = 0; i < sc->nprocs; i++) {
            struct proc *p = &s->procs[i];
            if (!sc->procs[i].heal || proc_poll(p))
                continue;
            /* "heal": {"restart": false}: recovering from the fault was the
             * process's own job; one that died did not do it. */
            if (!sc->heal_restart && p->starts > 0)
                return runner_fail(s, "heal: %s is not running (%s), and this scenario says "
                                   "every process recovers by itself (heal.restart false)",
                                   p->name, exit_text(p));
            /* Never started, killed, crashed: a fresh incarnation without
             * faults.  Bounded, so a process that dies at start cannot
             * spin here. */
            if (restarts[i]++ >= 5)
                return runner_fail(s, "heal: %s keeps exiting", p->name);
            if (runner_start_proc(s, i, NULL) < 0)
                return -1;
        }
        if (proc_stopped(&s->broker))
            kill(s->broker.pid, SIGCONT);
        if (runner_pipeline_quiet(s, why, sizeof(why))) {
            /* Twice in a row, a poll apart: a delivery in flight between
             * the SQL and the stats query must not pass for quiet.  Then
             * the relays are given until sessions_by to show a session;
             * one that has none by then is the checker's to judge. */
            if (quiet_since++ >= 1 &&
                (relays_connected(s, why, sizeof(why)) > 0 ||
                 cw_mono_ms() >= sessions_by || cw_mono_ms() >= deadline))
                break;
        } else {
            quiet_since = 0;
        }
        runner_reap_all(s);
        if (runner_interrupted())
            return runner_fail(s, "heal: interrupted");
        /* A mutant's run whose heal has not converged in a while: once an
         * invariant no later event can undo has failed, the rest of the
         * wait could not change its verdict. */
        char decided[400];
        if (cw_mono_ms() >= ask_at) {
            ask_at = cw_mono_ms() + RUNNER_DECIDE_AFTER_MS;
            if (runner_verdict_decided(s, decided, sizeof(decided)))
                return runner_fail(s, "heal: stopped after %lld ms, not converged (%s), with the "
                                   "verdict decided: %s", (long long)(cw_mono_ms() - start), why,
                                   decided);
        }
        int stalled = runner_target_stalled(s, &progress);
        if (cw_mono_ms() >= deadline || stalled) {
            if (s->run->target != NULL) {
                /* A target that does not converge is a finding, not an
                 * error of the run: what it lost or left behind is the
                 * checker's to name, event by event. */
                runner_rev_proc(s, "heal_incomplete", "pipeline", 0, "why", why);
                if (stalled)
                    runner_progress(s, "heal: the target made no progress for %d ms (%s): the "
                                    "checker decides", s->run->target->progress_timeout_ms, why);
                else
                    runner_progress(s, "heal: the target did not converge within %d ms (%s): "
                                    "the checker decides", heal_ms, why);
                s->step = saved_step;
                return 0;
            }
            if (sc->nhazard > 0 && outbox_drained(s, why, sizeof(why)) &&
                hazard_explains_leftovers(s, why, sizeof(why))) {
                /* A hazard scenario loses data on purpose: what was lost
                 * never arrives, and the checker is what must say so.  What
                 * the database still holds must have gone out, though, and
                 * reached every group unless the hazard explains its loss: a
                 * pipeline that stopped is stuck, not lossy. */
                runner_rev_proc(s, "heal_incomplete", "pipeline", 0, "why", why);
                runner_progress(s, "heal: not converged within %d ms (%s): expected of a "
                                "hazard, the checker decides", heal_ms, why);
                s->step = saved_step;
                return 0;
            }
            return runner_fail(s, "heal: the pipeline did not converge within %d ms: %s",
                               heal_ms, why);
        }
        nap(50);
    }
    if (s->run->target == NULL)
        record_relay_sessions(s);
    cJSON *ev = runner_rev_begin(s, "heal_done");
    cJSON_AddNumberToObject(ev, "converged_ms", (double)(cw_mono_ms() - start));
    runner_rev_emit(s, ev);
    runner_progress(s, "heal: converged in %lld ms", (long long)(cw_mono_ms() - start));
    s->step = saved_step;
    return 0;
}
