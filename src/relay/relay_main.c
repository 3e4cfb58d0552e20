/* relay_main.c -- outbox-relay: parses the command line, opens the events
 * file, arms the fault points and runs the relay loop (relay_loop.c).
 *
 * Exit codes: 0 after SIGTERM/SIGINT (or --help, --print-sql), 2 on bad usage
 * or when the events file, the fault points or the metrics endpoint cannot be
 * set up.  The endpoint is bound first, so that a port in use stops the relay
 * before it has opened or claimed anything. */
#include "relay.h"
#include "relay_metrics.h"

#include "cwlog.h"
#include "fault.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    struct relay_config cfg;
    char err[512];
    int rc = relay_config_parse(&cfg, argc, argv, err, sizeof(err));
    if (rc == 1) {
        relay_usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "outbox-relay: %s\n", err);
        relay_usage(stderr);
        return 2;
    }
    if (cfg.print_sql != NULL) {
        printf("%s\n", relay_sql(cfg.print_sql, cfg.order));
        return 0;
    }
    if (cfg.metrics_listen != NULL &&
        relay_metrics_start(cfg.metrics_listen, cfg.pipeline_metrics ? cfg.db : NULL, cfg.name,
                            err, sizeof(err)) < 0) {
        fprintf(stderr, "outbox-relay: --metrics-listen %s\n", err);
        return 2;
    }
    if (cwlog_open(cfg.events, cfg.name) < 0) {
        fprintf(stderr, "outbox-relay: cannot open events file %s\n", cfg.events);
        return 2;
    }
    if (relay_metrics_address() != NULL)
        cwlog_simple("metrics_listening", "address", relay_metrics_address());
    /* Before fault_init: its control thread must inherit the blocked stop
     * signals, so that only the loop's safe points ever take them. */
    relay_signals_init();
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "outbox-relay: %s\n", err);
        return 2;
    }
    rc = relay_run(&cfg);
    relay_metrics_stop();
    return rc;
}
