/* consumer_options.c -- the consumer's option table; see consumer_options.h. */
#include "consumer_options.h"
#include "consumer_config.h"
#include "metrics_http.h"

#include <string.h>

static int take_metrics_listen(const char *v, void *ctx, char *err, size_t errlen)
{
    struct consumer_config *cfg = ctx;
    if (metrics_listen_check(v, err, errlen) < 0)
        return -1;
    cfg->metrics_listen = v;
    return 0;
}

size_t consumer_options(struct consumer_config *cfg, const char **effect, const char **proc,
                        struct cw_opt *opts)
{
    const struct cw_opt table[CONSUMER_NOPTS] = {
        CW_OPT_INT("--prefetch", &cfg->prefetch, 1, 1000),
        CW_OPT_INT("--batch", &cfg->batch, 1, CONSUMER_BATCH_MAX),
        CW_OPT_INT("--poison-max-deliveries", &cfg->poison_max_deliveries, 1, 1000),
        CW_OPT_INT("--poison-delay-ms", &cfg->poison_delay_ms, 0, 600000),
        CW_OPT_INT("--gap-delay-ms", &cfg->gap_delay_ms, 0, 600000),
        CW_OPT_INT("--gap-park-after-ms", &cfg->gap_park_after_ms, 0, 86400000),
        CW_OPT_INT("--retry-delay-ms", &cfg->retry_delay_ms, 0, 600000),
        CW_OPT_INT("--tx-retries", &cfg->tx_retries, 1, 100),
        CW_OPT_INT("--lock-timeout-ms", &cfg->lock_timeout_ms, 0, 3600000),
        CW_OPT_INT("--bus-timeout-ms", &cfg->bus_timeout_ms, 100, 600000),
        CW_OPT_INT("--connect-timeout-ms", &cfg->connect_timeout_ms, 0, 3600000),
        CW_OPT_STRING("--db", &cfg->db),
        CW_OPT_STRING("--broker", &cfg->broker),
        CW_OPT_STRING("--name", &cfg->name),
        CW_OPT_STRING("--group", &cfg->group),
        CW_OPT_STRING("--topic", &cfg->topic),
        CW_OPT_STRING("--effect", effect),
        CW_OPT_STRING("--events", &cfg->events),
        CW_OPT_STRING("--proc-name", proc),
        CW_OPT_CALL("--metrics-listen", take_metrics_listen, cfg),
        CW_OPT_CALL("--pipeline-metrics", metrics_take_pipeline, &cfg->pipeline_metrics),
    };
    memcpy(opts, table, sizeof(table));
    return CONSUMER_NOPTS;
}

int consumer_options_check(int argc, char **argv, char *err, size_t errlen)
{
    struct consumer_config scratch;
    memset(&scratch, 0, sizeof(scratch));
    const char *effect = NULL, *proc = NULL;
    struct cw_opt opts[CONSUMER_NOPTS];
    size_t nopts = consumer_options(&scratch, &effect, &proc, opts);
    return cw_opts_parse(opts, nopts, &cw_pairs_style, argc, argv, NULL, err, errlen);
}
