/* test_harness_scenario.c -- unit tests of the scenario format: a valid
 * scenario parses, a field the runner would not act on and every other
 * mistake is an error naming the file and the field, and fault specs and
 * their points are checked against the catalogue. */
#include "scenario.h"
#include "check.h"

#include <stdio.h>
#include <string.h>

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
    CHECK_EQ_INT(sc->nprocs, 3);
    CHECK(sc->procs[1].kind == SC_RELAY && sc->procs[1].max_attempts == 4);
    CHECK_EQ_INT(sc->procs[1].lease_ms, 800);
    CHECK_EQ_STR(sc->procs[2].consumer_name, "accounting");
    CHECK_EQ_STR(sc->procs[2].group, "accounting");
    CHECK(sc->procs[0].autostart && sc->procs[0].heal);
    CHECK_EQ_INT(sc->nsteps, 9);
    CHECK(sc->steps[0].verb == V_PAYMENTS && sc->steps[0].proc == 0);  /* the only api */
    CHECK(sc->steps[5].until == U_CONSUMED && strcmp(sc->steps[5].consumer, "accounting") == 0);
    CHECK_EQ_STR(sc->steps[3].body, "{\"x\":1}");
    CHECK(sc->nexpect == 2 && sc->expect[0].has_equals && sc->expect[0].equals == 3);
    CHECK(sc->ninvariants == 1 && sc->invariants[0] == INV_NOTHING_LOST);
    char d[256];
    scenario_step_describe(sc, &sc->steps[1], d, sizeof(d));
    CHECK_EQ_STR(d, "wait until relay-1 exited (100 ms)");
    scenario_step_describe(sc, &sc->steps[2], d, sizeof(d));
    CHECK_EQ_STR(d, "restart relay-1");
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
        CHECK_EQ_STR(d, "sleep 250 ms");
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
/* A process's "args" are read over its program's own option table at load:
 * an option the program does not have, or a value it would refuse, is an
 * error naming the file, the process and the option. */
static struct scenario *parse_args(const char *proc, const char *kind, const char *args,
                                   char *err, size_t n)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"name\": \"x\", \"title\": \"t\", \"crash_window\": \"a/b\","
             " \"processes\": {\"%s\": {\"kind\": \"%s\", \"args\": %s}}, \"steps\": [],"
             " \"invariants\": [\"nothing_lost\"]}", proc, kind, args);
    return scenario_parse(text, "scenarios/a.json", NULL, err, n);
}

static int args_err_is(const char *proc, const char *kind, const char *args, const char *want)
{
    char err[512] = "";
    struct scenario *sc = parse_args(proc, kind, args, err, sizeof(err));
    scenario_free(sc);
    if (sc != NULL || strstr(err, want) == NULL) {
        fprintf(stderr, "  args %s: want error containing \"%s\", got \"%s\"\n", args, want, err);
        return 0;
    }
    return 1;
}

static void test_scenario_args(void)
{
    char err[512] = "";
    struct scenario *sc = parse_args("r1", "relay", "{\"lease-ms\": 800, \"order\": "
                                     "\"per-aggregate\", \"batch\": \"7\", \"name\": \"r\"}",
                                     err, sizeof(err));
    CHECK(sc != NULL);
    if (sc == NULL)
        fprintf(stderr, "  %s\n", err);
    scenario_free(sc);
    sc = parse_args("c", "consumer", "{\"prefetch\": 50, \"gap-park-after-ms\": 0}", err,
                    sizeof(err));
    CHECK(sc != NULL);
    scenario_free(sc);
    sc = parse_args("a", "api", "{\"threads\": 2, \"drain-ms\": 0}", err, sizeof(err));
    CHECK(sc != NULL);
    scenario_free(sc);

    CHECK(args_err_is("relay-1", "relay", "{\"lease-msec\": 1000}",
                      "scenarios/a.json: processes.relay-1.args.lease-msec: "
                      "outbox-relay has no option --lease-msec"));
    CHECK(args_err_is("relay-1", "relay", "{\"lease-ms\": \"abc\"}",
                      "processes.relay-1.args.lease-ms: --lease-ms: 'abc' is not an integer"));
    CHECK(args_err_is("relay-1", "relay", "{\"batch\": 0}",
                      "processes.relay-1.args.batch: --batch: '0' is not an integer in 1..10000"));
    CHECK(args_err_is("relay-1", "relay", "{\"order\": \"lifo\"}",
                      "processes.relay-1.args.order: --order: 'lifo' is not fifo or per-aggregate"));
    CHECK(args_err_is("relay-1", "relay", "{\"batch\": true}",
                      "processes.relay-1.args.batch: --batch of outbox-relay takes a value"));
    CHECK(args_err_is("relay-1", "relay", "{\"fast\": true}",
                      "processes.relay-1.args.fast: outbox-relay has no option --fast"));
    CHECK(args_err_is("relay-1", "relay", "{\"help\": true}",
                      "processes.relay-1.args.help: --help is not a setting of outbox-relay"));
    /* Each kind is read over its own program's table. */
    CHECK(args_err_is("acc", "consumer", "{\"lease-ms\": 800}",
                      "processes.acc.args.lease-ms: accounting-consumer has no option --lease-ms"));
    CHECK(args_err_is("acc", "consumer", "{\"prefetch\": 0}",
                      "processes.acc.args.prefetch: --prefetch: '0' is not an integer"));
    CHECK(args_err_is("api", "api", "{\"prefetch\": 5}",
                      "processes.api.args.prefetch: payments-api has no option --prefetch"));
    CHECK(args_err_is("api", "api", "{\"threads\": 65}",
                      "processes.api.args.threads: --threads: '65' is not an integer in 1..64"));
}

static void test_fault_specs(void)
{
    char err[256];
    CHECK_EQ_INT(scenario_check_faults("relay/after_publish=crash@2", POINTS, err, sizeof(err)), 0);
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

int main(void)
{
    test_scenario_valid();
    test_scenario_errors();
    test_scenario_args();
    test_fault_specs();
    return check_report("test_harness_scenario");
}
