/* Unit tests for backoff.h: the ceiling min(cap, base*2^attempts), the
 * equal-jitter bounds [ceil(ceiling/2), ceiling], overflow safety, and the
 * cap holding for any attempt count (the consumer's transaction retries once
 * shifted an int by the retry count, unbounded). */
#include "backoff.h"
#include "check.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

/* Draws from a second thread: its generator is its own, seeded on first use. */
static void *draw_in_thread(void *arg)
{
    double *u = arg;
    u[0] = cw_rand_unit();
    u[1] = cw_rand_unit();
    return NULL;
}

int main(void)
{
    /* The source article's (README) schedule: base 1 s, cap 300 s -> 2, 4, ... 256, 300, 300. */
    CHECK_EQ_INT(cw_backoff_ceiling_ms(0, 1000, 300000), 1000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(1, 1000, 300000), 2000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(8, 1000, 300000), 256000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(9, 1000, 300000), 300000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(12, 1000, 300000), 300000);
    /* Never overflows, whatever the attempt count. */
    CHECK_EQ_INT(cw_backoff_ceiling_ms(63, 1000, 300000), 300000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(1000000, 86400000, 86400000), 86400000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(40, 1, 86400000), 86400000);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(-5, 100, 1000), 100);
    /* A cap below the base yields the cap. */
    CHECK_EQ_INT(cw_backoff_ceiling_ms(3, 500, 200), 200);
    /* Monotone in attempts. */
    for (int a = 0; a < 40; a++)
        CHECK(cw_backoff_ceiling_ms(a, 7, 123457) <= cw_backoff_ceiling_ms(a + 1, 7, 123457));

    /* The API's schedule between attempts of a request: 10, 20, ... 320. */
    CHECK_EQ_INT(cw_backoff_ceiling_ms(1, 5, 320), 10);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(6, 5, 320), 320);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(7, 5, 320), 320);
    /* The consumer's reconnect pauses: 100, 200, ... 1600, 2000. */
    CHECK_EQ_INT(cw_backoff_ceiling_ms(0, 100, 2000), 100);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(4, 100, 2000), 1600);
    CHECK_EQ_INT(cw_backoff_ceiling_ms(5, 100, 2000), 2000);

    /* Capped: the consumer's transaction retries (base 5 ms, cap 200 ms) at
     * retry counts where 5 << retries used to overflow an int. */
    for (int retries = 0; retries <= 1000; retries++) {
        int64_t d = cw_backoff_delay_ms(retries, 5, 200);
        if (d < 1 || d > 200) {
            CHECK(!"transaction retry pause outside 1..200 ms");
            break;
        }
    }
    CHECK(cw_backoff_delay_ms(27, 5, 200) <= 200);
    CHECK(cw_backoff_delay_ms(INT_MAX, 5, 200) >= 100);
    CHECK(cw_backoff_delay_ms(INT_MAX, 5, 200) <= 200);
    CHECK(cw_backoff_delay_ms(INT_MAX, 1000, INT64_MAX / 2) <= INT64_MAX / 2);
    CHECK(cw_backoff_ceiling_ms(INT_MAX, 1, INT64_MAX) == (int64_t)1 << CW_BACKOFF_MAX_SHIFT);

    /* Jitter bounds at the ends of [0, 1) and outside it. */
    CHECK_EQ_INT(cw_backoff_jitter_ms(1000, 0.0), 500);
    CHECK_EQ_INT(cw_backoff_jitter_ms(1000, 0.999999), 1000);
    CHECK_EQ_INT(cw_backoff_jitter_ms(1001, 0.0), 501); /* ceil(1001/2) */
    CHECK_EQ_INT(cw_backoff_jitter_ms(1, 0.5), 1);
    CHECK_EQ_INT(cw_backoff_jitter_ms(0, 0.5), 0);
    CHECK_EQ_INT(cw_backoff_jitter_ms(1000, -3.0), 500);
    CHECK_EQ_INT(cw_backoff_jitter_ms(1000, 7.0), 1000);
    CHECK_EQ_INT(cw_backoff_jitter_ms(1000, 0.0 / 0.0), 500); /* NaN */

    /* Random draws: always within bounds, and actually spread. */
    int64_t lo_seen = INT64_MAX, hi_seen = 0;
    for (int i = 0; i < 200000; i++) {
        double u = cw_rand_unit();
        CHECK(u >= 0.0 && u < 1.0);
        int attempts = i % 15;
        int64_t ceiling = cw_backoff_ceiling_ms(attempts, 100, 30000);
        int64_t d = cw_backoff_delay_ms(attempts, 100, 30000);
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
    CHECK(cw_rand_unit() != cw_rand_unit());

    /* Another thread draws from its own, differently seeded generator. */
    double here[2] = { cw_rand_unit(), cw_rand_unit() }, there[2] = { -1, -1 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, draw_in_thread, there) == 0);
    pthread_join(t, NULL);
    CHECK(there[0] >= 0.0 && there[0] < 1.0 && there[1] >= 0.0 && there[1] < 1.0);
    CHECK(there[0] != here[0] || there[1] != here[1]);
    return check_report("test_backoff");
}
