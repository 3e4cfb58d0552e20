/* runner_dbfault.c -- the database as a fault target: a scenario's own
 * primary with a streaming standby, the "db" step, and how long the
 * pipeline took to recover from each database or broker outage (the
 * broker's is runner_broker_crash.c's).
 *
 * Most scenarios share the run's throwaway cluster, each in a database of
 * its own; a "db" step then crashes, restarts or freezes that shared server,
 * which is harmless because scenarios run one at a time.  A scenario with
 * "database": {"standby": true} gets a primary and a standby of its own
 * instead: a failover leaves the old primary dead, which no later scenario
 * may inherit.  Its processes and the runner itself connect with a
 * multi-host connection string and target_session_attrs=read-write, so they
 * find the new primary the way a production client would.
 *
 * Recovery time is measured from the end of each database or broker fault
 * to the first event a consumer applied afterwards (its "apply" event): a
 * figure for the report, never a verdict, since it is the consumer's own
 * word about its own timing. */
#include "runner_internal.h"
#include "cwlog.h"
#include "evlog.h"
#include "pgfault.h"
#include "pgx.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The port a cluster started by scripts/pg-cluster listens on, or 0. */
static int cluster_port(const char *dir)
{
    char path[PATH_MAX + 16];
    cw_fmt(path, sizeof(path), "%s/port", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int port = 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    return port;
}

/* Waits until the primary in s->pg.dir streams to the standby, in sync
 * state when the scenario asks for synchronous replication. */
static int wait_replication(struct sctx *s, const char *admin)
{
    const char *sql = s->sc->synchronous
        ? "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' "
          "AND sync_state = 'sync'"
        : "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'";
    char err[512] = "";
    int64_t deadline = cw_mono_ms() + 20000;
    PGconn *c = NULL;
    while (cw_mono_ms() < deadline) {
        if (c == NULL)
            c = pgx_connect(admin, err, sizeof(err));
        PGresult *r = c ? pgx_exec(c, sql, 0, NULL, NULL, err, sizeof(err)) : NULL;
        int ok = r != NULL && atoi(PQgetvalue(r, 0, 0)) > 0;
        PQclear(r);
        if (ok) {
            PQfinish(c);
            return 0;
        }
        nap(50);
    }
    PQfinish(c);
    return runner_fail(s, "database: the standby did not start %s replication within 20 s%s%s",
                       s->sc->synchronous ? "synchronous" : "streaming", err[0] ? ": " : "",
                       err);
}

int runner_open_standby_db(struct sctx *s)
{
    struct runner *r = s->run;
    char err[1024], out[1024];
    if (rdb_start_cluster(&s->pg.own, r->pg_script, err, sizeof(err)) < 0)
        return runner_fail(s, "database: primary: %s", err);
    cw_fmt(s->pg.dir, sizeof(s->pg.dir), "%s", s->pg.own.cluster_dir);
    char tag[48];
    cw_fmt(tag, sizeof(tag), "%d_%d", (int)getpid(), r->nsc);
    if (rdb_make_template(&s->pg.own, r->exe_outboxctl, tag, err, sizeof(err)) < 0)
        return runner_fail(s, "database: %s", err);
    char *single = rdb_create_db(&s->pg.own, s->label, s->db.name, err, sizeof(err));
    if (single == NULL)
        return runner_fail(s, "database: %s", err);
    free(single);
    cw_fmt(s->pg.standby_dir, sizeof(s->pg.standby_dir), "%s.standby", s->pg.dir);
    if (rdb_cluster_cmd(r->pg_script, "standby", s->pg.dir, s->pg.standby_dir, 120000, out,
                        sizeof(out), err, sizeof(err)) < 0) {
        s->pg.standby_dir[0] = '\0';
        return runner_fail(s, "database: standby: %s", err);
    }
    if (s->sc->synchronous &&
        rdb_cluster_cmd(r->pg_script, "sync", s->pg.dir, "on", 60000, NULL, 0, err,
                        sizeof(err)) < 0)
        return runner_fail(s, "database: synchronous replication: %s", err);
    if (wait_replication(s, s->pg.own.admin) < 0)
        return -1;
    char multi[3 * PATH_MAX];
    cw_fmt(multi, sizeof(multi),
        "host='%s,%s' port='%d,%d' user='postgres' dbname='%s' "
        "target_session_attrs='read-write' connect_timeout='5'",
        s->pg.dir, s->pg.standby_dir, cluster_port(s->pg.dir), cluster_port(s->pg.standby_dir),
        s->db.name);
    s->db.conninfo = strdup(multi);
    s->db.env = s->db.conninfo ? conninfo_env(s->db.conninfo) : NULL;
    if (s->db.env == NULL)
        return runner_fail(s, "database: out of memory");
    if (runner_connect(s, err, sizeof(err)) < 0)
        return runner_fail(s, "database: %s", err);
    runner_progress(s, "database: own primary %s and %s standby %s", s->pg.dir,
                    s->sc->synchronous ? "synchronous" : "asynchronous", s->pg.standby_dir);
    return 0;
}

void runner_close_own_cluster(struct sctx *s)
{
    char err[256];
    if (s->run->o->keep)
        return;
    if (s->pg.standby_dir[0] != '\0')
        rdb_cluster_cmd(s->run->pg_script, "stop", s->pg.standby_dir, NULL, 120000, NULL, 0, err,
                        sizeof(err));
    if (s->pg.own.cluster_dir[0] != '\0')
        rdb_finish(&s->pg.own, s->run->pg_script, 0);
}

/* A "db_fault" runner event, logged when the fault is over: its action and
 * when it began (started_us), for the recovery measurement. */
static void outage_event(struct sctx *s, const char *target, const char *action,
                         const char *detail, int64_t started_us, int64_t ended_us)
{
    cJSON *ev = runner_rev_begin(s, "db_fault");
    cwlog_add_int64(ev, "started_us", started_us);
    if (ended_us > 0)
        cwlog_add_int64(ev, "ended_us", ended_us);
    cJSON_AddStringToObject(ev, "target", target);
    cJSON_AddStringToObject(ev, "action", action);
    if (detail != NULL)
        cJSON_AddStringToObject(ev, "detail", detail);
    runner_rev_emit(s, ev);
}

void runner_outage_event(struct sctx *s, const char *target, const char *action,
                         const char *detail)
{
    outage_event(s, target, action, detail, s->fault_started_us, 0);
}

/* Waits ms (a fault's duration, chosen by the scenario), waking for an
 * interruption. */
void runner_hold(int ms)
{
    int64_t until = cw_mono_ms() + ms;
    while (cw_mono_ms() < until && !runner_interrupted())
        nap(ms < 20 ? ms : 20);
}

static int db_terminate(struct sctx *s, const struct sc_step *st)
{
    const struct scenario *sc = s->sc;
    char names[SC_MAX_PROCS * (SC_NAME_MAX + 3) + 4] = "{";
    for (int i = 0; i < sc->nprocs; i++) {
        size_t n = strlen(names);
        cw_fmt(names + n, sizeof(names) - n, "%s\"%s\"", i ? "," : "", sc->procs[i].name);
    }
    strcat(names, "}");
    const char *who = st->proc >= 0 ? sc->procs[st->proc].name : "";
    const char *params[3] = { s->db.name, who, names };
    char err[512];
    long long n = runner_sql_value(s, pgf_terminate_sql(), 3, params, err, sizeof(err));
    if (n < 0)
        return runner_fail(s, "db terminate: %s", err);
    char detail[96];
    cw_fmt(detail, sizeof(detail), "%lld sessions of %s", n, who[0] ? who : "every process");
    runner_outage_event(s, "postgres", "terminate", detail);
    runner_progress(s, "terminated %s", detail);
    return 0;
}

static int db_freeze(struct sctx *s, const struct sc_step *st)
{
    pid_t pids[PGF_MAX_PIDS];
    char err[512];
    int n = pgf_freeze(s->pg.dir, pids, PGF_MAX_PIDS, err, sizeof(err));
    if (n < 0)
        return runner_fail(s, "db freeze: %s", err);
    runner_progress(s, "froze the server (%d processes)", n);
    runner_hold(st->ms);
    pgf_thaw(pids, n);
    char detail[64];
    cw_fmt(detail, sizeof(detail), "%d processes stopped for %d ms", n, st->ms);
    runner_outage_event(s, "postgres", "freeze", detail);
    return 0;
}

static int db_failover(struct sctx *s)
{
    struct runner *r = s->run;
    char err[1024];
    if (s->pg.failed_over)
        return runner_fail(s, "db failover: already failed over (no standby left)");
    if (rdb_cluster_cmd(r->pg_script, "crash", s->pg.dir, NULL, 60000, NULL, 0, err,
                        sizeof(err)) < 0)
        return runner_fail(s, "db failover: %s", err);
    if (rdb_cluster_cmd(r->pg_script, "promote", s->pg.standby_dir, NULL, 60000, NULL, 0, err,
                        sizeof(err)) < 0)
        return runner_fail(s, "db failover: %s", err);
    s->pg.failed_over = 1;
    /* The runner's own connection went down with the primary. */
    PQfinish(s->db.conn);
    s->db.conn = NULL;
    char old[PATH_MAX];
    cw_fmt(old, sizeof(old), "%s", s->pg.dir);
    cw_fmt(s->pg.dir, sizeof(s->pg.dir), "%s", s->pg.standby_dir);
    runner_outage_event(s, "postgres", "failover", old);
    runner_progress(s, "failover: primary %s killed, %s promoted", old, s->pg.dir);
    return 0;
}

/* The standby stops receiving WAL: its primary_conninfo is cleared, and
 * the step returns once its WAL receiver is gone.  Stopping the receiver
 * with SIGSTOP instead would not do: what the primary already sent waits in
 * the socket's buffers and is written the moment the receiver runs again. */
static int db_stall_replication(struct sctx *s)
{
    char err[1024];
    if (rdb_cluster_cmd(s->run->pg_script, "detach", s->pg.standby_dir, NULL, 60000, NULL, 0, err,
                        sizeof(err)) < 0)
        return runner_fail(s, "db stall_replication: %s", err);
    int64_t deadline = cw_mono_ms() + 10000;
    while (pgf_signal_walreceiver(s->pg.standby_dir, 0, err, sizeof(err)) == 0) {
        if (cw_mono_ms() >= deadline)
            return runner_fail(s, "db stall_replication: the standby's WAL receiver still "
                               "runs 10 s after its primary_conninfo was cleared");
        nap(20);
    }
    s->pg.repl_stalled = 1;
    runner_outage_event(s, "postgres", "stall_replication", s->pg.standby_dir);
    return 0;
}

/* The server's synchronous_standby_names, as the runner's own session sees
 * it once the reload reached it; waits up to 5 s for it to read want. */
static int sync_names_become(struct sctx *s, const char *want, char *err, size_t errlen)
{
    const char *prm[1] = { want };
    int64_t deadline = cw_mono_ms() + 5000;
    for (;;) {
        long long same = runner_sql_value(s,
            "SELECT (current_setting('synchronous_standby_names') = $1)::int",
            1, prm, err, errlen);
        if (same == 1)
            return 0;
        if (same < 0)
            return -1;
        if (cw_mono_ms() >= deadline) {
            snprintf(err, errlen, "synchronous_standby_names is not '%s' 5 s after the reload",
                     want);
            return -1;
        }
        nap(10);
    }
}

/* Runs alter (an ALTER SYSTEM of synchronous_standby_names), reloads the
 * server's configuration and waits until the setting reads want.  0, or -1
 * with err. */
static int alter_sync_names(struct sctx *s, const char *alter, const char *want, char *err,
                            size_t errlen)
{
    if (runner_sql_value(s, alter, 0, NULL, err, errlen) < 0 ||
        runner_sql_value(s, "SELECT pg_reload_conf()::int", 0, NULL, err, errlen) < 0)
        return -1;
    return sync_names_become(s, want, err, errlen);
}

/* For st->ms every commit waits after its WAL is flushed: the server names
 * a synchronous standby that never connects, as when the one a service
 * relies on stops answering.  Each commit is then durable and already sent
 * to logical decoding, but no other session sees it until the names are
 * reset and the waiting backends are released -- the window in which a
 * reader of the replication stream that looks the row up finds nothing. */
static int db_hold_commits(struct sctx *s, const struct sc_step *st)
{
    char err[512];
    if (alter_sync_names(s, "ALTER SYSTEM SET synchronous_standby_names = "
                         "'crashwindow_absent_standby'", "crashwindow_absent_standby",
                         err, sizeof(err)) < 0)
        return runner_fail(s, "db hold_commits: %s", err);
    runner_progress(s, "commits held for %d ms (a synchronous standby that never answers)",
                    st->ms);
    runner_hold(st->ms);
    /* the release begins here: a commit may return as soon as the server
     * reloads, before the reset's call comes back */
    int64_t release_us = cw_now_us();
    if (alter_sync_names(s, "ALTER SYSTEM RESET synchronous_standby_names", "", err,
                         sizeof(err)) < 0)
        return runner_fail(s, "db hold_commits: releasing the commits: %s", err);
    char detail[96];
    cw_fmt(detail, sizeof(detail), "every commit held %d ms after its WAL flush", st->ms);
    outage_event(s, "postgres", "hold_commits", detail, s->fault_started_us, release_us);
    return 0;
}

/* One identifier, quoted by libpq, appended to out; -1 when it cannot be. */
static int append_quoted(PGconn *conn, const char *name, size_t len, char *out, size_t outlen)
{
    char *q = PQescapeIdentifier(conn, name, len);
    if (q == NULL)
        return -1;
    size_t used = strlen(out);
    int n = snprintf(out + used, outlen - used, "%s", q);
    PQfreemem(q);
    return n < 0 || (size_t)n >= outlen - used ? -1 : 0;
}

/* "table" or "schema.table" (the scenario's parser allows no more) with
 * each part quoted; -1 when libpq cannot quote it. */
static int quoted_table(PGconn *conn, const char *table, char *out, size_t outlen)
{
    const char *dot = strchr(table, '.');
    out[0] = '\0';
    if (dot == NULL)
        return append_quoted(conn, table, strlen(table), out, outlen);
    if (append_quoted(conn, table, (size_t)(dot - table), out, outlen) < 0 ||
        strlen(out) + 1 >= outlen)
        return -1;
    strcat(out, ".");
    return append_quoted(conn, dot + 1, strlen(dot + 1), out, outlen);
}

/* When r is an error and none was kept yet (sqlstate ""), keeps its
 * SQLSTATE and the first line of its message.  1 when r is an error. */
static int keep_first_error(const PGresult *r, char sqlstate[6], char *err, size_t errlen)
{
    if (PQresultStatus(r) != PGRES_FATAL_ERROR)
        return 0;
    if (sqlstate[0] == '\0') {
        const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        cw_fmt(sqlstate, 6, "%s", code != NULL ? code : "?????");
        cw_fmt(err, errlen, "%s", PQresultErrorMessage(r));
        err[strcspn(err, "\n")] = '\0';
    }
    return 1;
}

/* Reads the server's messages of a query that ended into err: the first
 * error, and its SQLSTATE into sqlstate ("" when the query succeeded). */
static void drain_results(PGconn *conn, char sqlstate[6], char *err, size_t errlen)
{
    PGresult *r;
    sqlstate[0] = '\0';
    while ((r = PQgetResult(conn)) != NULL) {
        keep_first_error(r, sqlstate, err, errlen);
        PQclear(r);
    }
}

/* The session's query sets its application_name to "crashwindow TAG <epoch
 * us>" when it gets where the steps may go on (the server flushes a
 * multi-statement query's results only at its end, and pg_locks has no grant
 * time): the moment is then the server's, however late the runner looks.
 * Returns that moment, or -1 with why in err when the query ended first or
 * nothing came within 30 s. */
static long long await_mark(struct sctx *s, PGconn *conn, const char *tag, char *err,
                            size_t errlen)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", PQbackendPID(conn));
    const char *params[] = { pid, tag };
    int64_t give_up = cw_mono_ms() + 31000;
    for (;;) {
        long long mark = runner_sql_value(s,
            "SELECT coalesce(substring(application_name FROM '^crashwindow ' || $2 || ' ([0-9]+)$'),"
            " '0')::bigint FROM pg_stat_activity WHERE pid = $1::int", 2, params, err, errlen);
        if (mark > 0)
            return mark;
        if (!PQconsumeInput(conn) || !PQisBusy(conn) || mark < 0 || cw_mono_ms() > give_up ||
            runner_interrupted()) {
            char sqlstate[6];
            if (mark >= 0)
                cw_fmt(err, errlen, "%s", PQerrorMessage(conn));
            if (!PQisBusy(conn))
                drain_results(conn, sqlstate, err, errlen);
            err[strcspn(err, "\n")] = '\0';
            if (err[0] == '\0')
                cw_fmt(err, errlen, "no answer within 30 s");
            return -1;
        }
        runner_hold(10);
    }
}

/* A session of the runner's own, without the bounds pgx_connect sets: the
 * whole query string is one statement, and those bounds would end it early. */
static PGconn *fault_session(struct sctx *s, const char *what, int lock_timeout_ms)
{
    char err[512], sqlstate[6] = "", sql[160];
    if (s->pg.lock_conn != NULL) {
        runner_fail(s, "db %s: an earlier lock or deadlock step still holds its session", what);
        return NULL;
    }
    PGconn *conn = pgx_connect(s->db.conninfo, err, sizeof(err));
    if (conn == NULL) {
        runner_fail(s, "db %s: %s", what, err);
        return NULL;
    }
    PQsetNoticeProcessor(conn, rdb_quiet_notices, NULL);
    snprintf(sql, sizeof(sql), "SELECT set_config('statement_timeout', '0', false),"
             " set_config('lock_timeout', '%dms', false)", lock_timeout_ms);
    if (pgx_cmd(conn, sql, 0, NULL, sqlstate, err, sizeof(err)) < 0) {
        PQfinish(conn);
        runner_fail(s, "db %s: %s (%s)", what, err, sqlstate);
        return NULL;
    }
    return conn;
}

/* For st->ms another session holds st->table ACCESS EXCLUSIVE, as a
 * migration's ALTER TABLE does: the processes' statements on it wait, and
 * those with a lock_timeout or a statement_timeout shorter than the hold
 * are refused on a live connection (55P03, 57014) -- the failures a lost
 * connection never shows.  The step returns once the lock is granted
 * (behind whatever transaction holds the table now) and the steps go on
 * while it is held, so that a scenario can release work into the lock;
 * the server itself ends the hold (pg_sleep in the same query), so no step
 * of the runner has to be on time for it. */
static int db_lock(struct sctx *s, const struct sc_step *st)
{
    char err[512], table[300], sql[1024];
    PGconn *conn = fault_session(s, "lock", 30000);
    if (conn == NULL)
        return -1;
    if (quoted_table(conn, st->table, table, sizeof(table)) < 0) {
        PQfinish(conn);
        return runner_fail(s, "db lock: cannot quote the table name '%s'", st->table);
    }
    snprintf(sql, sizeof(sql), "BEGIN; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE; "
             "SELECT set_config('application_name', 'crashwindow lock granted ' ||"
             " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, false); "
             "SELECT pg_sleep(%d / 1000.0); COMMIT", table, st->ms);
    if (!PQsendQuery(conn, sql)) {
        cw_fmt(err, sizeof(err), "%s", PQerrorMessage(conn));
        PQfinish(conn);
        return runner_fail(s, "db lock %s: %s", st->table, err);
    }
    long long granted = await_mark(s, conn, "lock granted", err, sizeof(err));
    if (granted < 0) {
        PQfinish(conn);
        return runner_fail(s, "db lock %s: the lock was not granted: %s", st->table, err);
    }
    s->pg.lock_deadlock = 0;
    s->pg.lock_started_us = granted;
    s->pg.lock_ends_ms = cw_mono_ms() + st->ms - (cw_now_us() - granted) / 1000;
    s->pg.lock_ms = st->ms;
    s->pg.lock_conn = conn;
    cw_fmt(s->pg.lock_detail, sizeof(s->pg.lock_detail), "%s locked ACCESS EXCLUSIVE for %d ms",
           st->table, st->ms);
    runner_progress(s, "%s (the steps go on)", s->pg.lock_detail);
    return 0;
}

/* A deadlock between a process and another session, built on the server in
 * one implicit transaction: the session runs st->first (taking locks), then
 * waits up to st->ms until some backend waits on it, then runs st->then,
 * which must wait on a lock that backend holds.  The backend waited first,
 * so its deadlock check (deadlock_timeout, 1 s by default) runs first and
 * PostgreSQL refuses its statement with 40P01; this session's own check is
 * put off to st->ms, so it is never the one refused while the other checks
 * in time.  Its work is rolled back: nothing of it stays.  The step returns
 * once st->first is done; the heal reads how it ended, and a session that
 * found no waiter or was itself refused fails the scenario: then no
 * deadlock reached the process, and a pass would prove nothing. */
static int db_deadlock(struct sctx *s, const struct sc_step *st)
{
    char err[512], sqlstate[6] = "", sql[200];
    PGconn *conn = fault_session(s, "deadlock", st->ms);
    if (conn == NULL)
        return -1;
    snprintf(sql, sizeof(sql), "SELECT set_config('deadlock_timeout', '%dms', false)", st->ms);
    if (pgx_cmd(conn, sql, 0, NULL, sqlstate, err, sizeof(err)) < 0) {
        PQfinish(conn);
        return runner_fail(s, "db deadlock: %s (%s; deadlock_timeout is set by a superuser: "
                           "the runner's own cluster, or --pg as one)", err, sqlstate);
    }
    static const char fmt[] =
        "%s;\n"
        "SELECT set_config('application_name', 'crashwindow deadlock armed ' ||"
        " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, false);\n"
        "DO $cw$ DECLARE stop timestamptz := clock_timestamp() + interval '%d milliseconds';\n"
        "BEGIN\n"
        "  LOOP\n"
        "    PERFORM pg_stat_clear_snapshot();\n"
        "    EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity a\n"
        "                      WHERE pg_backend_pid() = ANY (pg_blocking_pids(a.pid)));\n"
        "    IF clock_timestamp() > stop THEN\n"
        "      RAISE EXCEPTION 'no other session waited on this one within %d ms';\n"
        "    END IF;\n"
        "    PERFORM pg_sleep(0.005);\n"
        "  END LOOP;\n"
        "END $cw$;\n"
        "SELECT a.pid AS cw_waiter_pid, a.application_name AS cw_waiter,"
        " (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS cw_closing_us"
        " FROM pg_stat_activity a WHERE pg_backend_pid() = ANY (pg_blocking_pids(a.pid)) LIMIT 1;\n"
        "%s;\n"
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS cw_closed_us;\n"
        "ROLLBACK";
    size_t len = sizeof(fmt) + strlen(st->first) + strlen(st->then) + 32;
    char *query = malloc(len);
    if (query == NULL) {
        PQfinish(conn);
        return runner_fail(s, "db deadlock: out of memory");
    }
    snprintf(query, len, fmt, st->first, st->ms, st->ms, st->then);
    int sent = PQsendQuery(conn, query);
    free(query);
    if (!sent) {
        cw_fmt(err, sizeof(err), "%s", PQerrorMessage(conn));
        PQfinish(conn);
        return runner_fail(s, "db deadlock: %s", err);
    }
    long long armed = await_mark(s, conn, "deadlock armed", err, sizeof(err));
    if (armed < 0) {
        PQfinish(conn);
        return runner_fail(s, "db deadlock: the first statements failed: %s", err);
    }
    s->pg.lock_deadlock = 1;
    s->pg.lock_started_us = armed;
    /* Up to ms for a waiter, up to ms more for the closing statement's lock. */
    s->pg.lock_ends_ms = cw_mono_ms() + 2 * (int64_t)st->ms;
    s->pg.lock_ms = st->ms;
    s->pg.lock_conn = conn;
    cw_fmt(s->pg.lock_detail, sizeof(s->pg.lock_detail),
           "another session holds its first locks and waits up to %d ms for a process to wait "
           "on it", st->ms);
    runner_progress(s, "deadlock armed: %s (the steps go on)", s->pg.lock_detail);
    return 0;
}

/* A deadlock session's end: who waited on it and when the cycle closed, or
 * why there was none (-1, a failed scenario when log is set). */
static int deadlock_outcome(struct sctx *s, PGconn *conn, int log)
{
    char err[512] = "", sqlstate[6] = "", waiter[128] = "", detail[320];
    long long waiter_pid = 0, closing_us = 0, closed_us = 0;
    PGresult *r;
    while ((r = PQgetResult(conn)) != NULL) {
        if (!keep_first_error(r, sqlstate, err, sizeof(err)) &&
            PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            if (PQfnumber(r, "cw_waiter_pid") == 0) {
                waiter_pid = atoll(PQgetvalue(r, 0, 0));
                cw_fmt(waiter, sizeof(waiter), "%s", PQgetvalue(r, 0, 1));
                closing_us = atoll(PQgetvalue(r, 0, 2));
            } else if (PQfnumber(r, "cw_closed_us") == 0) {
                closed_us = atoll(PQgetvalue(r, 0, 0));
            }
        }
        PQclear(r);
    }
    if (!log)
        return 0;
    if (sqlstate[0] != '\0' || closed_us == 0) {
        if (strcmp(sqlstate, "40P01") == 0)
            cw_fmt(err, sizeof(err), "this session was refused (40P01), not the process: the "
                   "cycle closed after the process's own deadlock check had run");
        return runner_fail(s, "db deadlock: no deadlock reached a process: %s",
                           err[0] ? err : "the session never ended");
    }
    cw_fmt(detail, sizeof(detail), "a cycle with pid %lld ('%s') closed; PostgreSQL broke "
           "it by refusing that session's statement", waiter_pid, waiter);
    outage_event(s, "postgres", "deadlock", detail, closing_us, closed_us);
    return 0;
}

int runner_db_lock_release(struct sctx *s, int log)
{
    PGconn *conn = s->pg.lock_conn;
    if (conn == NULL)
        return 0;
    s->pg.lock_conn = NULL;
    /* The hold ends on the server's own clock; a server that is frozen or
     * gone ends it with the session, which PQfinish closes. */
    int64_t give_up = s->pg.lock_ends_ms + 10000;
    while (log && PQconsumeInput(conn) && PQisBusy(conn) && cw_mono_ms() < give_up)
        runner_hold(20);
    if (PQisBusy(conn)) {
        /* Cut off (an interrupt, or a server that never ended it): the
         * backend sleeps and would not notice a closed socket; a cancel
         * ends its transaction and frees the table now. */
        char why[64];
        PGcancel *c = PQgetCancel(conn);
        if (c != NULL) {
            PQcancel(c, why, sizeof(why));
            PQfreeCancel(c);
        }
    }
    int rc = 0;
    if (s->pg.lock_deadlock && !PQisBusy(conn)) {
        rc = deadlock_outcome(s, conn, log);
    } else {
        PGresult *r;
        while (!PQisBusy(conn) && (r = PQgetResult(conn)) != NULL)
            PQclear(r);
        if (s->pg.lock_deadlock && log)
            rc = runner_fail(s, "db deadlock: the session had not ended %d ms after it was "
                             "armed", (int)(2 * s->pg.lock_ms + 10000));
    }
    PQfinish(conn);
    if (!log || s->pg.lock_deadlock)
        return rc;
    /* Logged at the heal, long after the hold may have ended: the end is
     * the server's, the grant plus the hold. */
    outage_event(s, "postgres", "lock", s->pg.lock_detail, s->pg.lock_started_us,
                 s->pg.lock_started_us + (int64_t)s->pg.lock_ms * 1000);
    return 0;
}

/* The trigger function every refuse step calls: for a session of the
 * process named in TG_ARGV[0] (or, with '', of any process but the
 * runner's own, whose application_name begins with "crashwindow"), it draws
 * the next number of the step's sequence (TG_ARGV[1]) and raises SQLSTATE
 * TG_ARGV[2] for numbers skip+1 to skip+times (TG_ARGV[3], TG_ARGV[4]).  A
 * sequence, not a table, counts: nextval is not rolled back with the
 * transaction the refusal aborts (a crash of the server may move it on by
 * up to 32, the values PostgreSQL logs ahead: after one, fewer statements
 * may be refused than asked).  PostgreSQL raises the error itself, in
 * the process's own transaction, so what the process meets is what a
 * serialization failure or a full disk would show it.  With no SQLSTATE
 * (a sever) the session terminates its own backend instead: the signal is
 * taken at the sleep's first check for interrupts, and the process sees
 * its connection end (FATAL 57P01, then EOF) at that very statement or
 * COMMIT, its transaction rolled back. */
static const char refuse_function_sql[] =
    "CREATE OR REPLACE FUNCTION crashwindow_refuse() RETURNS trigger LANGUAGE plpgsql AS $cw$\n"
    "DECLARE\n"
    "  app text := current_setting('application_name');\n"
    "  n bigint;\n"
    "BEGIN\n"
    "  IF app = TG_ARGV[0] OR (TG_ARGV[0] = '' AND app NOT LIKE 'crashwindow%') THEN\n"
    "    n := nextval(TG_ARGV[1]::regclass) - TG_ARGV[3]::bigint;\n"
    "    IF n >= 1 AND n <= TG_ARGV[4]::bigint THEN\n"
    "      IF TG_ARGV[2] = '' THEN\n"
    "        IF pg_terminate_backend(pg_backend_pid()) THEN\n"
    "          PERFORM pg_sleep(30);\n"
    "        END IF;\n"
    "        RAISE EXCEPTION 'crashwindow could not end the session of %', app;\n"
    "      END IF;\n"
    "      RAISE EXCEPTION 'refused by crashwindow: % on % by % (% of %)', lower(TG_OP),\n"
    "        TG_TABLE_NAME, app, n, TG_ARGV[4] USING ERRCODE = TG_ARGV[2];\n"
    "    END IF;\n"
    "  END IF;\n"
    "  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;\n"
    "  RETURN NEW;\n"
    "END $cw$";

/* PostgreSQL refuses a process's statement, or the COMMIT after it, with
 * the step's SQLSTATE: a row trigger on the table (BEFORE the statement's
 * rows; or a deferred constraint trigger, which runs at COMMIT and makes it
 * fail as a serialization failure found at commit does).  A sever ends the
 * process's session there instead.  The trigger stays until the heal, which
 * reads how many it refused (runner_db_refusals_end). */
static int db_refuse(struct sctx *s, const struct sc_step *st)
{
    const int sever = st->db_action == DB_SEVER;
    const char *sqlstate = sever ? "" : st->sqlstate;
    const char *verb = sc_db_action_name(st->db_action);
    char err[512], table[300], sql[1800];
    struct sctx_pg *pg = &s->pg;
    if (pg->nrefusals == (int)(sizeof(pg->refusals) / sizeof(pg->refusals[0])))
        return runner_fail(s, "db %s: more than %d refuse and sever steps in one "
                           "scenario", verb, pg->nrefusals);
    if (runner_sql_value(s, "SELECT 1", 0, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "db %s: %s", verb, err);
    if (quoted_table(s->db.conn, st->table, table, sizeof(table)) < 0)
        return runner_fail(s, "db %s: cannot quote the table name '%s'", verb, st->table);
    const char *who = st->proc >= 0 ? s->procs[st->proc].name : "";
    int step = s->step;
    snprintf(sql, sizeof(sql), "CREATE SEQUENCE crashwindow_refusals_%d", step);
    if (runner_sql_value(s, refuse_function_sql, 0, NULL, err, sizeof(err)) < 0 ||
        runner_sql_value(s, sql, 0, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "db %s: %s", verb, err);
    /* The arguments are a process name and a SQLSTATE, both checked at load
     * to letters, digits, '-' and '_': no quote can occur in them; the
     * columns of "of" to lower-case letters, digits and '_'. */
    char on[320];
    if (st->refuse_of[0] != '\0')
        snprintf(on, sizeof(on), "%s OF %s", st->refuse_on, st->refuse_of);
    else
        snprintf(on, sizeof(on), "%s", st->refuse_on);
    if (st->refuse_at_commit)
        snprintf(sql, sizeof(sql), "CREATE CONSTRAINT TRIGGER crashwindow_refuse_%d AFTER %s ON "
                 "%s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "
                 "crashwindow_refuse('%s', 'crashwindow_refusals_%d', '%s', '%d', '%d')", step,
                 on, table, who, step, sqlstate, st->refuse_skip, st->refuse_times);
    else
        snprintf(sql, sizeof(sql), "CREATE TRIGGER crashwindow_refuse_%d BEFORE %s ON %s FOR "
                 "EACH ROW EXECUTE FUNCTION crashwindow_refuse('%s', 'crashwindow_refusals_%d', "
                 "'%s', '%d', '%d')", step, on, table, who, step, sqlstate,
                 st->refuse_skip, st->refuse_times);
    if (runner_sql_value(s, sql, 0, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "db %s: %s", verb, err);
    struct refusal *rf = &pg->refusals[pg->nrefusals++];
    rf->step = step;
    cw_fmt(rf->table, sizeof(rf->table), "%s", table);
    rf->skip = st->refuse_skip;
    rf->times = st->refuse_times;
    rf->must_fire = st->refuse_must_fire;
    rf->action = verb;
    rf->started_us = cw_now_us();
    cw_fmt(rf->detail, sizeof(rf->detail), "%s%s %s on %s by %s %s%s",
           sever ? "the session of " : "", st->refuse_at_commit ? "the COMMIT after" : "each",
           on, st->table, who[0] ? who : "any process",
           sever ? "severed" : "refused with ", sqlstate);
    runner_progress(s, "%s, %d time%s after %d (the steps go on)", rf->detail, rf->times,
                    rf->times == 1 ? "" : "s", rf->skip);
    return 0;
}

int runner_db_refusals_end(struct sctx *s, int log)
{
    struct sctx_pg *pg = &s->pg;
    int rc = 0;
    for (int i = 0; i < pg->nrefusals; i++) {
        struct refusal *rf = &pg->refusals[i];
        char err[512] = "", sql[500], detail[320];
        long long matched = 0;
        if (log && rc == 0) {
            snprintf(sql, sizeof(sql), "SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                     "FROM crashwindow_refusals_%d", rf->step);
            matched = runner_sql_value(s, sql, 0, NULL, err, sizeof(err));
        }
        snprintf(sql, sizeof(sql), "DROP TRIGGER IF EXISTS crashwindow_refuse_%d ON %s",
                 rf->step, rf->table);
        runner_sql_value(s, sql, 0, NULL, err, sizeof(err));
        if (!log || rc < 0)
            continue;
        if (matched < 0) {
            rc = runner_fail(s, "db %s: how many were met cannot be read: %s", rf->action,
                             err);
            continue;
        }
        long long refused = matched - rf->skip;
        refused = refused < 0 ? 0 : refused > rf->times ? rf->times : refused;
        if (refused == 0 && !rf->must_fire)
            continue; /* drawn blind: nothing came its way, no fault happened */
        if (refused == 0) {
            rc = runner_fail(s, "db %s: %s: none was %s (%lld matched, %d let pass "
                             "first): no process met the failure", rf->action, rf->detail,
                             strcmp(rf->action, "sever") == 0 ? "severed" : "refused", matched,
                             rf->skip);
            continue;
        }
        cw_fmt(detail, sizeof(detail), "%s, %lld of %d", rf->detail, refused, rf->times);
        outage_event(s, "postgres", rf->action, detail, rf->started_us, 0);
    }
    pg->nrefusals = 0;
    return rc;
}

int runner_step_db(struct sctx *s, const struct sc_step *st)
{
    struct runner *r = s->run;
    char err[1024];
    /* A lock is taken by a session like any client's: no control of the
     * cluster needed, so it works on a cluster given with --pg too. */
    if (st->db_action == DB_LOCK)
        return db_lock(s, st);
    if (st->db_action == DB_DEADLOCK)
        return db_deadlock(s, st);
    if (st->db_action == DB_REFUSE || st->db_action == DB_SEVER)
        return db_refuse(s, st);
    if (s->pg.dir[0] == '\0')
        return runner_fail(s, "db %s: the runner controls only the clusters it starts; "
                           "run without --pg", sc_db_action_name(st->db_action));
    s->fault_started_us = cw_now_us();
    switch (st->db_action) {
    case DB_CRASH:
        if (rdb_cluster_cmd(r->pg_script, "crash", s->pg.dir, NULL, 60000, NULL, 0, err,
                            sizeof(err)) < 0)
            return runner_fail(s, "db crash: %s", err);
        runner_hold(st->down_ms);
        if (rdb_cluster_cmd(r->pg_script, "up", s->pg.dir, NULL, 120000, NULL, 0, err,
                            sizeof(err)) < 0)
            return runner_fail(s, "db crash: start after the crash: %s", err);
        runner_outage_event(s, "postgres", "crash", NULL);
        return 0;
    case DB_RESTART:
        if (rdb_cluster_cmd(r->pg_script, "restart", s->pg.dir, NULL, 120000, NULL, 0, err,
                            sizeof(err)) < 0)
            return runner_fail(s, "db restart: %s", err);
        runner_outage_event(s, "postgres", "restart", NULL);
        return 0;
    case DB_TERMINATE:
        return db_terminate(s, st);
    case DB_FREEZE:
        return db_freeze(s, st);
    case DB_FAILOVER:
        return db_failover(s);
    case DB_STALL_REPLICATION:
        return db_stall_replication(s);
    case DB_HOLD_COMMITS:
        return db_hold_commits(s, st);
    case DB_LOCK:
    case DB_DEADLOCK:
    case DB_REFUSE:
    case DB_SEVER:
        break;
    }
    return runner_fail(s, "db: unhandled action");
}

cJSON *runner_recovery_json(struct sctx *s, const cJSON *const *proc_events)
{
    cJSON *faults = evlog_read(s->run_events_path, NULL);
    cJSON *out = cJSON_CreateArray();
    const cJSON *f;
    cJSON_ArrayForEach(f, faults) {
        /* A detached standby and a refused statement are no outage:
         * nothing to recover from; a severed session is one statement's
         * outage, the trigger's span says nothing of its recovery. */
        if (!ev_field_equals(f, "event", "db_fault") ||
            ev_field_equals(f, "action", "stall_replication") ||
            ev_field_equals(f, "action", "refuse") || ev_field_equals(f, "action", "sever"))
            continue;
        /* The first apply after the fault ended (ended_us when it was logged
         * later), timed from when it began. */
        double ended = (double)ev_ts(f);
        ev_num(f, "ended_us", &ended);
        int64_t t = (int64_t)ended;
        double started = (double)t;
        ev_num(f, "started_us", &started);
        int64_t first = -1;
        for (int i = 0; i < s->sc->nprocs; i++) {
            const cJSON *e;
            cJSON_ArrayForEach(e, proc_events[i]) {
                int64_t te = ev_ts(e);
                if (te >= t && ev_field_equals(e, "event", "apply") && (first < 0 || te < first))
                    first = te;
            }
        }
        cJSON *o = cJSON_CreateObject();
        const cJSON *target = cJSON_GetObjectItemCaseSensitive(f, "target");
        const cJSON *action = cJSON_GetObjectItemCaseSensitive(f, "action");
        cJSON_AddStringToObject(o, "target", cJSON_IsString(target) ? target->valuestring : "");
        cJSON_AddStringToObject(o, "action", cJSON_IsString(action) ? action->valuestring : "");
        if (first >= 0)
            cJSON_AddNumberToObject(o, "recovery_ms", ((double)first - started) / 1000.0);
        else
            cJSON_AddNullToObject(o, "recovery_ms");
        cJSON_AddItemToArray(out, o);
    }
    cJSON_Delete(faults);
    return out;
}
