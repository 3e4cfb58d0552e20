/* Unit tests for relay_policy.h: the redelivery horizon outboxctl guards
 * inbox cleanup with (the backoff itself is tested in test_backoff.c). */
#include "relay_policy.h"
#include "check.h"

#include <stdint.h>

int main(void)
{
    /* Redelivery horizon: retries after attempts 1..max-1, plus a lease per
     * attempt.  Defaults: 2+4+...+256 + 3*300 = 1410 s, + 12*30 s = 1770 s. */
    CHECK_EQ_INT(relay_redelivery_horizon_ms(12, 1000, 300000, 30000), 1770000);
    CHECK_EQ_INT(relay_redelivery_horizon_ms(1, 1000, 300000, 30000), 30000);
    CHECK_EQ_INT(relay_redelivery_horizon_ms(3, 100, 400, 1000), 200 + 400 + 3000);
    CHECK_EQ_INT(relay_redelivery_horizon_ms(0, 100, 400, 1000), 0);
    CHECK(relay_redelivery_horizon_ms(1000, 86400000, 86400000, 86400000) > 0);
    return check_report("test_relay_policy");
}
