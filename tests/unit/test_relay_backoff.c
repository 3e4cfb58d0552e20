/* Unit tests for relay_backoff.h: the ceiling min(cap, base*2^attempts), the
 * equal-jitter bounds [ceil(ceiling/2), ceiling], overflow safety, and the
 * redelivery horizon outboxctl guards inbox cleanup with. */
#include "relay_backoff.h"
#include "check.h"

#include <stdint.h>

int main(void)
{
    /* The article's schedule: base 1 s, cap 300 s -> 2, 4, ... 256, 300, 300. */
    CHECK(relay_backoff_ceiling_ms(0, 1000, 300000) == 1000);
    CHECK(relay_backoff_ceiling_ms(1, 1000, 300000) == 2000);
    CHECK(relay_backoff_ceiling_ms(8, 1000, 300000) == 256000);
    CHECK(relay_backoff_ceiling_ms(9, 1000, 300000) == 300000);
    CHECK(relay_backoff_ceiling_ms(12, 1000, 300000) == 300000);
    /* Never overflows, whatever the attempt count. */
    CHECK(relay_backoff_ceiling_ms(63, 1000, 300000) == 300000);
    CHECK(relay_backoff_ceiling_ms(1000000, 86400000, 86400000) == 86400000);
    CHECK(relay_backoff_ceiling_ms(40, 1, 86400000) == 86400000);
    CHECK(relay_backoff_ceiling_ms(-5, 100, 1000) == 100);
    /* A cap below the base yields the cap. */
    CHECK(relay_backoff_ceiling_ms(3, 500, 200) == 200);
    /* Monotone in attempts. */
    for (int a = 0; a < 40; a++)
        CHECK(relay_backoff_ceiling_ms(a, 7, 123457) <= relay_backoff_ceiling_ms(a + 1, 7, 123457));

    /* Jitter bounds at the ends of [0, 1) and outside it. */
    CHECK(relay_backoff_jitter_ms(1000, 0.0) == 500);
    CHECK(relay_backoff_jitter_ms(1000, 0.999999) == 1000);
    CHECK(relay_backoff_jitter_ms(1001, 0.0) == 501); /* ceil(1001/2) */
    CHECK(relay_backoff_jitter_ms(1, 0.5) == 1);
    CHECK(relay_backoff_jitter_ms(0, 0.5) == 0);
    CHECK(relay_backoff_jitter_ms(1000, -3.0) == 500);
    CHECK(relay_backoff_jitter_ms(1000, 7.0) == 1000);
    CHECK(relay_backoff_jitter_ms(1000, 0.0 / 0.0) == 500); /* NaN */

    /* Random draws: always within bounds, and actually spread. */
    int64_t lo_seen = INT64_MAX, hi_seen = 0;
    for (int i = 0; i < 200000; i++) {
        double u = relay_rand_unit();
        CHECK(u >= 0.0 && u < 1.0);
        int attempts = i % 15;
        int64_t ceiling = relay_backoff_ceiling_ms(attempts, 100, 30000);
        int64_t d = relay_backoff_delay_ms(attempts, 100, 30000);
        if (!(d >= (ceiling + 1) / 2 && d <= ceiling)) {
            CHECK(!"delay outside [ceil(c/2), c]");
            break;
        }
        if (attempts == 14) {
            if (d < lo_seen)
                lo_seen = d;
            if (d > hi_seen)
                hi_seen = d;
        }
    }
    /* With ~13,000 draws over [15000, 30000], both ends are approached. */
    CHECK(lo_seen < 15300);
    CHECK(hi_seen > 29700);
    /* Two draws in a row differ (the generator is not stuck). */
    CHECK(relay_rand_unit() != relay_rand_unit());

    /* Redelivery horizon: retries after attempts 1..max-1, plus a lease per
     * attempt.  Defaults: 2+4+...+256 + 3*300 = 1410 s, + 12*30 s = 1770 s. */
    CHECK(relay_redelivery_horizon_ms(12, 1000, 300000, 30000) == 1770000);
    CHECK(relay_redelivery_horizon_ms(1, 1000, 300000, 30000) == 30000);
    CHECK(relay_redelivery_horizon_ms(3, 100, 400, 1000) == 200 + 400 + 3000);
    CHECK(relay_redelivery_horizon_ms(0, 100, 400, 1000) == 0);
    CHECK(relay_redelivery_horizon_ms(1000, 86400000, 86400000, 86400000) > 0);
    return check_report("test_relay_backoff");
}
