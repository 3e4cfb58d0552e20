/* api_options.c -- payments-api's option table; see api_options.h. */
#include "api_options.h"
#include "metrics_http.h"

#include <string.h>

const struct cw_opts_style api_opts_style = {
    .help = CW_HELP_LONG,
    .value_first = 1,
    .unknown = "unknown option '%s'",
    .missing = "unknown option or missing value: '%s'",
};

size_t api_options(struct api_options *o, struct cw_opt *opts)
{
    const struct cw_opt table[API_NOPTS] = {
        CW_OPT_STRING("--db", &o->db),
        CW_OPT_STRING("--listen", &o->listen),
        CW_OPT_STRING("--events", &o->events),
        CW_OPT_STRING("--name", &o->name),
        CW_OPT_STRING("--broker", &o->broker),
        CW_OPT_STRING("--metrics-listen", &o->metrics_listen),
        CW_OPT_CALL("--pipeline-metrics", metrics_take_pipeline, &o->pipeline_metrics),
        CW_OPT_INT("--threads", &o->threads, 1, 64),
        CW_OPT_INT("--lock-timeout-ms", &o->lock_timeout_ms, 1, 60000),
        CW_OPT_INT("--statement-timeout-ms", &o->statement_timeout_ms, 1, 3600000),
        CW_OPT_INT("--drain-ms", &o->drain_ms, 0, 3600000),
        CW_OPT_INT("--db-wait-ms", &o->db_wait_ms, 0, 3600000),
        CW_OPT_INT("--request-timeout-ms", &o->request_timeout_ms, 100, 600000),
        CW_OPT_INT("--max-connections", &o->max_connections, 1, 65536),
        CW_OPT_INT("--max-conns-per-client", &o->max_per_client, 1, 65536),
    };
    memcpy(opts, table, sizeof(table));
    return API_NOPTS;
}

int api_options_check(int argc, char **argv, char *err, size_t errlen)
{
    struct api_options scratch;
    memset(&scratch, 0, sizeof(scratch));
    struct cw_opt opts[API_NOPTS];
    size_t nopts = api_options(&scratch, opts);
    return cw_opts_parse(opts, nopts, &api_opts_style, argc, argv, NULL, err, errlen);
}
