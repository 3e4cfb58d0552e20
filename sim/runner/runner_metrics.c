/* runner_metrics.c -- the sampling thread; see runner_metrics.h.
 *
 * The thread sleeps on a condition variable with a deadline, so stopping it
 * is immediate rather than "at the next tick".  A failed sample (the
 * database restarting, say) is skipped, and the connection re-opened on the
 * next tick. */
#include "runner_metrics.h"
#include "cwlog.h"
#include "pgx.h"
#include "pipeline_stats.h"
#include "runner_db.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct metrics {
    char *conninfo;
    FILE *out;
    int interval_ms;
    int stop;
    int samples;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static const char *const SAMPLE_SQL =
    "WITH o AS (SELECT count(*) FILTER (WHERE published_at IS NULL AND dead_lettered_at IS NULL) AS pending,"
    "                  extract(epoch FROM now() - min(occurred_at) FILTER"
    "                     (WHERE published_at IS NULL AND dead_lettered_at IS NULL)) * 1000 AS oldest_ms,"
    "                  coalesce(sum(attempts), 0) AS attempts,"
    "                  count(*) FILTER (WHERE dead_lettered_at IS NOT NULL) AS dead,"
    "                  count(*) FILTER (WHERE published_at IS NOT NULL) AS published,"
    "                  percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - occurred_at))"
    "                     FILTER (WHERE published_at IS NOT NULL) * 1000 AS pub_p50,"
    "                  percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - occurred_at))"
    "                     FILTER (WHERE published_at IS NOT NULL) * 1000 AS pub_p99"
    "             FROM outbox_messages),"
    "     p AS (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY "
    CW_SQL_PROCESSING_LATENCY_S("i", "m") ") * 1000 AS p50,"
    "                  percentile_cont(0.99) WITHIN GROUP (ORDER BY "
    CW_SQL_PROCESSING_LATENCY_S("i", "m") ") * 1000 AS p99"
    "             FROM inbox_messages i JOIN outbox_messages m ON m.id = i.message_id"
    "            WHERE m.published_at IS NOT NULL),"
    "     c AS (SELECT coalesce(json_object_agg(consumer_name, n), '{}'::json) AS consumed"
    "             FROM (SELECT consumer_name, count(*) AS n FROM inbox_messages GROUP BY consumer_name) x)"
    " SELECT o.pending, o.oldest_ms, o.attempts, o.dead, o.published, o.pub_p50, o.pub_p99,"
    "        p.p50, p.p99, c.consumed::text,"
    "        (SELECT count(*) FROM consumer_anomalies WHERE kind = 'duplicate'),"
    /* Sessions idle inside an open transaction, by the server's own clock:
     * the evidence of idle_transactions_bounded (checker_leases.c). */
    "        (SELECT coalesce(json_agg(json_build_object("
    "                    'app', application_name, 'pid', pid,"
    "                    'idle_ms', (extract(epoch FROM now() - state_change) * 1000)::bigint)),"
    "                 '[]'::json)::text"
    "           FROM pg_stat_activity"
    "          WHERE datname = current_database() AND state LIKE 'idle in transaction%')"
    "   FROM o, p, c";

static void add_num_or_null(cJSON *o, const char *key, PGresult *r, int col)
{
    if (PQgetisnull(r, 0, col))
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddNumberToObject(o, key, strtod(PQgetvalue(r, 0, col), NULL));
}

static void sample(struct metrics *m, PGconn **conn)
{
    char err[256];
    if (*conn == NULL) {
        *conn = pgx_connect(m->conninfo, err, sizeof(err));
        if (*conn == NULL)
            return;
        /* A crashed or restarted server says so to every session; the
         * sampler only needs to connect again. */
        PQsetNoticeProcessor(*conn, rdb_quiet_notices, NULL);
    }
    PGresult *r = pgx_exec(*conn, SAMPLE_SQL, 0, NULL, NULL, err, sizeof(err));
    if (r == NULL) {
        PQfinish(*conn);
        *conn = NULL;
        return;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cwlog_add_int64(o, "ts_us", cw_now_us());
    add_num_or_null(o, "pending", r, 0);
    add_num_or_null(o, "oldest_pending_age_ms", r, 1);
    add_num_or_null(o, "attempts_total", r, 2);
    add_num_or_null(o, "dead_letters", r, 3);
    add_num_or_null(o, "published", r, 4);
    cJSON *consumed = cJSON_Parse(PQgetvalue(r, 0, 9));
    cJSON_AddItemToObject(o, "consumed", consumed ? consumed : cJSON_CreateObject());
    add_num_or_null(o, "duplicates_ignored", r, 10);
    cJSON *idle = cJSON_Parse(PQgetvalue(r, 0, 11));
    cJSON_AddItemToObject(o, "idle_in_transaction", idle ? idle : cJSON_CreateArray());
    add_num_or_null(o, "publish_latency_p50_ms", r, 5);
    add_num_or_null(o, "publish_latency_p99_ms", r, 6);
    add_num_or_null(o, "processing_latency_p50_ms", r, 7);
    add_num_or_null(o, "processing_latency_p99_ms", r, 8);
    PQclear(r);
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (line != NULL) {
        fprintf(m->out, "%s\n", line);
        fflush(m->out);
        m->samples++;
        cJSON_free(line);
    }
}

static void *run(void *arg)
{
    struct metrics *m = arg;
    PGconn *conn = NULL;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        pthread_mutex_unlock(&m->lock);
        sample(m, &conn);
        pthread_mutex_lock(&m->lock);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)m->interval_ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (!m->stop) {
            int rc = pthread_cond_timedwait(&m->cond, &m->lock, &until);
            if (rc == ETIMEDOUT)
                break;
        }
    }
    pthread_mutex_unlock(&m->lock);
    sample(m, &conn); /* the state the checker saw */
    PQfinish(conn);
    return NULL;
}

metrics *metrics_start(const char *conninfo, const char *path, int interval_ms)
{
    struct metrics *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->conninfo = strdup(conninfo);
    m->out = fopen(path, "a");
    m->interval_ms = interval_ms;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&m->lock, NULL);
    if (m->conninfo == NULL || m->out == NULL ||
        pthread_create(&m->thread, NULL, run, m) != 0) {
        if (m->out)
            fclose(m->out);
        free(m->conninfo);
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
    }
    return m;
}

int metrics_stop(metrics *m)
{
    if (m == NULL)
        return 0;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    int n = m->samples;
    fclose(m->out);
    free(m->conninfo);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return n;
}
