/* Unit tests for promtext.h: families and samples as the exposition format
 * wants them, escapes, values that parse back exactly, and every mistake
 * refused with its name, leaving no page. */
#include "promtext.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int value_is(double v, const char *want)
{
    char out[32];
    promtext_value(v, out);
    return strcmp(out, want) == 0;
}

static int error_has(const struct promtext *p, const char *word)
{
    return promtext_text(p) == NULL && promtext_error(p) != NULL &&
           strstr(promtext_error(p), word) != NULL;
}

int main(void)
{
    struct promtext p;
    promtext_init(&p);
    promtext_family(&p, "outbox_relay_published_total", "counter", "Messages\\published\nok.");
    promtext_sample(&p, "outbox_relay_published_total", NULL, 42);
    promtext_family(&p, "inbox_processed", "gauge", "Markers.");
    promtext_sample(&p, "inbox_processed",
                    (const char *[]){ "consumer", "a\"b\\c\nd", "kind", "x", NULL }, 1.5);
    promtext_family(&p, "lat_seconds", "summary", "Latency.");
    promtext_sample(&p, "lat_seconds", (const char *[]){ "quantile", "0.5", NULL }, 0.25);
    promtext_sample(&p, "lat_seconds_sum", NULL, 1);
    promtext_sample(&p, "lat_seconds_count", NULL, 4);
    promtext_family(&p, "tries", "histogram", "Tries.");
    promtext_sample(&p, "tries_bucket", (const char *[]){ "le", "+Inf", NULL }, 3);
    promtext_sample(&p, "tries_sum", NULL, 5);
    promtext_sample(&p, "tries_count", NULL, 3);
    const char *want =
        "# HELP outbox_relay_published_total Messages\\\\published\\nok.\n"
        "# TYPE outbox_relay_published_total counter\n"
        "outbox_relay_published_total 42\n"
        "# HELP inbox_processed Markers.\n"
        "# TYPE inbox_processed gauge\n"
        "inbox_processed{consumer=\"a\\\"b\\\\c\\nd\",kind=\"x\"} 1.5\n"
        "# HELP lat_seconds Latency.\n"
        "# TYPE lat_seconds summary\n"
        "lat_seconds{quantile=\"0.5\"} 0.25\n"
        "lat_seconds_sum 1\n"
        "lat_seconds_count 4\n"
        "# HELP tries Tries.\n"
        "# TYPE tries histogram\n"
        "tries_bucket{le=\"+Inf\"} 3\n"
        "tries_sum 5\n"
        "tries_count 3\n";
    CHECK(promtext_text(&p) != NULL && strcmp(promtext_text(&p), want) == 0);
    CHECK_EQ_INT(promtext_len(&p), strlen(want));
    CHECK(promtext_error(&p) == NULL);
    promtext_free(&p);

    /* Values: integral without fraction, others exact in the fewest digits. */
    CHECK(value_is(0, "0"));
    CHECK(value_is(123456789012345.0, "123456789012345"));
    CHECK(value_is(0.1, "0.1"));
    CHECK(value_is(3600.123456, "3600.123456"));
    CHECK(value_is(1e300, "1.00000000000000005e+300") || value_is(1e300, "1e+300"));
    CHECK(value_is(NAN, "NaN"));
    CHECK(value_is(INFINITY, "+Inf"));
    CHECK(value_is(-INFINITY, "-Inf"));
    char out[32];
    promtext_value(2.0 / 3.0, out);
    CHECK(strtod(out, NULL) == 2.0 / 3.0);

    /* A table of counters: one family per run of rows, labels after the
     * constant ones. */
    static const struct promtext_counter rows[] = {
        { "a_total", "A.", NULL, NULL },
        { "b_total", "B.", "target", "db" },
        { "b_total", NULL, "target", "broker" },
    };
    unsigned long long values[] = { 1, 2, 3 };
    promtext_init(&p);
    promtext_counters(&p, rows, values, 3, (const char *[]){ "consumer", "acc", NULL });
    CHECK(promtext_text(&p) != NULL &&
          strcmp(promtext_text(&p), "# HELP a_total A.\n# TYPE a_total counter\n"
                                    "a_total{consumer=\"acc\"} 1\n"
                                    "# HELP b_total B.\n# TYPE b_total counter\n"
                                    "b_total{consumer=\"acc\",target=\"db\"} 2\n"
                                    "b_total{consumer=\"acc\",target=\"broker\"} 3\n") == 0);
    promtext_free(&p);

    /* Every mistake leaves no page, and says what it was. */
    promtext_init(&p);
    promtext_family(&p, "9lives", "gauge", "x");
    CHECK(error_has(&p, "9lives"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "a", "meter", "x");
    CHECK(error_has(&p, "meter"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_sample(&p, "orphan", NULL, 1);
    CHECK(error_has(&p, "orphan"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "a", "gauge", "x");
    promtext_sample(&p, "b", NULL, 1);
    CHECK(error_has(&p, "'b'"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "h", "histogram", "x");
    promtext_sample(&p, "h", NULL, 1);
    CHECK(error_has(&p, "'h'"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "g", "gauge", "x");
    promtext_sample(&p, "g_sum", NULL, 1);
    CHECK(error_has(&p, "g_sum"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "c_total", "counter", "x");
    promtext_sample(&p, "c_total", NULL, -1);
    CHECK(error_has(&p, "c_total"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "g", "gauge", "x");
    promtext_sample(&p, "g", (const char *[]){ "__name", "v", NULL }, 1);
    CHECK(error_has(&p, "__name"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "g", "gauge", "x");
    promtext_sample(&p, "g", (const char *[]){ "bad-label", "v", NULL }, 1);
    CHECK(error_has(&p, "bad-label"));
    promtext_free(&p);
    promtext_init(&p);
    promtext_family(&p, "g", "gauge", "x");
    promtext_sample(&p, "g", (const char *[]){ "k", NULL }, 1);
    CHECK(error_has(&p, "'k'"));
    /* Nothing is written after the first mistake. */
    promtext_family(&p, "fine", "gauge", "x");
    CHECK(error_has(&p, "'k'") && promtext_len(&p) == 0);
    promtext_free(&p);
    promtext_free(NULL);
    return check_report("test_promtext");
}
