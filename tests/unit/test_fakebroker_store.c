/* test_fakebroker_store.c -- the delivery state machine of the fake broker
 * (fakebroker.h, invariants I1-I5), driven directly on an in-memory store
 * and, for restarts, on a file store. */
#include "fakebroker.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static fb_store *open_store(const char *path)
{
    char err[256];
    fb_store *st = fb_store_open(path, err, sizeof(err));
    if (st == NULL)
        fprintf(stderr, "open: %s\n", err);
    return st;
}

static int64_t pub(fb_store *st, const char *topic, const char *id, const char *key,
                   int64_t visible)
{
    struct fb_msg_in m = {
        .topic = topic, .message_id = id, .type = "T", .partition_key = key,
        .headers_json = "{\"aggregate_version\":1}", .payload = "{}", .payload_len = 2,
        .client = "test", .sha256 = NULL, .stored_us = 1,
    };
    return fb_store_publish(st, &m, visible);
}

/* Delivers one message of group g to conn at now; returns its offset, 0 for
 * none.  The delivery is kept in *out when out is not NULL. */
static int64_t deliver(fb_store *st, int g, uint64_t conn, int64_t now, int reorder,
                       struct fb_delivery *out)
{
    struct fb_delivery d;
    int rc = fb_store_deliver(st, g, conn, now, now + 1000, reorder, &d);
    if (rc <= 0)
        return rc;
    int64_t off = d.offset;
    if (out != NULL)
        *out = d;
    else
        fb_delivery_clear(&d);
    return off;
}

static int releases;
static int requeues;
static void count_release(void *arg, const struct fb_release *r)
{
    (void)arg;
    releases++;
    requeues += r->requeued;
}

static void test_ordering_and_ack(void)
{
    fb_store *st = open_store(NULL);
    CHECK(st != NULL);
    if (st == NULL)
        return;
    CHECK_EQ_INT(fb_store_begin(st), 0);
    CHECK_EQ_INT(pub(st, "p", "a1", "A", 0), 1);
    CHECK_EQ_INT(pub(st, "p", "a2", "A", 0), 2);
    CHECK_EQ_INT(pub(st, "p", "b1", "B", 0), 3);
    CHECK_EQ_INT(pub(st, "other", "o1", "A", 0), 4);
    /* a group created later reads its topic from the start */
    int g = fb_store_group(st, "p", "acc", 1);
    CHECK_EQ_INT(g, 0);
    CHECK_EQ_INT(fb_store_group(st, "p", "acc", 0), g);  /* found, flag unchanged */
    CHECK_EQ_INT(fb_store_group_at(st, g)->ordered, 1);

    struct fb_delivery d1;
    CHECK_EQ_INT(deliver(st, g, 1, 0, 0, &d1), 1);
    CHECK(d1.delivery_count == 1 && strcmp(d1.message_id, "a1") == 0);
    CHECK(strcmp(d1.partition_key, "A") == 0 && strcmp(d1.payload, "{}") == 0);
    CHECK_EQ_STR(d1.headers_json, "{\"aggregate_version\":1}");
    /* I4: a2 waits for a1; b1 is free */
    CHECK(deliver(st, g, 2, 0, 0, NULL) == 3);
    CHECK(deliver(st, g, 2, 0, 0, NULL) == 0);

    struct fb_release r;
    CHECK_EQ_INT(fb_store_ack(st, d1.tag, 2, &r), 1);      /* not conn 2's */
    CHECK_EQ_INT(fb_store_ack(st, 999, 1, &r), 1);         /* unknown */
    CHECK_EQ_INT(fb_store_ack(st, d1.tag, 1, &r), 0);
    CHECK(r.finished == 1 && r.offset == 1 && strcmp(r.message_id, "a1") == 0);
    CHECK_EQ_INT(fb_store_ack(st, d1.tag, 1, &r), 1);      /* I3: acked once */
    CHECK(deliver(st, g, 1, 0, 0, NULL) == 2);

    /* the topic "other" is not this group's */
    CHECK(deliver(st, g, 1, 0, 0, NULL) == 0);

    /* an unordered group delivers a key's messages side by side */
    int u = fb_store_group(st, "p", "loose", 0);
    CHECK_EQ_INT(u, 1);
    CHECK(deliver(st, u, 3, 0, 0, NULL) == 1);
    CHECK(deliver(st, u, 3, 0, 0, NULL) == 2);
    CHECK(deliver(st, u, 3, 0, 0, NULL) == 3);
    CHECK(deliver(st, u, 3, 0, 0, NULL) == 0);

    cJSON *stats = fb_store_stats(st, 0);
    cJSON *acc = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "groups"), "acc");
    CHECK(cJSON_GetObjectItem(stats, "stored")->valuedouble == 4);
    CHECK(cJSON_GetObjectItem(acc, "acked")->valuedouble == 1);
    CHECK(cJSON_GetObjectItem(acc, "unacked")->valuedouble == 2);
    CHECK(cJSON_GetObjectItem(acc, "ready")->valuedouble == 0);
    cJSON_Delete(stats);
    CHECK_EQ_INT(fb_store_commit(st), 0);
    fb_delivery_clear(&d1);
    fb_store_close(st);
}

static void test_nack_release_expire(void)
{
    fb_store *st = open_store(":memory:");
    if (st == NULL)
        return;
    fb_store_begin(st);
    int g = fb_store_group(st, "p", "acc", 1);
    CHECK_EQ_INT(pub(st, "p", "m1", "K", 0), 1);
    CHECK_EQ_INT(pub(st, "p", "m2", "K", 0), 2);
    CHECK(pub(st, "p", "m3", NULL, 0) == 3);

    struct fb_delivery d;
    struct fb_release r;
    CHECK_EQ_INT(deliver(st, g, 1, 100, 0, &d), 1);
    /* nack with a delay: m1 comes back at 600 and gives up its turn until
     * then (I4), so m2 of the same key goes first */
    CHECK_EQ_INT(fb_store_nack(st, d.tag, 1, 1, 600, &r), 0);
    CHECK(r.requeued == 1 && r.finished == 0);
    fb_delivery_clear(&d);
    struct fb_delivery d2;
    CHECK_EQ_INT(deliver(st, g, 1, 100, 0, &d2), 2);
    CHECK(deliver(st, g, 1, 100, 0, NULL) == 3);   /* no key: free to go */
    CHECK(deliver(st, g, 1, 100, 0, NULL) == 0);   /* m1 still delayed */
    CHECK_EQ_INT(fb_store_ack(st, d2.tag, 1, &r), 0);
    fb_delivery_clear(&d2);
    CHECK(fb_store_next_due(st, 100) == 600 || fb_store_next_due(st, 100) == 1100);
    CHECK_EQ_INT(deliver(st, g, 1, 600, 0, &d), 1);
    CHECK_EQ_INT(d.delivery_count, 2);
    fb_delivery_clear(&d);

    /* conn 1 goes away: both its deliveries come back (I2) */
    releases = requeues = 0;
    CHECK(fb_store_release_conn(st, 1, 700, count_release, NULL) == 2);
    CHECK(releases == 2 && requeues == 2);
    CHECK_EQ_INT(deliver(st, g, 2, 700, 0, &d), 1);
    CHECK_EQ_INT(d.delivery_count, 3);
    fb_delivery_clear(&d);

    /* visibility timeout: deadline 700 + 1000 */
    releases = requeues = 0;
    CHECK_EQ_INT(fb_store_next_deadline(st), 1700);
    CHECK(fb_store_expire(st, 1699, 1699, count_release, NULL) == 0);
    CHECK(fb_store_expire(st, 1700, 1700, count_release, NULL) == 1);
    CHECK_EQ_INT(requeues, 1);
    CHECK_EQ_INT(deliver(st, g, 3, 1700, 0, &d), 1);
    CHECK_EQ_INT(d.delivery_count, 4);

    /* nack without requeue drops it for good (I3) */
    CHECK_EQ_INT(fb_store_nack(st, d.tag, 3, 0, 0, &r), 0);
    CHECK(r.finished == 1 && r.requeued == 0);
    fb_delivery_clear(&d);
    CHECK(deliver(st, g, 3, 1700, 0, NULL) == 3);
    CHECK(deliver(st, g, 3, 1700, 0, NULL) == 0);

    cJSON *stats = fb_store_stats(st, 1700);
    cJSON *acc = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "groups"), "acc");
    CHECK(cJSON_GetObjectItem(acc, "dropped")->valuedouble == 1);
    CHECK(cJSON_GetObjectItem(acc, "unacked")->valuedouble == 1);
    cJSON_Delete(stats);
    fb_store_commit(st);
    fb_store_close(st);
}

static void test_duplicate(void)
{
    fb_store *st = open_store(NULL);
    if (st == NULL)
        return;
    fb_store_begin(st);
    int g = fb_store_group(st, "p", "acc", 1);
    pub(st, "p", "m1", "K", 0);
    struct fb_delivery d, twin;
    struct fb_release r;
    CHECK_EQ_INT(deliver(st, g, 1, 0, 0, &d), 1);
    CHECK_EQ_INT(fb_store_deliver_copy(st, &d, 2, 1000, &twin), 1);
    CHECK(twin.tag != d.tag && twin.offset == d.offset && twin.duplicate == 1);
    CHECK_EQ_INT(twin.delivery_count, d.delivery_count);
    /* one copy lost: the other is still out, so no requeue yet (I2) */
    releases = requeues = 0;
    CHECK(fb_store_release_conn(st, 1, 0, count_release, NULL) == 1);
    CHECK_EQ_INT(requeues, 0);
    CHECK(deliver(st, g, 3, 0, 0, NULL) == 0);
    /* the twin acked: done */
    CHECK(fb_store_ack(st, twin.tag, 2, &r) == 0 && r.finished == 1);
    fb_delivery_clear(&d);
    fb_delivery_clear(&twin);

    /* ack of one copy, then the other copy's consumer dies: nothing back */
    pub(st, "p", "m2", "K", 0);
    CHECK_EQ_INT(deliver(st, g, 1, 0, 0, &d), 2);
    CHECK_EQ_INT(fb_store_deliver_copy(st, &d, 2, 1000, &twin), 1);
    CHECK(fb_store_ack(st, d.tag, 1, &r) == 0 && r.finished == 1);
    requeues = 0;
    CHECK(fb_store_release_conn(st, 2, 0, count_release, NULL) == 1);
    CHECK_EQ_INT(requeues, 0);
    /* a late ack of the acked message's copy is accepted, changes nothing */
    CHECK(deliver(st, g, 1, 0, 0, NULL) == 0);
    fb_delivery_clear(&d);
    fb_delivery_clear(&twin);
    fb_store_commit(st);
    fb_store_close(st);
}

static void test_reorder(void)
{
    fb_store *st = open_store(NULL);
    if (st == NULL)
        return;
    fb_store_begin(st);
    int g = fb_store_group(st, "p", "acc", 1);
    pub(st, "p", "v1", "K", 0);
    pub(st, "p", "v2", "K", 0);
    pub(st, "p", "v3", "K", 0);
    struct fb_delivery d;
    struct fb_release r;
    /* newest never-delivered first, one at a time per key */
    CHECK_EQ_INT(deliver(st, g, 1, 0, 1, &d), 3);
    CHECK(deliver(st, g, 1, 0, 1, NULL) == 0);
    CHECK_EQ_INT(fb_store_nack(st, d.tag, 1, 1, 0, &r), 0);
    fb_delivery_clear(&d);
    CHECK_EQ_INT(deliver(st, g, 1, 0, 1, &d), 2);
    CHECK_EQ_INT(fb_store_nack(st, d.tag, 1, 1, 0, &r), 0);
    fb_delivery_clear(&d);
    CHECK_EQ_INT(deliver(st, g, 1, 0, 1, &d), 1);
    CHECK_EQ_INT(fb_store_ack(st, d.tag, 1, &r), 0);
    fb_delivery_clear(&d);
    /* every one delivered once: back to publish order */
    CHECK_EQ_INT(deliver(st, g, 1, 0, 1, &d), 2);
    CHECK_EQ_INT(fb_store_ack(st, d.tag, 1, &r), 0);
    fb_delivery_clear(&d);
    CHECK_EQ_INT(deliver(st, g, 1, 0, 1, &d), 3);
    CHECK_EQ_INT(fb_store_ack(st, d.tag, 1, &r), 0);
    fb_delivery_clear(&d);
    CHECK(deliver(st, g, 1, 0, 1, NULL) == 0);
    fb_store_commit(st);
    fb_store_close(st);
}

static void count_line(void *arg, const char *line)
{
    (void)line;
    (*(int *)arg)++;
}

static void test_restart_and_log(void)
{
    char path[] = "/tmp/test_fakebroker_storeXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    unlink(path);
    fb_store *st = open_store(path);
    CHECK(st != NULL);
    if (st == NULL)
        return;
    fb_store_begin(st);
    int g = fb_store_group(st, "p", "acc", 1);
    pub(st, "p", "m1", "K", 0);
    pub(st, "p", "m2", NULL, 0);
    pub(st, "p", "m3", NULL, 5000);  /* delayed */
    struct fb_delivery d;
    struct fb_release r;
    CHECK_EQ_INT(deliver(st, g, 1, 0, 0, &d), 1);
    uint64_t tag1 = d.tag;
    fb_delivery_clear(&d);
    CHECK_EQ_INT(deliver(st, g, 1, 0, 0, &d), 2);
    CHECK_EQ_INT(fb_store_ack(st, d.tag, 1, &r), 0);
    uint64_t tag2 = d.tag;
    fb_delivery_clear(&d);
    CHECK_EQ_INT(fb_store_log_append(st, "{\"event\":\"a\"}"), 0);
    CHECK_EQ_INT(fb_store_log_append(st, "{\"event\":\"b\"}"), 0);
    CHECK_EQ_INT(fb_store_commit(st), 0);
    fb_store_close(st);

    /* restart: groups and messages kept, m1 back to READY, m2 stays acked,
     * the delay forgotten, tags continue (I5) */
    st = open_store(path);
    CHECK(st != NULL);
    if (st == NULL)
        return;
    CHECK_EQ_INT(fb_store_group_count(st), 1);
    fb_store_begin(st);
    releases = requeues = 0;
    CHECK(fb_store_recover(st, count_release, NULL) == 1);
    CHECK_EQ_INT(requeues, 1);
    CHECK_EQ_INT(deliver(st, 0, 7, 0, 0, &d), 1);
    CHECK(d.delivery_count == 2 && d.tag > tag1 && d.tag > tag2);
    CHECK_EQ_STR(d.message_id, "m1");
    fb_delivery_clear(&d);
    CHECK(deliver(st, 0, 7, 0, 0, NULL) == 3);
    CHECK(deliver(st, 0, 7, 0, 0, NULL) == 0);
    int lines = 0;
    int64_t last = fb_store_log_last_id(st);
    CHECK_EQ_INT(last, 2);
    CHECK_EQ_INT(fb_store_log_read(st, 0, last, 1, count_line, &lines), 1);
    CHECK_EQ_INT(fb_store_log_read(st, 1, last, 10, count_line, &lines), 2);
    CHECK_EQ_INT(fb_store_log_read(st, 2, last, 10, count_line, &lines), 2);
    CHECK_EQ_INT(lines, 2);
    fb_store_commit(st);
    fb_store_close(st);

    char side[300];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
}

static void test_rollback(void)
{
    fb_store *st = open_store(NULL);
    if (st == NULL)
        return;
    fb_store_begin(st);
    CHECK_EQ_INT(fb_store_group(st, "p", "kept", 1), 0);
    pub(st, "p", "m1", NULL, 0);
    CHECK_EQ_INT(fb_store_commit(st), 0);
    /* a failed round: its message, its group and its delivery vanish */
    fb_store_begin(st);
    pub(st, "p", "m2", NULL, 0);
    CHECK_EQ_INT(fb_store_group(st, "p", "lost", 1), 1);
    CHECK(deliver(st, 0, 1, 0, 0, NULL) == 1);
    CHECK_EQ_INT(fb_store_rollback(st), 0);
    CHECK_EQ_INT(fb_store_group_count(st), 1);
    fb_store_begin(st);
    cJSON *stats = fb_store_stats(st, 0);
    CHECK(cJSON_GetObjectItem(stats, "stored")->valuedouble == 1);
    cJSON *kept = cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "groups"), "kept");
    CHECK(cJSON_GetObjectItem(kept, "ready")->valuedouble == 1);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(stats, "groups"), "lost") == NULL);
    cJSON_Delete(stats);
    /* the same group can be created again, with a fresh id */
    CHECK_EQ_INT(fb_store_group(st, "p", "lost", 1), 1);
    CHECK(deliver(st, 1, 1, 0, 0, NULL) == 1);
    CHECK_EQ_INT(fb_store_commit(st), 0);
    fb_store_close(st);
}

int main(void)
{
    test_rollback();
    test_ordering_and_ack();
    test_nack_release_expire();
    test_duplicate();
    test_reorder();
    test_restart_and_log();
    return check_report("test_fakebroker_store");
}
