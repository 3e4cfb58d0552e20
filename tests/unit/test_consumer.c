/* Unit tests for the consumer's pure parts: delivery validation (what makes
 * a message poison, and that a reason never quotes the payload), exact
 * amounts, trace continuation, the effect table and the command line. */
#include "check.h"
#include "consumer_config.h"
#include "consumer_effect.h"
#include "consumer_event.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_ID "5f0c2a36-7d4e-4a51-9c3b-2f1e0d9c8b7a"
#define PAYMENT_ID "9a1e4b2c-3d5f-4e6a-8b7c-1d2e3f4a5b6c"
#define TRACE "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static char payload[4096];

/* A well-formed PaymentCreated delivery; tests break one thing at a time. */
static struct bus_delivery good(void)
{
    snprintf(payload, sizeof(payload),
             "{\"Amount\": \"12.50\", \"EventId\": \"%s\", \"Currency\": \"EUR\","
             " \"PaymentId\": \"%s\", \"OccurredAtUtc\": \"2026-11-29T21:00:00.123456Z\","
             " \"AggregateVersion\": 1}",
             EVENT_ID, PAYMENT_ID);
    struct bus_delivery d = {
        .tag = 7,
        .topic = "payments",
        .message_id = EVENT_ID,
        .type = "PaymentCreated",
        .partition_key = PAYMENT_ID,
        .traceparent = TRACE,
        .aggregate_version = 1,
        .schema_version = 1,
        .payload = payload,
        .delivery_count = 1,
    };
    return d;
}

/* Parses d; returns the reason ("" when valid). */
static const char *reason_of(const struct bus_delivery *d, struct consumer_event *ev)
{
    static char reason[256];
    reason[0] = '\0';
    if (consumer_event_parse(d, ev, reason, sizeof(reason)) == 0)
        return "";
    return reason;
}

static void test_valid(void)
{
    struct consumer_event ev;
    struct bus_delivery d = good();
    CHECK_EQ_STR(reason_of(&d, &ev), "");
    CHECK_EQ_STR(ev.message_id, EVENT_ID);
    CHECK_EQ_STR(ev.payment_id, PAYMENT_ID);
    CHECK_EQ_INT(ev.type, EVENT_PAYMENT_CREATED);
    CHECK_EQ_STR(ev.type_name, "PaymentCreated");
    CHECK_EQ_INT(ev.version, 1);
    CHECK(ev.has_amount && strcmp(ev.amount, "12.50") == 0);
    CHECK(ev.has_currency && strcmp(ev.currency, "EUR") == 0);

    /* Trace continued: same trace id and flags, new span, valid. */
    CHECK(ev.has_parent_trace);
    CHECK(cw_traceparent_valid(ev.trace));
    CHECK(strncmp(ev.trace, TRACE, 35) == 0);
    CHECK(strncmp(ev.trace + 36, TRACE + 36, 16) != 0);
    CHECK_EQ_STR(ev.trace + 52, TRACE + 52);

    /* The inbox key is the event id, never the trace. */
    char key[CW_UUID_LEN + 1];
    consumer_event_inbox_key(&ev, key);
    CHECK_EQ_STR(key, EVENT_ID);

    /* Upper-case ids are the same uuid: stored lowercase. */
    char upper_id[] = "5F0C2A36-7D4E-4A51-9C3B-2F1E0D9C8B7A";
    d.message_id = upper_id;
    CHECK_EQ_STR(reason_of(&d, &ev), "");
    CHECK_EQ_STR(ev.message_id, EVENT_ID);

    /* A later version without Amount/Currency; no headers to cross-check. */
    d = good();
    snprintf(payload, sizeof(payload),
             "{\"EventId\":\"%s\",\"PaymentId\":\"%s\",\"AggregateVersion\":3,"
             "\"OccurredAtUtc\":\"2026-11-29T21:00:01Z\"}",
             EVENT_ID, PAYMENT_ID);
    d.type = "PaymentCaptured";
    d.aggregate_version = 0;
    d.partition_key = NULL;
    CHECK_EQ_STR(reason_of(&d, &ev), "");
    CHECK(ev.type == EVENT_PAYMENT_CAPTURED && ev.version == 3);
    CHECK(!ev.has_amount && !ev.has_currency);
}

static void test_trace_missing_or_bad(void)
{
    struct consumer_event ev;
    struct bus_delivery d = good();
    d.traceparent = NULL;
    CHECK_EQ_STR(reason_of(&d, &ev), "");
    CHECK(!ev.has_parent_trace);
    CHECK(cw_traceparent_valid(ev.trace));

    /* An invalid traceparent starts a new trace; it never poisons. */
    d.traceparent = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
    CHECK_EQ_STR(reason_of(&d, &ev), "");
    CHECK(!ev.has_parent_trace);
    CHECK(cw_traceparent_valid(ev.trace));
    CHECK(strncmp(ev.trace + 3, "4bf92f35", 8) != 0);
}

/* Writes tmpl into payload with {E} and {P} replaced by the two ids. */
static void fill(const char *tmpl)
{
    size_t o = 0;
    for (const char *t = tmpl; *t != '\0' && o + 40 < sizeof(payload);) {
        if (strncmp(t, "{E}", 3) == 0 || strncmp(t, "{P}", 3) == 0) {
            const char *id = t[1] == 'E' ? EVENT_ID : PAYMENT_ID;
            memcpy(payload + o, id, strlen(id));
            o += strlen(id);
            t += 3;
        } else {
            payload[o++] = *t++;
        }
    }
    payload[o] = '\0';
}

/* Each broken rule is poison with a reason naming it and no payload bytes. */
static void expect_poison(const struct bus_delivery *d, const char *needle)
{
    struct consumer_event ev;
    const char *r = reason_of(d, &ev);
    CHECK(r[0] != '\0');
    if (strstr(r, needle) == NULL) {
        fprintf(stderr, "reason '%s' does not mention '%s'\n", r, needle);
        CHECK(0);
    }
    CHECK(strstr(r, "12.50") == NULL);
    CHECK(strstr(r, "SECRET") == NULL);
}

static void test_poison(void)
{
    struct bus_delivery d;

    d = good();
    d.message_id = "not-a-uuid";
    expect_poison(&d, "message_id");
    d.message_id = NULL;
    expect_poison(&d, "message_id");

    d = good();
    d.schema_version = 2;
    expect_poison(&d, "schema_version 2");
    d.schema_version = 0;
    expect_poison(&d, "schema_version 0");

    d = good();
    d.type = "PaymentRefunded";
    expect_poison(&d, "event type");
    d.type = NULL;
    expect_poison(&d, "event type");

    d = good();
    d.payload = NULL;
    expect_poison(&d, "payload is missing");
    d.payload = "{\"EventId\": \"SECRET";
    expect_poison(&d, "not a JSON object");
    d.payload = "[1,2,3]";
    expect_poison(&d, "not a JSON object");
    d.payload = "{} trailing SECRET";
    expect_poison(&d, "not a JSON object");

    d = good();
    char *big = malloc(CONSUMER_PAYLOAD_MAX + 2);
    memset(big, ' ', CONSUMER_PAYLOAD_MAX + 1);
    big[CONSUMER_PAYLOAD_MAX + 1] = '\0';
    d.payload = big;
    expect_poison(&d, "64 KiB");
    free(big);

    /* Field by field: missing, mistyped, inconsistent. */
    const struct {
        const char *payload_fmt;
        const char *needle;
    } cases[] = {
        { "{\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "EventId" },
        { "{\"EventId\":\"9a1e4b2c-3d5f-4e6a-8b7c-1d2e3f4a5b6c\",\"PaymentId\":\"{P}\","
          "\"Amount\":\"1.00\",\"Currency\":\"EUR\",\"AggregateVersion\":1,"
          "\"OccurredAtUtc\":\"t\"}", "does not match message_id" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":42,\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "PaymentId" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{E}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "partition_key" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":\"1\",\"OccurredAtUtc\":\"t\"}", "AggregateVersion" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1.5,\"OccurredAtUtc\":\"t\"}", "AggregateVersion" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":0,\"OccurredAtUtc\":\"t\"}", "AggregateVersion" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":2,\"OccurredAtUtc\":\"t\"}", "aggregate_version header" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1}", "OccurredAtUtc" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "Amount" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":12.5,\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "Amount" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"SECRET\",\"Currency\":\"EUR\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "Amount" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\",\"Currency\":\"eur\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "Currency" },
        { "{\"EventId\":\"{E}\",\"PaymentId\":\"{P}\",\"Amount\":\"1.00\","
          "\"AggregateVersion\":1,\"OccurredAtUtc\":\"t\"}", "Currency" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        d = good();
        fill(cases[i].payload_fmt);
        expect_poison(&d, cases[i].needle);
    }

    d = good();
    d.partition_key = "SECRET";
    expect_poison(&d, "partition_key");
}

static void test_ids_of_poison(void)
{
    char mid[CW_UUID_LEN + 1], aid[CW_UUID_LEN + 1];
    struct bus_delivery d = good();
    consumer_event_ids(&d, mid, aid);
    CHECK(strcmp(mid, EVENT_ID) == 0 && strcmp(aid, PAYMENT_ID) == 0);
    d.message_id = "garbage";
    d.partition_key = NULL;
    consumer_event_ids(&d, mid, aid);
    CHECK(mid[0] == '\0' && aid[0] == '\0');

    char out[16];
    consumer_safe_text("ab\x01\xff" "cdefghijklmnopqrstuvwxyz", out, sizeof(out));
    CHECK_EQ_STR(out, "ab??cdefghijklm");
    consumer_safe_text(NULL, out, sizeof(out));
    CHECK_EQ_STR(out, "(missing)");
    consumer_safe_text("", out, sizeof(out));
    CHECK_EQ_STR(out, "(missing)");
}

static void test_amounts(void)
{
    CHECK(consumer_amount_valid("12.50"));
    CHECK(consumer_amount_valid("1"));
    CHECK(consumer_amount_valid("0.01"));
    CHECK(consumer_amount_valid("0.5"));
    CHECK(consumer_amount_valid("999999999999999999.99"));
    CHECK(!consumer_amount_valid("9999999999999999999"));  /* 19 digits */
    CHECK(!consumer_amount_valid("0"));
    CHECK(!consumer_amount_valid("0.00"));
    CHECK(!consumer_amount_valid("-1.00"));
    CHECK(!consumer_amount_valid("+1.00"));
    CHECK(!consumer_amount_valid("1.001"));
    CHECK(!consumer_amount_valid("1."));
    CHECK(!consumer_amount_valid(".5"));
    CHECK(!consumer_amount_valid("1e3"));
    CHECK(!consumer_amount_valid("1,00"));
    CHECK(!consumer_amount_valid(" 1.00"));
    CHECK(!consumer_amount_valid(""));
    CHECK(!consumer_amount_valid(NULL));
}

static void test_effects(void)
{
    const struct consumer_effect *ledger = consumer_effect_by_name("ledger");
    const struct consumer_effect *notif = consumer_effect_by_name("notification");
    CHECK(ledger != NULL && strcmp(ledger->table, "ledger_entries") == 0);
    CHECK(notif != NULL && strcmp(notif->table, "notifications") == 0);
    CHECK(consumer_effect_by_name("email") == NULL);
    CHECK(consumer_effect_by_name(NULL) == NULL);
    CHECK(consumer_effect_for_consumer("accounting") == ledger);
    CHECK(consumer_effect_for_consumer("notifications") == notif);
    CHECK(consumer_effect_for_consumer("acounting") == NULL);
    /* Every statement is parameterized: $N for each parameter it takes. */
    CHECK(strstr(ledger->insert_sql, "$8") != NULL && ledger->nparams == 8);
    CHECK(strstr(notif->insert_sql, "$6") != NULL && strstr(notif->insert_sql, "$7") == NULL);
}

static int parse(struct consumer_config *cfg, char *err, size_t errlen, ...)
{
    char *argv[40];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    argv[argc++] = "accounting-consumer";
    for (char *a = va_arg(ap, char *); a != NULL && argc < 39; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    int rc = consumer_config_parse(argc, argv, cfg, devnull, err, errlen);
    fclose(devnull);
    return rc;
}

static void test_config(void)
{
    struct consumer_config cfg;
    char err[512];
    unsetenv("CW_DB");

    CHECK(parse(&cfg, err, sizeof(err), "--db", "dbname=x", "--broker", "/tmp/b.sock", NULL) == 0);
    CHECK(strcmp(cfg.name, "accounting") == 0 && strcmp(cfg.group, "accounting") == 0);
    CHECK_EQ_STR(cfg.effect->name, "ledger");
    CHECK(strncmp(cfg.proc, "accounting-", 11) == 0);
    CHECK(cfg.batch == 1 && cfg.prefetch == 10 && cfg.poison_max_deliveries == 3);

    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--name", "notifications",
                "--group", "notifications", "--proc-name", "notif-1", "--batch", "32", NULL) == 0);
    CHECK_EQ_STR(cfg.effect->name, "notification");
    CHECK(strcmp(cfg.proc, "notif-1") == 0 && cfg.batch == 32);

    /* An unknown name without --effect is refused, naming the way out. */
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--name", "billing",
                NULL) == -1);
    CHECK(strstr(err, "--effect") != NULL);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--name", "billing",
                "--effect", "ledger", NULL) == 0);
    CHECK(strcmp(cfg.effect->name, "ledger") == 0 && strcmp(cfg.name, "billing") == 0);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--effect", "email",
                NULL) == -1);
    CHECK(strstr(err, "unknown effect") != NULL);

    CHECK(parse(&cfg, err, sizeof(err), "--broker", "b", NULL) == -1);
    CHECK(strstr(err, "--db") != NULL);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", NULL) == -1);
    CHECK(strstr(err, "--broker") != NULL);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--prefetch", "0",
                NULL) == -1);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--batch", "10x",
                NULL) == -1);
    CHECK(strstr(err, "--batch") != NULL);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--batch", "9999",
                NULL) == -1);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--name", "a b",
                NULL) == -1);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", "b", "--bogus", "1",
                NULL) == -1);
    CHECK(strstr(err, "unknown option") != NULL);
    CHECK(parse(&cfg, err, sizeof(err), "--db", "x", "--broker", NULL) == -1);
    CHECK(parse(&cfg, err, sizeof(err), "--help", NULL) == 1);

    setenv("CW_DB", "dbname=fromenv", 1);
    CHECK(parse(&cfg, err, sizeof(err), "--broker", "b", NULL) == 0);
    CHECK_EQ_STR(cfg.db, "dbname=fromenv");
    unsetenv("CW_DB");
}

int main(void)
{
    test_valid();
    test_trace_missing_or_bad();
    test_poison();
    test_ids_of_poison();
    test_amounts();
    test_effects();
    test_config();
    return check_report("test_consumer");
}
