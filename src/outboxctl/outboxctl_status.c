/* outboxctl_status.c -- `status` (a human table, or --json) and `metrics`
 * (Prometheus text exposition format), read from the outbox, the inbox and
 * the consumers' anomaly tables.
 *
 * Both commands read the same snapshot functions, each one statement:
 * outbox summary, attempts histogram, persistent counters, and one row per
 * consumer.  The outbox is partitioned for the operator exactly as the relay
 * sees it: a pending row is leased (live lease), in backoff
 * (next_attempt_at in the future) or ready; an expired lease is a pending row
 * whose locked_until passed without a settle (a relay died or stalled; the
 * next claim recovers it).  Latencies: occurred_at -> published_at over
 * published rows; published_at -> inbox processed_at per consumer (clamped
 * at 0: a consumer may commit before the relay marks the row published). */
#include "outboxctl.h"
#include "pgx.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct outbox_summary {
    long long pending, ready, backoff, leased, expired, published, dead;
    double oldest_age_s;  /* 0 when nothing is pending */
    int has_latency;
    double p50_s, p99_s, latency_sum_s;
    long long latency_count;
    long long attempts_sum;
};

struct counters {
    long long recovered, lost, published_deleted, inbox_deleted, requeues;
};

struct consumer_row {
    char name[128];
    long long processed, duplicates, gaps, gaps_parked, dead_letters;
    int has_latency;
    double p50_s, p99_s, latency_sum_s;
    long long latency_count;
};

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
    "           greatest(0, extract(epoch FROM i.processed_at - o.published_at)) AS s\n"
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

static int read_summary(PGconn *conn, struct outbox_summary *s)
{
    char err[512];
    PGresult *r = pgx_exec(conn, sql_summary, 0, NULL, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading the outbox failed: %s\n", err);
        return -1;
    }
    memset(s, 0, sizeof(*s));
    s->pending = ll(r, 0, 0);
    s->ready = ll(r, 0, 1);
    s->backoff = ll(r, 0, 2);
    s->leased = ll(r, 0, 3);
    s->expired = ll(r, 0, 4);
    s->published = ll(r, 0, 5);
    s->dead = ll(r, 0, 6);
    s->oldest_age_s = dbl(r, 0, 7);
    s->has_latency = !PQgetisnull(r, 0, 8);
    if (s->has_latency) {
        s->p50_s = dbl(r, 0, 8);
        s->p99_s = dbl(r, 0, 9);
    }
    s->latency_sum_s = dbl(r, 0, 10);
    s->latency_count = ll(r, 0, 11);
    s->attempts_sum = ll(r, 0, 12);
    PQclear(r);
    return 0;
}

static int read_counters(PGconn *conn, struct counters *c)
{
    char err[512];
    PGresult *r = pgx_exec(conn, sql_counters, 0, NULL, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading the counters failed: %s\n", err);
        return -1;
    }
    memset(c, 0, sizeof(*c));
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

/* Returns the rows (caller frees) and their count in *n, or NULL on error
 * (*n = -1).  No consumers is a valid answer: NULL with *n = 0. */
static struct consumer_row *read_consumers(PGconn *conn, int *n)
{
    char err[512];
    PGresult *r = pgx_exec(conn, sql_consumers, 0, NULL, NULL, err, sizeof(err));
    *n = -1;
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading the consumers failed: %s\n", err);
        return NULL;
    }
    *n = PQntuples(r);
    struct consumer_row *rows = *n ? calloc((size_t)*n, sizeof(*rows)) : NULL;
    if (*n && rows == NULL)
        abort();
    for (int i = 0; i < *n; i++) {
        struct consumer_row *c = &rows[i];
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
    return rows;
}

static void fmt_age(double s, char *out, size_t outlen)
{
    ctl_format_duration((int64_t)(s * 1000.0), out, outlen);
}

static void print_human(const struct outbox_summary *s, const struct counters *k,
                        const PGresult *hist, const struct consumer_row *cons, int ncons)
{
    char age[32];
    fmt_age(s->oldest_age_s, age, sizeof(age));
    printf("outbox\n");
    printf("  %-26s %10lld   (ready %lld, in backoff %lld, leased %lld)\n", "pending",
           s->pending, s->ready, s->backoff, s->leased);
    printf("  %-26s %10s\n", "oldest pending age", s->pending ? age : "-");
    printf("  %-26s %10lld\n", "live leases", s->leased);
    printf("  %-26s %10lld   (unsettled; the next claim recovers them)\n", "expired leases",
           s->expired);
    printf("  %-26s %10lld\n", "published", s->published);
    printf("  %-26s %10lld   (outboxctl dead-letters list)\n", "dead letters", s->dead);
    printf("  %-26s %10lld\n", "expired leases recovered", k->recovered);
    printf("  %-26s %10lld\n", "leases lost (fenced)", k->lost);
    printf("  %-26s %10lld\n", "requeues", k->requeues);
    if (s->has_latency)
        printf("  %-26s p50 %.3fs  p99 %.3fs   (occurred_at -> published_at)\n",
               "publish latency", s->p50_s, s->p99_s);
    else
        printf("  %-26s %10s\n", "publish latency", "-");
    printf("  attempts histogram (claims per row)\n");
    for (int i = 0; i < PQntuples(hist); i++)
        printf("    %5s  %10s\n", PQgetvalue(hist, i, 0), PQgetvalue(hist, i, 1));
    printf("consumers\n");
    if (ncons == 0) {
        printf("  (none yet)\n");
        return;
    }
    printf("  %-16s %10s %11s %6s %12s %13s %9s %9s\n", "name", "processed", "duplicates",
           "gaps", "gaps parked", "dead letters", "p50", "p99");
    for (int i = 0; i < ncons; i++) {
        const struct consumer_row *c = &cons[i];
        char p50[16] = "-", p99[16] = "-";
        if (c->has_latency) {
            snprintf(p50, sizeof(p50), "%.3fs", c->p50_s);
            snprintf(p99, sizeof(p99), "%.3fs", c->p99_s);
        }
        printf("  %-16s %10lld %11lld %6lld %12lld %13lld %9s %9s\n", c->name, c->processed,
               c->duplicates, c->gaps, c->gaps_parked, c->dead_letters, p50, p99);
    }
    printf("  (duplicates: deliveries the inbox ignored; latency: published_at -> processed_at)\n");
}

static void print_json(const struct outbox_summary *s, const struct counters *k,
                       const PGresult *hist, const struct consumer_row *cons, int ncons)
{
    printf("{\"outbox\":{\"pending\":%lld,\"ready\":%lld,\"in_backoff\":%lld,"
           "\"live_leases\":%lld,\"expired_leases\":%lld,\"published\":%lld,"
           "\"dead_letters\":%lld,\"oldest_pending_age_s\":%.3f,"
           "\"expired_leases_recovered\":%lld,\"leases_lost\":%lld,\"requeues\":%lld,",
           s->pending, s->ready, s->backoff, s->leased, s->expired, s->published, s->dead,
           s->oldest_age_s, k->recovered, k->lost, k->requeues);
    if (s->has_latency)
        printf("\"publish_latency_s\":{\"p50\":%.6f,\"p99\":%.6f},", s->p50_s, s->p99_s);
    else
        printf("\"publish_latency_s\":null,");
    printf("\"attempts_histogram\":{");
    for (int i = 0; i < PQntuples(hist); i++)
        printf("%s\"%s\":%s", i ? "," : "", PQgetvalue(hist, i, 0), PQgetvalue(hist, i, 1));
    printf("}},\"consumers\":[");
    for (int i = 0; i < ncons; i++) {
        const struct consumer_row *c = &cons[i];
        printf("%s{\"name\":", i ? "," : "");
        ctl_json_string(stdout, c->name);
        printf(",\"processed\":%lld,\"duplicates_ignored\":%lld,\"gaps\":%lld,"
               "\"gaps_parked\":%lld,\"dead_letters\":%lld,",
               c->processed, c->duplicates, c->gaps, c->gaps_parked, c->dead_letters);
        if (c->has_latency)
            printf("\"processing_latency_s\":{\"p50\":%.6f,\"p99\":%.6f}}", c->p50_s, c->p99_s);
        else
            printf("\"processing_latency_s\":null}");
    }
    printf("]}\n");
}

/* Everything status and metrics report, read in one place. */
struct snapshot {
    struct outbox_summary s;
    struct counters k;
    PGresult *hist;             /* sql_attempts rows: attempts, count */
    struct consumer_row *cons;  /* ncons rows, owned */
    int ncons;
};

/* Connects and reads the outbox summary, the counters, the attempts histogram and the
 * consumer rows into *snap. 0 on success (release with snapshot_free); -1 after the
 * reason went to stderr, with nothing left to release. */
static int read_snapshot(struct ctl *c, struct snapshot *snap)
{
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return -1;
    char err[512];
    if (read_summary(conn, &snap->s) < 0 || read_counters(conn, &snap->k) < 0)
        return -1;
    snap->hist = pgx_exec(conn, sql_attempts, 0, NULL, NULL, err, sizeof(err));
    if (snap->hist == NULL) {
        fprintf(stderr, "outboxctl: reading attempts failed: %s\n", err);
        return -1;
    }
    snap->cons = read_consumers(conn, &snap->ncons);
    if (snap->ncons < 0) {
        PQclear(snap->hist);
        return -1;
    }
    return 0;
}

static void snapshot_free(struct snapshot *snap)
{
    PQclear(snap->hist);
    free(snap->cons);
}

int ctl_status(struct ctl *c, int argc, char **argv)
{
    int json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "outboxctl: status: unknown argument '%s' (only --json)\n", argv[i]);
            return CTL_USAGE;
        }
    }
    struct snapshot snap;
    if (read_snapshot(c, &snap) < 0)
        return CTL_FAILED;
    if (json)
        print_json(&snap.s, &snap.k, snap.hist, snap.cons, snap.ncons);
    else
        print_human(&snap.s, &snap.k, snap.hist, snap.cons, snap.ncons);
    snapshot_free(&snap);
    return CTL_OK;
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label(const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            printf("\\%c", *s);
        else if (*s == '\n')
            printf("\\n");
        else
            putchar(*s);
    }
}

static void head(const char *name, const char *type, const char *help)
{
    printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prints one per-consumer series: its HELP/TYPE head, then name{consumer="..."} value
 * for each of the ncons rows, the value being the long long member of struct
 * consumer_row at offset (give it with offsetof). */
static void per_consumer(const char *name, const char *type, const char *help,
                         const struct consumer_row *cons, int ncons, size_t offset)
{
    head(name, type, help);
    for (int i = 0; i < ncons; i++) {
        long long v;
        memcpy(&v, (const char *)&cons[i] + offset, sizeof(v));
        printf("%s{consumer=\"", name);
        label(cons[i].name);
        printf("\"} %lld\n", v);
    }
}

int ctl_metrics(struct ctl *c, int argc, char **argv)
{
    if (argc > 0) {
        fprintf(stderr, "outboxctl: metrics takes no arguments\n");
        return CTL_USAGE;
    }
    struct snapshot snap;
    if (read_snapshot(c, &snap) < 0)
        return CTL_FAILED;
    /* Short names for the many lines below. */
    const struct outbox_summary s = snap.s;
    const struct counters k = snap.k;
    const PGresult *hist = snap.hist;
    const struct consumer_row *cons = snap.cons;
    int ncons = snap.ncons;

    head("outbox_pending_total", "gauge", "Outbox rows neither published nor dead-lettered.");
    printf("outbox_pending_total %lld\n", s.pending);
    head("outbox_pending", "gauge", "Pending outbox rows by state.");
    printf("outbox_pending{state=\"ready\"} %lld\n", s.ready);
    printf("outbox_pending{state=\"backoff\"} %lld\n", s.backoff);
    printf("outbox_pending{state=\"leased\"} %lld\n", s.leased);
    head("outbox_oldest_pending_age_seconds", "gauge",
         "Age of the oldest pending outbox row (0 when none): the signal that a row is stuck.");
    printf("outbox_oldest_pending_age_seconds %.3f\n", s.oldest_age_s);
    head("outbox_expired_leases", "gauge", "Pending rows whose lease expired unsettled.");
    printf("outbox_expired_leases %lld\n", s.expired);
    head("outbox_published_total", "counter",
         "Outbox rows published, including rows since removed by cleanup.");
    printf("outbox_published_total %lld\n", s.published + k.published_deleted);
    head("outbox_dead_letters", "gauge", "Outbox rows dead-lettered and not requeued.");
    printf("outbox_dead_letters %lld\n", s.dead);
    head("outbox_requeues_total", "counter", "Dead letters requeued by an operator.");
    printf("outbox_requeues_total %lld\n", k.requeues);
    head("outbox_expired_leases_recovered_total", "counter",
         "Claims that took over a row whose previous lease had expired unsettled.");
    printf("outbox_expired_leases_recovered_total %lld\n", k.recovered);
    head("outbox_leases_lost_total", "counter",
         "Fenced settles that found the row re-claimed by another worker.");
    printf("outbox_leases_lost_total %lld\n", k.lost);

    /* Attempts per row as a histogram: cumulative buckets. */
    static const int le[] = { 1, 2, 3, 5, 8, 12 };
    long long total = 0;
    head("outbox_attempts", "histogram", "Claims per outbox row (the attempts column).");
    for (size_t b = 0; b < sizeof(le) / sizeof(le[0]); b++) {
        long long cum = 0;
        for (int i = 0; i < PQntuples(hist); i++)
            if (atoi(PQgetvalue(hist, i, 0)) <= le[b])
                cum += ll(hist, i, 1);
        printf("outbox_attempts_bucket{le=\"%d\"} %lld\n", le[b], cum);
    }
    for (int i = 0; i < PQntuples(hist); i++)
        total += ll(hist, i, 1);
    printf("outbox_attempts_bucket{le=\"+Inf\"} %lld\n", total);
    printf("outbox_attempts_sum %lld\noutbox_attempts_count %lld\n", s.attempts_sum, total);

    head("outbox_publish_latency_seconds", "summary", "From occurred_at to published_at.");
    if (s.has_latency)
        printf("outbox_publish_latency_seconds{quantile=\"0.5\"} %.6f\n"
               "outbox_publish_latency_seconds{quantile=\"0.99\"} %.6f\n",
               s.p50_s, s.p99_s);
    printf("outbox_publish_latency_seconds_sum %.6f\noutbox_publish_latency_seconds_count %lld\n",
           s.latency_sum_s, s.latency_count);

    per_consumer("inbox_processed", "gauge",
                 "Inbox markers held per consumer.",
                 cons, ncons, offsetof(struct consumer_row, processed));
    per_consumer("inbox_duplicates_ignored_total", "counter",
                 "Deliveries the inbox recognised as already processed.",
                 cons, ncons, offsetof(struct consumer_row, duplicates));
    per_consumer("consumer_gaps_total", "counter",
                 "Deliveries held back for a version gap.",
                 cons, ncons, offsetof(struct consumer_row, gaps));
    per_consumer("consumer_gaps_parked_total", "counter",
                 "Version gaps that never closed, parked.",
                 cons, ncons, offsetof(struct consumer_row, gaps_parked));
    per_consumer("consumer_dead_letters", "gauge",
                 "Deliveries parked by a consumer.",
                 cons, ncons, offsetof(struct consumer_row, dead_letters));
    head("inbox_processing_latency_seconds", "summary",
         "From published_at to the consumer's inbox processed_at.");
    for (int i = 0; i < ncons; i++) {
        const struct consumer_row *r = &cons[i];
        if (r->has_latency) {
            printf("inbox_processing_latency_seconds{consumer=\"");
            label(r->name);
            printf("\",quantile=\"0.5\"} %.6f\n", r->p50_s);
            printf("inbox_processing_latency_seconds{consumer=\"");
            label(r->name);
            printf("\",quantile=\"0.99\"} %.6f\n", r->p99_s);
        }
        printf("inbox_processing_latency_seconds_sum{consumer=\"");
        label(r->name);
        printf("\"} %.6f\n", r->latency_sum_s);
        printf("inbox_processing_latency_seconds_count{consumer=\"");
        label(r->name);
        printf("\"} %lld\n", r->latency_count);
    }
    snapshot_free(&snap);
    return CTL_OK;
}
