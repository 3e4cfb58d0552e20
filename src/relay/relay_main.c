/* relay_main.c -- outbox-relay: parses the command line, opens the events
 * file, arms the fault points and runs the relay loop (relay_loop.c).
 *
 * Exit codes: 0 after SIGTERM/SIGINT (or --help, --print-sql), 2 on bad usage
 * or when the events file or the fault points cannot be set up. */
#include "relay.h"

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
    if (cwlog_open(cfg.events, cfg.name) < 0) {
        fprintf(stderr, "outbox-relay: cannot open events file %s\n", cfg.events);
        return 2;
    }
    /* Before fault_init: its control thread must inherit the blocked stop
     * signals, so that only the loop's safe points ever take them. */
    relay_signals_init();
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "outbox-relay: %s\n", err);
        return 2;
    }
    return relay_run(&cfg);
}
