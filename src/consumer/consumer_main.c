/* accounting-consumer -- the inbox consumer of the "payments" topic.
 *
 *   accounting-consumer --db CONNINFO --broker SOCKET [--name accounting]
 *       [--group accounting] [--prefetch N] [--batch N] [--events FILE] ...
 *
 * The same binary serves every consumer name; the name picks the effect
 * (accounting books ledger entries, notifications writes notification rows;
 * other names need --effect).  See consumer_loop.h for the transaction and
 * failure design, consumer_inbox.h for the inbox and version rules,
 * consumer_event.h for what makes a message poison.
 *
 * Exit codes: 0 after SIGTERM/SIGINT (the transaction in progress finished),
 * 1 when the database or broker cannot be reached at start, 2 bad usage, a
 * bad CW_FAULTS specification, or a --metrics-listen address that cannot be
 * bound (checked first, before anything is opened). */
#include "consumer_config.h"
#include "consumer_loop.h"
#include "consumer_metrics.h"
#include "cwlog.h"
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_signal(int sig)
{
    (void)sig;
    consumer_request_stop();
}

int main(int argc, char **argv)
{
    struct consumer_config cfg;
    char err[512];
    int rc = consumer_config_parse(argc, argv, &cfg, stdout, err, sizeof(err));
    if (rc == 1)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "accounting-consumer: %s\n", err);
        consumer_usage(stderr);
        return 2;
    }
    if (cfg.metrics_listen != NULL &&
        consumer_metrics_start(cfg.metrics_listen, cfg.pipeline_metrics ? cfg.db : NULL,
                               cfg.name, cfg.proc, err, sizeof(err)) < 0) {
        fprintf(stderr, "accounting-consumer: --metrics-listen %s\n", err);
        return 2;
    }
    if (cwlog_open(cfg.events, cfg.proc) < 0) {
        fprintf(stderr, "accounting-consumer: cannot open events file %s\n", cfg.events);
        return 2;
    }
    if (consumer_metrics_address() != NULL)
        cwlog_simple("metrics_listening", "address", consumer_metrics_address());
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "accounting-consumer: %s\n", err);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* libpq reads PGAPPNAME when the conninfo names no application: the
     * process name then shows in pg_stat_activity. */
    setenv("PGAPPNAME", cfg.proc, 0);

    rc = consumer_run(&cfg);
    consumer_metrics_stop();
    return rc;
}
