/* Unit tests for the runner's pure parts: scenario validation and its
 * messages, event-file reading and time parsing, the HTTP response parser,
 * the checker's sanitization test, connection strings, and process
 * supervision (spawn, stop detection, reaping, FIFO cleanup, bounded
 * helper commands). */
#include "checker.h"
#include "evlog.h"
#include "httpc.h"
#include "procs.h"
#include "runner_db.h"
#include "scenario.h"
#include "check.h"
#include "sanitize.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const POINTS[] = { "relay/after_publish", "api/after_commit", NULL };

/* A valid scenario; tests splice steps and extra top-level fields into it. */
static const char *BASE_HEAD =
    "{\"name\": \"t-1\", \"title\": \"t\", \"crash_window\": \"relay/after_publish\","
    " \"processes\": {\"api\": {\"kind\": \"api\"},"
    "   \"relay-1\": {\"kind\": \"relay\", \"args\": {\"lease-ms\": 800, \"max-attempts\": 4},"
    "                 \"faults\": \"relay/after_publish=crash@1\"},"
    "   \"acc\": {\"kind\": \"consumer\", \"args\": {\"name\": \"accounting\"}}},"
    " \"steps\": [";
static const char *BASE_MID = "], \"invariants\": [\"nothing_lost\"]";

static struct scenario *parse_with(const char *steps, const char *extra, char *err, size_t n)
{
    char text[4096];
    snprintf(text, sizeof(text), "%s%s%s%s}", BASE_HEAD, steps, BASE_MID, extra);
    return scenario_parse(text, "scenarios/x.json", POINTS, err, n);
}

static int err_is(const char *steps, const char *extra, const char *want)
{
    char err[512] = "";
    struct scenario *sc = parse_with(steps, extra, err, sizeof(err));
    scenario_free(sc);
    if (sc != NULL || strstr(err, want) == NULL) {
        fprintf(stderr, "  want error containing \"%s\", got \"%s\"\n", want, err);
        return 0;
    }
    return 1;
}

static void test_scenario_valid(void)
{
    char err[512] = "";
    struct scenario *sc = parse_with(
        "{\"do\": \"payments\", \"count\": 3},"
        "{\"do\": \"wait\", \"until\": \"exited\", \"proc\": \"relay-1\", \"timeout_ms\": 100},"
        "{\"do\": \"restart\", \"proc\": \"relay-1\"},"
        "{\"do\": \"http\", \"name\": \"a\", \"key\": \"k\", \"body\": {\"x\": 1}},"
        "{\"do\": \"http\", \"name\": \"b\", \"key\": \"k\", \"same_as\": \"a\"},"
        "{\"do\": \"wait\", \"until\": \"consumed\", \"count\": 3, \"timeout_ms\": 100},"
        "{\"do\": \"fault\", \"proc\": \"relay-1\", \"point\": \"relay/after_publish\", \"action\": \"park\"},"
        "{\"do\": \"broker\", \"control\": {\"outage\": \"refuse\"}},"
        "{\"do\": \"outboxctl\", \"args\": [\"requeue\", \"x\"], \"expect_exit\": 0}",
        ", \"expect\": [{\"check\": \"effects\", \"equals\": 3}, {\"check\": \"http_status\", \"request\": \"a\", \"min\": 200}]",
        err, sizeof(err));
    CHECK(sc != NULL);
    if (sc == NULL) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK(sc->nprocs == 3);
    CHECK(sc->procs[1].kind == SC_RELAY && sc->procs[1].max_attempts == 4);
    CHECK(sc->procs[1].lease_ms == 800);
    CHECK(strcmp(sc->procs[2].consumer_name, "accounting") == 0);
    CHECK(strcmp(sc->procs[2].group, "accounting") == 0);
    CHECK(sc->procs[0].autostart && sc->procs[0].heal);
    CHECK(sc->nsteps == 9);
    CHECK(sc->steps[0].verb == V_PAYMENTS && sc->steps[0].proc == 0);  /* the only api */
    CHECK(sc->steps[5].until == U_CONSUMED && strcmp(sc->steps[5].consumer, "accounting") == 0);
    CHECK(strcmp(sc->steps[3].body, "{\"x\":1}") == 0);
    CHECK(sc->nexpect == 2 && sc->expect[0].has_equals && sc->expect[0].equals == 3);
    CHECK(sc->ninvariants == 1 && sc->invariants[0] == INV_NOTHING_LOST);
    char d[256];
    scenario_step_describe(sc, &sc->steps[1], d, sizeof(d));
    CHECK(strcmp(d, "wait until relay-1 exited (100 ms)") == 0);
    scenario_step_describe(sc, &sc->steps[2], d, sizeof(d));
    CHECK(strcmp(d, "restart relay-1") == 0);
    scenario_free(sc);
}

/* A field the runner would not act on is an error naming file and field. */
static void test_scenario_ignored_fields(void)
{
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"exited\", \"proc\": \"api\", \"count\": 2,"
                 " \"timeout_ms\": 5}", "",
                 "scenarios/x.json: steps[0].count: ignored by until 'exited'"));
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"published\", \"proc\": \"relay-1\","
                 " \"timeout_ms\": 5}", "", "steps[0].proc: ignored by until 'published'"));
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"published\", \"where\": {\"a\": 1},"
                 " \"timeout_ms\": 5}", "", "steps[0].where: ignored by until 'published'"));
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"quiet\", \"consumer\": \"accounting\","
                 " \"timeout_ms\": 5}", "", "steps[0].consumer: ignored by until 'quiet'"));
    CHECK(err_is("{\"do\": \"kill\", \"proc\": \"api\", \"timeout_ms\": 5}", "",
                 "steps[0].timeout_ms: ignored by kill"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"effects\", \"proc\": \"api\", \"min\": 1}]",
                 "scenarios/x.json: expect[0].proc: ignored by check 'effects'"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"sql\", \"sql\": \"SELECT 1\","
                 " \"where\": {\"a\": 1}, \"min\": 1}]", "expect[0].where: ignored by check 'sql'"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"faults_fired\", \"point\": \"api/after_commit\","
                 " \"where\": {\"a\": 1}, \"min\": 1}]",
                 "expect[0].where: ignored by check 'faults_fired'"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"events\", \"event\": \"claim\","
                 " \"point\": \"api/after_commit\", \"min\": 1}]",
                 "expect[0].point: ignored by check 'events'"));
    char err[512];
    struct scenario *sc = scenario_parse(
        "{\"name\": \"x\", \"title\": \"t\", \"crash_window\": \"a/b\","
        " \"processes\": {\"a\": {\"kind\": \"api\", \"autostart\": false,"
        "                          \"faults\": \"api/after_commit=crash\"}},"
        " \"steps\": [], \"invariants\": [\"nothing_lost\"]}", "s.json", POINTS, err, sizeof(err));
    CHECK(sc == NULL && strstr(err, "s.json: processes.a: faults: ignored on a process with "
                                    "\"autostart\": false") != NULL);
    scenario_free(sc);
    /* What is read is still accepted, and sleep is a step of its own. */
    sc = parse_with("{\"do\": \"sleep\", \"ms\": 250, \"why\": \"a backoff passes\"},"
                    "{\"do\": \"wait\", \"until\": \"event\", \"proc\": \"relay-1\","
                    " \"event\": \"claim\", \"count\": 2, \"where\": {\"attempt\": 1},"
                    " \"timeout_ms\": 5}",
                    ", \"expect\": [{\"check\": \"faults_fired\", \"proc\": \"relay-1\","
                    " \"where\": {\"action\": \"crash\"}, \"min\": 1}]", err, sizeof(err));
    CHECK(sc != NULL && sc->steps[0].verb == V_SLEEP && sc->steps[0].ms == 250);
    if (sc != NULL) {
        char d[128];
        scenario_step_describe(sc, &sc->steps[0], d, sizeof(d));
        CHECK(strcmp(d, "sleep 250 ms") == 0);
    } else {
        fprintf(stderr, "  %s\n", err);
    }
    scenario_free(sc);
}

static void test_scenario_errors(void)
{
    CHECK(err_is("{\"do\": \"kill\", \"proc\": \"relay-9\"}", "",
                 "scenarios/x.json: steps[0].proc: unknown process 'relay-9'"));
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"exited\", \"proc\": \"api\"}", "",
                 "scenarios/x.json: steps[0].timeout_ms: missing"));
    CHECK(err_is("{\"do\": \"sleep\"}", "", "steps[0].ms: missing"));
    CHECK(err_is("{\"do\": \"sleep\", \"ms\": 0}", "", "steps[0].ms: 0 is out of range"));
    CHECK(err_is("{\"do\": \"sleep\", \"ms\": 5, \"proc\": \"api\"}", "",
                 "steps[0]: unknown field 'proc'"));
    CHECK(err_is("{\"do\": \"kill\", \"procs\": \"api\"}", "", "steps[0]: unknown field 'procs'"));
    CHECK(err_is("{\"do\": \"start\", \"proc\": \"api\", \"faults\": \"api/after_commit=explode\"}", "",
                 "steps[0].faults: bad action 'explode'"));
    CHECK(err_is("{\"do\": \"start\", \"proc\": \"api\", \"faults\": \"api/nope=crash\"}", "",
                 "unknown fault point 'api/nope'"));
    CHECK(err_is("{\"do\": \"wait\", \"until\": \"later\", \"timeout_ms\": 5}", "",
                 "steps[0].until: unknown condition 'later'"));
    CHECK(err_is("{\"do\": \"http\", \"proc\": \"relay-1\"}", "",
                 "steps[0].proc: 'relay-1' is a relay, not a api"));
    CHECK(err_is("{\"do\": \"http\", \"same_as\": \"nothing\"}", "",
                 "steps[0].same_as: no earlier http step is named 'nothing'"));
    CHECK(err_is("{\"do\": \"outboxctl\", \"args\": [\"--db\", \"x\"]}", "", "--db is set by the runner"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"magic\", \"min\": 1}]",
                 "expect[0].check: unknown check 'magic'"));
    CHECK(err_is("", ", \"expect\": [{\"check\": \"effects\"}]", "expect[0]: give min, max or equals"));
    CHECK(err_is("", ", \"timeout_ms\": \"soon\"", "timeout_ms: must be an integer"));
    CHECK(err_is("", ", \"extra\": 1", "scenarios/x.json: unknown field 'extra'"));
    CHECK(err_is("{\"do\": \"payments\", \"count\": 0}", "", "steps[0].count: 0 is out of range"));
    CHECK(err_is("{\"do\": \"broker\", \"control\": {\"outage\": \"sometimes\"}}", "",
                 "steps[0].control.outage: must be \"off\", \"refuse\" or \"hang\""));
    test_scenario_ignored_fields();

    char err[512];
    struct scenario *sc = scenario_parse("{\"name\": \"x\",", "scenarios/y.json", NULL, err, sizeof(err));
    CHECK(sc == NULL && strstr(err, "scenarios/y.json: not valid JSON") != NULL);
    sc = scenario_parse("{\"name\": \"x\", \"title\": \"t\", \"crash_window\": \"a/b\","
                        " \"processes\": {\"broker\": {\"kind\": \"api\"}}, \"steps\": [],"
                        " \"invariants\": [\"nothing_lost\"]}", "s.json", NULL, err, sizeof(err));
    CHECK(sc == NULL && strstr(err, "processes.broker: 'broker' is reserved") != NULL);
    sc = scenario_parse("{\"name\": \"x\", \"title\": \"t\", \"crash_window\": \"a/b\","
                        " \"processes\": {\"a\": {\"kind\": \"api\", \"args\": {\"db\": \"x\"}}},"
                        " \"steps\": [], \"invariants\": [\"nothing_lost\"]}", "s.json", NULL, err,
                        sizeof(err));
    CHECK(sc == NULL && strstr(err, "processes.a.args.db: --db is set by the runner") != NULL);
    sc = scenario_parse("{\"name\": \"x\", \"title\": \"t\", \"crash_window\": \"a/b\","
                        " \"processes\": {\"a\": {\"kind\": \"api\"}}, \"steps\": [],"
                        " \"invariants\": [\"nothing_lost\", \"nothing_lost\"]}", "s.json", NULL,
                        err, sizeof(err));
    CHECK(sc == NULL && strstr(err, "invariants[1]: 'nothing_lost' is listed twice") != NULL);
    CHECK(scenario_load("/nonexistent/x.json", NULL, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "/nonexistent/x.json: cannot open") != NULL);
}

static void test_fault_specs(void)
{
    char err[256];
    CHECK(scenario_check_faults("relay/after_publish=crash@2", POINTS, err, sizeof(err)) == 0);
    CHECK(scenario_check_faults("relay/after_publish=stall:30+;api/after_commit=park", POINTS,
                                err, sizeof(err)) == 0);
    CHECK(scenario_check_faults("relay/after_publish=stall:1", POINTS, err, sizeof(err)) < 0);
    CHECK(scenario_check_faults("relay/after_publish=crash@0", POINTS, err, sizeof(err)) < 0);
    CHECK(scenario_check_faults("=crash", POINTS, err, sizeof(err)) < 0);
    CHECK(scenario_check_faults("", POINTS, err, sizeof(err)) < 0);
    char buf[256];
    const char *names[8];
    int n = scenario_fault_points("a/b=crash@2;c/d=stall:40+", buf, sizeof(buf), names, 8);
    CHECK(n == 2 && strcmp(names[0], "a/b") == 0 && strcmp(names[1], "c/d") == 0);
}

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
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    int bad = 0;
    cJSON *arr = evlog_read(path, &bad);
    CHECK(cJSON_GetArraySize(arr) == 3 && bad == 2);
    CHECK(ev_ts(cJSON_GetArrayItem(arr, 1)) == 2);
    CHECK(strcmp(ev_name(cJSON_GetArrayItem(arr, 2)), "claim") == 0);
    CHECK(ev_arr(cJSON_GetArrayItem(arr, 0), "ids") != NULL);
    CHECK(ev_arr(cJSON_GetArrayItem(arr, 0), "message_ids") == NULL); /* one name, no alias */
    double v = 0;
    CHECK(ev_num(cJSON_GetArrayItem(arr, 2), "n", &v) && v == 2);
    cJSON_Delete(arr);
    CHECK(evlog_count(path, "claim", NULL, NULL) == 2);
    CHECK(evlog_count(path, "claim", "pid", "8") == 1);
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

static void test_http_parse(void)
{
    struct http_resp r;
    memset(&r, 0, sizeof(r));
    const char *a = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello";
    CHECK(http_parse_response(a, strlen(a), &r) == 0 && r.status == 201);
    CHECK(r.body_len == 5 && strcmp(r.body, "hello") == 0);
    http_resp_free(&r);
    const char *b = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    CHECK(http_parse_response(b, strlen(b), &r) == 0 && strcmp(r.body, "abcde") == 0);
    http_resp_free(&r);
    const char *c = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    CHECK(http_parse_response(c, strlen(c), &r) < 0 && strstr(r.error, "5 of 10") != NULL);
    http_resp_free(&r);
    const char *d = "garbage";
    CHECK(http_parse_response(d, strlen(d), &r) < 0);
    http_resp_free(&r);
    /* A chunk size near SIZE_MAX: sz + 2 would wrap to 1 and pass a naive
     * bounds check, then memcpy far past the buffer. */
    const char *e = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "ffffffffffffffff\r\nabc\r\n0\r\n\r\n";
    CHECK(http_parse_response(e, strlen(e), &r) < 0 && strstr(r.error, "chunked") != NULL);
    http_resp_free(&r);
    const char *f = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "fffffffffffffffe\r\nabc\r\n0\r\n\r\n";
    CHECK(http_parse_response(f, strlen(f), &r) < 0);
    http_resp_free(&r);
    /* A chunk exactly as long as what is left, without its CRLF. */
    const char *g = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc";
    CHECK(http_parse_response(g, strlen(g), &r) < 0);
    http_resp_free(&r);
    /* Nothing listens on port 1: status 0 with a reason, not a crash. */
    CHECK(http_request(1, "GET", "/", NULL, NULL, 500, &r) < 0 && r.status == 0 && r.error[0]);
    http_resp_free(&r);
}

static void test_sanitized(void)
{
    char why[160];
    const char *payload = "{\"pw\": \"x\", \"Memo\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}";
    CHECK(checker_error_sanitized("broker refused publish: payload too large: [payload]",
                                  payload, why, sizeof(why)));
    CHECK(!checker_error_sanitized("could not connect: password=hunter2", payload, why, sizeof(why)));
    CHECK(strstr(why, "from byte 19 on") != NULL && strstr(why, "hunter2") == NULL);
    /* What libpq says is not a secret; what the sanitizer wrote passes. */
    CHECK(checker_error_sanitized("FATAL:  password authentication failed for user \"relay\"",
                                  payload, why, sizeof(why)));
    char stored[CW_ERROR_MAX + 1];
    cw_sanitize_error("refused: Authorization: Bearer abcdefghijklmnop token=xyz "
                      "https://u:p@h/ {\"pw\": 1}", stored, sizeof(stored));
    CHECK(checker_error_sanitized(stored, payload, why, sizeof(why)));
    char longer[CW_ERROR_MAX + 8];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    CHECK(!checker_error_sanitized(longer, payload, why, sizeof(why)));
    CHECK(!checker_error_sanitized("refused: {\"pw\": \"x\", \"Memo\": \"xxxx", payload, why,
                                   sizeof(why)));
    CHECK(strstr(why, "quotes the payload") != NULL);
    CHECK(strstr(why, "pw") == NULL && strstr(why, "Memo") == NULL); /* never quotes it again */
    CHECK(checker_error_sanitized(NULL, payload, why, sizeof(why)));
}

static void test_conninfo(void)
{
    char *c = conninfo_with_db("host=/tmp/x port=5433 user=postgres dbname=postgres", "it's");
    CHECK(c != NULL && strstr(c, "dbname='it\\'s'") != NULL && strstr(c, "port='5433'") != NULL);
    char v[64];
    conninfo_get(c, "dbname", v, sizeof(v));
    CHECK(strcmp(v, "it's") == 0);
    conninfo_get(c, "host", v, sizeof(v));
    CHECK(strcmp(v, "/tmp/x") == 0);
    free(c);
    CHECK(conninfo_with_db("host='unterminated", "x") == NULL);

    /* What --keep prints never holds the password, in either syntax. */
    int hidden = 0;
    c = conninfo_for_display("host=/tmp/x port=5433 user=u password=s3cr3t dbname=d", &hidden);
    CHECK(c != NULL && hidden && strstr(c, "s3cr3t") == NULL && strstr(c, "password") == NULL);
    CHECK(c != NULL && strstr(c, "dbname='d'") != NULL && strstr(c, "user='u'") != NULL);
    free(c);
    c = conninfo_for_display("postgresql://u:s3cr3t@localhost:5433/d", &hidden);
    CHECK(c != NULL && hidden && strstr(c, "s3cr3t") == NULL && strstr(c, "host='localhost'"));
    free(c);
    c = conninfo_for_display("host=/tmp/x dbname=d", &hidden);
    CHECK(c != NULL && !hidden);
    free(c);
    c = conninfo_env("host=/tmp/x dbname=d");
    CHECK(c != NULL && strcmp(c, "CW_DB=host=/tmp/x dbname=d") == 0);
    free(c);
}

static void test_procs(void)
{
    CHECK(proc_state(getpid()) == 'R');
    CHECK(proc_state(999999999) == 0);

    char out[256];
    char *echo[] = { (char *)"/bin/sh", (char *)"-c", (char *)"echo hi; exit 3", NULL };
    CHECK(proc_run_capture(echo, NULL, 5000, out, sizeof(out)) == 3);
    CHECK(strcmp(out, "hi\n") == 0);
    char *slow[] = { (char *)"/bin/sleep", (char *)"30", NULL };
    CHECK(proc_run_capture(slow, NULL, 200, out, sizeof(out)) == -1);
    CHECK(strstr(out, "timed out after 200 ms") != NULL);
    char *missing[] = { (char *)"/nonexistent/binary", NULL };
    CHECK(proc_run_capture(missing, NULL, 1000, out, sizeof(out)) != 0);

    char dir[] = "/tmp/cwtest_procXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct proc p;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "sleeper");
    snprintf(p.log_path, sizeof(p.log_path), "%s/sleeper.log", dir);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s/fiu", dir);
    p.fifo_prefix = prefix;
    char err[256];
    /* The child must not see CW_FAULTS unless given: print it.  Extra
     * variables replace the runner's own of the same name. */
    setenv("CW_FAULTS", "leaked=crash", 1);
    setenv("CW_DB", "runner-own", 1);
    char *sh[] = { (char *)"/bin/sh", (char *)"-c",
                   (char *)"echo \"faults=[$CW_FAULTS] fifo=[$CW_FIU_FIFO] db=[$CW_DB]\"; "
                           "exec sleep 30", NULL };
    const char *env[] = { "CW_DB=host=/x dbname=y", NULL };
    CHECK(proc_spawn(&p, sh, "x/y=park", env, err, sizeof(err)) == 0);
    unsetenv("CW_FAULTS");
    CHECK(p.running && p.starts == 1 && proc_poll(&p) == 1);
    /* Bounded wait for the child's line (it runs before exec sleep). */
    struct stat st;
    for (int i = 0; i < 1000 && (stat(p.log_path, &st) != 0 || st.st_size == 0); i++)
        usleep(5000);
    /* Leftover FIFOs of this pid, as a SIGKILLed process leaves them. */
    char fin[128], fout[128];
    snprintf(fin, sizeof(fin), "%s-%d.in", prefix, (int)p.pid);
    snprintf(fout, sizeof(fout), "%s-%d.out", prefix, (int)p.pid);
    CHECK(mkfifo(fin, 0600) == 0 && mkfifo(fout, 0600) == 0);
    CHECK(proc_signal(&p, SIGSTOP) == 0);
    int stopped = 0;
    for (int i = 0; i < 400 && !stopped; i++) {
        stopped = proc_stopped(&p);
        usleep(5000);
    }
    CHECK(stopped);
    /* proc_stop wakes a stopped process before SIGTERM. */
    CHECK(proc_stop(&p, 5000) == 0);
    CHECK(!p.running && proc_poll(&p) == 0);
    CHECK(access(fin, F_OK) != 0 && access(fout, F_OK) != 0);
    char how[64];
    proc_exit_text(&p, how, sizeof(how));
    CHECK(strstr(how, "TERM") != NULL);
    FILE *f = fopen(p.log_path, "r");
    char line[256] = "";
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    char want[160];
    snprintf(want, sizeof(want), "faults=[x/y=park] fifo=[%s] db=[host=/x dbname=y]", prefix);
    CHECK(strncmp(line, want, strlen(want)) == 0);
    if (strncmp(line, want, strlen(want)) != 0)
        fprintf(stderr, "  child saw: %s", line);
    /* A second incarnation without faults sees none. */
    off_t before = stat(p.log_path, &st) == 0 ? st.st_size : 0;
    CHECK(proc_spawn(&p, sh, NULL, NULL, err, sizeof(err)) == 0 && p.starts == 2);
    for (int i = 0; i < 1000 && stat(p.log_path, &st) == 0 && st.st_size == before; i++)
        usleep(5000);
    CHECK(proc_kill(&p) == 0 && !p.running);
    proc_exit_text(&p, how, sizeof(how));
    CHECK(strstr(how, "KILL") != NULL);
    f = fopen(p.log_path, "r");
    int clean = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        clean = strncmp(line, "faults=[] ", 10) == 0 && strstr(line, "db=[runner-own]") != NULL;
    if (f != NULL)
        fclose(f);
    CHECK(clean);
    unsetenv("CW_DB");
    CHECK(proc_signal(&p, SIGTERM) == -1);
    unlink(p.log_path);
    rmdir(dir);
}

int main(void)
{
    test_scenario_valid();
    test_scenario_errors();
    test_fault_specs();
    test_times();
    test_evlog();
    test_http_parse();
    test_sanitized();
    test_conninfo();
    test_procs();
    return check_report("test_harness");
}
