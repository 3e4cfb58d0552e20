/* schema.c -- applies schema.sql once.
 *
 * schema.sql holds only constant DDL; it is sent with PQexec because it is a
 * multi-statement script and carries no value from outside.  Everything that
 * does carry a value goes through PQexecParams. */
#include "schema.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATE_LOCK_KEY "7311245"  /* advisory lock id shared by all migrators */

int schema_migrate(PGconn *conn, char *err, size_t errlen)
{
    int rc = -1;
    int in_tx = 0;
    PGresult *res = NULL;
    char version[16];
    snprintf(version, sizeof(version), "%d", SCHEMA_VERSION);
    const char *vparams[1] = { version };
    const char *lparams[1] = { MIGRATE_LOCK_KEY };

    if (pgx_cmd(conn, "BEGIN", 0, NULL, NULL, err, errlen) < 0)
        goto out;
    in_tx = 1;
    if (pgx_cmd(conn, "SELECT pg_advisory_xact_lock($1::bigint)", 1, lparams,
                NULL, err, errlen) < 0)
        goto out;
    if (pgx_cmd(conn, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                      " version integer PRIMARY KEY,"
                      " applied_at timestamptz NOT NULL DEFAULT now())",
                0, NULL, NULL, err, errlen) < 0)
        goto out;
    res = pgx_exec(conn, "SELECT 1 FROM schema_migrations WHERE version = $1::int",
                   1, vparams, NULL, err, errlen);
    if (res == NULL)
        goto out;
    int current = PQntuples(res) > 0;
    PQclear(res);
    res = NULL;
    if (current) {
        rc = 0;
        goto out;
    }
    res = PQexec(conn, schema_sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        snprintf(err, errlen, "schema: %s", PQresultErrorMessage(res));
        goto out;
    }
    PQclear(res);
    res = NULL;
    if (pgx_cmd(conn, "INSERT INTO schema_migrations (version) VALUES ($1::int)",
                1, vparams, NULL, err, errlen) < 0)
        goto out;
    if (pgx_cmd(conn, "COMMIT", 0, NULL, NULL, err, errlen) < 0) {
        in_tx = 0;
        goto out;
    }
    in_tx = 0;
    rc = 1;
out:
    PQclear(res);
    if (in_tx) {
        PGresult *r = PQexec(conn, rc == 0 ? "COMMIT" : "ROLLBACK");
        PQclear(r);
    }
    return rc;
}
