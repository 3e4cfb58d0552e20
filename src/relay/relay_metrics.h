/* relay_metrics.h -- what the relay counts, and its /metrics endpoint.
 *
 * The loop counts each decision where it logs it (relay_count); the counts
 * live in atomics, only grow, and start at 0 with the process, as Prometheus
 * counters do.  With --metrics-listen the relay serves them on that address
 * together with the pipeline's figures read from the database at each scrape
 * (pipeline_stats.h), on a connection of the endpoint's own. */
#ifndef CW_RELAY_METRICS_H
#define CW_RELAY_METRICS_H

#include <stddef.h>

enum relay_count {
    RELAY_CLAIMS,                 /* claims that took rows */
    RELAY_CLAIMED,                /* rows those claims took */
    RELAY_PUBLISHED,              /* publishes the broker confirmed */
    RELAY_PUBLISH_FAILED,         /* publishes that failed */
    RELAY_MARKED,                 /* rows marked published */
    RELAY_MARKS_WITH_CLAIM,       /* mark statements committed with a claim */
    RELAY_MARKS_ALONE,            /* mark statements committed on their own */
    RELAY_RETRIES,                /* retries scheduled */
    RELAY_DEAD_LETTERS,           /* rows dead-lettered */
    RELAY_EXPIRED_LEASES,         /* rows claimed whose previous lease had expired */
    RELAY_LEASES_LOST,            /* settles that found the row re-claimed */
    RELAY_RECONNECTS_DB,          /* database connections lost or refused */
    RELAY_RECONNECTS_BROKER,      /* broker connections lost or refused */
    RELAY_COUNT_N
};

/* Adds n to a count.  Safe from any thread. */
void relay_count(enum relay_count which, long long n);

/* The worker id, shown in outbox_relay_info once the loop has one. */
void relay_metrics_worker(const char *worker);

/* Starts the endpoint on address for the database conninfo, NULL for no
 * pipeline figures (name: the process name).  0, or -1 with a message in err (nothing left running). */
int relay_metrics_start(const char *address, const char *conninfo, const char *name,
                        char *err, size_t errlen);

/* The address bound ("HOST:PORT"), NULL when not serving. */
const char *relay_metrics_address(void);

/* Stops the endpoint; a no-op when not serving. */
void relay_metrics_stop(void);

#endif
