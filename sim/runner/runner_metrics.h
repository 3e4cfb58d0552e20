/* runner_metrics.h -- the pipeline's vital signs, sampled during a scenario.
 *
 * A thread with its own database connection writes one JSON line every
 * ~250 ms to metrics.jsonl: pending rows, the oldest pending age, attempts,
 * dead letters, published, consumed per consumer, duplicates ignored, and
 * publish (occurred_at -> published_at) and processing (published_at ->
 * inbox processed_at) latency percentiles, and the sessions idle inside an
 * open transaction (application name, pid, how long, by the server's clock:
 * the checker's evidence that an abandoned transaction ends within its
 * bound).  The report draws the rest over time.
 * Sampling only reads, in one short statement, so it cannot change what the
 * scenario proves. */
#ifndef CW_RUNNER_METRICS_H
#define CW_RUNNER_METRICS_H

typedef struct metrics metrics;

/* Starts sampling conninfo into path every interval_ms.  NULL on failure
 * (the scenario runs on without metrics; the caller logs why). */
metrics *metrics_start(const char *conninfo, const char *path, int interval_ms);

/* Takes one last sample, stops the thread and frees everything.  Returns
 * the number of samples written. */
int metrics_stop(metrics *m);

#endif
