/* test_harness_target.c -- unit tests of the target profile: a valid
 * profile parses into its roles, operations and mapping; every mistake is
 * an error naming the file and the field; placeholders are checked at load
 * and filled per instance. */
#include "target.h"
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* A valid profile with one %s where a test splices its change. */
#define PROFILE \
    "{\"target\": \"t-1\", \"title\": \"a test target\"," \
    " \"requires\": [{\"command\": [\"node\", \"--version\"], \"why\": \"Node.js runs it\"}]," \
    " \"database\": {\"settings\": {\"wal_level\": \"logical\", \"max_wal_senders\": 4}}," \
    " \"broker\": {\"exchange\": \"payments\", \"queues\": {\"accounting\": \"acc-q\"}}," \
    " \"processes\": {" \
    "   \"producer\": {\"argv\": [\"node\", \"api.js\"], \"env\": {\"PORT\": \"${http_port}\"," \
    "                 \"DATABASE_URL\": \"${pg_url}\"}," \
    "                 \"ready\": {\"http_get\": \"/health\", \"timeout_ms\": 5000}}," \
    "   \"relay\": {\"argv\": [\"node\", \"relay.js\", \"${instance}\"]," \
    "              \"ready\": {\"log_line\": \"relay ready\", \"timeout_ms\": 5000}," \
    "              \"stop_signal\": \"INT\", \"restart\": false}," \
    "   \"consumer\": {\"argv\": [\"node\", \"consumer.js\"], \"env\": {\"GROUP\": \"${consumer}\"}," \
    "                 \"ready\": {\"sql\": \"SELECT true\", \"timeout_ms\": 5000}}}," \
    " \"workload\": {\"create\": {\"http\": {\"method\": \"POST\", \"path\": \"/payments\"," \
    "     \"headers\": {\"Idempotency-Key\": \"${key}\"}," \
    "     \"body\": {\"amount\": \"${amount}\", \"currency\": \"EUR\"}}," \
    "   \"ack\": {\"status\": [201, 200]}}}," \
    " \"mapping\": {\"outbox\": \"SELECT id, aggregate_id, version, state FROM o\"," \
    "   \"effects\": \"SELECT consumer, message_id, aggregate_id, version, seq FROM e\"}" \
    " %s}"

static struct target *parse_with(const char *extra, const char *replace, const char *with,
                                 char *err, size_t n)
{
    char text[8192], base[8192];
    snprintf(base, sizeof(base), PROFILE, extra);
    const char *at = replace ? strstr(base, replace) : NULL;
    if (at != NULL)
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, with,
                 at + strlen(replace));
    else
        snprintf(text, sizeof(text), "%s", base);
    return target_parse(text, "targets/t/profile.json", err, n);
}

static int err_is(const char *extra, const char *replace, const char *with, const char *want)
{
    char err[512] = "";
    struct target *t = parse_with(extra, replace, with, err, sizeof(err));
    target_free(t);
    if (t != NULL || strstr(err, want) == NULL) {
        fprintf(stderr, "  want error containing \"%s\", got \"%s\"\n", want, err);
        return 0;
    }
    return 1;
}

static void test_valid(void)
{
    char err[512] = "";
    struct target *t = parse_with("", NULL, NULL, err, sizeof(err));
    CHECK(t != NULL);
    if (t == NULL) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ_STR(t->name, "t-1");
    CHECK_EQ_INT(t->nrequires, 1);
    CHECK_EQ_INT(t->nsettings, 2);
    CHECK_EQ_STR(t->setting_value[1], "4");
    CHECK_EQ_STR(t->queue_name[0], "acc-q");
    CHECK(t->message_id_field == NULL);
    CHECK(t->proc[TG_PRODUCER].defined && t->proc[TG_RELAY].defined);
    CHECK_EQ_INT(t->proc[TG_PRODUCER].ready, TG_READY_HTTP_GET);
    CHECK_EQ_INT(t->proc[TG_RELAY].stop_signal, SIGINT);
    CHECK_EQ_INT(t->proc[TG_RELAY].restart, 0);
    CHECK_EQ_INT(t->proc[TG_CONSUMER].stop_signal, SIGTERM);
    CHECK_EQ_INT(t->proc[TG_CONSUMER].ready, TG_READY_SQL);
    CHECK_EQ_INT(t->create.nack, 2);
    CHECK_EQ_STR(t->create.aggregate_field, "id");
    CHECK(!t->follow_up.defined);
    CHECK(t->mapping[TG_MAP_INBOX] == NULL && t->mapping[TG_MAP_OUTBOX] != NULL);
    CHECK(strcmp(t->dir, "") != 0);
    FILE *out = tmpfile();
    target_describe(t, out);
    char text[4096] = "";
    rewind(out);
    size_t n = fread(text, 1, sizeof(text) - 1, out);
    text[n] = '\0';
    fclose(out);
    CHECK(strstr(text, "mapping inbox: not mapped") != NULL);
    CHECK(strstr(text, "relay: node relay.js ${instance}") != NULL);
    target_free(t);
}

static void test_errors(void)
{
    CHECK(err_is(", \"extra\": 1", NULL, NULL, "profile.json: unknown field 'extra'"));
    CHECK(err_is("", "\"relay\": {", "\"relayer\": {", "processes: unknown role 'relayer'"));
    CHECK(err_is("", "${instance}", "${instanse}",
                 "processes.relay.argv[2]: unknown placeholder '${instanse}'"));
    CHECK(err_is("", "${key}", "${pg_url}",
                 "workload.create.http.headers.Idempotency-Key: unknown placeholder '${pg_url}'"));
    CHECK(err_is("", "${amount}", "${amount",
                 "workload.create.http.body.amount: '${' without its closing '}'"));
    CHECK(err_is("", "\"log_line\": \"relay ready\", ", "",
                 "processes.relay.ready: needs one of log_line"));
    CHECK(err_is("", "\"http_get\": \"/health\"", "\"http_get\": \"/health\", \"sql\": \"x\"",
                 "needs exactly one of"));
    CHECK(err_is("", "\"timeout_ms\": 5000}}", "\"timeout_ms\": 500000}}",
                 "timeout_ms: 500000 is out of range"));
    CHECK(err_is("", "\"INT\"", "\"HUP\"", "stop_signal: 'HUP' is not TERM, INT or KILL"));
    CHECK(err_is("", "\"consumer\": {\"argv\"", "\"x_consumer\": {\"argv\"",
                 "processes: unknown role 'x_consumer'"));
    CHECK(err_is("", "[201, 200]", "[500]", "an acknowledgement is a 2xx status"));
    CHECK(err_is("", "\"POST\"", "\"SEND\"", "method: 'SEND' is not"));
    CHECK(err_is("", "\"effects\": \"SELECT", "\"inbox\": \"SELECT",
                 "mapping: needs \"outbox\" and \"effects\""));
    CHECK(err_is("", "FROM o\"", "FROM o; DROP TABLE o\"", "mapping.outbox: one SELECT"));
    CHECK(err_is("", "\"logical\"", "\"logical; rm\"", "database.settings.wal_level"));
    CHECK(err_is("", "\"queues\": {\"accounting\": \"acc-q\"}", "\"queues\": {}",
                 "broker.queues: must be an object"));
    CHECK(err_is("", "\"exchange\": \"payments\", ",
                 "\"exchange\": \"payments\", \"message_id\": \"header\", ",
                 "broker.message_id: 'header'"));
    CHECK(err_is("", "\"target\": \"t-1\"", "\"target\": \"T 1\"", "target: 'T 1'"));
    CHECK(err_is("", "\"node\", \"--version\"", "", "requires[0].command: must be a non-empty"));
    char err[256];
    CHECK(target_parse("[1]", "p.json", err, sizeof(err)) == NULL);
    CHECK(strstr(err, "p.json: not a JSON object") != NULL);
    CHECK(target_load("/nonexistent/profile.json", err, sizeof(err)) == NULL);
    CHECK(strstr(err, "/nonexistent/profile.json: cannot open") != NULL);
}

static void test_expand(void)
{
    struct tg_vars v = { 0 };
    tg_vars_set(&v, "instance", "relay-1");
    tg_vars_set(&v, "http_port", "4100");
    tg_vars_set(&v, "http_port", "4101");
    char out[64], err[128];
    CHECK_EQ_INT(target_expand("http://127.0.0.1:${http_port}/${instance}$x", &v, out,
                               sizeof(out), err, sizeof(err)), 0);
    CHECK_EQ_STR(out, "http://127.0.0.1:4101/relay-1$x");
    CHECK(target_expand("${pg_url}", &v, out, sizeof(out), err, sizeof(err)) < 0);
    CHECK(strstr(err, "placeholder 'pg_url' has no value") != NULL);
    CHECK(target_expand("${instance}${instance}${instance}${instance}", &v, out, 16, err,
                        sizeof(err)) < 0);
    CHECK(strstr(err, "expands beyond 15 bytes") != NULL);
    CHECK_EQ_INT(tg_role_from_name("relay"), TG_RELAY);
    CHECK_EQ_INT(tg_role_from_name("api"), -1);
    CHECK_EQ_STR(tg_map_columns(TG_MAP_EFFECTS)[4], "seq");
}

int main(void)
{
    test_valid();
    test_errors();
    test_expand();
    return check_report("test_harness_target");
}
