/* payments-api -- the command side of the pipeline: payments over HTTP, each
 * written in one transaction with its outbox event and idempotency record.
 *
 *   payments-api --db CONNINFO [--listen 127.0.0.1:PORT] [--events FILE]
 *                [--name NAME] [--threads N] [--lock-timeout-ms MS]
 *                [--statement-timeout-ms MS] [--drain-ms MS] [--broker SOCKET]
 *                [--request-timeout-ms MS] [--max-connections N]
 *                [--max-conns-per-client N] [--db-wait-ms MS]
 *
 * --listen takes an IPv4 address and a port; port 0 binds a free port.  The
 * bound address is printed on stdout as "listening 127.0.0.1:PORT" and
 * written as a "listening" event, so a test or the runner can find it.
 * --broker is only used by the known-wrong builds that publish directly
 * (CW_MUTANT dual_write, publish_before_commit); a normal build accepts and
 * ignores it, so every build runs with the same command line.
 *
 * SIGTERM or SIGINT: stop accepting connections, let requests in flight
 * finish (at most --drain-ms), exit 0.  The signals are blocked in every
 * thread and taken with sigwait() by the main thread, so no handler runs in
 * the middle of a request.
 *
 * Exit codes: 0 clean stop, 1 could not start (database, address), 2 bad
 * usage, bad CW_FAULTS, or a --metrics-listen address that cannot be bound. */
#include "api_http.h"
#include "api_metrics.h"
#include "api_options.h"
#include "api_pool.h"
#include "api_store.h"
#include "backoff.h"
#include "cliutil.h"
#include "cwlog.h"
#include "fault.h"
#include "mutant.h"

#include <arpa/inet.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: payments-api --db CONNINFO [--listen 127.0.0.1:PORT] [--events FILE]\n"
            "                    [--name NAME] [--threads N] [--lock-timeout-ms MS]\n"
            "                    [--statement-timeout-ms MS] [--drain-ms MS]\n"
            "                    [--broker SOCKET] [--request-timeout-ms MS]\n"
            "                    [--max-connections N] [--max-conns-per-client N]\n"
            "                    [--db-wait-ms MS] [--metrics-listen HOST:PORT]\n"
            "                    [--pipeline-metrics on|off]\n"
            "  --db CONNINFO             PostgreSQL connection string (or CW_DB)\n"
            "  --listen ADDR:PORT        IPv4 address and port (default 127.0.0.1:8080;\n"
            "                            port 0 picks a free one, printed on stdout)\n"
            "  --events FILE             JSON-lines events (default stderr)\n"
            "  --name NAME               process name in events (api)\n"
            "  --threads N               request workers = database connections (4)\n"
            "  --lock-timeout-ms MS      wait for a racing request's key at most MS (50)\n"
            "  --statement-timeout-ms MS bound on every statement (10000)\n"
            "  --drain-ms MS             on SIGTERM, wait for requests in flight (10000)\n"
            "  --broker SOCKET           only for builds that publish directly\n"
            "  --request-timeout-ms MS   a client's time for a whole request, however\n"
            "                            it trickles in; then the connection closes (10000)\n"
            "  --max-connections N       connections at once (1024)\n"
            "  --max-conns-per-client N  connections at once from one address (64)\n"
            "  --db-wait-ms MS           at start, retry an unreachable database for up\n"
            "                            to MS before giving up with exit 1 (30000)\n"
            "  --metrics-listen HOST:PORT serve Prometheus metrics at /metrics there (IPv4,\n"
            "                            [IPv6] or localhost; port 0 picks a free one, logged\n"
            "                            as the metrics_listening event)\n"
            "  --pipeline-metrics on|off the pipeline's figures from the database there too\n"
            "                            (default off: the relay exports them)\n"
            "Exit: 0 after SIGTERM/SIGINT, 1 when it cannot start, 2 on bad usage.\n");
}

static int parse_listen(const char *s, struct sockaddr_in *addr)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s || (size_t)(colon - s) >= INET_ADDRSTRLEN)
        return -1;
    char host[INET_ADDRSTRLEN];
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    int port;
    if (cw_parse_int("--listen port", colon + 1, 0, 65535, &port, NULL, 0) < 0)
        return -1;
    memset(addr, 0, sizeof(*addr));
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr->sin_addr) != 1)
        return -1;
    return 0;
}

static int parse_args(int argc, char **argv, struct api_options *o)
{
    struct cw_opt opts[API_NOPTS];
    size_t nopts = api_options(o, opts);
    char err[4096];
    int rc = cw_opts_parse(opts, nopts, &api_opts_style, argc, argv, NULL, err,
                           sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout);
        exit(0);
    }
    if (rc < 0) {
        fprintf(stderr, "payments-api: %s\n", err);
        return -1;
    }
    if (o->db == NULL) {
        fprintf(stderr, "payments-api: --db CONNINFO is required (or CW_DB)\n");
        return -1;
    }
    return 0;
}

/* The "start" event: the settings, where the fault controls are, which
 * build this is. */
static void log_start(const struct api_options *o)
{
    cJSON *ev = cwlog_begin("start");
    cJSON_AddStringToObject(ev, "listen", o->listen);
    cJSON_AddNumberToObject(ev, "threads", o->threads);
    cJSON_AddNumberToObject(ev, "lock_timeout_ms", o->lock_timeout_ms);
    cJSON_AddNumberToObject(ev, "request_timeout_ms", o->request_timeout_ms);
    cJSON_AddNumberToObject(ev, "max_connections", o->max_connections);
    cJSON_AddNumberToObject(ev, "max_conns_per_client", o->max_per_client);
    if (fault_fifo_prefix() != NULL)
        cJSON_AddStringToObject(ev, "fault_fifo", fault_fifo_prefix());
    else
        cJSON_AddNullToObject(ev, "fault_fifo");
#ifdef FIU_ENABLE
    cJSON_AddBoolToObject(ev, "fault_points", 1);
#else
    cJSON_AddBoolToObject(ev, "fault_points", 0);
#endif
    const char *mutant = CW_MUTANT_BUILD;
    if (mutant != NULL)
        cJSON_AddStringToObject(ev, "mutant", mutant);
    else
        cJSON_AddNullToObject(ev, "mutant");
    cwlog_emit(ev);
}

int main(int argc, char **argv)
{
    struct api_options o = {
        .db = getenv("CW_DB"),
        .listen = "127.0.0.1:8080",
        .name = "api",
        .threads = 4,
        .lock_timeout_ms = 50,
        .statement_timeout_ms = 10000,
        .drain_ms = 10000,
        .db_wait_ms = 30000,
        .request_timeout_ms = 10000,
        .max_connections = 1024,
        .max_per_client = 64,
    };
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    if (o.max_connections < o.threads) {
        fprintf(stderr, "payments-api: --max-connections (%d) is below --threads (%d)\n",
                o.max_connections, o.threads);
        return 2;
    }
    struct sockaddr_in addr;
    if (parse_listen(o.listen, &addr) < 0) {
        fprintf(stderr, "payments-api: --listen wants IPV4ADDRESS:PORT, got '%s'\n", o.listen);
        return 2;
    }
    /* Bound first: a bad address or a port in use stops the API (exit 2)
     * before it has opened anything. */
    char merr[512];
    if (api_metrics_start(o.metrics_listen, o.pipeline_metrics ? o.db : NULL, o.name, merr,
                          sizeof(merr)) < 0) {
        fprintf(stderr, "payments-api: --metrics-listen %s\n", merr);
        return 2;
    }
    if (cwlog_open(o.events, o.name) < 0) {
        fprintf(stderr, "payments-api: cannot open events file '%s'\n", o.events);
        return 2;
    }
    /* As the relay and the consumer do: port 0 picks one, and this says
     * which. */
    if (api_metrics_address() != NULL)
        cwlog_simple("metrics_listening", "address", api_metrics_address());
    /* Block the stop signals before any thread exists -- fault_init starts
     * libfiu's control thread -- so every thread inherits the mask and only
     * sigwait() below ever sees them: a SIGTERM during startup must not land
     * in a thread that would die of it. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512];
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "payments-api: %s\n", err);
        return 2;
    }

    log_start(&o);

    struct api_pool_config pcfg = {
        .conninfo = o.db,
        .size = o.threads,
        .lock_timeout_ms = o.lock_timeout_ms,
        .statement_timeout_ms = o.statement_timeout_ms,
        .connect_timeout_s = 5,
    };
    /* A database still starting, failing over or behind a silent link is
     * waited for, as the relay and the consumers wait for theirs: up to
     * --db-wait-ms, retrying with capped backoff; then the last error. */
    int64_t wait_until = cw_mono_ms() + o.db_wait_ms;
    api_pool *pool = NULL;
    for (int attempt = 1;; attempt++) {
        pool = api_pool_new(&pcfg, err, sizeof(err));
        if (pool != NULL || cw_mono_ms() >= wait_until)
            break;
        int64_t pause = cw_backoff_ceiling_ms(attempt, 100, 2000);
        if (pause > wait_until - cw_mono_ms())
            pause = wait_until - cw_mono_ms();
        cwlog_simple("db_wait", "error", err);
        if (attempt == 1)
            fprintf(stderr, "payments-api: waiting up to %d ms for the database: %s\n",
                    o.db_wait_ms, err);
        /* The pause is a wait for the stop signals: a stop ends it at once. */
        struct timespec ts = { (time_t)(pause / 1000), (long)(pause % 1000) * 1000000L };
        if (sigtimedwait(&stop, NULL, &ts) > 0) {
            cwlog_simple("exit", "reason", "stopped while waiting for the database");
            return 0;
        }
    }
    if (pool == NULL) {
        fprintf(stderr, "payments-api: %s\n", err);
        cwlog_simple("exit", "error", err);
        return 1;
    }
    struct api_store_config scfg = {
        .pool = pool,
        .acquire_timeout_ms = 5000,
        .max_attempts = 5,
        .resolve_timeout_ms = 5000,
        .broker = o.broker,
    };
    api_store *store = api_store_new(&scfg, err, sizeof(err));
    if (store == NULL) {
        fprintf(stderr, "payments-api: %s\n", err);
        api_pool_free(pool);
        return 2;
    }
    struct api_http_config hcfg = {
        .addr = addr,
        .threads = o.threads,
        .store = store,
        .request_timeout_ms = o.request_timeout_ms,
        .max_connections = o.max_connections,
        .max_per_client = o.max_per_client,
    };
    api_http *http = api_http_start(&hcfg, err, sizeof(err));
    if (http == NULL) {
        fprintf(stderr, "payments-api: %s: %s\n", o.listen, err);
        cwlog_simple("exit", "error", err);
        api_store_free(store);
        api_pool_free(pool);
        return 1;
    }

    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
    int port = api_http_port(http);
    cJSON *ev = cwlog_begin("listening");
    cJSON_AddStringToObject(ev, "host", host);
    cJSON_AddNumberToObject(ev, "port", port);
    cwlog_emit(ev);
    printf("listening %s:%d\n", host, port);
    fflush(stdout);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    ev = cwlog_begin("stopping");
    cJSON_AddStringToObject(ev, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    cwlog_emit(ev);

    int left = api_http_shutdown(http, o.drain_ms);
    api_store_free(store);
    api_pool_free(pool);
    ev = cwlog_begin("stop");
    cJSON_AddNumberToObject(ev, "abandoned_requests", left);
    cwlog_emit(ev);
    return 0;
}
