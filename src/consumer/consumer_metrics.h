/* consumer_metrics.h -- what a consumer counts, and its /metrics endpoint.
 *
 * The loop counts each decision where it logs it (consumer_count); the
 * counts live in atomics, only grow, and start at 0 with the process.  With
 * --metrics-listen the consumer serves them, labelled with its consumer
 * name, together with the pipeline's figures read from the database at each
 * scrape (pipeline_stats.h), on a connection of the endpoint's own. */
#ifndef CW_CONSUMER_METRICS_H
#define CW_CONSUMER_METRICS_H

#include <stddef.h>

enum consumer_count {
    CONSUMER_DELIVERIES,          /* deliveries received */
    CONSUMER_APPLIED,             /* events applied (effect + inbox marker committed) */
    CONSUMER_DUPLICATES,          /* deliveries the inbox absorbed */
    CONSUMER_STALE,               /* versions older than the applied one */
    CONSUMER_GAPS,                /* deliveries held back for a version gap */
    CONSUMER_PARKED_POISON,       /* poison deliveries parked */
    CONSUMER_PARKED_GAP,          /* gaps parked */
    CONSUMER_ACKS,                /* acknowledgements sent after COMMIT */
    CONSUMER_NACKS,               /* deliveries handed back to the broker */
    CONSUMER_TX_RETRIES,          /* transactions run again after 40001/40P01 */
    CONSUMER_RECONNECTS_DB,       /* database connections lost or refused */
    CONSUMER_RECONNECTS_BROKER,   /* broker connections lost or refused */
    CONSUMER_COUNT_N
};

/* Adds n to a count.  Safe from any thread. */
void consumer_count(enum consumer_count which, long long n);

/* Starts the endpoint on address for the database conninfo (NULL: no
 * pipeline figures); consumer is
 * the consumer name (every sample's label), proc the process name.  0, or
 * -1 with a message in err (nothing left running). */
int consumer_metrics_start(const char *address, const char *conninfo, const char *consumer,
                           const char *proc, char *err, size_t errlen);

/* The address bound ("HOST:PORT"), NULL when not serving. */
const char *consumer_metrics_address(void);

/* Stops the endpoint; a no-op when not serving. */
void consumer_metrics_stop(void);

#endif
