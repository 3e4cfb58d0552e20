/* backoff.h -- capped exponential backoff with jitter: how long every
 * crashwindow process waits before it tries something again.
 *
 * The wait after `attempts` failures is bounded by
 *
 *     ceiling(attempts) = min(cap, base * 2^attempts)
 *
 * milliseconds (the source article's 2^min(attempts, 9) s capped at 300 s,
 * see the README, is base 1000, cap 300000).  cw_backoff_delay_ms adds "equal jitter": the delay
 * is drawn uniformly from [ceil(ceiling/2), ceiling].  Full jitter
 * ([0, ceiling]) would let an unlucky caller retry almost at once in the
 * middle of an outage; equal jitter still spreads a fleet of processes apart
 * while keeping at least half of the backoff.
 *
 * Users: the relay's persisted publish retries and its reconnects (jittered),
 * the consumer's transaction retries (jittered) and reconnects (ceiling), the
 * API's attempts of one request (ceiling).  Every result is capped and no
 * computation overflows, whatever the attempt count. */
#ifndef CW_BACKOFF_H
#define CW_BACKOFF_H

#include <stdint.h>

/* Shifts beyond this cannot matter: any valid cap is reached long before. */
#define CW_BACKOFF_MAX_SHIFT 30

/* The backoff ceiling after `attempts` failures: min(cap_ms, base_ms *
 * 2^attempts).  Negative attempts count as 0; base_ms and cap_ms must be
 * positive (a cap below the base yields the cap).  Never overflows. */
int64_t cw_backoff_ceiling_ms(int attempts, int64_t base_ms, int64_t cap_ms);

/* Equal jitter: maps u in [0, 1) to a delay in [ceil(ceiling/2), ceiling].
 * u outside [0, 1) (NaN included) is clamped into it; a ceiling <= 0 gives 0. */
int64_t cw_backoff_jitter_ms(int64_t ceiling, double u);

/* A uniform draw in [0, 1) from a per-thread generator seeded from the
 * system's random source on first use (not for cryptography). */
double cw_rand_unit(void);

/* cw_backoff_jitter_ms(cw_backoff_ceiling_ms(...), cw_rand_unit()): a delay
 * in [ceil(ceiling/2), ceiling], never above cap_ms. */
int64_t cw_backoff_delay_ms(int attempts, int64_t base_ms, int64_t cap_ms);

#endif
