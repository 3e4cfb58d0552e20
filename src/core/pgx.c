/* pgx.c -- libpq helpers; see pgx.h. */
#include "pgx.h"

#include "ids.h"
#include "sanitize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

PGconn *pgx_connect(const char *conninfo, char *err, size_t errlen)
{
    PGconn *conn = PQconnectdb(conninfo);
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

PGresult *pgx_exec(PGconn *conn, const char *sql, int nparams,
                   const char *const *params, char *sqlstate,
                   char *err, size_t errlen)
{
    if (sqlstate != NULL)
        sqlstate[0] = '\0';
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    if (sqlstate != NULL && res != NULL) {
        const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        snprintf(sqlstate, 6, "%s", s ? s : "");
    }
    if (res != NULL) {
        const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        copy_msg(err, errlen, "", primary ? primary : PQerrorMessage(conn));
    } else {
        copy_msg(err, errlen, "", PQerrorMessage(conn));
    }
    PQclear(res);
    return NULL;
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

PGresult *pgx_get_result(PGconn *conn, char *sqlstate, char *err, size_t errlen)
{
    PGresult *res, *first = NULL;
    int seen = 0;
    if (sqlstate != NULL)
        sqlstate[0] = '\0';
    /* Only the first result is the statement's; any later one is drained so
     * that the connection can take the next command. */
    while ((res = PQgetResult(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (!seen && (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)) {
            first = res;
        } else {
            if (!seen) {
                const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
                const char *m = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
                if (sqlstate != NULL)
                    snprintf(sqlstate, 6, "%s", s ? s : "");
                copy_msg(err, errlen, "", m ? m : PQerrorMessage(conn));
            }
            PQclear(res);
        }
        seen = 1;
    }
    if (!seen)
        copy_msg(err, errlen, "", PQerrorMessage(conn));
    return first;
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
