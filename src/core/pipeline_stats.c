/* pipeline_stats.c -- the pipeline's figures, read from the outbox, the
 * inbox and the consumers' anomaly tables; see pipeline_stats.h.
 *
 * Counters here are read from tables that only grow (anomalies, requeues,
 * pipeline_counters), or add up what cleanup removed (published rows), so
 * they never go down between two readings: a scraper may take rate() of
 * them. */
#include "pipeline_stats.h"
#include "cwlog.h"
#include "pgx.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PENDING "published_at IS NULL AND dead_lettered_at IS NULL"
#define LIVE "locked_until >= now()"

static const char sql_summary[] =
    "SELECT count(*) FILTER (WHERE " PENDING "),\n"
    "       count(*) FILTER (WHERE " PENDING " AND NOT coalesce(" LIVE ", false)\n"
    "                          AND next_attempt_at <= now()),\n"
    "       count(*) FILTER (WHERE " PENDING " AND NOT coalesce(" LIVE ", false)\n"
    "                          AND next_attempt_at > now()),\n"
    "       count(*) FILTER (WHERE " PENDING " AND " LIVE "),\n"
    "       count(*) FILTER (WHERE " PENDING " AND locked_until < now()),\n"
    "       count(*) FILTER (WHERE published_at IS NOT NULL),\n"
    "       count(*) FILTER (WHERE dead_lettered_at IS NOT NULL AND published_at IS NULL),\n"
    "       coalesce(extract(epoch FROM now() - min(occurred_at) FILTER (WHERE " PENDING ")), 0),\n"
    "       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - occurred_at))\n"
    "           FILTER (WHERE published_at IS NOT NULL),\n"
    "       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM published_at - occurred_at))\n"
    "           FILTER (WHERE published_at IS NOT NULL),\n"
    "       coalesce(sum(extract(epoch FROM published_at - occurred_at)), 0),\n"
    "       count(published_at),\n"
    "       coalesce(sum(attempts), 0)\n"
    "FROM outbox_messages";

static const char sql_attempts[] =
    "SELECT attempts, count(*) FROM outbox_messages GROUP BY attempts ORDER BY attempts";

static const char sql_counters[] =
    "SELECT counter, value FROM pipeline_counters\n"
    "UNION ALL SELECT 'requeues', count(*) FROM outbox_requeues";

static const char sql_consumers[] =
    "WITH names AS (\n"
    "    SELECT DISTINCT consumer_name FROM inbox_messages\n"
    "    UNION SELECT consumer_name FROM consumer_anomalies\n"
    "    UNION SELECT consumer_name FROM consumer_dead_letters),\n"
    "lat AS (\n"
    "    SELECT i.consumer_name,\n"
    "           " CW_SQL_PROCESSING_LATENCY_S("i", "o") " AS s\n"
    "    FROM inbox_messages AS i JOIN outbox_messages AS o ON o.id = i.message_id\n"
    "    WHERE o.published_at IS NOT NULL)\n"
    "SELECT n.consumer_name,\n"
    "  (SELECT count(*) FROM inbox_messages AS i WHERE i.consumer_name = n.consumer_name),\n"
    "  (SELECT count(*) FROM consumer_anomalies AS a\n"
    "    WHERE a.consumer_name = n.consumer_name AND a.kind = 'duplicate'),\n"
    "  (SELECT count(*) FROM consumer_anomalies AS a\n"
    "    WHERE a.consumer_name = n.consumer_name AND a.kind = 'gap'),\n"
    "  (SELECT count(*) FROM consumer_anomalies AS a\n"
    "    WHERE a.consumer_name = n.consumer_name AND a.kind = 'gap_parked'),\n"
    "  (SELECT count(*) FROM consumer_dead_letters AS d WHERE d.consumer_name = n.consumer_name),\n"
    "  (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM lat\n"
    "    WHERE lat.consumer_name = n.consumer_name),\n"
    "  (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY s) FROM lat\n"
    "    WHERE lat.consumer_name = n.consumer_name),\n"
    "  (SELECT coalesce(sum(s), 0) FROM lat WHERE lat.consumer_name = n.consumer_name),\n"
    "  (SELECT count(*) FROM lat WHERE lat.consumer_name = n.consumer_name)\n"
    "FROM names AS n ORDER BY n.consumer_name";

static long long ll(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static double dbl(const PGresult *r, int row, int col)
{
    return strtod(PQgetvalue(r, row, col), NULL);
}

/* Runs sql; NULL with "reading <what>: <error>" in err. */
static PGresult *run(PGconn *conn, const char *sql, const char *what, char *err, size_t errlen)
{
    char msg[512];
    PGresult *r = pgx_exec(conn, sql, 0, NULL, NULL, msg, sizeof(msg));
    if (r == NULL)
        snprintf(err, errlen, "reading %s failed: %s", what, msg);
    return r;
}

static int read_outbox(PGconn *conn, struct pipeline_outbox *o, char *err, size_t errlen)
{
    PGresult *r = run(conn, sql_summary, "the outbox", err, errlen);
    if (r == NULL)
        return -1;
    o->pending = ll(r, 0, 0);
    o->ready = ll(r, 0, 1);
    o->backoff = ll(r, 0, 2);
    o->leased = ll(r, 0, 3);
    o->expired = ll(r, 0, 4);
    o->published = ll(r, 0, 5);
    o->dead = ll(r, 0, 6);
    o->oldest_age_s = dbl(r, 0, 7);
    o->has_latency = !PQgetisnull(r, 0, 8);
    if (o->has_latency) {
        o->p50_s = dbl(r, 0, 8);
        o->p99_s = dbl(r, 0, 9);
    }
    o->latency_sum_s = dbl(r, 0, 10);
    o->latency_count = ll(r, 0, 11);
    o->attempts_sum = ll(r, 0, 12);
    PQclear(r);
    return 0;
}

static int read_counts(PGconn *conn, struct pipeline_counts *c, char *err, size_t errlen)
{
    PGresult *r = run(conn, sql_counters, "the counters", err, errlen);
    if (r == NULL)
        return -1;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *name = PQgetvalue(r, i, 0);
        long long v = ll(r, i, 1);
        if (strcmp(name, "expired_leases_recovered") == 0)
            c->recovered = v;
        else if (strcmp(name, "leases_lost") == 0)
            c->lost = v;
        else if (strcmp(name, "published_rows_deleted") == 0)
            c->published_deleted = v;
        else if (strcmp(name, "inbox_markers_deleted") == 0)
            c->inbox_deleted = v;
        else if (strcmp(name, "requeues") == 0)
            c->requeues = v;
    }
    PQclear(r);
    return 0;
}

static int read_attempts(PGconn *conn, struct pipeline_stats *s, char *err, size_t errlen)
{
    PGresult *r = run(conn, sql_attempts, "attempts", err, errlen);
    if (r == NULL)
        return -1;
    s->nattempts = PQntuples(r);
    if (s->nattempts > 0) {
        s->attempts = calloc((size_t)s->nattempts, sizeof(*s->attempts));
        if (s->attempts == NULL)
            abort();
    }
    for (int i = 0; i < s->nattempts; i++) {
        s->attempts[i].attempts = atoi(PQgetvalue(r, i, 0));
        s->attempts[i].rows = ll(r, i, 1);
    }
    PQclear(r);
    return 0;
}

static int read_consumers(PGconn *conn, struct pipeline_stats *s, char *err, size_t errlen)
{
    PGresult *r = run(conn, sql_consumers, "the consumers", err, errlen);
    if (r == NULL)
        return -1;
    s->nconsumers = PQntuples(r);
    if (s->nconsumers > 0) {
        s->consumers = calloc((size_t)s->nconsumers, sizeof(*s->consumers));
        if (s->consumers == NULL)
            abort();
    }
    for (int i = 0; i < s->nconsumers; i++) {
        struct pipeline_consumer *c = &s->consumers[i];
        snprintf(c->name, sizeof(c->name), "%s", PQgetvalue(r, i, 0));
        c->processed = ll(r, i, 1);
        c->duplicates = ll(r, i, 2);
        c->gaps = ll(r, i, 3);
        c->gaps_parked = ll(r, i, 4);
        c->dead_letters = ll(r, i, 5);
        c->has_latency = !PQgetisnull(r, i, 6);
        if (c->has_latency) {
            c->p50_s = dbl(r, i, 6);
            c->p99_s = dbl(r, i, 7);
        }
        c->latency_sum_s = dbl(r, i, 8);
        c->latency_count = ll(r, i, 9);
    }
    PQclear(r);
    return 0;
}

int pipeline_stats_read(PGconn *conn, struct pipeline_stats *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    /* One snapshot for the four statements: a cleanup committing between
     * the published rows and the count of deleted ones would otherwise
     * count its rows twice, and outbox_published_total would then go down
     * at the next reading. */
    char msg[256];
    if (pgx_cmd(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, NULL, msg,
                sizeof(msg)) < 0) {
        snprintf(err, errlen, "starting a snapshot failed: %s", msg);
        return -1;
    }
    if (read_outbox(conn, &s->outbox, err, errlen) < 0 ||
        read_counts(conn, &s->counts, err, errlen) < 0 ||
        read_attempts(conn, s, err, errlen) < 0 ||
        read_consumers(conn, s, err, errlen) < 0) {
        pgx_rollback(conn);
        pipeline_stats_free(s);
        return -1;
    }
    pgx_rollback(conn); /* read only: nothing to commit */
    return 0;
}

void pipeline_stats_free(struct pipeline_stats *s)
{
    if (s == NULL)
        return;
    free(s->attempts);
    free(s->consumers);
    memset(s, 0, sizeof(*s));
}

/* One family of a single unlabeled sample. */
static void single(struct promtext *p, const char *name, const char *type, const char *help,
                   double value)
{
    promtext_family(p, name, type, help);
    promtext_sample(p, name, NULL, value);
}

/* One family with a sample per consumer: the long long at offset in each. */
static void per_consumer(struct promtext *p, const struct pipeline_stats *s, const char *name,
                         const char *type, const char *help, size_t offset)
{
    promtext_family(p, name, type, help);
    for (int i = 0; i < s->nconsumers; i++) {
        long long v;
        memcpy(&v, (const char *)&s->consumers[i] + offset, sizeof(v));
        promtext_sample(p, name, (const char *[]){ "consumer", s->consumers[i].name, NULL },
                        (double)v);
    }
}

static void attempts_histogram(const struct pipeline_stats *s, struct promtext *p)
{
    static const int le[] = { 1, 2, 3, 5, 8, 12 };
    long long total = 0;
    promtext_family(p, "outbox_attempts", "histogram",
                    "Claims per outbox row (the attempts column), over every row held.");
    for (size_t b = 0; b < sizeof(le) / sizeof(le[0]); b++) {
        long long cum = 0;
        char bound[16];
        for (int i = 0; i < s->nattempts; i++)
            if (s->attempts[i].attempts <= le[b])
                cum += s->attempts[i].rows;
        snprintf(bound, sizeof(bound), "%d", le[b]);
        promtext_sample(p, "outbox_attempts_bucket", (const char *[]){ "le", bound, NULL },
                        (double)cum);
    }
    for (int i = 0; i < s->nattempts; i++)
        total += s->attempts[i].rows;
    promtext_sample(p, "outbox_attempts_bucket", (const char *[]){ "le", "+Inf", NULL },
                    (double)total);
    promtext_sample(p, "outbox_attempts_sum", NULL, (double)s->outbox.attempts_sum);
    promtext_sample(p, "outbox_attempts_count", NULL, (double)total);
}

static void processing_latency(const struct pipeline_stats *s, struct promtext *p)
{
    const char *name = "inbox_processing_latency_seconds";
    promtext_family(p, name, "summary",
                    "From published_at to the consumer's inbox processed_at.");
    for (int i = 0; i < s->nconsumers; i++) {
        const struct pipeline_consumer *c = &s->consumers[i];
        if (c->has_latency) {
            promtext_sample(p, name,
                            (const char *[]){ "consumer", c->name, "quantile", "0.5", NULL },
                            c->p50_s);
            promtext_sample(p, name,
                            (const char *[]){ "consumer", c->name, "quantile", "0.99", NULL },
                            c->p99_s);
        }
        promtext_sample(p, "inbox_processing_latency_seconds_sum",
                        (const char *[]){ "consumer", c->name, NULL }, c->latency_sum_s);
        promtext_sample(p, "inbox_processing_latency_seconds_count",
                        (const char *[]){ "consumer", c->name, NULL }, (double)c->latency_count);
    }
}

/* The source article's (README) nine figures, in its order after the one it calls the most
 * useful signal. */
static void article_figures(const struct pipeline_stats *s, struct promtext *p)
{
    const struct pipeline_outbox *o = &s->outbox;
    single(p, "outbox_oldest_pending_age_seconds", "gauge",
           "Age of the oldest pending outbox row (0 when none): the signal that a row is stuck.",
           o->oldest_age_s);
    single(p, "outbox_pending_messages", "gauge",
           "Outbox rows neither published nor dead-lettered.", (double)o->pending);
    single(p, "outbox_published_total", "counter",
           "Outbox rows published, including rows since removed by cleanup.",
           (double)(o->published + s->counts.published_deleted));
    attempts_histogram(s, p);
    single(p, "outbox_dead_letters", "gauge", "Outbox rows dead-lettered and not requeued.",
           (double)o->dead);
    single(p, "outbox_expired_leases_recovered_total", "counter",
           "Claims that took over a row whose previous lease had expired unsettled.",
           (double)s->counts.recovered);
    per_consumer(p, s, "inbox_duplicates_ignored_total", "counter",
                 "Deliveries the inbox recognised as already processed.",
                 offsetof(struct pipeline_consumer, duplicates));
    promtext_family(p, "outbox_publish_latency_seconds", "summary",
                    "From occurred_at to published_at.");
    if (o->has_latency) {
        promtext_sample(p, "outbox_publish_latency_seconds",
                        (const char *[]){ "quantile", "0.5", NULL }, o->p50_s);
        promtext_sample(p, "outbox_publish_latency_seconds",
                        (const char *[]){ "quantile", "0.99", NULL }, o->p99_s);
    }
    promtext_sample(p, "outbox_publish_latency_seconds_sum", NULL, o->latency_sum_s);
    promtext_sample(p, "outbox_publish_latency_seconds_count", NULL, (double)o->latency_count);
    processing_latency(s, p);
}

void pipeline_stats_prometheus(const struct pipeline_stats *s, struct promtext *p)
{
    const struct pipeline_outbox *o = &s->outbox;
    article_figures(s, p);
    promtext_family(p, "outbox_pending_messages_by_state", "gauge",
                    "Pending outbox rows by state: ready, in backoff, or under a live lease.");
    promtext_sample(p, "outbox_pending_messages_by_state",
                    (const char *[]){ "state", "ready", NULL }, (double)o->ready);
    promtext_sample(p, "outbox_pending_messages_by_state",
                    (const char *[]){ "state", "backoff", NULL }, (double)o->backoff);
    promtext_sample(p, "outbox_pending_messages_by_state",
                    (const char *[]){ "state", "leased", NULL }, (double)o->leased);
    single(p, "outbox_expired_leases", "gauge",
           "Pending rows whose lease expired unsettled (the next claim recovers them).",
           (double)o->expired);
    single(p, "outbox_requeues_total", "counter",
           "Outbox rows an operator restarted: dead letters requeued, parked events replayed.",
           (double)s->counts.requeues);
    single(p, "outbox_leases_lost_total", "counter",
           "Fenced settles that found the row re-claimed by another worker.",
           (double)s->counts.lost);
    per_consumer(p, s, "inbox_processed", "gauge", "Inbox markers held per consumer.",
                 offsetof(struct pipeline_consumer, processed));
    per_consumer(p, s, "consumer_gaps_total", "counter", "Deliveries held back for a version gap.",
                 offsetof(struct pipeline_consumer, gaps));
    per_consumer(p, s, "consumer_gaps_parked_total", "counter",
                 "Version gaps that never closed, parked.",
                 offsetof(struct pipeline_consumer, gaps_parked));
    per_consumer(p, s, "consumer_dead_letters", "gauge", "Deliveries parked by a consumer.",
                 offsetof(struct pipeline_consumer, dead_letters));
}

/* Opens src->conn with its timeouts; 0 or -1 with a message. */
static int source_open(struct pipeline_source *src, char *err, size_t errlen)
{
    char timeout_s[16], timeout_ms[16];
    snprintf(timeout_s, sizeof(timeout_s), "%d", (src->timeout_ms + 999) / 1000);
    snprintf(timeout_ms, sizeof(timeout_ms), "%d", src->timeout_ms);
    /* The conninfo is expanded first; what follows overrides it. */
    const char *keys[] = { "dbname", "connect_timeout", "application_name", NULL };
    const char *vals[] = { src->conninfo, timeout_s, src->app_name, NULL };
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errlen, "could not connect to database: %s",
                 c ? PQerrorMessage(c) : "out of memory");
        PQfinish(c);
        return -1;
    }
    const char *params[1] = { timeout_ms };
    if (pgx_cmd(c, "SELECT set_config('statement_timeout', $1, false)", 1, params, NULL, err,
                errlen) < 0) {
        PQfinish(c);
        return -1;
    }
    src->conn = c;
    return 0;
}

void pipeline_source_write(struct pipeline_source *src, struct promtext *p)
{
    if (src->conninfo == NULL)
        return;
    char err[512] = "";
    struct pipeline_stats s;
    int64_t t0 = cw_mono_us();
    int ok = (src->conn != NULL || source_open(src, err, sizeof(err)) == 0) &&
             pipeline_stats_read(src->conn, &s, err, sizeof(err)) == 0;
    double took = (double)(cw_mono_us() - t0) / 1e6;
    if (ok) {
        pipeline_stats_prometheus(&s, p);
        pipeline_stats_free(&s);
    } else {
        /* Opened again at the next scrape: a broken connection, or one a
         * statement timeout left in doubt, is not worth keeping. */
        pipeline_source_close(src);
    }
    single(p, "outbox_stats_up", "gauge",
           "1 when this scrape read the pipeline's figures from the database, 0 when it could not.",
           ok ? 1 : 0);
    single(p, "outbox_stats_read_seconds", "gauge",
           "Time this scrape took to read the pipeline's figures.", took);
}

void pipeline_source_close(struct pipeline_source *src)
{
    if (src->conn != NULL)
        PQfinish(src->conn);
    src->conn = NULL;
}
