/* relay_metrics.c -- the relay's counts and its /metrics page; see
 * relay_metrics.h. */
#include "relay_metrics.h"

#include "metrics_http.h"
#include "pipeline_stats.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Atomic unsigned long long counts[RELAY_COUNT_N];

/* The page's rows, in enum relay_count order. */
static const struct promtext_counter rows[RELAY_COUNT_N] = {
    [RELAY_CLAIMS] = { "outbox_relay_claims_total", "Claims that took at least one row.",
                       NULL, NULL },
    [RELAY_CLAIMED] = { "outbox_relay_claimed_messages_total",
                        "Rows taken under a lease by this relay's claims.", NULL, NULL },
    [RELAY_PUBLISHED] = { "outbox_relay_published_total",
                          "Messages this relay published and the broker confirmed.",
                          NULL, NULL },
    [RELAY_PUBLISH_FAILED] = { "outbox_relay_publish_failures_total",
                               "Publishes that failed (refused, timed out, connection lost).",
                               NULL, NULL },
    [RELAY_MARKED] = { "outbox_relay_marked_total",
                       "Rows this relay marked published (each fenced by its claim token).", NULL, NULL },
    [RELAY_MARKS_WITH_CLAIM] = { "outbox_relay_mark_commits_total",
                                 "Mark statements committed: with the claim of a batch ahead "
                                 "(one commit per batch), or on their own.",
                                 "commit", "with_claim" },
    [RELAY_MARKS_ALONE] = { "outbox_relay_mark_commits_total", NULL, "commit", "alone" },
    [RELAY_RETRIES] = { "outbox_relay_retries_total",
                        "Retries scheduled after a failed publish (persisted backoff).",
                        NULL, NULL },
    [RELAY_DEAD_LETTERS] = { "outbox_relay_dead_letters_total", "Rows this relay dead-lettered.",
                             NULL, NULL },
    [RELAY_EXPIRED_LEASES] = { "outbox_relay_expired_leases_recovered_total",
                               "Rows claimed whose previous lease had expired unsettled.",
                               NULL, NULL },
    [RELAY_LEASES_LOST] = { "outbox_relay_leases_lost_total",
                            "Settles that found the row re-claimed by another worker.",
                            NULL, NULL },
    [RELAY_RECONNECTS_DB] = { "outbox_relay_reconnects_total",
                              "Connections lost or refused, then tried again.", "target", "db" },
    [RELAY_RECONNECTS_BROKER] = { "outbox_relay_reconnects_total", NULL, "target", "broker" },
};

static metrics_server *server;
static struct pipeline_source source;
static char proc_name[64];
static char app_name[80];
static char worker_id[40];
static atomic_int worker_known;

void relay_count(enum relay_count which, long long n)
{
    if (which >= 0 && which < RELAY_COUNT_N && n > 0)
        atomic_fetch_add(&counts[which], (unsigned long long)n);
}

void relay_metrics_worker(const char *worker)
{
    if (atomic_load(&worker_known))
        return;
    snprintf(worker_id, sizeof(worker_id), "%s", worker);
    atomic_store(&worker_known, 1);
}

static void render(void *arg, struct promtext *p)
{
    (void)arg;
    unsigned long long values[RELAY_COUNT_N];
    for (int i = 0; i < RELAY_COUNT_N; i++)
        values[i] = atomic_load(&counts[i]);
    promtext_family(p, "outbox_relay_info", "gauge",
                    "This relay: its process name and worker id (the locked_by it writes).");
    promtext_sample(p, "outbox_relay_info",
                    (const char *[]){ "name", proc_name, "worker",
                                      atomic_load(&worker_known) ? worker_id : "", NULL },
                    1);
    promtext_counters(p, rows, values, RELAY_COUNT_N, NULL);
    pipeline_source_write(&source, p);
}

int relay_metrics_start(const char *address, const char *conninfo, const char *name,
                        char *err, size_t errlen)
{
    snprintf(proc_name, sizeof(proc_name), "%s", name);
    source.conninfo = conninfo;
    snprintf(app_name, sizeof(app_name), "%s metrics", name);
    source.app_name = app_name;
    source.timeout_ms = 5000;
    server = metrics_server_start(address, render, NULL, err, errlen);
    return server != NULL ? 0 : -1;
}

const char *relay_metrics_address(void)
{
    return server != NULL ? metrics_server_address(server) : NULL;
}

void relay_metrics_stop(void)
{
    metrics_server_stop(server);
    server = NULL;
    pipeline_source_close(&source);
}
