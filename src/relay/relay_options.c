/* relay_options.c -- the relay's option table; see relay_options.h. */
#include "relay_options.h"
#include "relay.h"
#include "metrics_http.h"

#include <stdio.h>
#include <string.h>

/* --name: 1..sizeof(name)-1 printable ASCII characters without spaces. */
static int take_name(const char *v, void *ctx, char *err, size_t errlen)
{
    struct relay_config *cfg = ctx;
    size_t n = strlen(v);
    if (n == 0 || n >= sizeof(cfg->name)) {
        snprintf(err, errlen, "--name: must be 1..%zu characters", sizeof(cfg->name) - 1);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        if ((unsigned char)v[k] < 0x21 || (unsigned char)v[k] > 0x7e) {
            snprintf(err, errlen, "--name: printable ASCII without spaces only");
            return -1;
        }
    }
    snprintf(cfg->name, sizeof(cfg->name), "%s", v);
    return 0;
}

static int take_order(const char *v, void *ctx, char *err, size_t errlen)
{
    struct relay_config *cfg = ctx;
    if (strcmp(v, "fifo") == 0) {
        cfg->order = RELAY_ORDER_FIFO;
    } else if (strcmp(v, "per-aggregate") == 0) {
        cfg->order = RELAY_ORDER_PER_AGGREGATE;
    } else {
        snprintf(err, errlen, "--order: '%s' is not fifo or per-aggregate", v);
        return -1;
    }
    return 0;
}

static int take_print_sql(const char *v, void *ctx, char *err, size_t errlen)
{
    struct relay_config *cfg = ctx;
    if (strcmp(v, "claim") != 0 && strcmp(v, "mark") != 0 &&
        strcmp(v, "retry") != 0 && strcmp(v, "dead_letter") != 0) {
        snprintf(err, errlen, "--print-sql: '%s' is not claim, mark, retry or dead_letter", v);
        return -1;
    }
    cfg->print_sql = v;
    return 0;
}

static int take_metrics_listen(const char *v, void *ctx, char *err, size_t errlen)
{
    struct relay_config *cfg = ctx;
    if (metrics_listen_check(v, err, errlen) < 0)
        return -1;
    cfg->metrics_listen = v;
    return 0;
}

size_t relay_options(struct relay_config *cfg, struct cw_opt *opts)
{
    const struct cw_opt table[RELAY_NOPTS] = {
        CW_OPT_STRING("--db", &cfg->db),
        CW_OPT_STRING("--broker", &cfg->broker),
        CW_OPT_STRING("--events", &cfg->events),
        CW_OPT_CALL("--metrics-listen", take_metrics_listen, cfg),
        CW_OPT_CALL("--pipeline-metrics", metrics_take_pipeline, &cfg->pipeline_metrics),
        CW_OPT_CALL("--name", take_name, cfg),
        CW_OPT_INT("--batch", &cfg->batch, 1, 10000),
        CW_OPT_INT("--lease-ms", &cfg->lease_ms, 100, 86400000),
        CW_OPT_INT("--backoff-base-ms", &cfg->backoff_base_ms, 1, 86400000),
        CW_OPT_INT("--backoff-cap-ms", &cfg->backoff_cap_ms, 1, 86400000),
        CW_OPT_INT("--max-attempts", &cfg->max_attempts, 1, 1000),
        CW_OPT_INT("--idle-ms", &cfg->idle_ms, 1, 3600000),
        CW_OPT_CALL("--order", take_order, cfg),
        CW_OPT_CALL("--print-sql", take_print_sql, cfg),
    };
    memcpy(opts, table, sizeof(table));
    return RELAY_NOPTS;
}

int relay_options_check(int argc, char **argv, char *err, size_t errlen)
{
    struct relay_config scratch;
    memset(&scratch, 0, sizeof(scratch));
    struct cw_opt opts[RELAY_NOPTS];
    size_t nopts = relay_options(&scratch, opts);
    return cw_opts_parse(opts, nopts, &cw_pairs_style, argc, argv, NULL, err, errlen);
}
