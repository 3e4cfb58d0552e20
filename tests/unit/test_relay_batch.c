/* Unit tests for the relay's pure parts: batch re-sort by (occurred_at, id),
 * the id array literal of the grouped mark, the statements' fencing, and the
 * command line. */
#include "relay.h"
#include "relay_store.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

static void set(struct relay_msg *m, const char *id, const char *at, enum relay_msg_state st)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->id, sizeof(m->id), "%s", id);
    snprintf(m->occurred_at, sizeof(m->occurred_at), "%s", at);
    m->state = st;
}

static int parse(const char **args, struct relay_config *cfg, char *err, size_t errlen)
{
    int argc = 0;
    while (args[argc] != NULL)
        argc++;
    return relay_config_parse(cfg, argc, (char **)args, err, errlen);
}

int main(void)
{
    /* Re-sort: occurred_at first, id breaks ties; text order is time order
     * because the timestamps are fixed-width UTC. */
    struct relay_batch b;
    memset(&b, 0, sizeof(b));
    b.msgs = calloc(5, sizeof(*b.msgs));
    b.n = 5;
    set(&b.msgs[0], "cccccccc-0000-4000-8000-000000000000", "2026-11-29T21:00:00.000002Z", RELAY_MSG_PUBLISHED);
    set(&b.msgs[1], "bbbbbbbb-0000-4000-8000-000000000000", "2026-11-29T21:00:00.000001Z", RELAY_MSG_FAILED);
    set(&b.msgs[2], "aaaaaaaa-0000-4000-8000-000000000000", "2026-11-29T21:00:00.000002Z", RELAY_MSG_PUBLISHED);
    set(&b.msgs[3], "dddddddd-0000-4000-8000-000000000000", "2025-12-31T23:59:59.999999Z", RELAY_MSG_SKIPPED);
    set(&b.msgs[4], "00000000-0000-4000-8000-000000000000", "2026-11-29T21:00:01.000000Z", RELAY_MSG_PUBLISHED);
    relay_batch_sort(&b);
    CHECK_EQ_INT(b.msgs[0].id[0], 'd');
    CHECK_EQ_INT(b.msgs[1].id[0], 'b');
    CHECK_EQ_INT(b.msgs[2].id[0], 'a');
    CHECK_EQ_INT(b.msgs[3].id[0], 'c');
    CHECK_EQ_INT(b.msgs[4].id[0], '0');

    /* The grouped mark's array literal holds exactly the PUBLISHED ids. */
    int count = -1;
    char *arr = relay_id_array(&b, RELAY_MSG_PUBLISHED, &count);
    CHECK_EQ_INT(count, 3);
    CHECK(arr != NULL && strcmp(arr, "{aaaaaaaa-0000-4000-8000-000000000000,"
                                     "cccccccc-0000-4000-8000-000000000000,"
                                     "00000000-0000-4000-8000-000000000000}") == 0);
    free(arr);
    arr = relay_id_array(&b, RELAY_MSG_LOST, &count);
    CHECK(count == 0 && strcmp(arr, "{}") == 0);
    free(arr);
    relay_batch_free(&b);
    CHECK(b.n == 0 && b.msgs == NULL);
    relay_batch_free(&b);
    relay_batch_free(NULL);

    /* The statements: claim in index order with SKIP LOCKED and the lease
     * filter; every settle fenced by lock_id. */
    const char *claim = relay_sql("claim", RELAY_ORDER_FIFO);
    CHECK(strstr(claim, "ORDER BY o.occurred_at, o.id") != NULL);
    CHECK(strstr(claim, "FOR UPDATE SKIP LOCKED") != NULL);
    CHECK(strstr(claim, "o.locked_until IS NULL OR o.locked_until < now()") != NULL);
    CHECK(strstr(claim, "attempts = m.attempts + 1") != NULL);
    CHECK(strstr(claim, "NOT EXISTS") == NULL);
    CHECK(strstr(relay_sql("claim", RELAY_ORDER_PER_AGGREGATE), "NOT EXISTS") != NULL);
    CHECK(strstr(relay_sql("mark", RELAY_ORDER_FIFO), "lock_id = $2::uuid") != NULL);
    CHECK(strstr(relay_sql("mark", RELAY_ORDER_FIFO), "published_at IS NULL") != NULL);
    CHECK(strstr(relay_sql("claim", RELAY_ORDER_FIFO), "locked_by = $4::uuid") != NULL);
    CHECK(strstr(relay_sql("retry", RELAY_ORDER_FIFO), "lock_id = $2::uuid") != NULL);
    CHECK(strstr(relay_sql("retry", RELAY_ORDER_FIFO), "SET next_attempt_at") != NULL);
    CHECK(strstr(relay_sql("dead_letter", RELAY_ORDER_FIFO), "lock_id = $2::uuid") != NULL);
    CHECK(relay_sql("drop table", RELAY_ORDER_FIFO) == NULL);
    CHECK(relay_sql(NULL, RELAY_ORDER_FIFO) == NULL);

    /* Command line. */
    struct relay_config cfg;
    char err[256];
    unsetenv("CW_DB");
    const char *ok[] = { "outbox-relay", "--db", "dbname=x", "--broker", "/tmp/b.sock", NULL };
    CHECK_EQ_INT(parse(ok, &cfg, err, sizeof(err)), 0);
    CHECK(cfg.batch == 100 && cfg.lease_ms == 30000 && cfg.max_attempts == 12);
    CHECK(cfg.backoff_base_ms == 1000 && cfg.backoff_cap_ms == 300000 && cfg.idle_ms == 500);
    CHECK(cfg.order == RELAY_ORDER_FIFO && strncmp(cfg.name, "relay-", 6) == 0);
    const char *full[] = { "r", "--db", "x", "--broker", "b", "--name", "relay-1", "--batch", "10",
                           "--lease-ms", "1000", "--backoff-base-ms", "50", "--backoff-cap-ms",
                           "400", "--max-attempts", "4", "--idle-ms", "20", "--order",
                           "per-aggregate", "--events", "e.jsonl", NULL };
    CHECK_EQ_INT(parse(full, &cfg, err, sizeof(err)), 0);
    CHECK(cfg.batch == 10 && cfg.lease_ms == 1000 && cfg.backoff_base_ms == 50);
    CHECK(cfg.backoff_cap_ms == 400 && cfg.max_attempts == 4 && cfg.idle_ms == 20);
    CHECK(cfg.order == RELAY_ORDER_PER_AGGREGATE && strcmp(cfg.name, "relay-1") == 0);
    CHECK_EQ_STR(cfg.events, "e.jsonl");

    const char *no_db[] = { "r", "--broker", "b", NULL };
    CHECK(parse(no_db, &cfg, err, sizeof(err)) == -1 && strstr(err, "--db") != NULL);
    setenv("CW_DB", "dbname=fromenv", 1);
    CHECK(parse(no_db, &cfg, err, sizeof(err)) == 0 && strcmp(cfg.db, "dbname=fromenv") == 0);
    unsetenv("CW_DB");
    const char *no_broker[] = { "r", "--db", "x", NULL };
    CHECK(parse(no_broker, &cfg, err, sizeof(err)) == -1 && strstr(err, "--broker") != NULL);
    const char *bad_batch[] = { "r", "--db", "x", "--broker", "b", "--batch", "0", NULL };
    CHECK(parse(bad_batch, &cfg, err, sizeof(err)) == -1 && strstr(err, "--batch") != NULL);
    const char *junk[] = { "r", "--db", "x", "--broker", "b", "--lease-ms", "10s", NULL };
    CHECK(parse(junk, &cfg, err, sizeof(err)) == -1 && strstr(err, "'10s'") != NULL);
    const char *huge[] = { "r", "--db", "x", "--broker", "b", "--batch", "99999999999999999999", NULL };
    CHECK_EQ_INT(parse(huge, &cfg, err, sizeof(err)), -1);
    const char *cap[] = { "r", "--db", "x", "--broker", "b", "--backoff-base-ms", "500",
                          "--backoff-cap-ms", "100", NULL };
    CHECK(parse(cap, &cfg, err, sizeof(err)) == -1 && strstr(err, "cap") != NULL);
    const char *order[] = { "r", "--db", "x", "--broker", "b", "--order", "random", NULL };
    CHECK(parse(order, &cfg, err, sizeof(err)) == -1 && strstr(err, "random") != NULL);
    const char *unknown[] = { "r", "--frobnicate", "1", NULL };
    CHECK(parse(unknown, &cfg, err, sizeof(err)) == -1 && strstr(err, "--frobnicate") != NULL);
    const char *dangling[] = { "r", "--db", NULL };
    CHECK(parse(dangling, &cfg, err, sizeof(err)) == -1 && strstr(err, "needs a value") != NULL);
    const char *name[] = { "r", "--db", "x", "--broker", "b", "--name", "two words", NULL };
    CHECK(parse(name, &cfg, err, sizeof(err)) == -1 && strstr(err, "--name") != NULL);
    const char *help[] = { "r", "--help", NULL };
    CHECK_EQ_INT(parse(help, &cfg, err, sizeof(err)), 1);
    const char *sql[] = { "r", "--print-sql", "claim", NULL };
    CHECK(parse(sql, &cfg, err, sizeof(err)) == 0 && strcmp(cfg.print_sql, "claim") == 0);
    const char *badsql[] = { "r", "--print-sql", "drop", NULL };
    CHECK_EQ_INT(parse(badsql, &cfg, err, sizeof(err)), -1);
    return check_report("test_relay_batch");
}
