/* consumer_config.h -- the command line of accounting-consumer.
 *
 *   accounting-consumer --db CONNINFO --broker SOCKET [--name accounting]
 *       [--group NAME] [--effect ledger|notification] [--prefetch N] [--batch N]
 *       [--events FILE] [--proc-name NAME] [--metrics-listen HOST:PORT] ...
 *       (see consumer_usage)
 *
 * The effect follows from the name for the known consumers (accounting ->
 * ledger, notifications -> notification); any other name must say which
 * effect it applies with --effect, otherwise the command is refused (exit 2):
 * a typo in a name must not silently book money under a new consumer. */
#ifndef CW_CONSUMER_CONFIG_H
#define CW_CONSUMER_CONFIG_H

#include "consumer_effect.h"

#include <stddef.h>
#include <stdio.h>

#define CONSUMER_BATCH_MAX 256

struct consumer_config {
    const char *db;                  /* conninfo (--db or CW_DB) */
    const char *broker;              /* broker socket path */
    const char *name;                /* consumer name: inbox and effect rows carry it */
    const char *group;               /* broker consumer group (default: name) */
    const char *topic;               /* "payments" */
    const struct consumer_effect *effect;
    const char *events;              /* JSON-lines events file, NULL = stderr */
    const char *metrics_listen;      /* serve /metrics there; NULL = not at all */
    int pipeline_metrics;            /* and the pipeline's figures on it (default 0) */
    char proc[64];                   /* process name in events (default name-pid) */
    int prefetch;                    /* unacked deliveries in flight */
    int batch;                       /* deliveries per transaction (1 = one each) */
    int poison_max_deliveries;       /* park poison at this delivery count */
    int poison_delay_ms;             /* nack delay for poison before it is parked */
    int gap_delay_ms;                /* nack delay for a version gap */
    int gap_park_after_ms;           /* park a gap first seen this long ago */
    int retry_delay_ms;              /* nack delay after a failed attempt */
    int tx_retries;                  /* attempts on 40001/40P01 */
    int lock_timeout_ms;             /* lock_timeout of the session, 0 = none */
    int bus_timeout_ms;              /* bounds every broker call */
    int connect_timeout_ms;          /* how long to keep trying at start */
};

/* Fills cfg from argv (cfg->proc gets "<name>-<pid>" unless --proc-name).
 * Returns 0; 1 when --help was asked (usage already printed to out); or -1
 * with a message in err (bad usage: the caller exits 2). */
int consumer_config_parse(int argc, char **argv, struct consumer_config *cfg,
                          FILE *out, char *err, size_t errlen);

void consumer_usage(FILE *f);

#endif
