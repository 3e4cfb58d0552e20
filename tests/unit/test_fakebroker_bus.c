/* test_fakebroker_bus.c -- the bus client (src/bus/bus_fakebroker.c) against a
 * real fake broker: the test forks a child that runs the broker's event
 * loop on a socket in a fresh temporary directory, talks to it through
 * bus.h only (plus raw control frames), and kills the child by its pid. */
#include "bus.h"
#include "check.h"
#include "cwlog.h"
#include "fakebroker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static char sock[96];
static pid_t broker_pid = -1;

/* The broker's socket accepts a connection (closed again at once). */
static int broker_accepts(void)
{
    char err[256];
    bus_conn *c = bus_connect(sock, "probe", 1000, err, sizeof(err));
    if (c == NULL)
        return 0;
    bus_close(c);
    return 1;
}

static void start_broker(void)
{
    broker_pid = fork();
    if (broker_pid == 0) {
        struct fb_options opt = {.socket_path = sock, .visibility_timeout_ms = 30000};
        _exit(fb_server_run(&opt));
    }
    WAIT_FOR(broker_accepts(), 5000);
    if (check_waited)
        return;
    fprintf(stderr, "broker did not come up\n");
    kill(broker_pid, SIGKILL);
    exit(1);
}

static int stop_broker(int sig)
{
    int status = -1;
    kill(broker_pid, sig);
    WAIT_FOR(waitpid(broker_pid, &status, WNOHANG) != 0, 5000);
    if (!check_waited) {
        kill(broker_pid, SIGKILL);
        waitpid(broker_pid, &status, 0);
    }
    broker_pid = -1;
    return status;
}

/* Sends one raw frame on a fresh connection and returns the reply line. */
static void control(const char *frame, char *reply, size_t n)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    reply[0] = '\0';
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        CHECK(!"control connect");
        if (fd >= 0)
            close(fd);
        return;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    CHECK_EQ_INT(write(fd, frame, strlen(frame)), (ssize_t)strlen(frame));
    CHECK_EQ_INT(write(fd, "\n", 1), 1);
    size_t got = 0;
    while (got + 1 < n) {
        ssize_t r = read(fd, reply + got, n - got - 1);
        if (r <= 0)
            break;
        got += (size_t)r;
        reply[got] = '\0';
        if (memchr(reply, '\n', got) != NULL)
            break;
    }
    close(fd);
}

static struct bus_message msg(const char *id, const char *payload)
{
    struct bus_message m = {
        .topic = "payments",
        .message_id = id,
        .type = "PaymentCreated",
        .partition_key = "agg-1",
        .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        .aggregate_version = 7,
        .schema_version = 1,
        .occurred_at = "2026-11-29T21:00:00Z",
        .payload = payload,
    };
    return m;
}

static void test_publish(bus_conn *p)
{
    char err[512];
    struct bus_message m = msg("m-0", "{\"EventId\":\"m-0\",\"note\":\"caf\xc3\xa9 \\\" \\n\"}");
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_OK);

    /* pipelining: 50 sends, then 50 confirms in order */
    char ids[50][16];
    for (int i = 0; i < 50; i++) {
        snprintf(ids[i], sizeof(ids[i]), "m-%d", i + 1);
        struct bus_message mi = msg(ids[i], "{}");
        mi.partition_key = NULL;
        CHECK_EQ_INT(bus_publish_send(p, &mi, err, sizeof(err)), BUS_OK);
    }
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_PROTOCOL); /* confirms unread */
    for (int i = 0; i < 50; i++)
        CHECK_EQ_INT(bus_publish_confirm(p, err, sizeof(err)), BUS_OK);
    CHECK_EQ_INT(bus_publish_confirm(p, err, sizeof(err)), BUS_PROTOCOL);

    /* invalid input is refused locally; the connection stays usable */
    struct bus_message bad = msg("x", "{}");
    bad.type = NULL;
    CHECK_EQ_INT(bus_publish(p, &bad, err, sizeof(err)), BUS_REFUSED);

    /* the poison maker: refused with the payload's start in the error */
    char reply[512];
    control("{\"op\":\"control\",\"max_payload_bytes\":16}", reply, sizeof(reply));
    CHECK(strstr(reply, "\"max_payload_bytes\":16") != NULL);
    struct bus_message big = msg("poison", "{\"card\":\"4111111111111111\"}");
    CHECK_EQ_INT(bus_publish(p, &big, err, sizeof(err)), BUS_REFUSED);
    CHECK(strstr(err, "payload too large") != NULL && strstr(err, "4111") != NULL);
    control("{\"op\":\"control\",\"outage\":\"refuse\",\"max_payload_bytes\":0}", reply,
            sizeof(reply));
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_REFUSED);
    CHECK(strstr(err, "outage") != NULL);
    control("{\"op\":\"control\",\"reset\":true}", reply, sizeof(reply));
    CHECK(strstr(reply, "\"outage\":\"off\"") != NULL);
    struct bus_message last = msg("m-51", "{}");
    CHECK_EQ_INT(bus_publish(p, &last, err, sizeof(err)), BUS_OK);
}

static void test_subscribe(void)
{
    char err[512];
    bus_conn *s = bus_connect(sock, "sub-1", 2000, err, sizeof(err));
    CHECK(s != NULL);
    if (s == NULL)
        return;
    CHECK_EQ_INT(bus_subscribe(s, "payments", "accounting", 100, err, sizeof(err)), BUS_OK);
    CHECK_EQ_INT(bus_subscribe(s, "payments", "accounting", 100, err, sizeof(err)), BUS_REFUSED);
    CHECK_EQ_INT(bus_subscribe(s, "payments", "", 1, err, sizeof(err)), BUS_PROTOCOL);

    struct bus_delivery *d = NULL;
    CHECK_EQ_INT(bus_next_delivery(s, 2000, &d, err, sizeof(err)), BUS_OK);
    if (d != NULL) {
        CHECK_EQ_STR(d->message_id, "m-0");
        CHECK_EQ_STR(d->payload, "{\"EventId\":\"m-0\",\"note\":\"caf\xc3\xa9 \\\" \\n\"}");
        CHECK_EQ_STR(d->partition_key, "agg-1");
        CHECK_EQ_STR(d->traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        CHECK(d->aggregate_version == 7 && d->schema_version == 1);
        CHECK(d->delivery_count == 1 && d->redelivered == 0);
        CHECK(strcmp(d->topic, "payments") == 0 && strcmp(d->type, "PaymentCreated") == 0);
        CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
        bus_delivery_free(d);
    }
    /* 51 more (m-1..m-50 and m-51); an ack of an unknown tag in between
     * gets an error frame that the client skips */
    CHECK_EQ_INT(bus_ack(s, 987654, err, sizeof(err)), BUS_OK);
    int got = 0;
    uint64_t keep = 0;
    for (int i = 0; i < 51; i++) {
        d = NULL;
        if (bus_next_delivery(s, 2000, &d, err, sizeof(err)) != BUS_OK)
            break;
        got++;
        if (strcmp(d->message_id, "m-51") == 0)
            keep = d->tag;
        else
            CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
        bus_delivery_free(d);
    }
    CHECK_EQ_INT(got, 51);
    CHECK(keep != 0);

    /* nothing more: BUS_NONE after about the wait, connection still fine */
    int64_t t0 = cw_mono_ms();
    CHECK_EQ_INT(bus_next_delivery(s, 200, &d, err, sizeof(err)), BUS_NONE);
    int64_t took = cw_mono_ms() - t0;
    CHECK(took >= 190 && took < 1500);

    /* nack with requeue: back, flagged, counted */
    CHECK_EQ_INT(bus_nack(s, keep, 1, 50, err, sizeof(err)), BUS_OK);
    d = NULL;
    CHECK_EQ_INT(bus_next_delivery(s, 2000, &d, err, sizeof(err)), BUS_OK);
    if (d != NULL) {
        CHECK_EQ_STR(d->message_id, "m-51");
        CHECK(d->delivery_count == 2 && d->redelivered == 1);
        bus_delivery_free(d);
    }
    /* the subscriber disappears without acking: another one gets it */
    bus_close(s);
    s = bus_connect(sock, "sub-2", 2000, err, sizeof(err));
    CHECK(s != NULL);
    if (s == NULL)
        return;
    CHECK_EQ_INT(bus_subscribe(s, "payments", "accounting", 1, err, sizeof(err)), BUS_OK);
    d = NULL;
    CHECK_EQ_INT(bus_next_delivery(s, 2000, &d, err, sizeof(err)), BUS_OK);
    if (d != NULL) {
        CHECK_EQ_STR(d->message_id, "m-51");
        CHECK(d->delivery_count == 3 && d->redelivered == 1);
        CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
        bus_delivery_free(d);
    }
    bus_close(s);
}

/* A raw client socket with a receive timeout, for frames bus.h never sends. */
static int raw_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads what arrives until a newline, EOF (returns 0) or the timeout (-1). */
static ssize_t raw_line(int fd, char *buf, size_t n)
{
    size_t got = 0;
    buf[0] = '\0';
    while (got + 1 < n) {
        ssize_t r = read(fd, buf + got, n - got - 1);
        if (r <= 0)
            return r == 0 && got == 0 ? 0 : (r < 0 ? -1 : (ssize_t)got);
        got += (size_t)r;
        buf[got] = '\0';
        if (memchr(buf, '\n', got) != NULL)
            return (ssize_t)got;
    }
    return (ssize_t)got;
}

static void raw_send(int fd, const char *line)
{
    CHECK_EQ_INT(write(fd, line, strlen(line)), (ssize_t)strlen(line));
}

/* Heartbeats, both ways: a link that goes silent without closing (a
 * half-open peer) is noticed by the side that still lives. */
static void test_heartbeat(void)
{
    char err[512], line[1024];

    /* bad value: refused by name, the connection stays */
    int fd = raw_connect();
    CHECK(fd >= 0);
    raw_send(fd, "{\"op\":\"subscribe\",\"topic\":\"payments\",\"group\":\"hb\","
                 "\"heartbeat_ms\":50}\n");
    CHECK(raw_line(fd, line, sizeof(line)) > 0);
    CHECK(strstr(line, "\"error\"") != NULL && strstr(line, "heartbeat_ms") != NULL);

    /* a subscriber that asked for 100 ms and then says nothing is dropped
     * after two intervals; one that pings is answered */
    raw_send(fd, "{\"op\":\"subscribe\",\"topic\":\"payments\",\"group\":\"hb\","
                 "\"heartbeat_ms\":100}\n");
    CHECK(raw_line(fd, line, sizeof(line)) > 0);
    CHECK(strstr(line, "\"subscribed\"") != NULL);
    raw_send(fd, "{\"op\":\"ping\"}\n");
    int64_t t0 = cw_mono_ms();
    ssize_t r;
    int pong = 0;
    while ((r = raw_line(fd, line, sizeof(line))) > 0)
        pong |= strstr(line, "\"pong\"") != NULL;
    int64_t took = cw_mono_ms() - t0;
    CHECK(pong);
    CHECK_EQ_INT(r, 0);  /* EOF, not the 3 s receive timeout */
    CHECK(took >= 150 && took < 2500);
    close(fd);

    /* the client side: a subscriber whose broker is alive waits its whole
     * wait (its pings are answered) ... */
    bus_conn *s = bus_connect(sock, "sub-hb", 400, err, sizeof(err));
    CHECK(s != NULL);
    if (s == NULL)
        return;
    CHECK_EQ_INT(bus_subscribe(s, "payments", "hb-live", 1, err, sizeof(err)), BUS_OK);
    struct bus_delivery *d = NULL;
    /* the group reads the topic from its start: drain it first */
    while (bus_next_delivery(s, 300, &d, err, sizeof(err)) == BUS_OK) {
        CHECK_EQ_INT(bus_ack(s, d->tag, err, sizeof(err)), BUS_OK);
        bus_delivery_free(d);
        d = NULL;
    }
    t0 = cw_mono_ms();
    CHECK_EQ_INT(bus_next_delivery(s, 1200, &d, err, sizeof(err)), BUS_NONE);
    took = cw_mono_ms() - t0;
    CHECK(took >= 1150 && took < 2500);

    /* ... and one whose broker stops answering (stopped, its socket open,
     * as behind a link that swallows bytes) gives up after two silent
     * intervals (2 x 200 ms), not at the end of its wait */
    kill(broker_pid, SIGSTOP);
    t0 = cw_mono_ms();
    int rc = bus_next_delivery(s, 5000, &d, err, sizeof(err));
    took = cw_mono_ms() - t0;
    kill(broker_pid, SIGCONT);
    CHECK_EQ_INT(rc, BUS_TIMEOUT);
    CHECK(strstr(err, "heartbeat") != NULL);
    CHECK(took < 1500);
    CHECK_EQ_INT(bus_next_delivery(s, 10, &d, err, sizeof(err)), BUS_DISCONNECTED);
    bus_close(s);
}

static void test_hang_and_disconnect(void)
{
    char err[512], reply[512];
    bus_conn *p = bus_connect(sock, "pub-hang", 300, err, sizeof(err));
    CHECK(p != NULL);
    if (p == NULL)
        return;
    control("{\"op\":\"control\",\"outage\":\"hang\"}", reply, sizeof(reply));
    struct bus_message m = msg("hung", "{}");
    int64_t t0 = cw_mono_ms();
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_TIMEOUT);
    int64_t took = cw_mono_ms() - t0;
    CHECK(took >= 290 && took < 1500);
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_DISCONNECTED);
    bus_close(p);
    control("{\"op\":\"control\",\"outage\":\"off\"}", reply, sizeof(reply));

    /* drop_before_confirm: stored, then the connection is cut */
    p = bus_connect(sock, "pub-drop", 2000, err, sizeof(err));
    control("{\"op\":\"control\",\"drop_before_confirm\":1}", reply, sizeof(reply));
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_DISCONNECTED);
    bus_close(p);

    /* the broker dies: calls fail with BUS_DISCONNECTED, not a signal */
    p = bus_connect(sock, "pub-last", 2000, err, sizeof(err));
    CHECK(p != NULL);
    stop_broker(SIGKILL);
    CHECK_EQ_INT(bus_publish(p, &m, err, sizeof(err)), BUS_DISCONNECTED);
    bus_close(p);
    CHECK(bus_connect(sock, "nobody", 500, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "could not connect") != NULL);
}

int main(void)
{
    char err[512];
    cwlog_open(NULL, "test_fakebroker_bus");
    snprintf(dir, sizeof(dir), "/tmp/cwbusXXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(sock, sizeof(sock), "%s/broker.sock", dir);

    CHECK(bus_connect(sock, "early", 500, err, sizeof(err)) == NULL);
    CHECK(bus_connect("", "x", 500, err, sizeof(err)) == NULL);

    start_broker();
    bus_conn *p = bus_connect(sock, "pub-1", 2000, err, sizeof(err));
    CHECK(p != NULL);
    if (p != NULL) {
        test_publish(p);
        bus_close(p);
    }
    test_subscribe();
    test_heartbeat();
    test_hang_and_disconnect();

    /* a clean stop: exit 0 and the socket removed */
    start_broker();
    int status = stop_broker(SIGTERM);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(access(sock, F_OK) != 0);
    rmdir(dir);
    return check_report("test_fakebroker_bus");
}
