/* bus_fakebroker.c -- the publisher/subscriber interface of bus.h over the
 * fake broker's newline-delimited JSON protocol (sim/fakebroker/fakebroker.h).
 *
 * One non-blocking Unix socket per bus_conn.  Every call computes a deadline
 * from the connection's timeout (bus_next_delivery: from its wait) and waits
 * only with poll() up to it, so no call can block longer than asked.
 * Outgoing publishes are buffered (bus_publish_send) and written when the
 * buffer grows or a confirm is awaited, so a pipelining relay sends its
 * window in a few writes.  While writing, the socket is read too: a broker
 * that answers while we send can never deadlock us both on full buffers.
 *
 * Frames that arrive while a call waits for something else are sorted out:
 * deliveries are queued (bus_next_delivery returns them first), error frames
 * that do not answer the current request (e.g. the broker's reply to an ack
 * of an expired tag) are reported with a warning and skipped.  A timeout in
 * the middle of an exchange, a broken stream or an unparseable frame makes
 * the connection unusable: later calls return BUS_DISCONNECTED, and the
 * caller reconnects (the broker redelivers what was not acknowledged). */
#include "bus_internal.h"
#include "cwlog.h"
#include "mutant.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define BUS_MAX_FRAME (8 * 1024 * 1024) /* a 1 MiB payload, escaped, fits */
#define BUS_SEND_HIGH (64 * 1024)        /* flush buffered publishes above this */
#define BUS_IN_CAP (64 * 1024 * 1024)    /* unread input we are willing to hold */
#define BUS_HEARTBEAT_MIN_MS 100         /* the broker's lower bound */

struct dq {
    struct bus_delivery *d;
    struct dq *next;
};

struct fake_conn {
    struct bus_conn base;   /* first: the dispatcher sees this */
    int fd;
    int timeout_ms;
    int broken;         /* after a timeout/disconnect/protocol error */
    char name[64];
    char *in;
    size_t inlen;
    size_t instart;
    size_t incap;
    char *out;
    size_t outlen;
    size_t outcap;
    struct dq *qhead;   /* deliveries received while waiting for something else */
    struct dq *qtail;
    long long next_seq;     /* seq of the next publish sent */
    long long confirm_seq;  /* seq of the next confirm expected */
    int pending;            /* publishes sent whose confirm was not read */
    int heartbeat_ms;       /* subscribers: 0 before bus_subscribe */
    int64_t last_rx_ms;     /* monotonic: when the broker last sent bytes */
    int64_t last_tx_ms;     /* monotonic: when we last wrote bytes */
    int pinged;             /* a ping went out since the last bytes came in */
};

/* Marks the connection unusable and returns status. */
static int fail(struct fake_conn *c, int status)
{
    c->broken = 1;
    return status;
}

static int check_usable(struct fake_conn *c, char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    if (c->broken)
        return bus_set_err(err, errlen, BUS_DISCONNECTED,
                       "broker connection unusable after an earlier error; reconnect");
    return BUS_OK;
}

static int left_ms(int64_t deadline)
{
    int64_t l = deadline - cw_mono_ms();
    if (l < 0)
        return 0;
    return l > 1000000 ? 1000000 : (int)l;
}

/* ---- buffers ---------------------------------------------------------- */

static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    char *b = realloc(*buf, n);
    if (b == NULL)
        return -1;
    *buf = b;
    *cap = n;
    return 0;
}

/* Reads what the socket holds (without waiting) into the input buffer.
 * Returns bytes read (0: nothing now), or BUS_DISCONNECTED / BUS_PROTOCOL. */
static int read_some(struct fake_conn *c, char *err, size_t errlen)
{
    if (c->instart > 0 && (c->instart == c->inlen || c->instart > c->incap / 2)) {
        memmove(c->in, c->in + c->instart, c->inlen - c->instart);
        c->inlen -= c->instart;
        c->instart = 0;
    }
    if (c->inlen - c->instart > BUS_IN_CAP)
        return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                       "broker sent more than %d bytes we did not read", BUS_IN_CAP);
    if (reserve(&c->in, &c->incap, c->inlen + 65536 + 1) < 0)
        return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL), "out of memory");
    ssize_t n;
    do {
        n = recv(c->fd, c->in + c->inlen, 65536, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n == 0)
        return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "broker closed the connection");
    if (n < 0)
        return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "broker connection: %s",
                       strerror(errno));
    c->inlen += (size_t)n;
    c->in[c->inlen] = '\0';
    c->last_rx_ms = cw_mono_ms();
    c->pinged = 0;
    return (int)n;
}

/* Writes the output buffer completely by the deadline. */
static int flush_out(struct fake_conn *c, int64_t deadline, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < c->outlen) {
        ssize_t w = send(c->fd, c->out + off, c->outlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            c->last_tx_ms = cw_mono_ms();
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "broker connection: %s",
                           strerror(errno));
        struct pollfd p = {.fd = c->fd, .events = POLLOUT | POLLIN};
        int wait = left_ms(deadline);
        int rc = poll(&p, 1, wait);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "poll: %s", strerror(errno));
        if (rc == 0)
            return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                           "broker did not take our data within %d ms", c->timeout_ms);
        if (p.revents & POLLIN) {
            /* Keep reading while we write: the broker may be blocked on us. */
            int r = read_some(c, err, errlen);
            if (r < 0)
                return r;
        }
        if ((p.revents & (POLLERR | POLLHUP)) && !(p.revents & (POLLIN | POLLOUT)))
            return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "broker connection closed");
    }
    c->outlen = 0;
    return BUS_OK;
}

static int queue_frame(struct fake_conn *c, cJSON *frame, char *err, size_t errlen)
{
    char *text = cJSON_PrintUnformatted(frame);
    cJSON_Delete(frame);
    if (text == NULL)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "out of memory building a frame");
    size_t n = strlen(text);
    if (reserve(&c->out, &c->outcap, c->outlen + n + 1) < 0) {
        cJSON_free(text);
        return bus_set_err(err, errlen, BUS_PROTOCOL, "out of memory");
    }
    memcpy(c->out + c->outlen, text, n);
    c->out[c->outlen + n] = '\n';
    c->outlen += n + 1;
    cJSON_free(text);
    return BUS_OK;
}

/* ---- reading frames --------------------------------------------------- */

/* The next complete frame from the buffer, or NULL.  *status is set to a
 * negative code when the buffered data is not a frame we accept. */
static cJSON *take_frame(struct fake_conn *c, int *status, char *err, size_t errlen)
{
    *status = BUS_OK;
    for (;;) {
        char *start = c->in + c->instart;
        size_t avail = c->inlen - c->instart;
        char *nl = avail ? memchr(start, '\n', avail) : NULL;
        if (nl == NULL) {
            if (avail > BUS_MAX_FRAME) {
                *status = bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                                  "broker frame longer than %d bytes", BUS_MAX_FRAME);
            }
            return NULL;
        }
        size_t len = (size_t)(nl - start);
        c->instart += len + 1;
        if (len == 0 || (len == 1 && start[0] == '\r'))
            continue;
        cJSON *f = cJSON_ParseWithLength(start, len);
        if (f == NULL || !cJSON_IsObject(f) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f, "op"))) {
            cJSON_Delete(f);
            *status = bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                              "broker sent a frame that is not a JSON object with an op");
            return NULL;
        }
        return f;
    }
}

/* Waits until the deadline for one frame.  BUS_OK with *out set, BUS_NONE on
 * timeout (the connection stays usable), or an error. */
static int read_frame(struct fake_conn *c, int64_t deadline, cJSON **out, char *err, size_t errlen)
{
    *out = NULL;
    for (;;) {
        int status;
        cJSON *f = take_frame(c, &status, err, errlen);
        if (f != NULL) {
            *out = f;
            return BUS_OK;
        }
        if (status < 0)
            return status;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int rc = poll(&p, 1, left_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "poll: %s", strerror(errno));
        if (rc == 0)
            return BUS_NONE;
        int r = read_some(c, err, errlen);
        if (r < 0)
            return r;
    }
}

static char *dup_str(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(it) || it->valuestring == NULL)
        return NULL;
    char *s = strdup(it->valuestring);
    if (s == NULL)
        abort();
    return s;
}

static int get_num(const cJSON *o, const char *key, double *v)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return -1;
    *v = it->valuedouble;
    return 0;
}

/* Turns a deliver frame into a bus_delivery; NULL when a field is missing or
 * of the wrong type. */
static struct bus_delivery *parse_delivery(const cJSON *f, char *why, size_t whylen)
{
    struct bus_delivery *d = calloc(1, sizeof(*d));
    if (d == NULL)
        abort();
    double tag, count;
    if (get_num(f, "tag", &tag) < 0 || tag < 1 || tag > 9007199254740991.0 ||
        tag != (double)(long long)tag) {
        snprintf(why, whylen, "delivery without a valid tag");
        goto bad;
    }
    d->tag = (uint64_t)tag;
    d->topic = dup_str(f, "topic");
    d->message_id = dup_str(f, "message_id");
    d->type = dup_str(f, "type");
    d->partition_key = dup_str(f, "partition_key");
    d->payload = dup_str(f, "payload");
    if (d->message_id == NULL || d->topic == NULL || d->type == NULL) {
        snprintf(why, whylen, "delivery %llu lacks topic, message_id or type",
                 (unsigned long long)d->tag);
        goto bad;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(f, "headers");
    if (cJSON_IsObject(h)) {
        double v;
        d->traceparent = dup_str(h, "traceparent");
        if (get_num(h, "aggregate_version", &v) == 0) {
            /* Versions travel as JSON numbers, exact only up to 2^53; a
             * fraction, a negative or a larger value is not a version, and
             * casting it would be undefined beyond long long's range. */
            if (v < 0 || v > 9007199254740992.0 || v != floor(v)) {
                snprintf(why, whylen, "delivery %llu has an aggregate_version outside 0..2^53",
                         (unsigned long long)d->tag);
                goto bad;
            }
            d->aggregate_version = (long long)v;
        }
        if (get_num(h, "schema_version", &v) == 0 && v >= -2147483648.0 && v <= 2147483647.0)
            d->schema_version = (int)v;
    }
    d->redelivered = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "redelivered"));
    if (get_num(f, "delivery_count", &count) < 0 || count < 1 || count > 2147483647.0) {
        snprintf(why, whylen, "delivery %llu without a valid delivery_count",
                 (unsigned long long)d->tag);
        goto bad;
    }
    d->delivery_count = (int)count;
    return d;
bad:
    bus_delivery_free(d);
    return NULL;
}

static int enqueue_delivery(struct fake_conn *c, const cJSON *f, char *err, size_t errlen)
{
    char why[160];
    struct bus_delivery *d = parse_delivery(f, why, sizeof(why));
    if (d == NULL)
        return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL), "broker sent a bad delivery: %s", why);
    struct dq *q = malloc(sizeof(*q));
    if (q == NULL)
        abort();
    q->d = d;
    q->next = NULL;
    if (c->qtail != NULL)
        c->qtail->next = q;
    else
        c->qhead = q;
    c->qtail = q;
    return BUS_OK;
}

static const char *op_of(const cJSON *f)
{
    return cJSON_GetObjectItemCaseSensitive(f, "op")->valuestring;
}

/* Reads until a frame with op `want` arrives (returned in *out).  Deliveries
 * are queued; an error frame naming `request` is the answer (BUS_REFUSED),
 * other error frames are warned about and skipped.  A timeout here breaks
 * the connection: the answer may still come and would be misread later. */
static int wait_reply(struct fake_conn *c, const char *want, const char *request, int64_t deadline,
                      cJSON **out, char *err, size_t errlen)
{
    *out = NULL;
    for (;;) {
        cJSON *f;
        int rc = read_frame(c, deadline, &f, err, errlen);
        if (rc == BUS_NONE)
            return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT), "no %s from the broker within %d ms",
                           want, c->timeout_ms);
        if (rc < 0)
            return rc;
        const char *op = op_of(f);
        if (strcmp(op, want) == 0) {
            *out = f;
            return BUS_OK;
        }
        if (strcmp(op, "deliver") == 0) {
            rc = enqueue_delivery(c, f, err, errlen);
            cJSON_Delete(f);
            if (rc < 0)
                return rc;
            continue;
        }
        if (strcmp(op, "error") == 0) {
            const cJSON *req = cJSON_GetObjectItemCaseSensitive(f, "request");
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(f, "error");
            const char *text = cJSON_IsString(msg) ? msg->valuestring : "(no message)";
            if (request != NULL && cJSON_IsString(req) && strcmp(req->valuestring, request) == 0) {
                rc = bus_set_err(err, errlen, BUS_REFUSED, "broker refused %s: %s", request, text);
                cJSON_Delete(f);
                return rc;
            }
            cwlog_warn("broker error skipped: %s", text);
            cJSON_Delete(f);
            continue;
        }
        /* A frame we did not ask for (e.g. a late log line): ignore it. */
        cJSON_Delete(f);
    }
}

static void fake_close(bus_conn *bc);
static const struct bus_ops fake_ops;

/* ---- the interface ---------------------------------------------------- */

bus_conn *bus_fake_connect(const char *addr, const char *client_name, int timeout_ms,
                      char *err, size_t errlen)
{
    struct sockaddr_un sa;
    if (addr == NULL || addr[0] == '\0') {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker socket path given");
        return NULL;
    }
    if (strlen(addr) >= sizeof(sa.sun_path)) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "broker socket path too long (max %zu bytes)",
                sizeof(sa.sun_path) - 1);
        return NULL;
    }
    if (timeout_ms <= 0) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "broker timeout must be positive, got %d",
                timeout_ms);
        return NULL;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, addr, strlen(addr) + 1);

    struct fake_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "out of memory");
        return NULL;
    }
    c->base.ops = &fake_ops;
    c->timeout_ms = timeout_ms;
    c->next_seq = 1;
    c->confirm_seq = 1;
    snprintf(c->name, sizeof(c->name), "%s", client_name ? client_name : "");
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "socket: %s", strerror(errno));
        free(c);
        return NULL;
    }
    int64_t deadline = cw_mono_ms() + timeout_ms;
    for (;;) {
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        /* A full listen backlog says EAGAIN on a Unix socket: wait a little. */
        if ((errno == EAGAIN || errno == EINTR) && left_ms(deadline) > 0) {
            poll(NULL, 0, 10);
            continue;
        }
        bus_set_err(err, errlen, errno == EAGAIN ? BUS_TIMEOUT : BUS_DISCONNECTED,
                "could not connect to broker at %s: %s", addr, strerror(errno));
        fake_close(&c->base);
        return NULL;
    }
    cJSON *hello = cJSON_CreateObject();
    if (hello == NULL)
        abort();
    cJSON_AddStringToObject(hello, "op", "hello");
    if (c->name[0] != '\0')
        cJSON_AddStringToObject(hello, "client", c->name);
    cJSON *reply = NULL;
    if (queue_frame(c, hello, err, errlen) < 0 || flush_out(c, deadline, err, errlen) < 0 ||
        wait_reply(c, "hello_ok", "hello", deadline, &reply, err, errlen) < 0) {
        fake_close(&c->base);
        return NULL;
    }
    cJSON_Delete(reply);
    return &c->base;
}

static void fake_close(bus_conn *bc)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    while (c->qhead != NULL) {
        struct dq *q = c->qhead;
        c->qhead = q->next;
        bus_delivery_free(q->d);
        free(q);
    }
    free(c->in);
    free(c->out);
    free(c);
}

static int fake_fd(bus_conn *bc)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    return c ? c->fd : -1;
}

static int fake_publish_send(bus_conn *bc, const struct bus_message *m, char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    /* Refused, the connection usable: see bus_rabbitmq.c. */
    if (m == NULL || m->topic == NULL || m->topic[0] == '\0' || m->message_id == NULL ||
        m->message_id[0] == '\0' || m->type == NULL || m->type[0] == '\0')
        return bus_set_err(err, errlen, BUS_REFUSED,
                       "message needs a topic, a message_id and a type");
    cJSON *f = cJSON_CreateObject();
    if (f == NULL)
        abort();
    cJSON_AddStringToObject(f, "op", "publish");
    cJSON_AddNumberToObject(f, "seq", (double)c->next_seq);
    cJSON_AddStringToObject(f, "topic", m->topic);
    cJSON_AddStringToObject(f, "message_id", m->message_id);
    cJSON_AddStringToObject(f, "type", m->type);
    if (m->partition_key != NULL)
        cJSON_AddStringToObject(f, "partition_key", m->partition_key);
    if (m->claim_token != NULL)
        cJSON_AddStringToObject(f, "claim_token", m->claim_token);
    if (m->not_after_us > 0)
        cwlog_add_int64(f, "not_after_us", m->not_after_us);
    cJSON *h = cJSON_AddObjectToObject(f, "headers");
    if (m->traceparent != NULL)
        cJSON_AddStringToObject(h, "traceparent", m->traceparent);
    cJSON_AddNumberToObject(h, "aggregate_version", (double)m->aggregate_version);
    cJSON_AddNumberToObject(h, "schema_version", m->schema_version);
    if (m->occurred_at != NULL)
        cJSON_AddStringToObject(h, "occurred_at", m->occurred_at);
    if (m->payload != NULL)
        cJSON_AddStringToObject(f, "payload", m->payload);
    rc = queue_frame(c, f, err, errlen);
    if (rc < 0)
        return rc;
    c->next_seq++;
    c->pending++;
    if (c->outlen >= BUS_SEND_HIGH)
        return flush_out(c, cw_mono_ms() + c->timeout_ms, err, errlen);
    return BUS_OK;
}

static int fake_publish_confirm(bus_conn *bc, char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (c->pending <= 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "no publish is waiting for a confirm");
    int64_t deadline = cw_mono_ms() + c->timeout_ms;
    rc = flush_out(c, deadline, err, errlen);
    if (rc < 0)
        return rc;
    cJSON *f;
    rc = wait_reply(c, "confirm", "publish", deadline, &f, err, errlen);
    if (rc < 0)
        return rc;
    c->pending--;
    double seq;
    if (get_num(f, "seq", &seq) == 0 && (long long)seq != c->confirm_seq) {
        rc = bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                     "broker confirmed publish %lld, expected %lld", (long long)seq,
                     c->confirm_seq);
        cJSON_Delete(f);
        return rc;
    }
    c->confirm_seq++;
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(f, "status");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(f, "error");
    if (cJSON_IsString(status) && strcmp(status->valuestring, "stored") == 0) {
        rc = BUS_OK;
    } else if (cJSON_IsString(status) && strcmp(status->valuestring, "refused") == 0) {
        rc = bus_set_err(err, errlen, BUS_REFUSED, "broker refused publish: %s",
                     cJSON_IsString(msg) ? msg->valuestring : "(no reason given)");
    } else {
        rc = bus_set_err(err, errlen, fail(c, BUS_PROTOCOL), "broker sent a confirm without a status");
    }
    cJSON_Delete(f);
    return rc;
}


static int fake_subscribe(bus_conn *bc, const char *topic, const char *group, int prefetch,
                  char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (topic == NULL || topic[0] == '\0' || group == NULL || group[0] == '\0')
        return bus_set_err(err, errlen, BUS_PROTOCOL, "subscribe needs a topic and a group");
    if (prefetch < 1 || prefetch > 10000)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "prefetch must be in 1..10000, got %d",
                       prefetch);
    cJSON *f = cJSON_CreateObject();
    if (f == NULL)
        abort();
    cJSON_AddStringToObject(f, "op", "subscribe");
    cJSON_AddStringToObject(f, "topic", topic);
    cJSON_AddStringToObject(f, "group", group);
    cJSON_AddNumberToObject(f, "prefetch", prefetch);
    /* Half the timeout, so that a broker gone silent (a half-open link
     * swallows every byte and never resets) is given up on after two silent
     * intervals, within the timeout, and the broker in turn drops a
     * subscriber it has not heard from in two intervals. */
    int hb = c->timeout_ms / 2 < BUS_HEARTBEAT_MIN_MS ? BUS_HEARTBEAT_MIN_MS : c->timeout_ms / 2;
    if (CW_MUTANT(consumer_ignores_silent_broker))
        hb = 0;
    if (hb > 0)
        cJSON_AddNumberToObject(f, "heartbeat_ms", hb);
    int64_t deadline = cw_mono_ms() + c->timeout_ms;
    rc = queue_frame(c, f, err, errlen);
    if (rc < 0)
        return rc;
    rc = flush_out(c, deadline, err, errlen);
    if (rc < 0)
        return rc;
    cJSON *reply;
    rc = wait_reply(c, "subscribed", "subscribe", deadline, &reply, err, errlen);
    cJSON_Delete(reply);
    if (rc == BUS_OK) {
        c->heartbeat_ms = hb;
        c->last_rx_ms = cw_mono_ms();
        c->pinged = 0;
    }
    return rc;
}

/* A subscriber may wait for deliveries for ever, so silence is its only
 * sign of a dead link: a ping goes out when we have sent nothing for an
 * interval, or heard nothing for one, and the connection is given up after
 * two intervals without a byte from the broker (who answers a ping with a
 * pong).  Returns BUS_OK, or BUS_TIMEOUT with the connection broken. */
static int64_t silent_until(const struct fake_conn *c)
{
    return c->last_rx_ms + 2 * (int64_t)c->heartbeat_ms;
}

static int64_t ping_due(const struct fake_conn *c)
{
    int64_t due = c->last_tx_ms + c->heartbeat_ms;
    if (!c->pinged && c->last_rx_ms + c->heartbeat_ms < due)
        due = c->last_rx_ms + c->heartbeat_ms;
    return due;
}

static int heartbeat(struct fake_conn *c, char *err, size_t errlen)
{
    int64_t now = cw_mono_ms();
    if (now >= silent_until(c))
        return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                           "broker silent for %lld ms (heartbeat every %d ms)",
                           (long long)(now - c->last_rx_ms), c->heartbeat_ms);
    if (now < ping_due(c))
        return BUS_OK;
    cJSON *f = cJSON_CreateObject();
    if (f == NULL)
        abort();
    cJSON_AddStringToObject(f, "op", "ping");
    int rc = queue_frame(c, f, err, errlen);
    if (rc == BUS_OK)
        rc = flush_out(c, now + c->timeout_ms, err, errlen);
    if (rc == BUS_OK)
        c->pinged = 1;
    return rc;
}

/* When heartbeat() next has something to do. */
static int64_t heartbeat_due(const struct fake_conn *c)
{
    return ping_due(c) < silent_until(c) ? ping_due(c) : silent_until(c);
}

static int fake_next_delivery(bus_conn *bc, int wait_ms, struct bus_delivery **out,
                      char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    if (out != NULL)
        *out = NULL;
    if (out == NULL)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "bus_next_delivery needs an out pointer");
    /* Deliveries already received are handed out even on a broken
     * connection: acking them will fail, and the broker redelivers. */
    if (c != NULL && c->qhead != NULL) {
        struct dq *q = c->qhead;
        c->qhead = q->next;
        if (c->qhead == NULL)
            c->qtail = NULL;
        *out = q->d;
        free(q);
        return BUS_OK;
    }
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    int64_t deadline = cw_mono_ms() + (wait_ms > 0 ? wait_ms : 0);
    if (c->outlen > 0) {
        rc = flush_out(c, cw_mono_ms() + c->timeout_ms, err, errlen);
        if (rc < 0)
            return rc;
    }
    for (;;) {
        int64_t until = deadline;
        if (c->heartbeat_ms > 0) {
            rc = heartbeat(c, err, errlen);
            if (rc < 0)
                return rc;
            if (heartbeat_due(c) < until)
                until = heartbeat_due(c);
        }
        cJSON *f;
        rc = read_frame(c, until, &f, err, errlen);
        if (rc == BUS_NONE && cw_mono_ms() < deadline)
            continue;
        if (rc == BUS_NONE)
            return bus_set_err(err, errlen, BUS_NONE, "no delivery within %d ms", wait_ms);
        if (rc < 0)
            return rc;
        const char *op = op_of(f);
        if (strcmp(op, "deliver") == 0) {
            char why[160];
            *out = parse_delivery(f, why, sizeof(why));
            cJSON_Delete(f);
            if (*out == NULL)
                return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                               "broker sent a bad delivery: %s", why);
            return BUS_OK;
        }
        if (strcmp(op, "error") == 0) {
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(f, "error");
            cwlog_warn("broker error skipped: %s",
                       cJSON_IsString(msg) ? msg->valuestring : "(no message)");
        } else if (strcmp(op, "confirm") == 0 && c->pending > 0) {
            /* A subscriber that also publishes must read its confirms with
             * bus_publish_confirm; a confirm here is out of turn. */
            cJSON_Delete(f);
            return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                           "confirm arrived while waiting for a delivery");
        }
        cJSON_Delete(f);
    }
}


static int send_tag_frame(struct fake_conn *c, const char *op, uint64_t tag, int nack, int requeue,
                          int delay_ms, char *err, size_t errlen)
{
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (tag == 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "%s: delivery tag 0 is never valid", op);
    if (nack && (delay_ms < 0 || delay_ms > 3600000))
        return bus_set_err(err, errlen, BUS_PROTOCOL, "nack delay must be in 0..3600000 ms, got %d",
                       delay_ms);
    cJSON *f = cJSON_CreateObject();
    if (f == NULL)
        abort();
    cJSON_AddStringToObject(f, "op", op);
    cJSON_AddNumberToObject(f, "tag", (double)tag);
    if (nack) {
        cJSON_AddBoolToObject(f, "requeue", requeue ? 1 : 0);
        cJSON_AddNumberToObject(f, "delay_ms", delay_ms);
    }
    rc = queue_frame(c, f, err, errlen);
    if (rc < 0)
        return rc;
    /* Sent before returning: "ACK sent" must mean it left this process. */
    return flush_out(c, cw_mono_ms() + c->timeout_ms, err, errlen);
}

static int fake_ack(bus_conn *bc, uint64_t tag, char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    return send_tag_frame(c, "ack", tag, 0, 0, 0, err, errlen);
}

static int fake_nack(bus_conn *bc, uint64_t tag, int requeue, int delay_ms, char *err, size_t errlen)
{
    struct fake_conn *c = (struct fake_conn *)bc;
    return send_tag_frame(c, "nack", tag, 1, requeue, delay_ms, err, errlen);
}

static int fake_unconfirmed(bus_conn *bc)
{
    /* A broken connection answers every call with BUS_DISCONNECTED first. */
    struct fake_conn *c = (struct fake_conn *)bc;
    return c->broken ? 0 : c->pending;
}

static const struct bus_ops fake_ops = {
    .unconfirmed = fake_unconfirmed,
    .close = fake_close,
    .fd = fake_fd,
    .publish_send = fake_publish_send,
    .publish_confirm = fake_publish_confirm,
    .subscribe = fake_subscribe,
    .next_delivery = fake_next_delivery,
    .ack = fake_ack,
    .nack = fake_nack,
};
