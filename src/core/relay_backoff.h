/* relay_backoff.h -- the redelivery horizon implied by the relay's retry
 * schedule.
 *
 * A failed publish is retried after a jittered delay below
 * cw_backoff_ceiling_ms(attempts, base, cap) (backoff.h), computed when the
 * retry is scheduled and persisted in next_attempt_at, so a restarted relay
 * honours it.  From that schedule follows how long one outbox row can keep
 * being published again; outboxctl must compute the same horizon to guard
 * inbox cleanup, so the function is static inline over the core library and
 * outboxctl shares it without linking the relay. */
#ifndef CW_RELAY_BACKOFF_H
#define CW_RELAY_BACKOFF_H

#include "backoff.h"

#include <stdint.h>

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
