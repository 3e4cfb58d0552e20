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
    CHECK(dur("30s") == 30000);
    CHECK(dur("15m") == 900000);
    CHECK(dur("2h") == 7200000);
    CHECK(dur("7d") == 604800000);
    CHECK(dur("250ms") == 250);
    CHECK(dur("36500d") == (int64_t)36500 * 86400000);
    CHECK(dur("36501d") == -1);          /* over 100 years */
    CHECK(dur("99999999999999999999d") == -1);
    CHECK(dur("0s") == -1);
    CHECK(dur("-5m") == -1);
    CHECK(dur("10") == -1);              /* a unit is required */
    CHECK(dur("10x") == -1);
    CHECK(dur("m") == -1);
    CHECK(dur("") == -1);
    CHECK(dur(" 5s") == -1);
    CHECK(dur("5s ") == -1);
    CHECK(dur("1.5h") == -1);
    CHECK(dur(NULL) == -1);
    int64_t ms;
    CHECK(ctl_parse_duration("10x", &ms, err, sizeof(err)) == -1 && strstr(err, "'10x'") != NULL);

    CHECK(strcmp(fmt(750), "750ms") == 0);
    CHECK(strcmp(fmt(1000), "1s") == 0);
    CHECK(strcmp(fmt(59000), "59s") == 0);
    CHECK(strcmp(fmt(90000), "1m30s") == 0);
    CHECK(strcmp(fmt(1770000), "29m30s") == 0);
    CHECK(strcmp(fmt(3600000), "1h") == 0);
    CHECK(strcmp(fmt(93600000), "1d2h") == 0);
    CHECK(strcmp(fmt(604800000), "7d") == 0);

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
    CHECK(strcmp(buf, "\"a\\\"b\\\\c\\nd\\u0001\" null") == 0);
    free(buf);

    /* The horizon cleanup-inbox enforces by default is the relay's. */
    CHECK(relay_redelivery_horizon_ms(RELAY_DEFAULT_MAX_ATTEMPTS, RELAY_DEFAULT_BACKOFF_BASE_MS,
                                      RELAY_DEFAULT_BACKOFF_CAP_MS,
                                      RELAY_DEFAULT_LEASE_MS) == 1770000);
    return check_report("test_outboxctl");
}
