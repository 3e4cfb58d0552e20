/* outboxctl -- the operator's runbook for the outbox and inbox.
 *
 *   outboxctl --db CONNINFO migrate
 *
 * Exit codes: 0 success, 1 the operation failed (database unreachable, unknown
 * id, refused), 2 bad usage. */
#include "cwlog.h"
#include "pgx.h"
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: outboxctl --db CONNINFO COMMAND [ARGS]\n"
            "commands:\n"
            "  migrate            create or update the schema (idempotent)\n");
}

static int cmd_migrate(PGconn *conn, int argc, char **argv)
{
    char err[512];
    if (argc != 0) {
        fprintf(stderr, "outboxctl: migrate takes no arguments\n");
        return 2;
    }
    int rc = schema_migrate(conn, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "outboxctl: migrate failed: %s\n", err);
        return 1;
    }
    printf(rc == 1 ? "schema version %d applied\n" : "schema already at version %d\n",
           SCHEMA_VERSION);
    return 0;
}

int main(int argc, char **argv)
{
    const char *db = getenv("CW_DB");
    int i = 1;
    cwlog_open(NULL, "outboxctl");
    while (i < argc && strncmp(argv[i], "--", 2) == 0) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            db = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "outboxctl: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (db == NULL) {
        fprintf(stderr, "outboxctl: --db CONNINFO is required (or CW_DB)\n");
        return 2;
    }
    const char *cmd = argv[i++];
    if (strcmp(cmd, "migrate") != 0) {
        fprintf(stderr, "outboxctl: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    char err[512];
    PGconn *conn = pgx_connect(db, err, sizeof(err));
    if (conn == NULL) {
        fprintf(stderr, "outboxctl: %s\n", err);
        return 1;
    }
    int rc = cmd_migrate(conn, argc - i, argv + i);
    PQfinish(conn);
    return rc;
}
