/* relay_config.c -- the relay's command line: every flag validated, with a
 * message naming the flag and the accepted range. */
#include "relay.h"
#include "relay_options.h"
#include "bus.h"
#include "cliutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void relay_usage(FILE *f)
{
    fprintf(f,
            "usage: outbox-relay --db CONNINFO --broker ADDR [options]\n"
            "  --db CONNINFO          PostgreSQL connection string (or CW_DB)\n"
            "  --broker ADDR          the fake broker's Unix socket, or RabbitMQ as\n"
            "                         amqp://USER:PASS@HOST:PORT/VHOST[?exchange=X]\n"
            "  --name ID              process name in events and at the broker (relay-<pid>)\n"
            "  --batch N              rows claimed per iteration, 1..10000 (%d)\n"
            "  --lease-ms N           lease on claimed rows, 100..86400000 (%d)\n"
            "  --backoff-base-ms N    retry delay base: min(cap, base*2^attempts), jittered (%d)\n"
            "  --backoff-cap-ms N     retry delay cap (%d)\n"
            "  --max-attempts N       dead-letter when a publish fails at this attempt, 1..1000 (%d);\n"
            "                         a row claimed past it is dead-lettered unpublished\n"
            "  --idle-ms N            poll interval when idle; NOTIFY wakes earlier (%d)\n"
            "  --order MODE           fifo (default) or per-aggregate: a row waits while an\n"
            "                         older version of its aggregate is unpublished, a\n"
            "                         dead-lettered one included (requeue it to release them)\n"
            "  --events FILE          JSON-lines events (default stderr)\n"
            "  --metrics-listen HOST:PORT  serve Prometheus metrics at /metrics there\n"
            "                         (IPv4, [IPv6] or localhost; port 0 picks a free one)\n"
            "  --pipeline-metrics on|off  the pipeline's figures from the database there too\n"
            "                         (default on: the relay exports them, the API and the\n"
            "                         consumer do not unless told to)\n"
            "  --print-sql WHICH      print the claim, mark, retry or dead_letter statement and exit\n"
            "SIGTERM finishes the messages in flight (publish and mark) and exits 0; the\n"
            "rest of the batch is left to its lease.\n",
            RELAY_DEFAULT_BATCH, RELAY_DEFAULT_LEASE_MS, RELAY_DEFAULT_BACKOFF_BASE_MS,
            RELAY_DEFAULT_BACKOFF_CAP_MS, RELAY_DEFAULT_MAX_ATTEMPTS, RELAY_DEFAULT_IDLE_MS);
}

int relay_config_parse(struct relay_config *cfg, int argc, char **argv,
                       char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->db = getenv("CW_DB");
    cfg->batch = RELAY_DEFAULT_BATCH;
    cfg->lease_ms = RELAY_DEFAULT_LEASE_MS;
    cfg->pipeline_metrics = 1;
    cfg->backoff_base_ms = RELAY_DEFAULT_BACKOFF_BASE_MS;
    cfg->backoff_cap_ms = RELAY_DEFAULT_BACKOFF_CAP_MS;
    cfg->max_attempts = RELAY_DEFAULT_MAX_ATTEMPTS;
    cfg->idle_ms = RELAY_DEFAULT_IDLE_MS;
    cfg->order = RELAY_ORDER_FIFO;
    snprintf(cfg->name, sizeof(cfg->name), "relay-%ld", (long)getpid());

    struct cw_opt opts[RELAY_NOPTS];
    size_t nopts = relay_options(cfg, opts);
    int rc = cw_opts_parse(opts, nopts, &cw_pairs_style, argc, argv, NULL, err, errlen);
    if (rc == CW_OPTS_HELP)
        return 1;
    if (rc < 0)
        return -1;
    if (cfg->print_sql != NULL)
        return 0;
    if (cfg->backoff_cap_ms < cfg->backoff_base_ms) {
        snprintf(err, errlen, "--backoff-cap-ms (%d) is below --backoff-base-ms (%d)",
                 cfg->backoff_cap_ms, cfg->backoff_base_ms);
        return -1;
    }
    if (cfg->db == NULL || cfg->db[0] == '\0') {
        snprintf(err, errlen, "--db CONNINFO is required (or CW_DB)");
        return -1;
    }
    if (cfg->broker == NULL || cfg->broker[0] == '\0') {
        snprintf(err, errlen, "--broker ADDR is required");
        return -1;
    }
    char why[200];
    if (bus_check_address(cfg->broker, why, sizeof(why)) != BUS_OK) {
        snprintf(err, errlen, "--broker: %s", why);
        return -1;
    }
    return 0;
}
