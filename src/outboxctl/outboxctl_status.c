/* outboxctl_status.c -- `status` (a human table, or --json) and `metrics`
 * (Prometheus text exposition format).
 *
 * Both print one reading of pipeline_stats (src/core): the same figures, and
 * the same SQL, as every program's /metrics endpoint. */
#include "outboxctl.h"
#include "pipeline_stats.h"
#include "promtext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fmt_age(double s, char *out, size_t outlen)
{
    ctl_format_duration((int64_t)(s * 1000.0), out, outlen);
}

static void print_human(const struct pipeline_stats *st)
{
    const struct pipeline_outbox *s = &st->outbox;
    const struct pipeline_counts *k = &st->counts;
    const struct pipeline_consumer *cons = st->consumers;
    int ncons = st->nconsumers;
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
    for (int i = 0; i < st->nattempts; i++)
        printf("    %5d  %10lld\n", st->attempts[i].attempts, st->attempts[i].rows);
    printf("consumers\n");
    if (ncons == 0) {
        printf("  (none yet)\n");
        return;
    }
    printf("  %-16s %10s %11s %6s %12s %13s %9s %9s\n", "name", "processed", "duplicates",
           "gaps", "gaps parked", "dead letters", "p50", "p99");
    for (int i = 0; i < ncons; i++) {
        const struct pipeline_consumer *c = &cons[i];
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

static void print_json(const struct pipeline_stats *st)
{
    const struct pipeline_outbox *s = &st->outbox;
    const struct pipeline_counts *k = &st->counts;
    const struct pipeline_consumer *cons = st->consumers;
    int ncons = st->nconsumers;
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
    for (int i = 0; i < st->nattempts; i++)
        printf("%s\"%d\":%lld", i ? "," : "", st->attempts[i].attempts, st->attempts[i].rows);
    printf("}},\"consumers\":[");
    for (int i = 0; i < ncons; i++) {
        const struct pipeline_consumer *c = &cons[i];
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

/* Connects and reads every figure into st.  0 (release with
 * pipeline_stats_free), or -1 after the reason went to stderr. */
static int read_stats(struct ctl *c, struct pipeline_stats *st)
{
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return -1;
    char err[512];
    if (pipeline_stats_read(conn, st, err, sizeof(err)) < 0) {
        fprintf(stderr, "outboxctl: %s\n", err);
        return -1;
    }
    return 0;
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
    struct pipeline_stats st;
    if (read_stats(c, &st) < 0)
        return CTL_FAILED;
    if (json)
        print_json(&st);
    else
        print_human(&st);
    pipeline_stats_free(&st);
    return CTL_OK;
}

int ctl_metrics(struct ctl *c, int argc, char **argv)
{
    if (argc > 0) {
        fprintf(stderr, "outboxctl: metrics takes no arguments\n");
        return CTL_USAGE;
    }
    struct pipeline_stats st;
    if (read_stats(c, &st) < 0)
        return CTL_FAILED;
    struct promtext p;
    promtext_init(&p);
    pipeline_stats_prometheus(&st, &p);
    pipeline_stats_free(&st);
    int rc = CTL_OK;
    if (promtext_text(&p) == NULL) {
        fprintf(stderr, "outboxctl: metrics: %s\n", promtext_error(&p));
        rc = CTL_FAILED;
    } else {
        fwrite(promtext_text(&p), 1, promtext_len(&p), stdout);
    }
    promtext_free(&p);
    return rc;
}
