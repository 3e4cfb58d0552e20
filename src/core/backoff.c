/* backoff.c -- capped exponential backoff with jitter; see backoff.h.
 *
 * Jitter only has to decorrelate processes, so a xorshift64* generator
 * seeded once from libuuid's random bytes is enough; two processes started
 * in the same microsecond still get different seeds.  The state is per
 * thread, so the API's request workers may draw without a lock. */
#include "backoff.h"
#include "ids.h"

#include <stdlib.h>

static _Thread_local uint64_t rng_state;

int64_t cw_backoff_ceiling_ms(int attempts, int64_t base_ms, int64_t cap_ms)
{
    int shift = attempts < 0 ? 0 : attempts;
    if (shift > CW_BACKOFF_MAX_SHIFT)
        shift = CW_BACKOFF_MAX_SHIFT;
    if (base_ms >= cap_ms || base_ms > (cap_ms >> shift))
        return cap_ms;
    return base_ms << shift;
}

int64_t cw_backoff_jitter_ms(int64_t ceiling, double u)
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

double cw_rand_unit(void)
{
    /* 53 random bits: every value is exact in a double and below 1. */
    return (double)(rng_next() >> 11) / 9007199254740992.0;
}

int64_t cw_backoff_delay_ms(int attempts, int64_t base_ms, int64_t cap_ms)
{
    return cw_backoff_jitter_ms(cw_backoff_ceiling_ms(attempts, base_ms, cap_ms),
                                cw_rand_unit());
}
