/* relay_policy.h -- the relay's retry policy: its defaults and the
 * redelivery horizon they imply.
 *
 * Two programs must agree on it: the relay, which retries on this schedule,
 * and outboxctl, whose inbox cleanup must keep every marker that a retry may
 * still meet.  It lives in the core so that neither program reads the
 * other's headers.
 *
 * A failed publish is retried after a jittered delay below
 * cw_backoff_ceiling_ms(attempts, base, cap) (backoff.h), computed when the
 * retry is scheduled and persisted in next_attempt_at, so a restarted relay
 * honours it.  From that schedule follows how long one outbox row can keep
 * being published again; outboxctl must compute the same horizon to guard
 * inbox cleanup, so the function is static inline over backoff.h. */
#ifndef CW_RELAY_POLICY_H
#define CW_RELAY_POLICY_H

#include "backoff.h"

#include <stdint.h>

/* The relay's defaults, as in the source article (README). */
#define RELAY_DEFAULT_BATCH 100
#define RELAY_DEFAULT_LEASE_MS 30000
#define RELAY_DEFAULT_BACKOFF_BASE_MS 1000
#define RELAY_DEFAULT_BACKOFF_CAP_MS 300000
#define RELAY_DEFAULT_MAX_ATTEMPTS 12
#define RELAY_DEFAULT_IDLE_MS 500

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
        total += cw_backoff_ceiling_ms(a, base_ms, cap_ms);
    if (max_attempts > 0)
        total += (int64_t)max_attempts * lease_ms;
    return total;
}

#endif
