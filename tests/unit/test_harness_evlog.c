/* test_harness_evlog.c -- unit tests of the event-log reader the runner and
 * the checker share: time parsing both ways, tolerant and strict reading of
 * an events file (a bad line counted, or an error naming its line), counts,
 * and the one field comparison of waits and invariants. */
#include "evlog.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_times(void)
{
    int64_t us = 0;
    CHECK(iso_to_us("1970-01-01T00:00:01Z", &us) && us == 1000000);
    CHECK(iso_to_us("1970-01-01T00:00:01.5Z", &us) && us == 1500000);
    CHECK(iso_to_us("1970-01-01 01:00:00.000001+01", &us) && us == 1);
    CHECK(iso_to_us("1970-01-01T01:30:00+01:30", &us) && us == 0);
    CHECK(!iso_to_us("yesterday", &us));
    CHECK(!iso_to_us("1970-01-01T00:00:01Zjunk", &us));
    char out[40];
    us_to_iso(1795988105618137LL, out, sizeof(out));
    CHECK(iso_to_us(out, &us) && us == 1795988105618000LL);
    cJSON *n = cJSON_CreateNumber(1795988105618137.0);
    CHECK(ev_time_us(n, &us) && us == 1795988105618137LL);
    cJSON_Delete(n);
    n = cJSON_CreateNumber(1795988105618.0); /* milliseconds */
    CHECK(ev_time_us(n, &us) && us == 1795988105618000LL);
    cJSON_Delete(n);
}

static void test_evlog(void)
{
    char path[] = "/tmp/cwtest_evlogXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text =
        "{\"ts_us\":1,\"proc\":\"r\",\"pid\":7,\"event\":\"claim\",\"ids\":[\"a\"],\"n\":1}\n"
        "not json\n"
        "\n"
        "{\"ts_us\":2,\"proc\":\"r\",\"pid\":7,\"event\":\"mark\",\"n\":0}\n"
        "{\"ts_us\":3,\"proc\":\"r\",\"pid\":8,\"event\":\"claim\",\"n\":2}\n"
        "{\"ts_us\":4,\"proc\":\"r\",\"pid\":8,\"event\":\"cla";  /* half a line */
    CHECK_EQ_INT(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    int bad = 0;
    cJSON *arr = evlog_read(path, &bad);
    CHECK(cJSON_GetArraySize(arr) == 3 && bad == 2);
    CHECK_EQ_INT(ev_ts(cJSON_GetArrayItem(arr, 1)), 2);
    CHECK_EQ_STR(ev_name(cJSON_GetArrayItem(arr, 2)), "claim");
    CHECK(ev_arr(cJSON_GetArrayItem(arr, 0), "ids") != NULL);
    CHECK(ev_arr(cJSON_GetArrayItem(arr, 0), "message_ids") == NULL); /* one name, no alias */
    double v = 0;
    CHECK(ev_num(cJSON_GetArrayItem(arr, 2), "n", &v) && v == 2);
    cJSON_Delete(arr);
    CHECK(evlog_count(path, "claim", NULL, NULL) == 2);
    CHECK_EQ_INT(evlog_count(path, "claim", "pid", "8"), 1);
    CHECK(evlog_count(path, NULL, "pid", "7") == 2);
    CHECK(evlog_count("/nonexistent/file", "claim", NULL, NULL) == 0);
    /* Read as evidence, the first bad line is an error naming its line. */
    char err[512] = "";
    CHECK(evlog_read_strict(path, NULL, NULL, err, sizeof(err)) == NULL);
    char want[600];
    snprintf(want, sizeof(want), "%s:2: the line is not a JSON object", path);
    CHECK(strstr(err, want) != NULL);
    unlink(path);

    /* The one field comparison the runner's waits and the checker share. */
    cJSON *ev = cJSON_Parse("{\"event\":\"fault_hit\",\"point\":\"relay/x\",\"pid\":42,"
                            "\"ok\":true,\"f\":1.5,\"o\":{}}");
    CHECK(ev_field_equals(ev, "point", "relay/x") && !ev_field_equals(ev, "point", "relay/y"));
    CHECK(ev_field_equals(ev, "pid", "42") && !ev_field_equals(ev, "pid", "42.0"));
    CHECK(ev_field_equals(ev, "ok", "true") && !ev_field_equals(ev, "ok", "false"));
    CHECK(!ev_field_equals(ev, "missing", "") && !ev_field_equals(ev, "o", "{}"));
    cJSON_Delete(ev);
}

int main(void)
{
    test_times();
    test_evlog();
    return check_report("test_harness_evlog");
}
