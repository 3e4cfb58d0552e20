/* relay.h -- the outbox relay: configuration and the run loop.
 *
 *   outbox-relay --db CONNINFO --broker SOCKET [--name ID] [--batch N]
 *                [--lease-ms N] [--backoff-base-ms N] [--backoff-cap-ms N]
 *                [--max-attempts N] [--idle-ms N] [--order fifo|per-aggregate]
 *                [--events FILE] [--metrics-listen HOST:PORT]
 *                [--print-sql claim|mark|retry|dead_letter]
 *
 * The loop (relay_loop.c): claim a batch under a lease in one short
 * statement, publish each message outside any transaction, then settle each:
 * mark published, schedule a retry, or dead-letter, always fenced by the
 * worker's lock_id.  The row lifecycle is drawn in relay_store.h. */
#ifndef CW_RELAY_H
#define CW_RELAY_H

#include "relay_policy.h"
#include "relay_store.h"

#include <stddef.h>
#include <stdio.h>

struct relay_config {
    const char *db;          /* libpq conninfo; never logged or stored */
    const char *broker;      /* the broker's Unix socket path */
    const char *events;      /* events file; NULL = stderr */
    char name[64];           /* process name in events; default relay-<pid> */
    int batch;
    int lease_ms;
    int backoff_base_ms;
    int backoff_cap_ms;
    int max_attempts;
    int idle_ms;
    enum relay_order order;
    const char *metrics_listen; /* serve /metrics there; NULL = not at all */
    int pipeline_metrics;       /* and the pipeline's figures on it (default 1) */
    const char *print_sql;   /* non-NULL: print that statement and exit */
};

/* Fills cfg from argv (argv[0] is skipped).  Returns 0 when the relay should
 * run, 1 when usage was asked for (--help), -1 with a message in err on a bad
 * or missing flag.  --db falls back to the CW_DB environment variable. */
int relay_config_parse(struct relay_config *cfg, int argc, char **argv,
                       char *err, size_t errlen);

/* Writes the usage text to f. */
void relay_usage(FILE *f);

/* Blocks SIGTERM and SIGINT (they are taken only at safe points: between
 * messages and while idle) and installs their handler.  Call before any
 * thread is started (fault_init starts libfiu's control thread), so that
 * every thread inherits the blocked mask. */
void relay_signals_init(void);

/* 1 once SIGTERM or SIGINT has arrived. */
int relay_stopping(void);

/* Runs until SIGTERM/SIGINT.  Database and broker failures are survived by
 * reconnecting with backoff.  Returns the process exit code (0 after a clean
 * stop). */
int relay_run(const struct relay_config *cfg);

#endif
