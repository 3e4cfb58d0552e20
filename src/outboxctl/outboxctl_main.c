/* outboxctl -- the operator's runbook for the outbox and inbox.
 *
 *   outboxctl --db CONNINFO COMMAND [ARGS]
 *
 * The commands live in outboxctl_*.c (see outboxctl.h); this file parses the
 * global options and dispatches.  Arguments are validated before anything
 * connects, so bad usage is reported even when the database is down.
 *
 * Exit codes: 0 success, 1 the operation failed (database unreachable, unknown
 * id, refused), 2 bad usage. */
#include "cliutil.h"
#include "cwlog.h"
#include "outboxctl.h"
#include "pgx.h"
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: outboxctl --db CONNINFO COMMAND [ARGS]      (--db may come from CW_DB)\n"
            "commands:\n"
            "  migrate                      create or update the schema (idempotent)\n"
            "  status [--json]              pending rows (ready, in backoff, leased), oldest\n"
            "                               pending age, live and expired leases, dead letters,\n"
            "                               attempts histogram, publish latency p50/p99; per\n"
            "                               consumer: processed, duplicates ignored, gaps,\n"
            "                               parked gaps, dead letters, processing latency\n"
            "  metrics                      the same in Prometheus text format\n"
            "  dead-letters list [--json]   dead letters grouped by error fingerprint\n"
            "  dead-letters show ID [--show-payload]\n"
            "                               one dead letter; payload values redacted unless asked\n"
            "  requeue ID... | --fingerprint F | --all\n"
            "                               send dead letters again, keeping their ids: clears\n"
            "                               dead_lettered_at and last_error, due now, and resets\n"
            "                               attempts to 0 so the row gets a full new set of\n"
            "                               attempts; the old attempts and error are recorded in\n"
            "                               outbox_requeues\n"
            "  cleanup --published-older-than DURATION [--batch N]\n"
            "                               delete published outbox rows older than DURATION,\n"
            "                               in keyset batches of N (1000), each its own short\n"
            "                               transaction; skips a row another command holds\n"
            "                               (a replay); reports rows and time\n"
            "  cleanup-inbox --older-than DURATION [--horizon DURATION] [--batch N]\n"
            "                [--max-attempts N] [--backoff-base-ms N] [--backoff-cap-ms N]\n"
            "                [--lease-ms N]\n"
            "                               delete inbox markers older than DURATION; refuses a\n"
            "                               retention shorter than the redelivery horizon (the\n"
            "                               sum of all backoffs up to the attempt limit plus a\n"
            "                               lease per attempt, for the relay settings given,\n"
            "                               defaults as the relay's: 29m30s), or than --horizon;\n"
            "                               never deletes the marker of a message unpublished\n"
            "                               at the moment of the delete (a replay included)\n"
            "  parked list [--consumer NAME] [--json]\n"
            "                               the consumers' parked events: poison, and versions\n"
            "                               parked while their predecessor had not arrived\n"
            "  parked show CONSUMER ID [--show-payload]\n"
            "                               one parked event; amount and currency redacted\n"
            "                               unless asked\n"
            "  parked replay CONSUMER ID...\n"
            "                               give parked events back to their consumer group:\n"
            "                               removes the dead letter and the group's inbox\n"
            "                               marker and publishes the outbox row again under\n"
            "                               its id (other groups absorb the copy), its attempts\n"
            "                               reset to 0 as a requeue does; recorded in\n"
            "                               consumer_replays and outbox_requeues\n"
            "durations: a number and a unit, ms s m h d (30s, 15m, 2h, 7d)\n"
            "exit codes: 0 success, 1 failed (database unreachable, unknown id, refused),\n"
            "            2 bad usage\n");
}

static int cmd_migrate(struct ctl *c, int argc, char **argv)
{
    char err[512];
    if (argc != 0) {
        fprintf(stderr, "outboxctl: migrate takes no arguments\n");
        return CTL_USAGE;
    }
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    int rc = schema_migrate(conn, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "outboxctl: migrate failed: %s\n", err);
        return CTL_FAILED;
    }
    printf(rc == 1 ? "schema version %d applied\n" : "schema already at version %d\n",
           SCHEMA_VERSION);
    return CTL_OK;
}

static const struct {
    const char *name;
    int (*run)(struct ctl *c, int argc, char **argv);
} commands[] = {
    { "migrate", cmd_migrate },
    { "status", ctl_status },
    { "metrics", ctl_metrics },
    { "dead-letters", ctl_dead_letters },
    { "requeue", ctl_requeue },
    { "cleanup", ctl_cleanup },
    { "cleanup-inbox", ctl_cleanup_inbox },
    { "parked", ctl_parked },
};

/* The global options come before the command, which ends them. */
static const struct cw_opts_style global_style = {
    .prefix = "--",
    .help = CW_HELP_LONG,
    .unknown = "unknown option '%s'",
    .missing = "unknown option '%s'",
};

int main(int argc, char **argv)
{
    struct ctl c = { getenv("CW_DB"), NULL };
    int i = 1;
    cwlog_open(NULL, "outboxctl");
    const struct cw_opt opts[] = { CW_OPT_STRING("--db", &c.db) };
    char err[4096];
    int pr = cw_opts_parse(opts, CW_NOPTS(opts), &global_style, argc, argv, &i, err,
                           sizeof(err));
    if (pr == CW_OPTS_HELP) {
        usage(stdout);
        return CTL_OK;
    }
    if (pr < 0) {
        fprintf(stderr, "outboxctl: %s\n", err);
        usage(stderr);
        return CTL_USAGE;
    }
    if (i >= argc) {
        usage(stderr);
        return CTL_USAGE;
    }
    const char *cmd = argv[i++];
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
        if (strcmp(cmd, commands[k].name) != 0)
            continue;
        if (c.db == NULL || c.db[0] == '\0') {
            fprintf(stderr, "outboxctl: --db CONNINFO is required (or CW_DB)\n");
            return CTL_USAGE;
        }
        int rc = commands[k].run(&c, argc - i, argv + i);
        if (c.conn != NULL)
            PQfinish(c.conn);
        return rc;
    }
    fprintf(stderr, "outboxctl: unknown command '%s'\n", cmd);
    usage(stderr);
    return CTL_USAGE;
}
