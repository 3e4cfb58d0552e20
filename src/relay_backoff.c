/* relay_backoff.c -- the random source behind the relay's jitter.
 *
 * The arithmetic lives in relay_backoff.h (shared with outboxctl).  Jitter
 * only has to decorrelate relays, so a xorshift64* generator seeded once from
 * libuuid's random bytes is enough; two relays started in the same
 * microsecond still get different seeds. */
#include "relay_backoff.h"
#include "ids.h"

#include <stdlib.h>

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    if (rng_state == 0) {
        char hex[17];
        cw_random_hex(hex, 8);
        rng_state = strtoull(hex, NULL, 16);
        if (rng_state == 0)
            rng_state = 0x9e3779b97f4a7c15ULL;
    }
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

double relay_rand_unit(void)
{
    /* 53 random bits: every value is exact in a double and below 1. */
    return (double)(rng_next() >> 11) / 9007199254740992.0;
}

int64_t relay_backoff_delay_ms(int attempts, int64_t base_ms, int64_t cap_ms)
{
    return relay_backoff_jitter_ms(relay_backoff_ceiling_ms(attempts, base_ms, cap_ms),
                                   relay_rand_unit());
}
