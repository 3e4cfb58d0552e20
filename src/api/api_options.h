/* api_options.h -- payments-api's option table, the one its main reads the
 * command line over.
 *
 * The harness checks a scenario's "args" for an api process against this
 * same table before it starts anything (sim/scenario), so what a scenario
 * may say and what the API accepts cannot drift apart.  This header is the
 * API's only one the harness may include. */
#ifndef CW_API_OPTIONS_H
#define CW_API_OPTIONS_H

#include "cliutil.h"

#include <stddef.h>

struct api_options {
    const char *db;
    const char *listen;
    const char *events;
    const char *name;
    const char *broker;
    const char *metrics_listen;
    int pipeline_metrics;       /* the pipeline's figures on /metrics too (default 0) */
    int threads;
    int lock_timeout_ms;
    int statement_timeout_ms;
    int drain_ms;
    int db_wait_ms;
    int request_timeout_ms;
    int max_connections;
    int max_per_client;
};

#define API_NOPTS 15

/* How the API's command line reads: every option takes a value, and a
 * value-less last argument is reported as such whatever it is. */
extern const struct cw_opts_style api_opts_style;

/* Fills opts[0..API_NOPTS) with the API's options, their values stored into
 * o; returns API_NOPTS. */
size_t api_options(struct api_options *o, struct cw_opt *opts);

/* Reads argv (argv[0] the program) over the API's options alone, into
 * scratch storage: the names and each value's kind and range, not which
 * options are required nor how they combine.  Returns a CW_OPTS_ code, with
 * the message in err on an error (it names the option). */
int api_options_check(int argc, char **argv, char *err, size_t errlen);

#endif
