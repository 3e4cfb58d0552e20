/* api_metrics.h -- what the payments API counts, and its /metrics endpoint.
 *
 * The store counts every command it answers (by command and status code),
 * the replays among them, the transactions it ran again and the commits
 * whose outcome it had to settle; the counts live in atomics, only grow, and
 * start at 0 with the process.  With --metrics-listen the API serves them on
 * that address, on a listener of its own (not the API's port), together
 * with the pipeline's figures read from the database at each scrape
 * (pipeline_stats.h), on a connection of the endpoint's own. */
#ifndef CW_API_METRICS_H
#define CW_API_METRICS_H

#include "api_store.h"

#include <stddef.h>

/* A command answered with HTTP status (replayed: from its idempotency
 * record). */
void api_metrics_command(enum api_command_kind kind, int status, int replayed);

/* A transaction run again (serialization failure, deadlock, lost connection
 * before COMMIT). */
void api_metrics_retry(void);

/* A COMMIT whose outcome had to be settled from the transaction id. */
void api_metrics_ambiguous(void);

/* Starts the endpoint on address (NULL: does nothing and returns 0) for the
 * database conninfo (NULL: no pipeline figures); name is the process name.  0, or -1 with a message in
 * err (nothing left running).  Exits are the caller's: 2 by convention. */
int api_metrics_start(const char *address, const char *conninfo, const char *name,
                      char *err, size_t errlen);

/* The address bound ("HOST:PORT"), NULL when not serving. */
const char *api_metrics_address(void);

/* Stops the endpoint; a no-op when not serving. */
void api_metrics_stop(void);

#endif
