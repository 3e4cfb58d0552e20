/* test_harness_report.c -- unit tests of the report writer: escaping and
 * UTF-8 repair, the size-capped buffer, axis steps, timeline windows and
 * witness marking, and report_write's refusals on bad input. */
#include "report.h"
#include "report_html.h"
#include "report_timeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[] = "/tmp/cwreportXXXXXX";

static void write_text(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static void test_escape(void)
{
    char out[512];
    html_escape("</script><img src=x onerror=alert(1)>", out, sizeof(out));
    CHECK_EQ_STR(out, "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;");
    html_escape("a&b \"q\" 'p'", out, sizeof(out));
    CHECK_EQ_STR(out, "a&amp;b &quot;q&quot; &#39;p&#39;");
    /* invalid UTF-8, an overlong '/', a surrogate and control bytes: U+FFFD */
    html_escape("x\xff\xc0\xaf\xed\xa0\x80\x01y", out, sizeof(out));
    CHECK(strstr(out, "\xff") == NULL && strstr(out, "\x01") == NULL);
    CHECK(strncmp(out, "x\xEF\xBF\xBD", 4) == 0);
    CHECK_EQ_INT(out[strlen(out) - 1], 'y');
    /* valid multi-byte text, tab and newline pass unchanged */
    html_escape("caf\xc3\xa9 \xe2\x82\xac\t\n\xf0\x9f\x98\x80", out, sizeof(out));
    CHECK_EQ_STR(out, "caf\xc3\xa9 \xe2\x82\xac\t\n\xf0\x9f\x98\x80");
    /* too small an output buffer: empty, never a cut reference */
    CHECK(html_escape("<<<<", out, 8) == 0 && out[0] == '\0');
}

static void test_cut(void)
{
    struct rbuf b;
    rbuf_init(&b, 1024);
    /* cutting at 4 bytes would split the two-byte e-acute: stop before it */
    rbuf_esc(&b, "caf\xc3\xa9-au-lait", 4);
    CHECK(b.len > 0 && strcmp(b.data, "caf\xE2\x80\xA6") == 0);
    rbuf_free(&b);
}

static void test_limit(void)
{
    struct rbuf b;
    rbuf_init(&b, 10);
    CHECK_EQ_INT(rbuf_puts(&b, "0123456789"), 0);
    CHECK_EQ_INT(rbuf_puts(&b, "x"), -1);
    CHECK(b.overflow == 1 && b.len == 10);
    CHECK_EQ_INT(rbuf_printf(&b, "%d", 1), -1);
    rbuf_free(&b);
    rbuf_init(&b, 1 << 20);
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK(rbuf_printf(&b, "[%s]", big) == 0 && b.len == sizeof(big) + 1);
    rbuf_free(&b);
}

static void test_nice_step(void)
{
    CHECK(report_nice_step(1000, 10) == 100);
    CHECK(report_nice_step(2600, 10) == 200);
    CHECK(report_nice_step(37, 4) == 10);
    CHECK(report_nice_step(0, 4) == 1);
}

/* A relay crashes at a fault and is restarted; the consumer is paused, then
 * killed (the runner logs the kill and the exit it saw) and restarted; one
 * line is garbage. */
static const char timeline[] =
    "{\"ts_us\":1000000,\"proc\":\"relay-1\",\"pid\":10,\"event\":\"start\"}\n"
    "{\"ts_us\":1000100,\"proc\":\"accounting\",\"pid\":20,\"event\":\"start\"}\n"
    "{\"ts_us\":1001000,\"proc\":\"relay-1\",\"pid\":10,\"event\":\"claim\","
    "\"ids\":[\"11111111-aaaa-4bbb-8ccc-000000000001\"]}\n"
    "{\"ts_us\":1002000,\"proc\":\"relay-1\",\"pid\":10,\"event\":\"fault_hit\","
    "\"point\":\"relay/after_publish\",\"action\":\"crash\"}\n"
    "not json at all\n"
    "{\"ts_us\":1010000,\"proc\":\"runner\",\"pid\":1,\"event\":\"restart\","
    "\"target\":\"relay-1\"}\n"
    "{\"ts_us\":1011000,\"proc\":\"relay-1\",\"pid\":11,\"event\":\"start\"}\n"
    "{\"ts_us\":1012000,\"proc\":\"accounting\",\"pid\":20,\"event\":\"deliver\","
    "\"id\":\"11111111-aaaa-4bbb-8ccc-000000000001\"}\n"
    "{\"ts_us\":1013000,\"proc\":\"runner\",\"pid\":1,\"event\":\"pause\","
    "\"target\":\"accounting\"}\n"
    "{\"ts_us\":1014000,\"proc\":\"runner\",\"pid\":1,\"event\":\"kill\","
    "\"target\":\"accounting\"}\n"
    "{\"ts_us\":1014500,\"proc\":\"runner\",\"pid\":1,\"event\":\"exit\","
    "\"target\":\"accounting\",\"how\":\"killed by SIGKILL\"}\n"
    "{\"ts_us\":1015000,\"proc\":\"runner\",\"pid\":1,\"event\":\"restart\","
    "\"target\":\"accounting\"}\n";

static void test_timeline(void)
{
    char path[512], err[256];
    write_text("timeline.jsonl", timeline);
    snprintf(path, sizeof(path), "%s/timeline.jsonl", tmpdir);
    struct rtl *t = rtl_load(path, 1000, err, sizeof(err));
    CHECK(t != NULL);
    if (t == NULL)
        return;
    CHECK_EQ_INT(rtl_count(t), 11);
    CHECK_EQ_INT(rtl_bad_lines(t), 1);
    CHECK_EQ_INT(rtl_lanes(t), 3);
    CHECK_EQ_INT(rtl_windows(t, "fault"), 1);
    CHECK_EQ_INT(rtl_windows(t, "paused"), 1);
    CHECK_EQ_INT(rtl_windows(t, "down"), 1); /* the kill and its exit: one window */
    const char *w[] = {"event 11111111-aaaa-4bbb-8ccc-000000000001 was applied twice"};
    CHECK_EQ_INT(rtl_mark_witnesses(t, w, 1), 1);

    struct rbuf b;
    rbuf_init(&b, 1 << 20);
    struct rview v;
    CHECK(rtl_view(t, NULL, &v) == 1 && v.origin == 1000000 && v.t0 == 1000000 &&
          v.t1 == 1015000);
    CHECK_EQ_INT(rtl_svg(&b, t, 0, &v, 100), 0);
    CHECK(strstr(b.data, "class=\"win-fault\"") != NULL);
    CHECK(strstr(b.data, "fault relay/after_publish (crash)") != NULL);
    CHECK(strstr(b.data, "class=\"wline\"") != NULL);
    CHECK(strstr(b.data, "mk k-claim w") != NULL);
    rbuf_free(&b);

    /* a cap of 2 folds the routine events into density bars */
    rbuf_init(&b, 1 << 20);
    CHECK_EQ_INT(rtl_svg(&b, t, 1, &v, 2), 0);
    CHECK(strstr(b.data, "class=\"density\"") != NULL);
    rbuf_free(&b);
    rtl_free(t);

    CHECK(rtl_load("/nonexistent/timeline.jsonl", 10, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "cannot open") != NULL);
}

/* Start-up takes half the run: the view starts just before the first step. */
static void test_view_focus(void)
{
    char path[512], err[256];
    write_text("focus.jsonl",
               "{\"ts_us\":1000000,\"proc\":\"runner\",\"pid\":1,\"event\":\"start\","
               "\"target\":\"api\"}\n"
               "{\"ts_us\":1100000,\"proc\":\"api\",\"pid\":2,\"event\":\"start\"}\n"
               "{\"ts_us\":1500000,\"proc\":\"runner\",\"pid\":1,\"event\":\"step\","
               "\"do\":\"payments\"}\n"
               "{\"ts_us\":1800000,\"proc\":\"api\",\"pid\":2,\"event\":\"commit\"}\n"
               "{\"ts_us\":2000000,\"proc\":\"runner\",\"pid\":1,\"event\":\"check\"}\n");
    snprintf(path, sizeof(path), "%s/focus.jsonl", tmpdir);
    struct rtl *t = rtl_load(path, 100, err, sizeof(err));
    CHECK(t != NULL);
    if (t == NULL)
        return;
    struct rview v;
    CHECK(rtl_view(t, NULL, &v) == 1);
    CHECK(v.origin == 1000000 && v.t1 == 2000000);
    CHECK(v.t0 > 1400000 && v.t0 < 1500000);
    struct rbuf b;
    rbuf_init(&b, 1 << 20);
    CHECK_EQ_INT(rtl_svg(&b, t, 0, &v, 100), 0);
    CHECK(strstr(b.data, "the 2 events of process start-up") != NULL);
    rbuf_free(&b);
    rtl_free(t);
}

static void test_metrics(void)
{
    char path[512], err[256];
    write_text("metrics.jsonl",
               "{\"ts_us\":1000000,\"pending\":3,\"consumed\":{\"accounting\":1}}\n"
               "{\"ts_us\":1250000,\"pending\":null,\"publish_latency_p50_ms\":2.5}\n"
               "[1,2]\n");
    snprintf(path, sizeof(path), "%s/metrics.jsonl", tmpdir);
    struct rmetrics *m = rmetrics_load(path, 100, err, sizeof(err));
    CHECK(m != NULL && rmetrics_count(m) == 2);
    struct rbuf b;
    rbuf_init(&b, 1 << 20);
    struct rview v = {1000000, 1000000, 1250000};
    CHECK(rmetrics_svg(&b, m, NULL, &v) == 0);
    CHECK(strstr(b.data, "pending outbox rows") != NULL);
    CHECK(strstr(b.data, "accounting") != NULL);
    CHECK(strstr(b.data, "1 malformed metric lines skipped") != NULL);
    rbuf_free(&b);
    rmetrics_free(m);
}

static void test_write_errors(void)
{
    char err[512], out[512];
    snprintf(out, sizeof(out), "%s/out.html", tmpdir);
    CHECK_EQ_INT(report_write("/nonexistent-run-dir", out, err, sizeof(err)), -1);
    CHECK(strstr(err, "cannot open") != NULL);
    CHECK(access(out, F_OK) != 0);
    write_text("result.json", "{\"tool\":\"crashwindow\",");
    CHECK_EQ_INT(report_write(tmpdir, out, err, sizeof(err)), -1);
    CHECK(strstr(err, "not valid JSON") != NULL);
    write_text("result.json", "{\"tool\":\"other\"}");
    CHECK_EQ_INT(report_write(tmpdir, out, err, sizeof(err)), -1);
    CHECK(strstr(err, "not a crashwindow result") != NULL);
    write_text("result.json", "{\"tool\":\"crashwindow\",\"scenarios\":{}}");
    CHECK_EQ_INT(report_write(tmpdir, out, err, sizeof(err)), -1);
    CHECK(access(out, F_OK) != 0);
    write_text("result.json", "{\"tool\":\"crashwindow\",\"verdict\":\"pass\",\"scenarios\":[]}");
    CHECK_EQ_INT(report_write(tmpdir, out, err, sizeof(err)), 0);
    CHECK_EQ_INT(access(out, F_OK), 0);
}

/* Network faults: a window per fault on a lane of the link's own, ended by
 * its duration or by the link's next net_fault or net_clear. */
static const char net_timeline[] =
    "{\"ts_us\":2000000,\"proc\":\"relay-1\",\"pid\":10,\"event\":\"start\"}\n"
    "{\"ts_us\":2001000,\"proc\":\"runner\",\"pid\":1,\"event\":\"net_fault\","
    "\"link\":\"relay-1->pg\",\"fault\":\"blackhole\",\"detail\":\"blackhole for 500 ms\","
    "\"ms\":500}\n"
    "{\"ts_us\":2600000,\"proc\":\"runner\",\"pid\":1,\"event\":\"net_fault\","
    "\"link\":\"relay-1->broker\",\"fault\":\"latency\",\"detail\":\"latency 9+-0 ms\","
    "\"ms\":0}\n"
    "{\"ts_us\":2700000,\"proc\":\"runner\",\"pid\":1,\"event\":\"net_clear\","
    "\"link\":\"relay-1->broker\"}\n"
    "{\"ts_us\":2900000,\"proc\":\"relay-1\",\"pid\":10,\"event\":\"claim\"}\n";

static void test_net_windows(void)
{
    char path[512], err[256];
    write_text("net.jsonl", net_timeline);
    snprintf(path, sizeof(path), "%s/net.jsonl", tmpdir);
    struct rtl *t = rtl_load(path, 1000, err, sizeof(err));
    CHECK(t != NULL);
    if (t == NULL)
        return;
    CHECK_EQ_INT(rtl_windows(t, "net"), 2);
    CHECK_EQ_INT(rtl_lanes(t), 4); /* relay-1, runner and one lane per faulted link */
    struct rbuf b;
    rbuf_init(&b, 1 << 20);
    struct rview v;
    CHECK(rtl_view(t, NULL, &v) == 1);
    CHECK_EQ_INT(rtl_svg(&b, t, 0, &v, 100), 0);
    CHECK(strstr(b.data, "blackhole for 500 ms in net relay-1-&gt;pg: +0.001 s to +0.501 s") !=
          NULL);
    CHECK(strstr(b.data, "latency 9+-0 ms in net relay-1-&gt;broker: +0.600 s to +0.700 s") !=
          NULL);
    rbuf_free(&b);
    rtl_free(t);
    unlink(path);
}

int main(void)
{
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_escape();
    test_cut();
    test_limit();
    test_nice_step();
    test_timeline();
    test_net_windows();
    test_view_focus();
    test_metrics();
    test_write_errors();
    static const char *const files[] = {"timeline.jsonl", "focus.jsonl", "metrics.jsonl",
                                        "result.json", "out.html"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return check_report("test_harness_report");
}
