/* pgx.c -- libpq helpers; see pgx.h.
 *
 * Every call has a deadline.  libpq's blocking calls wait as long as the
 * socket stays open, and a peer that stops answering without closing (a
 * half-open connection, a proxy that swallows bytes, a stopped server) keeps
 * it open forever; TCP keepalives and tcp_user_timeout notice only a peer
 * whose kernel went silent too.  So statements go out with
 * PQsendQueryParams and their answer is awaited with poll() against the
 * deadline; a connection that misses it is shut down (the caller sees a
 * lost connection and reconnects). */
#include "pgx.h"

#include "ids.h"
#include "mutant.h"
#include "sanitize.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Session defaults put before the caller's conninfo (which wins): connect,
 * keepalive and unacknowledged-data bounds for a real half-open peer, and
 * the server-side bounds of a statement and of an idle transaction. */
static const char *const conn_keys[] = {
    "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "options", "dbname", NULL
};

static void copy_msg(char *err, size_t errlen, const char *prefix, const char *msg);

static int call_deadline_ms = PGX_DEFAULT_DEADLINE_MS;
static int deadline_from_env_done;

/* CW_DB_DEADLINE_MS, read once: how a supervisor (or the harness) sets
 * the bound without a flag on every program.  -1 when it is not a number
 * in range. */
static int deadline_from_env(char *err, size_t errlen)
{
    if (deadline_from_env_done)
        return 0;
    deadline_from_env_done = 1;
    const char *v = getenv("CW_DB_DEADLINE_MS");
    if (v == NULL || v[0] == '\0')
        return 0;
    char *end = NULL;
    long ms = strtol(v, &end, 10);
    if (*end != '\0' || pgx_set_deadline_ms(ms < 0 || ms > 3600000 ? 0 : (int)ms) < 0) {
        copy_msg(err, errlen, "could not connect to database: ",
                 "CW_DB_DEADLINE_MS must be a whole number of milliseconds, 100..3600000");
        return -1;
    }
    return 0;
}

int pgx_set_deadline_ms(int ms)
{
    if (ms < 100 || ms > 3600000)
        return -1;
    deadline_from_env_done = 1; /* the program's own choice wins */
    call_deadline_ms = ms;
    return 0;
}

int pgx_deadline_ms(void)
{
    return call_deadline_ms;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Copies a libpq message into err without its trailing newline. */
static void copy_msg(char *err, size_t errlen, const char *prefix, const char *msg)
{
    if (err == NULL || errlen == 0)
        return;
    snprintf(err, errlen, "%s%s", prefix, msg ? msg : "");
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
        err[--n] = '\0';
}

PGconn *pgx_connect_params(const char *const *keys, const char *const *vals,
                           const char *conninfo, char *err, size_t errlen)
{
    const char *k[24], *v[24];
    int n = 0;
    if (deadline_from_env(err, errlen) < 0)
        return NULL;
    char ctimeout[16], user_timeout[16], options[96];
    int dl = call_deadline_ms;
    /* libpq's connect_timeout is whole seconds, at least 2 */
    snprintf(ctimeout, sizeof(ctimeout), "%d", dl / 1000 < 2 ? 2 : dl / 1000);
    snprintf(user_timeout, sizeof(user_timeout), "%d", dl);
    /* Mutant: without the idle bound, a session whose client vanished
     * silently inside a transaction holds its locks until the server's own
     * keepalive (hours) notices. */
    /* The server's statement bound fires first, with room for its error to
     * arrive: a timeout the server reports keeps the session; only a peer
     * that says nothing meets the client's deadline (pgx_wait_result). */
    int stmt = dl - dl / 4;
    if (CW_MUTANT(sessions_without_idle_timeout))
        snprintf(options, sizeof(options), "-c statement_timeout=%d", stmt);
    else
        snprintf(options, sizeof(options),
                 "-c statement_timeout=%d -c idle_in_transaction_session_timeout=%d", stmt, dl);
    const char *defaults[] = { ctimeout, "1", "2", "1", "3", user_timeout, options };
    for (int i = 0; keys != NULL && keys[i] != NULL && n < 12; i++, n++) {
        k[n] = keys[i];
        v[n] = vals[i];
    }
    for (int i = 0; i < 7; i++) {
        int given = 0;
        for (int j = 0; j < n; j++)
            given |= strcmp(k[j], conn_keys[i]) == 0;
        if (!given) {
            k[n] = conn_keys[i];
            v[n++] = defaults[i];
        }
    }
    k[n] = "dbname";
    v[n++] = conninfo;
    k[n] = NULL;
    v[n] = NULL;
    PGconn *conn = PQconnectdbParams(k, v, 1);
    if (conn == NULL) {
        copy_msg(err, errlen, "could not connect to database: ", "out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        /* libpq's message may quote the connection string (a host, a
         * fragment it could not parse): sanitized here, whole, before any
         * caller's buffer could cut a secret in two and hide it from the
         * sanitizer. */
        char safe[CW_ERROR_MAX + 1];
        cw_sanitize_error(PQerrorMessage(conn), safe, sizeof(safe));
        copy_msg(err, errlen, "could not connect to database: ", safe);
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

PGconn *pgx_connect(const char *conninfo, char *err, size_t errlen)
{
    return pgx_connect_params(NULL, NULL, conninfo, err, errlen);
}

int pgx_wait_result(PGconn *conn, char *err, size_t errlen)
{
    long long deadline = now_ms() + call_deadline_ms;
    while (PQisBusy(conn)) {
        long long left = deadline - now_ms();
        struct pollfd pf = { .fd = PQsocket(conn), .events = POLLIN };
        int rc = pf.fd < 0 ? -1 : left <= 0 ? 0 : poll(&pf, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0 || pf.fd < 0) {
            /* Nothing can be trusted to arrive on it any more: shut it, so
             * that libpq reports the connection bad and the caller opens a
             * new one. */
            if (pf.fd >= 0)
                shutdown(pf.fd, SHUT_RDWR);
            PQconsumeInput(conn);
            if (err != NULL)
                snprintf(err, errlen, "database did not answer within %d ms; connection "
                         "closed", call_deadline_ms);
            return -1;
        }
        if (PQconsumeInput(conn) == 0)
            return 0; /* the error is the result's to tell */
    }
    return 0;
}

PGresult *pgx_exec(PGconn *conn, const char *sql, int nparams,
                   const char *const *params, char *sqlstate,
                   char *err, size_t errlen)
{
    if (sqlstate != NULL)
        sqlstate[0] = '\0';
    if (PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0) == 0) {
        copy_msg(err, errlen, "", PQerrorMessage(conn));
        if (sqlstate != NULL)
            snprintf(sqlstate, 6, "08006");
        return NULL;
    }
    return pgx_get_result(conn, sqlstate, err, errlen);
}

int pgx_cmd(PGconn *conn, const char *sql, int nparams,
            const char *const *params, char *sqlstate, char *err, size_t errlen)
{
    PGresult *res = pgx_exec(conn, sql, nparams, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    PQclear(res);
    return 0;
}

PGresult *pgx_next_result(PGconn *conn)
{
    pgx_wait_result(conn, NULL, 0);
    return PQgetResult(conn);
}

PGresult *pgx_get_result(PGconn *conn, char *sqlstate, char *err, size_t errlen)
{
    PGresult *res, *first = NULL;
    int seen = 0;
    if (sqlstate != NULL)
        sqlstate[0] = '\0';
    if (pgx_wait_result(conn, err, errlen) < 0) {
        while ((res = PQgetResult(conn)) != NULL) /* a dead socket: ends at once */
            PQclear(res);
        if (sqlstate != NULL)
            snprintf(sqlstate, 6, "08006");
        return NULL;
    }
    /* Only the first result is the statement's; any later one is drained so
     * that the connection can take the next command.  But a statement outside
     * a transaction block commits at the protocol's Sync, after its rows and
     * its CommandComplete were sent: an error after them is its commit
     * failing (a deferred check, a serialization failure, the connection lost
     * while a synchronous standby was awaited).  Then the statement did not
     * happen, or nobody knows whether it did: its result must not be
     * believed. */
    int failed = 0;
    while ((res = pgx_next_result(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (!seen && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
            first = res;
        } else {
            if (!failed && st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
                const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
                const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
                if (sqlstate != NULL)
                    snprintf(sqlstate, 6, "%s", s ? s : "");
                copy_msg(err, errlen, "", m ? m : PQerrorMessage(conn));
                failed = 1;
            }
            PQclear(res);
        }
        seen = 1;
    }
    if (first != NULL && !failed && PQstatus(conn) != CONNECTION_OK) {
        copy_msg(err, errlen, "", PQerrorMessage(conn));
        if (sqlstate != NULL)
            snprintf(sqlstate, 6, "08006");
        failed = 1;
    }
    if (failed) {
        PQclear(first);
        first = NULL;
    }
    if (!seen)
        copy_msg(err, errlen, "", PQerrorMessage(conn));
    return first;
}

/* Notes r's error (the first one only) into sqlstate and err. */
static void note_error(PGconn *conn, const PGresult *r, int *failed, char *sqlstate,
                       char *err, size_t errlen)
{
    if (*failed)
        return;
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    if (sqlstate != NULL)
        snprintf(sqlstate, 6, "%s", s && s[0] ? s : "08006");
    copy_msg(err, errlen, "", m ? m : PQerrorMessage(conn));
    *failed = 1;
}

PGresult *pgx_begin_exec(PGconn *conn, const char *sql, int nparams,
                         const char *const *params, char *sqlstate, char *err, size_t errlen)
{
    if (sqlstate != NULL)
        sqlstate[0] = '\0';
    if (!PQenterPipelineMode(conn) ||
        !PQsendQueryParams(conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) ||
        !PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0) ||
        !PQpipelineSync(conn)) {
        /* Only a broken connection (or no memory) gets here; a pipeline half
         * queued cannot be taken back, and the caller drops the connection. */
        copy_msg(err, errlen, "", PQerrorMessage(conn));
        if (sqlstate != NULL)
            snprintf(sqlstate, 6, "08006");
        PQexitPipelineMode(conn);
        return NULL;
    }
    /* BEGIN's result and NULL, the statement's and NULL, then the Sync.  The
     * Sync commits nothing here: the transaction block stays open. */
    PGresult *res[2] = { NULL, NULL }, *r;
    int failed = 0, synced = 0;
    for (int step = 0; step < 2 && PQstatus(conn) == CONNECTION_OK; step++) {
        while ((r = pgx_next_result(conn)) != NULL) {
            ExecStatusType st = PQresultStatus(r);
            if ((st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) && res[step] == NULL) {
                res[step] = r;
                continue;
            }
            if (st != PGRES_PIPELINE_ABORTED)
                note_error(conn, r, &failed, sqlstate, err, errlen);
            PQclear(r);
            if (PQstatus(conn) != CONNECTION_OK)
                break;
        }
    }
    while (PQstatus(conn) == CONNECTION_OK && (r = pgx_next_result(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        PQclear(r);
        if (st == PGRES_PIPELINE_SYNC) {
            synced = 1;
            break;
        }
    }
    if (!PQexitPipelineMode(conn) || !synced || res[0] == NULL || res[1] == NULL) {
        if (!failed) {
            copy_msg(err, errlen, "", PQerrorMessage(conn));
            if (sqlstate != NULL)
                snprintf(sqlstate, 6, "08006");
        }
        failed = 1;
    }
    PQclear(res[0]);
    if (failed) {
        PQclear(res[1]);
        return NULL;
    }
    return res[1];
}

void pgx_rollback(PGconn *conn)
{
    pgx_cmd(conn, "ROLLBACK", 0, NULL, NULL, NULL, 0);
}

char *pgx_uuid_array(const char *const *ids, size_t n)
{
    char *s = malloc(3 + n * (CW_UUID_LEN + 1));
    if (s == NULL)
        return NULL;
    size_t len = 0;
    s[len++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (!cw_uuid_valid(ids[i])) {
            free(s);
            return NULL;
        }
        if (i > 0)
            s[len++] = ',';
        memcpy(s + len, ids[i], CW_UUID_LEN);
        len += CW_UUID_LEN;
    }
    s[len++] = '}';
    s[len] = '\0';
    return s;
}

int pgx_is_retryable(const char *sqlstate)
{
    return sqlstate != NULL &&
           (strcmp(sqlstate, "40001") == 0 || strcmp(sqlstate, "40P01") == 0);
}

int pgx_conn_lost(PGconn *conn, const char *sqlstate)
{
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
        return 1;
    /* A pipeline whose results could not all be read (the server went away
     * between them: libpq notices a failed write only on a later read, so
     * the status can still say OK) leaves the connection in pipeline mode for
     * good; every ordinary statement on it then fails. */
    if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF)
        return 1;
    if (sqlstate == NULL)
        return 0;
    return strncmp(sqlstate, "08", 2) == 0 || strncmp(sqlstate, "57P0", 4) == 0;
}
