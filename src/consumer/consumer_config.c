/* consumer_config.c -- command-line parsing; see consumer_config.h.
 *
 * Every value is checked here, with a message naming the option, so that the
 * daemon proper never meets a nonsensical setting: numbers must be whole,
 * in range, and nothing else; names are short and made of [A-Za-z0-9._-]. */
#include "consumer_config.h"
#include "consumer_options.h"
#include "bus.h"
#include "cliutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void consumer_usage(FILE *f)
{
    fprintf(f,
            "usage: accounting-consumer --db CONNINFO --broker ADDR [options]\n"
            "  --db CONNINFO              PostgreSQL connection string (or CW_DB)\n"
            "  --broker ADDR              the fake broker's Unix socket, or RabbitMQ as\n"
            "                             amqp://USER:PASS@HOST:PORT/VHOST[?exchange=X]\n"
            "  --name NAME                consumer name (default accounting)\n"
            "  --group GROUP              broker consumer group (default: the name)\n"
            "  --effect EFFECT            ledger | notification (default: from the name:\n"
            "                             accounting -> ledger, notifications -> notification;\n"
            "                             required for any other name)\n"
            "  --topic TOPIC              default payments\n"
            "  --prefetch N               unacked deliveries in flight, 1-1000 (default 10)\n"
            "  --batch N                  deliveries per transaction, 1-%d (default 1)\n"
            "  --events FILE              JSON-lines events (default stderr)\n"
            "  --proc-name NAME           process name in events (default NAME-PID)\n"
            "  --metrics-listen HOST:PORT serve Prometheus metrics at /metrics there (IPv4,\n"
            "                             [IPv6] or localhost; port 0 picks a free one)\n"
            "  --pipeline-metrics on|off  the pipeline's figures from the database there too\n"
            "                             (default off: the relay exports them)\n"
            "  --poison-max-deliveries N  park a poison message at this delivery (default 3)\n"
            "  --poison-delay-ms MS       nack delay of a poison message before that (200)\n"
            "  --gap-delay-ms MS          nack delay of a version gap (200)\n"
            "  --gap-park-after-ms MS     park a gap first seen this long ago (30000)\n"
            "  --retry-delay-ms MS        nack delay after a failed attempt (500)\n"
            "  --tx-retries N             attempts on serialization failure/deadlock (5)\n"
            "  --lock-timeout-ms MS       lock_timeout per session, 0 = none (5000)\n"
            "  --bus-timeout-ms MS        bound of every broker call (5000)\n"
            "  --connect-timeout-ms MS    keep trying to connect at start this long (30000)\n"
            "Exit: 0 after SIGTERM/SIGINT, 1 when it cannot start, 2 on bad usage.\n",
            CONSUMER_BATCH_MAX);
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

int consumer_config_parse(int argc, char **argv, struct consumer_config *cfg,
                          FILE *out, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->db = getenv("CW_DB");
    cfg->name = "accounting";
    cfg->topic = "payments";
    cfg->prefetch = 10;
    cfg->batch = 1;
    cfg->poison_max_deliveries = 3;
    cfg->poison_delay_ms = 200;
    cfg->gap_delay_ms = 200;
    cfg->gap_park_after_ms = 30000;
    cfg->retry_delay_ms = 500;
    cfg->tx_retries = 5;
    cfg->lock_timeout_ms = 5000;
    cfg->bus_timeout_ms = 5000;
    cfg->connect_timeout_ms = 30000;
    const char *effect = NULL, *proc = NULL;

    struct cw_opt opts[CONSUMER_NOPTS];
    size_t nopts = consumer_options(cfg, &effect, &proc, opts);
    int rc = cw_opts_parse(opts, nopts, &cw_pairs_style, argc, argv, NULL, err, errlen);
    if (rc == CW_OPTS_HELP) {
        consumer_usage(out);
        return 1;
    }
    if (rc < 0)
        return -1;

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
    if (!valid_name(cfg->name)) {
        snprintf(err, errlen, "--name: '%s' is not 1-63 characters of [A-Za-z0-9._-]",
                 cfg->name);
        return -1;
    }
    if (cfg->group == NULL)
        cfg->group = cfg->name;
    if (!valid_name(cfg->group)) {
        snprintf(err, errlen, "--group: '%s' is not 1-63 characters of [A-Za-z0-9._-]",
                 cfg->group);
        return -1;
    }
    if (!valid_name(cfg->topic)) {
        snprintf(err, errlen, "--topic: '%s' is not 1-63 characters of [A-Za-z0-9._-]",
                 cfg->topic);
        return -1;
    }
    if (effect != NULL) {
        cfg->effect = consumer_effect_by_name(effect);
        if (cfg->effect == NULL) {
            snprintf(err, errlen, "--effect: unknown effect '%s' (known: %s)", effect,
                     consumer_effect_names());
            return -1;
        }
    } else {
        cfg->effect = consumer_effect_for_consumer(cfg->name);
        if (cfg->effect == NULL) {
            snprintf(err, errlen,
                     "consumer name '%s' has no default effect: give --effect (%s); "
                     "the known names are accounting and notifications",
                     cfg->name, consumer_effect_names());
            return -1;
        }
    }
    if (proc != NULL) {
        if (!valid_name(proc)) {
            snprintf(err, errlen, "--proc-name: '%s' is not 1-63 characters of [A-Za-z0-9._-]",
                     proc);
            return -1;
        }
        snprintf(cfg->proc, sizeof(cfg->proc), "%s", proc);
    } else {
        snprintf(cfg->proc, sizeof(cfg->proc), "%.40s-%ld", cfg->name, (long)getpid());
    }
    return 0;
}
