/* pipeline_stats.h -- the pipeline's figures as the database holds them:
 * the source article's nine (README; oldest pending age first) and the
 * runbook's others.
 *
 * One reading is four statements (outbox summary, attempts histogram,
 * persistent counters, one row per consumer).  `outboxctl status` and
 * `outboxctl metrics` print a reading; every program's /metrics endpoint
 * serves one per scrape (pipeline_source), so the SQL exists once.
 *
 * The outbox is partitioned as the relay sees it: a pending row is leased
 * (live lease), in backoff (next_attempt_at in the future) or ready; an
 * expired lease is a pending row whose locked_until passed without a settle.
 * Latencies: occurred_at -> published_at over published rows;
 * published_at -> inbox processed_at per consumer (clamped at 0: a consumer
 * may commit before the relay marks the row published).  Each reading
 * scans the outbox and the inbox: a scrape interval of seconds, not
 * milliseconds. */
#ifndef CW_PIPELINE_STATS_H
#define CW_PIPELINE_STATS_H

#include "promtext.h"

#include <libpq-fe.h>
#include <stddef.h>

/* The processing latency of one message, in seconds, as SQL over an inbox
 * row INBOX and its outbox row OUTBOX: from its mark as published to the
 * consumer's commit, clamped at 0 because the relay marks a row after the
 * broker's confirm and a fast consumer can commit before that mark lands.
 * /metrics and the harness's sampler (the report's latency chart) both use
 * it, so the two never disagree. */
#define CW_SQL_PROCESSING_LATENCY_S(inbox, outbox)                                  \
    "greatest(0, extract(epoch FROM " inbox ".processed_at - " outbox ".published_at))"

struct pipeline_outbox {
    long long pending, ready, backoff, leased, expired, published, dead;
    double oldest_age_s;       /* 0 when nothing is pending */
    int has_latency;           /* p50_s, p99_s are set */
    double p50_s, p99_s, latency_sum_s;
    long long latency_count;
    long long attempts_sum;
};

/* pipeline_counters and requeues: they only grow. */
struct pipeline_counts {
    long long recovered, lost, published_deleted, inbox_deleted, requeues;
};

struct pipeline_consumer {
    char name[128];
    long long processed, duplicates, gaps, gaps_parked, dead_letters;
    int has_latency;
    double p50_s, p99_s, latency_sum_s;
    long long latency_count;
};

struct pipeline_attempts {
    int attempts;
    long long rows;
};

struct pipeline_stats {
    struct pipeline_outbox outbox;
    struct pipeline_counts counts;
    struct pipeline_attempts *attempts;  /* nattempts rows, ascending; owned */
    int nattempts;
    struct pipeline_consumer *consumers; /* nconsumers rows, by name; owned */
    int nconsumers;
};

/* Reads every figure.  0, or -1 with a message in err naming what could not
 * be read (then s holds nothing to free). */
int pipeline_stats_read(PGconn *conn, struct pipeline_stats *s, char *err, size_t errlen);

/* Frees what s owns; NULL is fine. */
void pipeline_stats_free(struct pipeline_stats *s);

/* Writes the figures as metric families: the source article's nine first, oldest
 * pending age leading, then the others. */
void pipeline_stats_prometheus(const struct pipeline_stats *s, struct promtext *p);

/* A program's own connection for reading the figures at each scrape of its
 * /metrics endpoint: opened on first use, with a connect and a statement
 * timeout of timeout_ms, dropped after a failure and opened again at the
 * next scrape.  Used from one thread only. */
struct pipeline_source {
    const char *conninfo;  /* borrowed; NULL: this program does not export the
                            * pipeline's figures (--pipeline-metrics off) */
    const char *app_name;  /* application_name of the connection */
    int timeout_ms;
    PGconn *conn;
};

/* Reads the figures and writes them, then outbox_stats_up (1, or 0 when the
 * database could not be read: the process's own metrics still get served)
 * and outbox_stats_read_seconds. */
void pipeline_source_write(struct pipeline_source *src, struct promtext *p);

/* Closes the connection. */
void pipeline_source_close(struct pipeline_source *src);

#endif
