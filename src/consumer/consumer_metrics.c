/* consumer_metrics.c -- a consumer's counts and its /metrics page; see
 * consumer_metrics.h. */
#include "consumer_metrics.h"

#include "metrics_http.h"
#include "pipeline_stats.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Atomic unsigned long long counts[CONSUMER_COUNT_N];

/* The page's rows, in enum consumer_count order. */
static const struct promtext_counter rows[CONSUMER_COUNT_N] = {
    [CONSUMER_DELIVERIES] = { "inbox_consumer_deliveries_total",
                              "Deliveries received from the broker (redeliveries included).",
                              NULL, NULL },
    [CONSUMER_APPLIED] = { "inbox_consumer_applied_total",
                           "Events applied: effect and inbox marker committed together.",
                           NULL, NULL },
    [CONSUMER_DUPLICATES] = { "inbox_consumer_duplicates_total",
                              "Deliveries the inbox absorbed: already processed, no effect.",
                              NULL, NULL },
    [CONSUMER_STALE] = { "inbox_consumer_stale_total",
                         "Deliveries of a version older than the one applied.", NULL, NULL },
    [CONSUMER_GAPS] = { "inbox_consumer_gaps_total",
                        "Deliveries held back because an earlier version was missing.",
                        NULL, NULL },
    [CONSUMER_PARKED_POISON] = { "inbox_consumer_parked_total",
                                 "Deliveries parked in consumer_dead_letters, by kind.",
                                 "kind", "poison" },
    [CONSUMER_PARKED_GAP] = { "inbox_consumer_parked_total", NULL, "kind", "gap_parked" },
    [CONSUMER_ACKS] = { "inbox_consumer_acks_total", "Acknowledgements, each after its COMMIT.",
                        NULL, NULL },
    [CONSUMER_NACKS] = { "inbox_consumer_nacks_total",
                         "Deliveries handed back to the broker for a later redelivery.",
                         NULL, NULL },
    [CONSUMER_TX_RETRIES] = { "inbox_consumer_transaction_retries_total",
                              "Transactions run again after a serialization failure or deadlock.",
                              NULL, NULL },
    [CONSUMER_RECONNECTS_DB] = { "inbox_consumer_reconnects_total",
                                 "Connections lost or refused, then tried again.", "target", "db" },
    [CONSUMER_RECONNECTS_BROKER] = { "inbox_consumer_reconnects_total", NULL, "target",
                                     "broker" },
};

static metrics_server *server;
static struct pipeline_source source;
static char consumer_name[64];
static char app_name[80];

void consumer_count(enum consumer_count which, long long n)
{
    if (which >= 0 && which < CONSUMER_COUNT_N && n > 0)
        atomic_fetch_add(&counts[which], (unsigned long long)n);
}

static void render(void *arg, struct promtext *p)
{
    (void)arg;
    unsigned long long values[CONSUMER_COUNT_N];
    for (int i = 0; i < CONSUMER_COUNT_N; i++)
        values[i] = atomic_load(&counts[i]);
    promtext_counters(p, rows, values, CONSUMER_COUNT_N,
                      (const char *[]){ "consumer", consumer_name, NULL });
    pipeline_source_write(&source, p);
}

int consumer_metrics_start(const char *address, const char *conninfo, const char *consumer,
                           const char *proc, char *err, size_t errlen)
{
    snprintf(consumer_name, sizeof(consumer_name), "%s", consumer);
    snprintf(app_name, sizeof(app_name), "%s metrics", proc);
    source.conninfo = conninfo;
    source.app_name = app_name;
    source.timeout_ms = 5000;
    server = metrics_server_start(address, render, NULL, err, errlen);
    return server != NULL ? 0 : -1;
}

const char *consumer_metrics_address(void)
{
    return server != NULL ? metrics_server_address(server) : NULL;
}

void consumer_metrics_stop(void)
{
    metrics_server_stop(server);
    server = NULL;
    pipeline_source_close(&source);
}
