/* test_bus_rabbitmq.c -- bus.h against RabbitMQ.
 *
 * The URL parser always runs.  With CW_TEST_AMQP_URL set (a node from
 * scripts/rabbit-node; tests/py/test_bus_rabbitmq.py starts one and runs
 * this binary) the cases against the real broker run as well: pipelined
 * confirmed publishes and their headers, nack with and without a delay,
 * redelivery after a lost connection, basic.return of an unroutable
 * message, basic.nack of a publish the queue refuses, a missing exchange
 * with declare=passive, a refused login, an unreachable port, an unknown
 * delivery tag, and a peer that stops reading in the middle of a window
 * (the publish must come back within the connection's timeout).  Each run
 * uses its own exchange, so runs never see each other's messages. */
#include "bus.h"
#include "bus_internal.h"
#include "check.h"
#include "cwlog.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T_MS 5000

static void test_parse(void)
{
    struct bus_rmq_url u;
    char err[256];
    CHECK_EQ_INT(bus_rmq_parse_url("amqp://guest:s3cret@127.0.0.1:5999/%2f", &u, err, sizeof(err)),
                 BUS_OK);
    CHECK(strcmp(u.host, "127.0.0.1") == 0 && u.port == 5999);
    CHECK(strcmp(u.user, "guest") == 0 && strcmp(u.password, "s3cret") == 0);
    CHECK_EQ_STR(u.vhost, "/");
    CHECK(strcmp(u.exchange, BUS_RMQ_DEFAULT_EXCHANGE) == 0 && u.passive == 0);
    CHECK_EQ_INT(u.heartbeat_s, -1);
    CHECK_EQ_INT(bus_rmq_parse_url("amqp://u:p@h:1/v?exchange=ex.1&declare=passive", &u, err,
                                   sizeof(err)), BUS_OK);
    CHECK(strcmp(u.exchange, "ex.1") == 0 && u.passive == 1 && strcmp(u.vhost, "v") == 0);
    CHECK_EQ_INT(bus_rmq_parse_url("amqp://u:p@h:1/v?heartbeat=0", &u, err, sizeof(err)), BUS_OK);
    CHECK_EQ_INT(u.heartbeat_s, 0);
    CHECK_EQ_INT(bus_rmq_parse_url("amqp://u:p@h:1/v?heartbeat=3600", &u, err, sizeof(err)),
                 BUS_OK);
    CHECK_EQ_INT(u.heartbeat_s, 3600);

    const char *bad[] = { "http://h/", "amqp://", "amqp://u:p@h:99999/", "amqp://u:p@h:1/?x=1",
                          "amqp://u:p@h:1/?exchange=amq.topic", "amqp://u:p@h:1/?exchange=a b",
                          "amqp://u:p@h:1/?declare=maybe", "amqp://u:p@h:1/?exchange",
                          "amqp://u:p@h:1/?heartbeat=-1", "amqp://u:p@h:1/?heartbeat=3601",
                          "amqp://u:p@h:1/?heartbeat=5s", "amqp://u:p@h:1/?heartbeat=", NULL };
    for (int i = 0; bad[i] != NULL; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(bus_rmq_parse_url(bad[i], &u, err, sizeof(err)), BUS_PROTOCOL);
        CHECK(err[0] != '\0');
    }
    /* The password never reaches the message. */
    CHECK(bus_rmq_parse_url("amqp://u:hunter2@h:0/?exchange=x", &u, err, sizeof(err)) < 0);
    CHECK(strstr(err, "hunter2") == NULL);
    /* Nor a part of it: a '?' inside a password is no query. */
    const char *q_pw[] = { "amqp://u:hun?ter2=x@h:1/", "amqp://u:hun?ter2@h:1/",
                           "amqp://u:hun?ter2@h:1/?exchange=x", NULL };
    for (int i = 0; q_pw[i] != NULL; i++) {
        err[0] = '\0';
        int rc = bus_rmq_parse_url(q_pw[i], &u, err, sizeof(err));
        CHECK(strstr(err, "ter2") == NULL);
        CHECK(rc < 0 || strcmp(u.password, "hun?ter2") == 0);
    }
    CHECK(bus_is_amqp_url("amqp://h/") == 1 && bus_is_amqp_url("/tmp/b.sock") == 0);
    bus_conn *c = bus_connect("amqps://h/", "t", T_MS, err, sizeof(err));
    CHECK(c == NULL && strstr(err, "not supported") != NULL);
}

/* A peer that takes the TCP connection and never speaks AMQP: the login
 * times out, and the error says so rather than call it refused (a slow or
 * silent link is not a wrong password). */
static void test_silent_login(void)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);
    CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0 &&
          getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
    char url[128], err[512] = "";
    snprintf(url, sizeof(url), "amqp://guest:s3cret@127.0.0.1:%d/", ntohs(sa.sin_port));
    int64_t t0 = cw_mono_ms();
    CHECK(bus_connect(url, "relay-q", 300, err, sizeof(err)) == NULL);
    CHECK(cw_mono_ms() - t0 < 5000);
    CHECK(strstr(err, "did not answer the login of user guest") != NULL);
    CHECK(strstr(err, "refused") == NULL && strstr(err, "s3cret") == NULL);
    close(lfd);
}

/* base URL + "?exchange=NAME" (+ extra). */
static void url_with(char *out, size_t n, const char *base, const char *exchange,
                     const char *extra)
{
    snprintf(out, n, "%s?exchange=%s%s", base, exchange, extra ? extra : "");
}

static struct bus_message msg(const char *topic, const char *id, long long version)
{
    struct bus_message m = {
        .topic = topic, .message_id = id, .type = "PaymentCreated", .partition_key = "agg-1",
        .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        .aggregate_version = version, .schema_version = 1,
        .occurred_at = "2026-11-30T00:00:00Z", .payload = "{\"amount\":100}",
    };
    return m;
}

static void test_publish_consume(const char *url)
{
    char err[512];
    CHECK_EQ_INT(bus_declare_group(url, "payments", "acc", T_MS, err, sizeof(err)), BUS_OK);
    bus_conn *p = bus_connect(url, "relay-t", T_MS, err, sizeof(err));
    CHECK(p != NULL);
    if (p == NULL) {
        fprintf(stderr, "connect: %s\n", err);
        return;
    }
    /* Fifty publishes in one window, then their confirms in order. */
    char ids[50][40];
    for (int i = 0; i < 50; i++) {
        snprintf(ids[i], sizeof(ids[i]), "id-%d", i);
        struct bus_message m = msg("payments", ids[i], i + 1);
        CHECK_EQ_INT(bus_publish_send(p, &m, err, sizeof(err)), BUS_OK);
    }
    int ok = 0;
    for (int i = 0; i < 50; i++)
        ok += bus_publish_confirm(p, err, sizeof(err)) == BUS_OK;
    CHECK_EQ_INT(ok, 50);
    CHECK_EQ_INT(bus_publish_confirm(p, err, sizeof(err)), BUS_PROTOCOL);

    bus_conn *s = bus_connect(url, "acc-t", T_MS, err, sizeof(err));
    CHECK(s != NULL);
    if (s == NULL)
        goto out;
    CHECK_EQ_INT(bus_subscribe(s, "payments", "acc", 10, err, sizeof(err)), BUS_OK);
    int got = 0;
    for (int i = 0; i < 50; i++) {
        struct bus_delivery *d = NULL;
        if (bus_next_delivery(s, T_MS, &d, err, sizeof(err)) != BUS_OK)
            break;
        got++;
        CHECK_EQ_STR(d->message_id, ids[i]);
        CHECK(strcmp(d->type, "PaymentCreated") == 0 && strcmp(d->topic, "payments") == 0);
        CHECK(d->aggregate_version == i + 1 && d->schema_version == 1);
        CHECK(d->partition_key != NULL && strcmp(d->partition_key, "agg-1") == 0);
        CHECK(d->traceparent != NULL && strncmp(d->traceparent, "00-0af7", 7) == 0);
        CHECK(d->payload != NULL && strcmp(d->payload, "{\"amount\":100}") == 0);
        CHECK(d->delivery_count == 1 && d->redelivered == 0);
        if (i == 0) {
            /* nack, requeue at once: back with the next delivery count */
            CHECK_EQ_INT(bus_nack(s, d->tag, 1, 0, err, sizeof(err)), BUS_OK);
            bus_delivery_free(d);
            CHECK_EQ_INT(bus_next_delivery(s, T_MS, &d, err, sizeof(err)), BUS_OK);
            if (d == NULL)
                break;
            /* a quorum queue puts a returned message back at its head */
            while (strcmp(d->message_id, ids[0]) != 0) {
                got++;
                CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
                bus_delivery_free(d);
                d = NULL;
                if (bus_next_delivery(s, T_MS, &d, err, sizeof(err)) != BUS_OK)
                    break;
            }
            if (d == NULL)
                break;
            CHECK(d->redelivered == 1 && d->delivery_count == 2);
            /* nack with a delay: not back before it */
            int64_t t0 = cw_mono_ms();
            CHECK_EQ_INT(bus_nack(s, d->tag, 1, 400, err, sizeof(err)), BUS_OK);
            bus_delivery_free(d);
            d = NULL;
            for (;;) {
                if (bus_next_delivery(s, T_MS, &d, err, sizeof(err)) != BUS_OK)
                    break;
                if (strcmp(d->message_id, ids[0]) == 0)
                    break;
                got++;
                CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
                bus_delivery_free(d);
                d = NULL;
            }
            CHECK(d != NULL);
            if (d == NULL)
                break;
            CHECK(cw_mono_ms() - t0 >= 350);
            CHECK(d->redelivered == 1 && d->delivery_count == 3);
            CHECK(strcmp(d->payload, "{\"amount\":100}") == 0 && d->aggregate_version == 1);
            CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
            bus_delivery_free(d);
            break;
        }
        CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
        bus_delivery_free(d);
    }
    CHECK_EQ_INT(got, 50);
    /* An unknown tag is refused here, and the connection stays usable. */
    CHECK_EQ_INT(bus_ack(s, 999999, err, sizeof(err)), BUS_REFUSED);
    struct bus_message m = msg("payments", "id-redeliver", 7);
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_OK);
    struct bus_delivery *d = NULL;
    CHECK_EQ_INT(bus_next_delivery(s, T_MS, &d, err, sizeof(err)), BUS_OK);
    CHECK(d != NULL && strcmp(d->message_id, "id-redeliver") == 0);
    bus_delivery_free(d);
    /* Closed without an ack: the next subscriber gets it again. */
    bus_close(s);
    s = bus_connect(url, "acc-t2", T_MS, err, sizeof(err));
    CHECK(s != NULL && bus_subscribe(s, "payments", "acc", 10, err, sizeof(err)) == BUS_OK);
    d = NULL;
    CHECK_EQ_INT(bus_next_delivery(s, T_MS, &d, err, sizeof(err)), BUS_OK);
    CHECK(d != NULL && strcmp(d->message_id, "id-redeliver") == 0 && d->redelivered == 1 &&
          d->delivery_count == 2);
    if (d != NULL)
        CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
    bus_delivery_free(d);
    CHECK_EQ_INT(bus_next_delivery(s, 200, &d, err, sizeof(err)), BUS_NONE);
    bus_close(s);
out:
    bus_close(p);
}

static void test_return_and_bad_input(const char *base, const char *exchange)
{
    char url[600], err[512];
    url_with(url, sizeof(url), base, exchange, NULL);
    bus_conn *p = bus_connect(url, "relay-r", T_MS, err, sizeof(err));
    CHECK(p != NULL);
    if (p != NULL) {
        /* A type the broker cannot route by is refused at once, and the
         * connection goes on: the publishes around it are confirmed. */
        struct bus_message spaced = msg("payments", "id-spaced", 1);
        spaced.type = "Payment Created";
        err[0] = '\0';
        CHECK_EQ_INT(bus_publish_send(p, &spaced, err, sizeof(err)), BUS_REFUSED);
        CHECK(strstr(err, "topic and type must be") != NULL);
        struct bus_message after = msg("payments", "id-after-spaced", 1);
        CHECK_EQ_INT(bus_publish(p, &after, err, sizeof(err)), BUS_OK);
        /* No queue is bound for this topic: basic.return, then refused. */
        struct bus_message m = msg("nobody", "id-unroutable", 1);
        struct bus_message ok = msg("payments", "id-routable", 1);
        CHECK_EQ_INT(bus_publish_send(p, &m, err, sizeof(err)), BUS_OK);
        CHECK_EQ_INT(bus_publish_send(p, &ok, err, sizeof(err)), BUS_OK);
        err[0] = '\0';
        CHECK_EQ_INT(bus_publish_confirm(p, err, sizeof(err)), BUS_REFUSED);
        CHECK(strstr(err, "NO_ROUTE") != NULL && strstr(err, "unroutable") != NULL);
        CHECK_EQ_INT(bus_publish_confirm(p, err, sizeof(err)), BUS_OK);
        bus_close(p);
    }
    /* A missing exchange with declare=passive. */
    url_with(url, sizeof(url), base, "nosuch-exchange", "&declare=passive");
    err[0] = '\0';
    CHECK(bus_connect(url, "relay-p", T_MS, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "nosuch-exchange") != NULL && strstr(err, "NOT_FOUND") != NULL);
    /* A missing queue with declare=passive. */
    url_with(url, sizeof(url), base, exchange, "&declare=passive");
    bus_conn *s = bus_connect(url, "acc-p", T_MS, err, sizeof(err));
    CHECK(s != NULL);
    if (s != NULL) {
        err[0] = '\0';
        CHECK_EQ_INT(bus_subscribe(s, "payments", "nosuchgroup", 5, err, sizeof(err)), BUS_REFUSED);
        CHECK(strstr(err, "nosuchgroup") != NULL && strstr(err, "NOT_FOUND") != NULL);
        bus_close(s);
    }
    /* A refused login names the user, never the password. */
    struct bus_rmq_url u;
    CHECK_EQ_INT(bus_rmq_parse_url(base, &u, err, sizeof(err)), BUS_OK);
    snprintf(url, sizeof(url), "amqp://guest:wrong-pw-42@%s:%d/", u.host, u.port);
    err[0] = '\0';
    CHECK(bus_connect(url, "relay-l", T_MS, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "refused the login of user guest") != NULL);
    CHECK(strstr(err, "wrong-pw-42") == NULL);
    /* Nobody listens there. */
    snprintf(url, sizeof(url), "amqp://guest:guest@127.0.0.1:1/");
    err[0] = '\0';
    CHECK(bus_connect(url, "relay-u", T_MS, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "could not connect to broker at 127.0.0.1:1") != NULL);
}

/* A queue that refuses publishes beyond its length makes RabbitMQ answer
 * basic.nack: the publish is refused, never reported stored. */
static void test_broker_nack(const char *base, const char *exchange)
{
    struct bus_rmq_url u;
    char err[512], url[600];
    CHECK_EQ_INT(bus_rmq_parse_url(base, &u, err, sizeof(err)), BUS_OK);
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    CHECK_EQ_INT(amqp_socket_open(sock, u.host, u.port), AMQP_STATUS_OK);
    amqp_rpc_reply_t r = amqp_login(conn, u.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, u.user,
                                    u.password);
    CHECK_EQ_INT(r.reply_type, AMQP_RESPONSE_NORMAL);
    amqp_channel_open(conn, 1);
    amqp_exchange_declare(conn, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 0,
                          1, 0, 0, amqp_empty_table);
    char q[200];
    snprintf(q, sizeof(q), "%s.full", exchange);
    amqp_table_entry_t args[2] = {
        { amqp_cstring_bytes("x-max-length"), { AMQP_FIELD_KIND_I32, { .i32 = 1 } } },
        { amqp_cstring_bytes("x-overflow"),
          { AMQP_FIELD_KIND_UTF8, { .bytes = amqp_cstring_bytes("reject-publish") } } },
    };
    amqp_table_t t = { 2, args };
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(q), 0, 1, 0, 0, t);
    amqp_queue_bind(conn, 1, amqp_cstring_bytes(q), amqp_cstring_bytes(exchange),
                    amqp_cstring_bytes("full.#"), amqp_empty_table);
    CHECK_EQ_INT(amqp_get_rpc_reply(conn).reply_type, AMQP_RESPONSE_NORMAL);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);

    url_with(url, sizeof(url), base, exchange, NULL);
    bus_conn *p = bus_connect(url, "relay-n", T_MS, err, sizeof(err));
    CHECK(p != NULL);
    if (p == NULL)
        return;
    struct bus_message a = msg("full", "id-fits", 1), b = msg("full", "id-overflows", 2);
    CHECK_EQ_INT(bus_publish(p, &a, err, sizeof(err)), BUS_OK);
    err[0] = '\0';
    CHECK_EQ_INT(bus_publish(p, &b, err, sizeof(err)), BUS_REFUSED);
    CHECK(strstr(err, "nacked") != NULL);
    bus_close(p);
}

/* ---- a peer that stops reading ---------------------------------------------
 *
 * A forwarder between the bus and the node: it passes bytes both ways until
 * stalled, then reads nothing more from the client, as a partitioned link or
 * a broker blocking publishers does.  The client's socket buffer fills and
 * the next write has to wait for room. */

struct forwarder {
    int lfd, port;
    atomic_int stalled, stop;
    int up_port;
};

static void *forward(void *arg)
{
    struct forwarder *f = arg;
    int cfd = accept(f->lfd, NULL, NULL);
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)f->up_port) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (cfd < 0 || sfd < 0 || connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return NULL;
    char buf[65536];
    while (!atomic_load(&f->stop)) {
        struct pollfd pf[2] = { { atomic_load(&f->stalled) ? -1 : cfd, POLLIN, 0 },
                                { sfd, POLLIN, 0 } };
        if (poll(pf, 2, 50) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(pf[i].fd, buf, sizeof(buf));
            if (n <= 0 || write(i == 0 ? sfd : cfd, buf, (size_t)n) != n)
                atomic_store(&f->stop, 1);
        }
    }
    close(cfd);
    close(sfd);
    return NULL;
}

static void test_stalled_peer(const char *base, const char *exchange)
{
    struct bus_rmq_url u;
    char err[512], url[700];
    CHECK_EQ_INT(bus_rmq_parse_url(base, &u, err, sizeof(err)), BUS_OK);
    struct forwarder f = { .up_port = u.port };
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t len = sizeof(sa);
    CHECK(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(f.lfd, 1) == 0 &&
          getsockname(f.lfd, (struct sockaddr *)&sa, &len) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, forward, &f) == 0);
    snprintf(url, sizeof(url), "amqp://%s:%s@127.0.0.1:%d/%%2f?exchange=%s", u.user, u.password,
             ntohs(sa.sin_port), exchange);
    bus_conn *p = bus_connect(url, "relay-s", 1000, err, sizeof(err));
    CHECK(p != NULL);
    if (p != NULL) {
        atomic_store(&f.stalled, 1);
        /* 64 KiB bodies, up to 32 MiB in all: far more than the kernel's
         * buffers on both sides hold. */
        static char body[65536];
        memset(body, 'x', sizeof(body) - 1);
        struct bus_message m = msg("payments", "id-stalled", 1);
        m.payload = body;
        int64_t t0 = cw_mono_ms();
        int rc = BUS_OK, sent = 0;
        while (rc == BUS_OK && sent < 512) {
            rc = bus_publish_send(p, &m, err, sizeof(err));
            sent += rc == BUS_OK;
        }
        int64_t took = cw_mono_ms() - t0;
        CHECK_EQ_INT(rc, BUS_TIMEOUT);
        CHECK(strstr(err, "took no bytes for 1000 ms") != NULL);
        CHECK(took < 1000 + 2000); /* the timeout, a watchdog tick, the machine's load */
        printf("stalled peer: %d publishes sent, the next one given up after %lld ms: %s\n", sent,
               (long long)took, err);
        bus_close(p);
    }
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    close(f.lfd);
}

int main(void)
{
    test_parse();
    test_silent_login();
    const char *base = getenv("CW_TEST_AMQP_URL");
    if (base != NULL && base[0] != '\0') {
        char exchange[64], url[600];
        snprintf(exchange, sizeof(exchange), "t%d-%lld", (int)getpid(), (long long)cw_mono_ms());
        url_with(url, sizeof(url), base, exchange, NULL);
        test_publish_consume(url);
        test_return_and_bad_input(base, exchange);
        char ex2[80];
        snprintf(ex2, sizeof(ex2), "%s-n", exchange);
        test_broker_nack(base, ex2);
        /* Without the bound a publish would wait for the peer forever. */
        alarm(60);
        char ex3[80];
        snprintf(ex3, sizeof(ex3), "%s-s", exchange);
        test_stalled_peer(base, ex3);
        alarm(0);
    } else {
        printf("test_bus_rabbitmq: CW_TEST_AMQP_URL not set, broker cases not run "
               "(tests/py/test_bus_rabbitmq.py runs them)\n");
    }
    return check_report("test_bus_rabbitmq");
}
