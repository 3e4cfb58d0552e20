/* relay_backoff.h -- capped exponential backoff with jitter, and the
 * redelivery horizon it implies.
 *
 * A failed publish is retried after
 *
 *     ceiling(attempts) = min(cap, base * 2^attempts)
 *
 * milliseconds (the article's 2^min(attempts, 9) s capped at 300 s is
 * base 1000, cap 300000), with "equal jitter": the delay is drawn uniformly
 * from [ceil(ceiling/2), ceiling].  Full jitter ([0, ceiling]) would let an
 * unlucky row retry almost at once in the middle of a broker outage; equal
 * jitter still spreads the relays of a fleet apart while keeping at least
 * half of the backoff.  The delay is computed when the retry is scheduled and
 * persisted in next_attempt_at, so a restarted relay honours it.
 *
 * The pure functions are static inline so that outboxctl (which must compute
 * the same redelivery horizon to guard inbox cleanup) shares them without
 * linking the relay. */
#ifndef CW_RELAY_BACKOFF_H
#define CW_RELAY_BACKOFF_H

#include <stdint.h>

/* Shifts beyond this cannot matter: any valid cap is reached long before. */
#define RELAY_BACKOFF_MAX_SHIFT 30

/* The backoff ceiling for a row that has been claimed `attempts` times:
 * min(cap_ms, base_ms * 2^attempts).  Negative attempts count as 0; base_ms
 * and cap_ms must be positive (a cap below the base yields the cap).  Never
 * overflows. */
static inline int64_t relay_backoff_ceiling_ms(int attempts, int64_t base_ms, int64_t cap_ms)
{
    int shift = attempts < 0 ? 0 : attempts;
    if (shift > RELAY_BACKOFF_MAX_SHIFT)
        shift = RELAY_BACKOFF_MAX_SHIFT;
    if (base_ms >= cap_ms || base_ms > (cap_ms >> shift))
        return cap_ms;
    return base_ms << shift;
}

/* Equal jitter: maps u in [0, 1) to a delay in [ceil(ceiling/2), ceiling].
 * u outside [0, 1) is clamped into it. */
static inline int64_t relay_backoff_jitter_ms(int64_t ceiling, double u)
{
    if (ceiling <= 0)
        return 0;
    if (!(u >= 0.0))
        u = 0.0;
    if (u >= 1.0)
        u = 0.999999999;
    int64_t half = ceiling / 2;                 /* floor */
    int64_t extra = (int64_t)(u * (double)(half + 1));
    if (extra > half)
        extra = half;
    return ceiling - half + extra;
}

/* The longest time over which one outbox row can be published again: every
 * attempt may hold its lease to the end (a relay that died after publishing)
 * and every retry may wait its full backoff ceiling.  Attempts run 1..max, and
 * a retry follows each of the first max-1.  An inbox marker younger than this
 * may still see its message again, so inbox cleanup must keep it. */
static inline int64_t relay_redelivery_horizon_ms(int max_attempts, int64_t base_ms,
                                                  int64_t cap_ms, int64_t lease_ms)
{
    int64_t total = 0;
    for (int a = 1; a < max_attempts; a++)
        total += relay_backoff_ceiling_ms(a, base_ms, cap_ms);
    if (max_attempts > 0)
        total += (int64_t)max_attempts * lease_ms;
    return total;
}

/* A uniform draw in [0, 1) from a per-process generator seeded from the
 * system's random source on first use (not for cryptography). */
double relay_rand_unit(void);

/* relay_backoff_jitter_ms(relay_backoff_ceiling_ms(...), relay_rand_unit()). */
int64_t relay_backoff_delay_ms(int attempts, int64_t base_ms, int64_t cap_ms);

#endif
