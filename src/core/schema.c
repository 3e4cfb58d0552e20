/* schema.c -- applies schema.sql once.
 *
 * schema.sql holds only constant DDL; it is sent with PQexec because it is a
 * multi-statement script and carries no value from outside.  Everything that
 * does carry a value goes through PQexecParams.
 *
 * schema.sql is written with IF NOT EXISTS throughout, so running it over an
 * older version adds what is new; what changed shape (an index with another
 * predicate) is dropped first by that version's upgrade step, below. */
#include "schema.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATE_LOCK_KEY "7311245"  /* advisory lock id shared by all migrators */

/* What to undo in a database at version `from` before schema.sql runs. */
static const struct {
    int from;
    const char *sql;
} upgrades[] = {
    /* Version 3 keeps rows in backoff out of the claim-order index (and
     * keeps the events of parked gaps, which needs no upgrade step). */
    { 1, "DROP INDEX IF EXISTS ix_outbox_claim_order" },
    { 2, "DROP INDEX IF EXISTS ix_outbox_claim_order" },
};

/* Runs the upgrade steps of every version older than SCHEMA_VERSION that the
 * database records.  0, or -1 with a message in err. */
static int run_upgrades(PGconn *conn, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof(upgrades) / sizeof(upgrades[0]); i++) {
        char from[16];
        snprintf(from, sizeof(from), "%d", upgrades[i].from);
        const char *params[1] = { from };
        PGresult *res = pgx_exec(conn, "SELECT 1 FROM schema_migrations WHERE version = $1::int",
                                 1, params, NULL, err, errlen);
        if (res == NULL)
            return -1;
        int applies = PQntuples(res) > 0;
        PQclear(res);
        if (applies && pgx_cmd(conn, upgrades[i].sql, 0, NULL, NULL, err, errlen) < 0)
            return -1;
    }
    return 0;
}

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
    /* Re-running IF NOT EXISTS statements over an older version is expected:
     * their notices ("already exists, skipping") are not news. */
    if (pgx_cmd(conn, "SET LOCAL client_min_messages = warning", 0, NULL, NULL, err, errlen) < 0)
        goto out;
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
    if (run_upgrades(conn, err, errlen) < 0)
        goto out;
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
