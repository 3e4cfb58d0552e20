/* api_metrics.c -- the API's counts and its /metrics page; see
 * api_metrics.h.
 *
 * Commands are counted per (command, status) over the statuses the store
 * answers with, each pair present from the start at 0, so that a rate over
 * a pair that has not happened yet is 0 rather than missing. */
#include "api_metrics.h"

#include "metrics_http.h"
#include "pipeline_stats.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define KINDS 3
static const char *const kind_names[KINDS] = { "create", "authorize", "capture" };
static const int statuses[] = { 200, 201, 404, 409, 422, 500, 503 };
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

static _Atomic unsigned long long commands[KINDS][NSTATUS + 1]; /* + other */
static _Atomic unsigned long long replays[KINDS];
static _Atomic unsigned long long retries, ambiguous;

static metrics_server *server;
static struct pipeline_source source;
static char app_name[80];

static int kind_index(enum api_command_kind kind)
{
    switch (kind) {
    case API_CMD_CREATE:
        return 0;
    case API_CMD_AUTHORIZE:
        return 1;
    case API_CMD_CAPTURE:
    default:
        return 2;
    }
}

void api_metrics_command(enum api_command_kind kind, int status, int replayed)
{
    int k = kind_index(kind);
    size_t s = NSTATUS;
    for (size_t i = 0; i < NSTATUS; i++)
        if (statuses[i] == status)
            s = i;
    atomic_fetch_add(&commands[k][s], 1);
    if (replayed)
        atomic_fetch_add(&replays[k], 1);
}

void api_metrics_retry(void)
{
    atomic_fetch_add(&retries, 1);
}

void api_metrics_ambiguous(void)
{
    atomic_fetch_add(&ambiguous, 1);
}

static void render(void *arg, struct promtext *p)
{
    (void)arg;
    const char *name = "payments_api_commands_total";
    promtext_family(p, name, "counter",
                    "Commands run by the store (valid POST /payments, /authorize, /capture), "
                    "by the HTTP status answered; requests refused before (400, 413, 415) "
                    "are not counted here.");
    for (int k = 0; k < KINDS; k++) {
        for (size_t s = 0; s <= NSTATUS; s++) {
            char code[16];
            snprintf(code, sizeof(code), s < NSTATUS ? "%d" : "other",
                     s < NSTATUS ? statuses[s] : 0);
            promtext_sample(p, name,
                            (const char *[]){ "command", kind_names[k], "status", code, NULL },
                            (double)atomic_load(&commands[k][s]));
        }
    }
    name = "payments_api_replays_total";
    promtext_family(p, name, "counter",
                    "Commands answered from their idempotency record (same key, same request).");
    for (int k = 0; k < KINDS; k++)
        promtext_sample(p, name, (const char *[]){ "command", kind_names[k], NULL },
                        (double)atomic_load(&replays[k]));
    promtext_family(p, "payments_api_transaction_retries_total", "counter",
                    "Transactions run again: serialization failure, deadlock, or a connection "
                    "lost before COMMIT.");
    promtext_sample(p, "payments_api_transaction_retries_total", NULL,
                    (double)atomic_load(&retries));
    promtext_family(p, "payments_api_ambiguous_commits_total", "counter",
                    "COMMITs whose outcome was not seen and was settled from the transaction id.");
    promtext_sample(p, "payments_api_ambiguous_commits_total", NULL,
                    (double)atomic_load(&ambiguous));
    pipeline_source_write(&source, p);
}

int api_metrics_start(const char *address, const char *conninfo, const char *name,
                      char *err, size_t errlen)
{
    if (address == NULL)
        return 0;
    snprintf(app_name, sizeof(app_name), "%s metrics", name);
    source.conninfo = conninfo;
    source.app_name = app_name;
    source.timeout_ms = 5000;
    server = metrics_server_start(address, render, NULL, err, errlen);
    return server != NULL ? 0 : -1;
}

const char *api_metrics_address(void)
{
    return server != NULL ? metrics_server_address(server) : NULL;
}

void api_metrics_stop(void)
{
    metrics_server_stop(server);
    server = NULL;
    pipeline_source_close(&source);
}
