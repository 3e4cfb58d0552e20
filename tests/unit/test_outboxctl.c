/* Unit tests for outboxctl's helpers: durations (parse and format),
 * fingerprints, JSON strings, and the redelivery horizon that guards
 * cleanup-inbox. */
#include "outboxctl.h"
#include "relay_policy.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t dur(const char *s)
{
    char err[256];
    int64_t ms = -1;
    return ctl_parse_duration(s, &ms, err, sizeof(err)) == 0 ? ms : -1;
}

static const char *fmt(int64_t ms)
{
    static char out[32];
    ctl_format_duration(ms, out, sizeof(out));
    return out;
}

int main(void)
{
    char err[256];
    CHECK_EQ_INT(dur("30s"), 30000);
    CHECK_EQ_INT(dur("15m"), 900000);
    CHECK_EQ_INT(dur("2h"), 7200000);
    CHECK_EQ_INT(dur("7d"), 604800000);
    CHECK_EQ_INT(dur("250ms"), 250);
    CHECK_EQ_INT(dur("36500d"), (int64_t)36500 * 86400000);
    CHECK_EQ_INT(dur("36501d"), -1);          /* over 100 years */
    CHECK_EQ_INT(dur("99999999999999999999d"), -1);
    CHECK_EQ_INT(dur("0s"), -1);
    CHECK_EQ_INT(dur("-5m"), -1);
    CHECK_EQ_INT(dur("10"), -1);              /* a unit is required */
    CHECK_EQ_INT(dur("10x"), -1);
    CHECK_EQ_INT(dur("m"), -1);
    CHECK_EQ_INT(dur(""), -1);
    CHECK_EQ_INT(dur(" 5s"), -1);
    CHECK_EQ_INT(dur("5s "), -1);
    CHECK_EQ_INT(dur("1.5h"), -1);
    CHECK(dur(NULL) == -1);
    int64_t ms;
    CHECK(ctl_parse_duration("10x", &ms, err, sizeof(err)) == -1 && strstr(err, "'10x'") != NULL);

    CHECK_EQ_STR(fmt(750), "750ms");
    CHECK_EQ_STR(fmt(1000), "1s");
    CHECK_EQ_STR(fmt(59000), "59s");
    CHECK_EQ_STR(fmt(90000), "1m30s");
    CHECK_EQ_STR(fmt(1770000), "29m30s");
    CHECK_EQ_STR(fmt(3600000), "1h");
    CHECK_EQ_STR(fmt(93600000), "1d2h");
    CHECK_EQ_STR(fmt(604800000), "7d");

    CHECK(ctl_fingerprint_valid("0123456789ab"));
    CHECK(!ctl_fingerprint_valid("0123456789AB"));
    CHECK(!ctl_fingerprint_valid("0123456789a"));
    CHECK(!ctl_fingerprint_valid("0123456789abc"));
    CHECK(!ctl_fingerprint_valid("0123456789ag"));
    CHECK(!ctl_fingerprint_valid(NULL));

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ctl_json_string(f, "a\"b\\c\nd\x01");
    fputc(' ', f);
    ctl_json_string(f, NULL);
    fclose(f);
    CHECK_EQ_STR(buf, "\"a\\\"b\\\\c\\nd\\u0001\" null");
    free(buf);

    /* The horizon cleanup-inbox enforces by default is the relay's. */
    CHECK(relay_redelivery_horizon_ms(RELAY_DEFAULT_MAX_ATTEMPTS, RELAY_DEFAULT_BACKOFF_BASE_MS,
                                      RELAY_DEFAULT_BACKOFF_CAP_MS,
                                      RELAY_DEFAULT_LEASE_MS) == 1770000);
    return check_report("test_outboxctl");
}
