/* bus_rabbitmq.c -- the publisher/subscriber interface of bus.h over AMQP
 * 0-9-1 to RabbitMQ, with librabbitmq 0.11 as Debian 12 ships it.
 *
 * Topology (declared by bus_subscribe and bus_declare_group, or expected to
 * exist with declare=passive), for exchange X (URL parameter, default
 * "crashwindow"), topic T and consumer group G:
 *   X           durable topic exchange; a message goes out with routing key
 *               "T.<event type>"
 *   X.T.G       durable quorum queue, bound to X with "T.#": one per group,
 *               so every group receives every message, and within a group
 *               one consumer has a message at a time
 *   X.T.G.retry durable classic queue without consumers whose messages
 *               dead-letter back into X.T.G when their per-message TTL ends
 *               (x-dead-letter-exchange "" routes by queue name)
 *
 * Publishing: the channel is in confirm mode; every publish is persistent
 * (delivery_mode 2) and mandatory, carries message_id = the outbox id,
 * type = the event type, app_id = the client's name and the headers
 * topic, partition_key, aggregate_version, schema_version, traceparent,
 * occurred_at and the claim's claim_token and not_after_us (RabbitMQ cannot
 * refuse a publish that arrives after not_after_us, as the fake broker
 * does; the header lets the broker log carry the token).  librabbitmq 0.11 has no confirm-wait call, so confirms are
 * read from the frame loop: basic.ack and basic.nack (with "multiple"
 * settling every earlier tag) and basic.return, which RabbitMQ sends
 * before the ack of an unroutable mandatory message; the return is matched
 * to its publish by message_id.  bus_publish_confirm hands the outcomes out
 * in publish order: acked (BUS_OK), nacked or returned (BUS_REFUSED).  A
 * publish is never reported stored without its ack.
 *
 * Consuming: manual acks, basic.qos prefetch; redelivered comes from
 * basic.deliver, delivery_count from the quorum queue's x-delivery-count
 * (deliveries before this one) on top of our own cw-delivery-count header,
 * which a delayed requeue carries because the copy it makes is a new
 * message to RabbitMQ.  A nack with requeue and a delay republishes the
 * delivery to X.T.G.retry with expiration = the delay (confirmed), then
 * acks the original: the broker holds it for the delay and then puts it
 * back at the tail of X.T.G.  RabbitMQ expires messages only from a
 * queue's head, so a short delay queued behind a long one waits for the
 * long one; the consumers use one delay per reason, which keeps that
 * honest.  A nack with delay 0 is basic.nack requeue=true; without requeue
 * the message is dropped for the group.  A delivery that lacks a
 * message_id or a type, or carries a version that is not an integer, did
 * not come from a relay: it is rejected (dropped) with a warning instead of
 * breaking the connection on every redelivery.
 *
 * Writes: librabbitmq sends every publish as three writes (method, content
 * header, body), the last one pushed at once (TCP_NODELAY), so a pipelined
 * batch reached the broker as one small segment per message, each waking
 * its reader; on a machine where the broker shares the cores that cost
 * RabbitMQ about a seventh more CPU per message.  The socket is corked
 * (TCP_CORK) from the first publish_send until the connection next waits
 * for the peer (wait_frame, an RPC, close): the kernel then sends full
 * segments as they fill and the rest at the uncork, before any wait that
 * could depend on it.  A forgotten uncork would cost latency, never a
 * message: Linux sends corked data after 200 ms anyway.
 *
 * Deadlines: connect (amqp_socket_open_noblock), the login handshake and
 * every RPC (amqp_set_rpc_timeout) and every frame wait
 * (amqp_simple_wait_frame_noblock) are bounded by the connection's
 * timeout.  The other writes are not, by the library: it keeps its socket
 * non-blocking and waits for room in poll() with no deadline
 * (amqp_basic_publish, amqp_basic_ack and the rest send with
 * amqp_time_infinite), so SO_SNDTIMEO bounds nothing and a peer that stops
 * reading -- a partition, a broker blocking publishers under a memory
 * alarm -- would hold a publish, and the relay with it, until it reads
 * again: long after the lease that covered the publish.  A watchdog thread
 * bounds them (see "Watchdog" below): a write that has not returned by its
 * deadline finds its socket shut down, the library's wait ends with an
 * error and the connection is broken.  A broken connection is closed with
 * a reset (SO_LINGER 0), so that no byte still queued in the kernel -- a
 * publish the broker has not received -- reaches it after the caller gave
 * it up (a plain close would leave the kernel sending them for minutes,
 * into whatever lease comes next).  Heartbeats are on for subscribers
 * only (bus_connect_subscriber; heartbeat=S in the URL for any
 * connection): a relay that waits on its database for a while must not
 * lose its broker connection for it, and its every call has a deadline
 * anyway, while a subscriber waiting for deliveries would never learn that
 * its link went silent.  A
 * closed channel or connection, a timeout or a frame we cannot read makes
 * the connection unusable; the caller reconnects and the broker redelivers
 * what was not acknowledged. */
#include "bus_internal.h"
#include "cwlog.h"
#include "mutant.h"

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#define RMQ_CHANNEL 1
#define RMQ_MAX_BODY (8 * 1024 * 1024)
#define RMQ_FRAME_MAX 131072
#define RMQ_ID_MAX 128

enum { P_WAIT = 0, P_ACKED, P_NACKED };

/* A publish sent and not yet handed out by bus_publish_confirm. */
struct pend {
    uint64_t seq;
    char id[RMQ_ID_MAX];
    int state;
    int returned;        /* basic.return came for it: refused even when acked */
    char why[160];
};

/* A delivery handed out and not acked or nacked yet: its content is kept
 * for a delayed requeue, which republishes it. */
struct held {
    uint64_t tag;
    struct bus_delivery *copy;
    char *occurred_at;
    struct held *next;
};

struct dq {
    struct bus_delivery *d;
    struct dq *next;
};

/* A write's deadline, watched by the watchdog thread (below). */
struct wd_slot {
    _Atomic int64_t deadline;  /* mono ms; 0 disarmed; WD_FIRED: the watchdog cut the write */
    int fd;                    /* the socket, set before the slot is registered */
    struct wd_slot *next;      /* the registry, under wd_lock */
};

struct rmq_conn {
    struct bus_conn base;
    amqp_connection_state_t conn;
    struct wd_slot wd;
    int wd_registered;
    int timeout_ms;
    int subscriber;            /* heartbeats on (bus_connect_subscriber) */
    int broken;
    int corked;                /* TCP_CORK is on: publishes wait in the kernel */
    struct bus_rmq_url url;
    char name[64];
    char queue[256];           /* the group's queue after bus_subscribe */
    uint64_t next_seq;         /* confirm sequence number of the next publish */
    struct pend *pend;         /* publishes awaiting bus_publish_confirm, in order */
    size_t phead, pn, pcap;
    struct held *held;
    struct dq *qhead, *qtail;
};

static const struct bus_ops rmq_ops;

static int fail(struct rmq_conn *c, int status)
{
    c->broken = 1;
    return status;
}

static int check_usable(struct rmq_conn *c, char *err, size_t errlen)
{
    if (c->broken)
        return bus_set_err(err, errlen, BUS_DISCONNECTED,
                       "broker connection unusable after an earlier error; reconnect");
    return BUS_OK;
}

/* Corks or uncorks the socket (see "Writes" above).  A failure only costs
 * segments, so it is ignored. */
static void cork(struct rmq_conn *c, int on)
{
#ifdef TCP_CORK
    if (c->corked == on || c->conn == NULL)
        return;
    int v = on;
    setsockopt(amqp_get_sockfd(c->conn), IPPROTO_TCP, TCP_CORK, &v, sizeof(v));
    c->corked = on;
#else
    (void)c;
    (void)on;
#endif
}

/* ---- Watchdog ------------------------------------------------------------------
 *
 * One thread per process, started with the first connection, wakes every
 * WD_TICK_MS and shuts down the socket of every write whose deadline has
 * passed.  Arming and disarming are one atomic store and one exchange, no
 * system call, so a publish costs nothing more; a write is cut at most a
 * tick after its deadline.  The thread walks the registry under wd_lock, and
 * a connection leaves the registry (under wd_lock) before its socket is
 * closed, so the thread never shuts down a descriptor that was reused.  The
 * thread and the write race on the slot's deadline by compare-and-swap:
 * either the write returned first (disarm sees its own deadline) or the
 * watchdog fired first (disarm sees WD_FIRED), never both. */

#define WD_TICK_MS 20
#define WD_FIRED INT64_MIN

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wd_slot *wd_slots;
static int wd_started;

static void *wd_thread(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec tick = { 0, WD_TICK_MS * 1000000L };
        nanosleep(&tick, NULL);
        int64_t now = cw_mono_ms();
        pthread_mutex_lock(&wd_lock);
        for (struct wd_slot *s = wd_slots; s != NULL; s = s->next) {
            int64_t d = atomic_load(&s->deadline);
            if (d > 0 && now >= d && atomic_compare_exchange_strong(&s->deadline, &d, WD_FIRED))
                shutdown(s->fd, SHUT_RDWR);
        }
        pthread_mutex_unlock(&wd_lock);
    }
    return NULL;
}

/* Puts c's socket under watch; a failure to start the thread leaves the
 * writes as the library has them (unbounded), with a warning. */
static void wd_register(struct rmq_conn *c)
{
    sigset_t all, old;
    c->wd.fd = amqp_get_sockfd(c->conn);
    atomic_store(&c->wd.deadline, 0);
    pthread_mutex_lock(&wd_lock);
    if (!wd_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* The thread takes no signal: the process's own handling of
         * SIGTERM and the rest stays where it was. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        wd_started = pthread_create(&t, &attr, wd_thread, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (!wd_started)
            cwlog_warn("broker writes unbounded: the watchdog thread did not start");
    }
    c->wd.next = wd_slots;
    wd_slots = &c->wd;
    c->wd_registered = 1;
    pthread_mutex_unlock(&wd_lock);
}

static void wd_unregister(struct rmq_conn *c)
{
    if (!c->wd_registered)
        return;
    pthread_mutex_lock(&wd_lock);
    for (struct wd_slot **pp = &wd_slots; *pp != NULL; pp = &(*pp)->next)
        if (*pp == &c->wd) {
            *pp = c->wd.next;
            break;
        }
    c->wd_registered = 0;
    pthread_mutex_unlock(&wd_lock);
}

static void wd_arm(struct rmq_conn *c)
{
    atomic_store(&c->wd.deadline, cw_mono_ms() + c->timeout_ms);
}

/* Ends the watch of one write: 1 when the watchdog cut it. */
static int wd_disarm(struct rmq_conn *c)
{
    return atomic_exchange(&c->wd.deadline, 0) == WD_FIRED;
}

/* The status of a write the watchdog watched (st: the library's). */
static int wd_sent(struct rmq_conn *c, int st, const char *op, char *err, size_t errlen)
{
    if (wd_disarm(c))
        return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                           "could not send %s: the broker took no bytes for %d ms (a stalled or "
                           "partitioned peer)", op, c->timeout_ms);
    if (st != AMQP_STATUS_OK)
        return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "could not send %s: %s", op,
                           amqp_error_string2(st));
    return BUS_OK;
}

static struct timeval ms_tv(int64_t ms)
{
    if (ms < 0)
        ms = 0;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
    return tv;
}

static int left_ms(int64_t deadline)
{
    int64_t l = deadline - cw_mono_ms();
    if (l < 0)
        return 0;
    return l > 1000000 ? 1000000 : (int)l;
}

static char *xstrndup(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s == NULL)
        abort();
    if (n > 0)
        memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static char *xstrdup_opt(const char *s)
{
    return s != NULL ? xstrndup(s, strlen(s)) : NULL;
}

/* ---- the URL ------------------------------------------------------------- */

/* Names RabbitMQ would take and a log line can carry as they are. */
static int name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

static int copy_field(char *dst, size_t cap, const char *src)
{
    if (src == NULL)
        src = "";
    if (strlen(src) >= cap)
        return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* Parses the query part ("exchange=NAME&declare=passive"); q is modified. */
static int parse_query(char *q, struct bus_rmq_url *u, char *err, size_t errlen)
{
    char *save = NULL;
    for (char *kv = strtok_r(q, "&", &save); kv != NULL; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            return bus_set_err(err, errlen, BUS_PROTOCOL,
                           "broker URL parameter '%.40s' has no value", kv);
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(kv, "exchange") == 0) {
            if (!name_ok(v, 100) || strncmp(v, "amq.", 4) == 0)
                return bus_set_err(err, errlen, BUS_PROTOCOL,
                               "broker URL exchange must be 1..100 of A-Z a-z 0-9 _ - . and "
                               "not start with amq.");
            snprintf(u->exchange, sizeof(u->exchange), "%s", v);
        } else if (strcmp(kv, "declare") == 0) {
            if (strcmp(v, "passive") == 0)
                u->passive = 1;
            else if (strcmp(v, "yes") == 0)
                u->passive = 0;
            else
                return bus_set_err(err, errlen, BUS_PROTOCOL,
                               "broker URL declare must be yes or passive");
        } else if (strcmp(kv, "heartbeat") == 0) {
            char *end = NULL;
            long s = strtol(v, &end, 10);
            if (v[0] < '0' || v[0] > '9' || *end != '\0' || s > 3600)
                return bus_set_err(err, errlen, BUS_PROTOCOL,
                               "broker URL heartbeat must be whole seconds in 0..3600");
            u->heartbeat_s = (int)s;
        } else {
            return bus_set_err(err, errlen, BUS_PROTOCOL,
                           "unknown broker URL parameter '%.40s' (known: exchange, declare, "
                           "heartbeat)", kv);
        }
    }
    return BUS_OK;
}

int bus_rmq_parse_url(const char *url, struct bus_rmq_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    u->heartbeat_s = -1;
    snprintf(u->exchange, sizeof(u->exchange), "%s", BUS_RMQ_DEFAULT_EXCHANGE);
    if (url == NULL || strncmp(url, "amqp://", 7) != 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker URL must start with amqp://");
    if (url[7] == '\0' || url[7] == '/' || url[7] == '?')
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker URL names no host");
    if (strlen(url) > 1024)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker URL longer than 1024 bytes");
    char buf[1025];
    snprintf(buf, sizeof(buf), "%s", url);
    /* The query starts after the userinfo: a '?' in a password that was
     * not percent-encoded must not be taken for it, or an error naming an
     * unknown parameter would quote the password. */
    char *at = strrchr(buf + 7, '@');
    char *q = strchr(at != NULL ? at + 1 : buf + 7, '?');
    if (q != NULL) {
        *q++ = '\0';
        int rc = parse_query(q, u, err, errlen);
        if (rc < 0)
            return rc;
    }
    struct amqp_connection_info ci;
    amqp_default_connection_info(&ci);
    /* amqp_parse_url decodes %xx and leaves pointers into buf. */
    if (amqp_parse_url(buf, &ci) != AMQP_STATUS_OK || ci.host == NULL || ci.host[0] == '\0')
        return bus_set_err(err, errlen, BUS_PROTOCOL,
                       "malformed broker URL (expected amqp://USER:PASSWORD@HOST:PORT/VHOST)");
    if (ci.port < 1 || ci.port > 65535)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker URL port must be in 1..65535");
    if (copy_field(u->host, sizeof(u->host), ci.host) < 0 ||
        copy_field(u->user, sizeof(u->user), ci.user) < 0 ||
        copy_field(u->password, sizeof(u->password), ci.password) < 0 ||
        copy_field(u->vhost, sizeof(u->vhost), ci.vhost) < 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker URL has a part that is too long");
    u->port = ci.port;
    return BUS_OK;
}

/* ---- errors from the broker ------------------------------------------------ */

/* The reason of an RPC that did not get its reply: a closed channel or
 * connection (answered with close-ok, as the protocol wants), or a library
 * error.  The connection is unusable afterwards.  what names the request. */
static int rpc_fail(struct rmq_conn *c, amqp_rpc_reply_t r, const char *what, char *err,
                    size_t errlen)
{
    c->broken = 1;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
        int st = r.library_error;
        return bus_set_err(err, errlen, st == AMQP_STATUS_TIMEOUT ? BUS_TIMEOUT : BUS_DISCONNECTED,
                       "%s: %s", what, amqp_error_string2(st));
    }
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION) {
        if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            const amqp_channel_close_t *m = r.reply.decoded;
            amqp_channel_close_ok_t ok = { 0 };
            amqp_send_method(c->conn, RMQ_CHANNEL, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
            return bus_set_err(err, errlen, BUS_REFUSED, "%s: broker closed the channel: %u %.*s",
                           what, m->reply_code, (int)m->reply_text.len,
                           (const char *)m->reply_text.bytes);
        }
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            const amqp_connection_close_t *m = r.reply.decoded;
            amqp_connection_close_ok_t ok = { 0 };
            amqp_send_method(c->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
            return bus_set_err(err, errlen, BUS_REFUSED, "%s: broker closed the connection: %u %.*s",
                           what, m->reply_code, (int)m->reply_text.len,
                           (const char *)m->reply_text.bytes);
        }
        return bus_set_err(err, errlen, BUS_PROTOCOL, "%s: unexpected broker method 0x%08x", what,
                       (unsigned)r.reply.id);
    }
    return bus_set_err(err, errlen, BUS_PROTOCOL, "%s: no reply from the broker", what);
}

static int rpc_check(struct rmq_conn *c, const char *what, char *err, size_t errlen)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c->conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return BUS_OK;
    return rpc_fail(c, r, what, err, errlen);
}

/* ---- connect ----------------------------------------------------------------- */

static void rmq_close(bus_conn *bc);

static int open_socket(struct rmq_conn *c, char *err, size_t errlen)
{
    c->conn = amqp_new_connection();
    if (c->conn == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "out of memory");
    amqp_socket_t *sock = amqp_tcp_socket_new(c->conn);
    if (sock == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "out of memory");
    struct timeval tv = ms_tv(c->timeout_ms);
    int st = amqp_socket_open_noblock(sock, c->url.host, c->url.port, &tv);
    if (st != AMQP_STATUS_OK)
        return bus_set_err(err, errlen, st == AMQP_STATUS_TIMEOUT ? BUS_TIMEOUT : BUS_DISCONNECTED,
                       "could not connect to broker at %s:%d: %s", c->url.host, c->url.port,
                       amqp_error_string2(st));
    wd_register(c);
    amqp_set_handshake_timeout(c->conn, &tv);
    amqp_set_rpc_timeout(c->conn, &tv);
    return BUS_OK;
}

static int login(struct rmq_conn *c, char *err, size_t errlen)
{
    amqp_table_entry_t prop = { amqp_cstring_bytes("connection_name"),
                                { AMQP_FIELD_KIND_UTF8, { .bytes = amqp_cstring_bytes(c->name) } } };
    amqp_table_t props = { c->name[0] ? 1 : 0, &prop };
    /* librabbitmq sends and checks heartbeats inside its frame waits
     * (amqp_simple_wait_frame_noblock), where a subscriber spends its idle
     * time, and gives up after two silent intervals; RabbitMQ takes the
     * smaller of its own and ours. */
    int subscriber = c->subscriber && !CW_MUTANT(consumer_ignores_silent_broker);
    int heartbeat = c->url.heartbeat_s >= 0 ? c->url.heartbeat_s
                    : subscriber ? (c->timeout_ms / 2 + 999) / 1000 : 0;
    amqp_rpc_reply_t r = amqp_login_with_properties(c->conn, c->url.vhost, 0, RMQ_FRAME_MAX,
                                                    heartbeat, &props, AMQP_SASL_METHOD_PLAIN,
                                                    c->url.user, c->url.password);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return BUS_OK;
    /* A login that timed out was not refused: a slow link is not a wrong
     * password, and the operator reading the error must not be sent to check
     * the credentials. */
    int timed_out = r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                    r.library_error == AMQP_STATUS_TIMEOUT;
    char what[768];
    snprintf(what, sizeof(what), "broker at %s:%d %s the login of user %s on vhost %s",
             c->url.host, c->url.port, timed_out ? "did not answer" : "refused", c->url.user,
             c->url.vhost);
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        r.library_error == AMQP_STATUS_CONNECTION_CLOSED)
        return bus_set_err(err, errlen, fail(c, BUS_REFUSED), "%s (connection closed)", what);
    int rc = rpc_fail(c, r, what, err, errlen);
    return rc == BUS_PROTOCOL ? BUS_REFUSED : rc;
}

/* Opens the channel, turns confirms on and declares (or checks) the
 * exchange. */
static int open_channel(struct rmq_conn *c, char *err, size_t errlen)
{
    amqp_channel_open(c->conn, RMQ_CHANNEL);
    int rc = rpc_check(c, "channel.open", err, errlen);
    if (rc < 0)
        return rc;
    amqp_confirm_select(c->conn, RMQ_CHANNEL);
    rc = rpc_check(c, "confirm.select", err, errlen);
    if (rc < 0)
        return rc;
    char what[200];
    snprintf(what, sizeof(what), "%s exchange %s", c->url.passive ? "checking" : "declaring",
             c->url.exchange);
    amqp_exchange_declare(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(c->url.exchange),
                          amqp_cstring_bytes("topic"), c->url.passive, 1, 0, 0, amqp_empty_table);
    return rpc_check(c, what, err, errlen);
}

bus_conn *bus_rabbitmq_connect(const char *url, const char *client_name, int timeout_ms,
                               int subscriber, char *err, size_t errlen)
{
    if (timeout_ms <= 0) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "broker timeout must be positive, got %d",
                timeout_ms);
        return NULL;
    }
    struct rmq_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        bus_set_err(err, errlen, BUS_DISCONNECTED, "out of memory");
        return NULL;
    }
    c->base.ops = &rmq_ops;
    c->timeout_ms = timeout_ms;
    c->subscriber = subscriber;
    c->next_seq = 1;
    snprintf(c->name, sizeof(c->name), "%s", client_name ? client_name : "");
    if (bus_rmq_parse_url(url, &c->url, err, errlen) < 0 || open_socket(c, err, errlen) < 0 ||
        login(c, err, errlen) < 0 || open_channel(c, err, errlen) < 0) {
        rmq_close(&c->base);
        return NULL;
    }
    return &c->base;
}

static void held_free(struct held *h)
{
    bus_delivery_free(h->copy);
    free(h->occurred_at);
    free(h);
}

static void rmq_close(bus_conn *bc)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    if (c->conn != NULL) {
        cork(c, 0);
        if (!c->broken) {
            /* A polite close, bounded by the rpc timeout; a broken
             * connection is just dropped. */
            amqp_channel_close(c->conn, RMQ_CHANNEL, AMQP_REPLY_SUCCESS);
            amqp_connection_close(c->conn, AMQP_REPLY_SUCCESS);
        }
        wd_unregister(c);
        if (c->broken) {
            /* A reset: what the kernel still holds for the broker is
             * dropped, not delivered after we gave it up. */
            struct linger lg = { 1, 0 };
            setsockopt(amqp_get_sockfd(c->conn), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        amqp_destroy_connection(c->conn);
    }
    while (c->qhead != NULL) {
        struct dq *q = c->qhead;
        c->qhead = q->next;
        bus_delivery_free(q->d);
        free(q);
    }
    while (c->held != NULL) {
        struct held *h = c->held;
        c->held = h->next;
        held_free(h);
    }
    free(c->pend);
    memset(&c->url, 0, sizeof(c->url));  /* the password */
    free(c);
}

static int rmq_fd(bus_conn *bc)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    return c->conn != NULL ? amqp_get_sockfd(c->conn) : -1;
}

/* ---- reading frames ------------------------------------------------------------ */

static int wait_frame(struct rmq_conn *c, int64_t deadline, amqp_frame_t *f, char *err,
                      size_t errlen)
{
    cork(c, 0); /* what we wait for may answer what is still corked */
    struct timeval tv = ms_tv(left_ms(deadline));
    int st = amqp_simple_wait_frame_noblock(c->conn, f, &tv);
    if (st == AMQP_STATUS_TIMEOUT)
        return BUS_NONE;
    if (st != AMQP_STATUS_OK)
        return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED), "broker connection: %s",
                       amqp_error_string2(st));
    return BUS_OK;
}

/* What we keep of a content header and body (copied out of the library's
 * buffers, which the next read may reuse). */
struct content {
    char *message_id, *type, *app_id, *topic, *partition_key, *traceparent, *occurred_at;
    long long aggregate_version;
    int has_version, bad_version;
    int schema_version;
    long long x_delivery_count, cw_delivery_count;
    char *body;
    size_t body_len;
};

static void content_free(struct content *m)
{
    free(m->message_id);
    free(m->type);
    free(m->app_id);
    free(m->topic);
    free(m->partition_key);
    free(m->traceparent);
    free(m->occurred_at);
    free(m->body);
    memset(m, 0, sizeof(*m));
}

static const amqp_field_value_t *table_get(const amqp_table_t *t, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < t->num_entries; i++)
        if (t->entries[i].key.len == kl && memcmp(t->entries[i].key.bytes, key, kl) == 0)
            return &t->entries[i].value;
    return NULL;
}

/* An integer header: 1 and *out set, 0 when absent, -1 when not an integer. */
static int field_int(const amqp_field_value_t *v, long long *out)
{
    if (v == NULL)
        return 0;
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8: *out = v->value.i8; return 1;
    case AMQP_FIELD_KIND_U8: *out = v->value.u8; return 1;
    case AMQP_FIELD_KIND_I16: *out = v->value.i16; return 1;
    case AMQP_FIELD_KIND_U16: *out = v->value.u16; return 1;
    case AMQP_FIELD_KIND_I32: *out = v->value.i32; return 1;
    case AMQP_FIELD_KIND_U32: *out = v->value.u32; return 1;
    case AMQP_FIELD_KIND_I64: *out = v->value.i64; return 1;
    case AMQP_FIELD_KIND_U64:
        if (v->value.u64 > (uint64_t)INT64_MAX)
            return -1;
        *out = (long long)v->value.u64;
        return 1;
    default: return -1;
    }
}

static char *field_str(const amqp_field_value_t *v)
{
    if (v == NULL || (v->kind != AMQP_FIELD_KIND_UTF8 && v->kind != AMQP_FIELD_KIND_BYTES))
        return NULL;
    return xstrndup(v->value.bytes.bytes, v->value.bytes.len);
}

static char *bytes_str(amqp_flags_t flags, amqp_flags_t flag, amqp_bytes_t b)
{
    return (flags & flag) ? xstrndup(b.bytes, b.len) : NULL;
}

static void take_properties(const amqp_basic_properties_t *p, struct content *m)
{
    m->message_id = bytes_str(p->_flags, AMQP_BASIC_MESSAGE_ID_FLAG, p->message_id);
    m->type = bytes_str(p->_flags, AMQP_BASIC_TYPE_FLAG, p->type);
    m->app_id = bytes_str(p->_flags, AMQP_BASIC_APP_ID_FLAG, p->app_id);
    if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
        return;
    const amqp_table_t *h = &p->headers;
    m->topic = field_str(table_get(h, "topic"));
    m->partition_key = field_str(table_get(h, "partition_key"));
    m->traceparent = field_str(table_get(h, "traceparent"));
    m->occurred_at = field_str(table_get(h, "occurred_at"));
    long long v = 0;
    int k = field_int(table_get(h, "aggregate_version"), &v);
    /* Versions are exact integers in 0..2^53, as with the fake broker. */
    if (k < 0 || (k > 0 && (v < 0 || v > 9007199254740992LL)))
        m->bad_version = 1;
    else if (k > 0) {
        m->has_version = 1;
        m->aggregate_version = v;
    }
    if (field_int(table_get(h, "schema_version"), &v) > 0 && v >= INT32_MIN && v <= INT32_MAX)
        m->schema_version = (int)v;
    if (field_int(table_get(h, "x-delivery-count"), &v) > 0 && v >= 0 && v < INT32_MAX)
        m->x_delivery_count = v;
    if (field_int(table_get(h, "cw-delivery-count"), &v) > 0 && v >= 1 && v < INT32_MAX)
        m->cw_delivery_count = v;
}

/* Reads the content header and body frames that follow a deliver or
 * return method on the channel. */
static int read_content(struct rmq_conn *c, int64_t deadline, struct content *m, char *err,
                        size_t errlen)
{
    amqp_frame_t f;
    int rc = wait_frame(c, deadline, &f, err, errlen);
    if (rc == BUS_NONE)
        return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                       "broker sent a message without its content within %d ms", c->timeout_ms);
    if (rc < 0)
        return rc;
    if (f.frame_type != AMQP_FRAME_HEADER)
        return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                       "broker sent frame type %d where a content header belongs", f.frame_type);
    uint64_t size = f.payload.properties.body_size;
    if (size > RMQ_MAX_BODY)
        return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                       "broker sent a message of %llu bytes (limit %d)", (unsigned long long)size,
                       RMQ_MAX_BODY);
    take_properties(f.payload.properties.decoded, m);
    m->body = malloc((size_t)size + 1);
    if (m->body == NULL)
        abort();
    size_t got = 0;
    while (got < size) {
        rc = wait_frame(c, deadline, &f, err, errlen);
        if (rc == BUS_NONE)
            return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                           "broker sent a partial message body within %d ms", c->timeout_ms);
        if (rc < 0)
            return rc;
        if (f.frame_type != AMQP_FRAME_BODY || f.payload.body_fragment.len > size - got)
            return bus_set_err(err, errlen, fail(c, BUS_PROTOCOL),
                           "broker sent a malformed message body");
        memcpy(m->body + got, f.payload.body_fragment.bytes, f.payload.body_fragment.len);
        got += f.payload.body_fragment.len;
    }
    m->body[got] = '\0';
    m->body_len = got;
    return BUS_OK;
}

/* ---- confirms -------------------------------------------------------------------- */

static void settle(struct rmq_conn *c, uint64_t tag, int multiple, int state, const char *why)
{
    int found = 0;
    for (size_t i = c->phead; i < c->phead + c->pn; i++) {
        struct pend *p = &c->pend[i];
        if (p->state != P_WAIT || p->seq > tag || (!multiple && p->seq != tag))
            continue;
        p->state = state;
        if (state == P_NACKED && !p->returned)
            snprintf(p->why, sizeof(p->why), "%s", why);
        found = 1;
    }
    if (!found)
        cwlog_warn("broker settled publish %llu, which is not waiting", (unsigned long long)tag);
}

static void mark_returned(struct rmq_conn *c, const char *message_id, const amqp_basic_return_t *r)
{
    for (size_t i = c->phead; i < c->phead + c->pn; i++) {
        struct pend *p = &c->pend[i];
        if (p->state != P_WAIT || p->returned || message_id == NULL ||
            strcmp(p->id, message_id) != 0)
            continue;
        p->returned = 1;
        snprintf(p->why, sizeof(p->why), "broker returned the message as unroutable: %u %.*s",
                 r->reply_code, (int)r->reply_text.len, (const char *)r->reply_text.bytes);
        return;
    }
    cwlog_warn("broker returned message %s, which is not waiting",
               message_id ? message_id : "(no id)");
}

/* ---- deliveries ------------------------------------------------------------------- */

static void reject(struct rmq_conn *c, uint64_t tag, const char *why)
{
    cwlog_warn("rejected delivery %llu: %s", (unsigned long long)tag, why);
    wd_arm(c);
    int st = amqp_basic_reject(c->conn, RMQ_CHANNEL, tag, 0);
    char err[256];
    if (wd_sent(c, st, "reject", err, sizeof(err)) < 0)
        cwlog_warn("%s", err); /* the connection is broken now: the caller reconnects */
}

static struct bus_delivery *dup_delivery(const struct bus_delivery *d)
{
    struct bus_delivery *x = calloc(1, sizeof(*x));
    if (x == NULL)
        abort();
    *x = *d;
    x->topic = xstrdup_opt(d->topic);
    x->message_id = xstrdup_opt(d->message_id);
    x->type = xstrdup_opt(d->type);
    x->partition_key = xstrdup_opt(d->partition_key);
    x->traceparent = xstrdup_opt(d->traceparent);
    x->payload = xstrdup_opt(d->payload);
    return x;
}

/* Turns a basic.deliver and its content into a queued delivery (and a held
 * copy), or rejects it when it did not come from a relay. */
static int take_delivery(struct rmq_conn *c, const amqp_basic_deliver_t *dm, int64_t deadline,
                         char *err, size_t errlen)
{
    uint64_t tag = dm->delivery_tag;
    int redelivered = dm->redelivered;
    char *rk = xstrndup(dm->routing_key.bytes, dm->routing_key.len);
    struct content m = { 0 };
    int rc = read_content(c, deadline, &m, err, errlen);
    if (rc < 0)
        goto out;
    if (m.message_id == NULL || m.message_id[0] == '\0' || m.type == NULL || m.type[0] == '\0') {
        reject(c, tag, "no message_id or type");
        goto out;
    }
    if (m.bad_version || memchr(m.body, '\0', m.body_len) != NULL) {
        reject(c, tag, "aggregate_version outside 0..2^53, or a NUL in the body");
        goto out;
    }
    struct bus_delivery *d = calloc(1, sizeof(*d));
    if (d == NULL)
        abort();
    d->tag = tag;
    if (m.topic == NULL) {
        char *dot = strchr(rk, '.');
        m.topic = xstrndup(rk, dot ? (size_t)(dot - rk) : strlen(rk));
    }
    d->topic = m.topic;
    d->message_id = m.message_id;
    d->type = m.type;
    d->partition_key = m.partition_key;
    d->traceparent = m.traceparent;
    d->payload = m.body;
    d->aggregate_version = m.aggregate_version;
    d->schema_version = m.schema_version;
    long long base = m.cw_delivery_count > 0 ? m.cw_delivery_count : 1;
    d->delivery_count = (int)(base + m.x_delivery_count);
    d->redelivered = redelivered || d->delivery_count > 1;
    m.topic = m.message_id = m.type = m.partition_key = m.traceparent = m.body = NULL;

    struct held *h = calloc(1, sizeof(*h));
    struct dq *q = malloc(sizeof(*q));
    if (h == NULL || q == NULL)
        abort();
    h->tag = tag;
    h->copy = dup_delivery(d);
    h->occurred_at = m.occurred_at;
    m.occurred_at = NULL;
    h->next = c->held;
    c->held = h;
    q->d = d;
    q->next = NULL;
    if (c->qtail != NULL)
        c->qtail->next = q;
    else
        c->qhead = q;
    c->qtail = q;
out:
    content_free(&m);
    free(rk);
    return rc;
}

/* Reads one frame (waiting up to the deadline) and applies it: confirms,
 * returns, deliveries, closes.  BUS_OK, BUS_NONE (nothing came), or an
 * error that broke the connection. */
static int pump(struct rmq_conn *c, int64_t deadline, char *err, size_t errlen)
{
    amqp_frame_t f;
    int rc = wait_frame(c, deadline, &f, err, errlen);
    if (rc < 0)
        return rc;
    if (f.frame_type != AMQP_FRAME_METHOD)
        return BUS_OK;  /* heartbeats; stray content is not ours */
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        const amqp_basic_ack_t *a = f.payload.method.decoded;
        settle(c, a->delivery_tag, a->multiple, P_ACKED, "");
        return BUS_OK;
    }
    case AMQP_BASIC_NACK_METHOD: {
        const amqp_basic_nack_t *n = f.payload.method.decoded;
        settle(c, n->delivery_tag, n->multiple, P_NACKED,
               "broker nacked the publish (it could not store it)");
        return BUS_OK;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        amqp_basic_return_t r = *(const amqp_basic_return_t *)f.payload.method.decoded;
        char text[128];
        snprintf(text, sizeof(text), "%.*s", (int)r.reply_text.len,
                 (const char *)r.reply_text.bytes);
        r.reply_text = amqp_cstring_bytes(text);
        struct content m = { 0 };
        rc = read_content(c, deadline > cw_mono_ms() ? deadline : cw_mono_ms() + c->timeout_ms,
                          &m, err, errlen);
        if (rc == BUS_OK)
            mark_returned(c, m.message_id, &r);
        content_free(&m);
        return rc;
    }
    case AMQP_BASIC_DELIVER_METHOD: {
        amqp_basic_deliver_t dm = *(const amqp_basic_deliver_t *)f.payload.method.decoded;
        char rk[256];
        snprintf(rk, sizeof(rk), "%.*s", (int)dm.routing_key.len,
                 (const char *)dm.routing_key.bytes);
        dm.routing_key = amqp_cstring_bytes(rk);
        return take_delivery(c, &dm, cw_mono_ms() + c->timeout_ms, err, errlen);
    }
    case AMQP_BASIC_CANCEL_METHOD:
        return bus_set_err(err, errlen, fail(c, BUS_DISCONNECTED),
                       "broker cancelled the subscription (queue %s deleted?)", c->queue);
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_rpc_reply_t r = { AMQP_RESPONSE_SERVER_EXCEPTION, f.payload.method, 0 };
        rc = rpc_fail(c, r, "broker", err, errlen);
        return rc == BUS_REFUSED ? BUS_DISCONNECTED : rc;
    }
    default:
        return BUS_OK;
    }
}

/* ---- publishing ----------------------------------------------------------------- */

static int push_pend(struct rmq_conn *c, const char *id)
{
    if (c->phead > 0 && c->phead == c->pcap / 2) {
        memmove(c->pend, c->pend + c->phead, c->pn * sizeof(*c->pend));
        c->phead = 0;
    }
    if (c->phead + c->pn == c->pcap) {
        size_t n = c->pcap ? c->pcap * 2 : 64;
        struct pend *p = realloc(c->pend, n * sizeof(*p));
        if (p == NULL)
            abort();
        c->pend = p;
        c->pcap = n;
    }
    struct pend *p = &c->pend[c->phead + c->pn++];
    memset(p, 0, sizeof(*p));
    p->seq = c->next_seq++;
    snprintf(p->id, sizeof(p->id), "%s", id);
    return BUS_OK;
}

static amqp_table_entry_t str_entry(const char *k, const char *v)
{
    amqp_table_entry_t e = { amqp_cstring_bytes(k),
                             { AMQP_FIELD_KIND_UTF8, { .bytes = amqp_cstring_bytes(v) } } };
    return e;
}

static amqp_table_entry_t int_entry(const char *k, long long v)
{
    amqp_table_entry_t e = { amqp_cstring_bytes(k), { AMQP_FIELD_KIND_I64, { .i64 = v } } };
    return e;
}

/* Sends one persistent mandatory publish; extra: the delayed requeue's
 * expiration (ms, 0 for none) and delivery count (0 for none). */
static int send_message(struct rmq_conn *c, const char *exchange, const char *routing_key,
                        const struct bus_message *m, int expiration_ms, int delivery_count,
                        char *err, size_t errlen)
{
    amqp_table_entry_t h[10];
    int n = 0;
    h[n++] = str_entry("topic", m->topic);
    h[n++] = int_entry("aggregate_version", m->aggregate_version);
    h[n++] = int_entry("schema_version", m->schema_version);
    if (m->partition_key != NULL)
        h[n++] = str_entry("partition_key", m->partition_key);
    if (m->traceparent != NULL)
        h[n++] = str_entry("traceparent", m->traceparent);
    if (m->occurred_at != NULL)
        h[n++] = str_entry("occurred_at", m->occurred_at);
    if (m->claim_token != NULL)
        h[n++] = str_entry("claim_token", m->claim_token);
    if (m->not_after_us > 0)
        h[n++] = int_entry("not_after_us", m->not_after_us);
    if (delivery_count > 0)
        h[n++] = int_entry("cw-delivery-count", delivery_count);
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG;
    p.content_type = amqp_cstring_bytes("application/json");
    p.delivery_mode = 2;
    p.message_id = amqp_cstring_bytes(m->message_id);
    p.type = amqp_cstring_bytes(m->type);
    p.headers.num_entries = n;
    p.headers.entries = h;
    if (c->name[0] != '\0') {
        p._flags |= AMQP_BASIC_APP_ID_FLAG;
        p.app_id = amqp_cstring_bytes(c->name);
    }
    char exp[16];
    if (expiration_ms > 0) {
        snprintf(exp, sizeof(exp), "%d", expiration_ms);
        p._flags |= AMQP_BASIC_EXPIRATION_FLAG;
        p.expiration = amqp_cstring_bytes(exp);
    }
    amqp_bytes_t body = amqp_cstring_bytes(m->payload != NULL ? m->payload : "");
    wd_arm(c);
    int st = amqp_basic_publish(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(exchange),
                                amqp_cstring_bytes(routing_key), 1, 0, &p, body);
    int rc = wd_sent(c, st, "publish", err, errlen);
    return rc < 0 ? rc : push_pend(c, m->message_id);
}

static int rmq_publish_send(bus_conn *bc, const struct bus_message *m, char *err, size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    /* A message that cannot be sent as it is is refused, and the
     * connection stays usable: one bad row must not fail the messages
     * sent around it (the relay retries it, and dead-letters it at its
     * attempt limit). */
    if (m == NULL || m->topic == NULL || m->topic[0] == '\0' || m->message_id == NULL ||
        m->message_id[0] == '\0' || m->type == NULL || m->type[0] == '\0')
        return bus_set_err(err, errlen, BUS_REFUSED,
                       "message needs a topic, a message_id and a type");
    if (!name_ok(m->topic, 100) || !name_ok(m->type, 100) || strlen(m->message_id) >= RMQ_ID_MAX)
        return bus_set_err(err, errlen, BUS_REFUSED,
                       "topic and type must be 1..100 of A-Z a-z 0-9 _ - ., message_id under %d "
                       "bytes", RMQ_ID_MAX);
    if (m->payload != NULL && strlen(m->payload) > RMQ_MAX_BODY)
        return bus_set_err(err, errlen, BUS_REFUSED, "payload larger than %d bytes", RMQ_MAX_BODY);
    char rk[256];
    snprintf(rk, sizeof(rk), "%s.%s", m->topic, m->type);
    amqp_maybe_release_buffers(c->conn);
    cork(c, 1);
    return send_message(c, c->url.exchange, rk, m, 0, 0, err, errlen);
}

/* Pops the oldest publish once it is settled: its outcome. */
static int pop_settled(struct rmq_conn *c, char *err, size_t errlen)
{
    struct pend *p = &c->pend[c->phead];
    c->phead++;
    c->pn--;
    if (c->pn == 0)
        c->phead = 0;
    if (p->returned)
        return bus_set_err(err, errlen, BUS_REFUSED, "%s", p->why);
    if (p->state == P_NACKED)
        return bus_set_err(err, errlen, BUS_REFUSED, "%s", p->why);
    return BUS_OK;
}

static int rmq_publish_confirm(bus_conn *bc, char *err, size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (c->pn == 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "no publish is waiting for a confirm");
    int64_t deadline = cw_mono_ms() + c->timeout_ms;
    while (c->pend[c->phead].state == P_WAIT) {
        rc = pump(c, deadline, err, errlen);
        if (rc == BUS_NONE)
            return bus_set_err(err, errlen, fail(c, BUS_TIMEOUT),
                           "no confirm from the broker within %d ms", c->timeout_ms);
        if (rc < 0)
            return rc;
    }
    return pop_settled(c, err, errlen);
}

/* ---- consuming ------------------------------------------------------------------ */

static int queue_names(const struct bus_rmq_url *u, const char *topic, const char *group,
                       char *q, size_t qlen, char *err, size_t errlen)
{
    if (topic == NULL || group == NULL || !name_ok(topic, 60) || !name_ok(group, 60))
        return bus_set_err(err, errlen, BUS_PROTOCOL,
                       "topic and group must be 1..60 of A-Z a-z 0-9 _ - .");
    snprintf(q, qlen, "%s.%s.%s", u->exchange, topic, group);
    return BUS_OK;
}

/* Declares (or, passive, checks) the group's queue, its binding and its
 * retry queue. */
static int declare_topology(struct rmq_conn *c, const char *topic, const char *queue, char *err,
                            size_t errlen)
{
    char retry[280], what[320], pattern[80];
    snprintf(retry, sizeof(retry), "%s.retry", queue);
    snprintf(pattern, sizeof(pattern), "%s.#", topic);
    int passive = c->url.passive;
    amqp_table_entry_t qa[1] = { str_entry("x-queue-type", "quorum") };
    amqp_table_t qargs = { passive ? 0 : 1, qa };
    snprintf(what, sizeof(what), "%s queue %s", passive ? "checking" : "declaring", queue);
    amqp_queue_declare(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(queue), passive, 1, 0, 0, qargs);
    int rc = rpc_check(c, what, err, errlen);
    if (rc < 0)
        return rc;
    if (!passive) {
        amqp_queue_bind(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(queue),
                        amqp_cstring_bytes(c->url.exchange), amqp_cstring_bytes(pattern),
                        amqp_empty_table);
        snprintf(what, sizeof(what), "binding queue %s to %s", queue, c->url.exchange);
        rc = rpc_check(c, what, err, errlen);
        if (rc < 0)
            return rc;
    }
    amqp_table_entry_t ra[2] = { str_entry("x-dead-letter-exchange", ""),
                                 str_entry("x-dead-letter-routing-key", queue) };
    amqp_table_t rargs = { passive ? 0 : 2, ra };
    snprintf(what, sizeof(what), "%s queue %s", passive ? "checking" : "declaring", retry);
    amqp_queue_declare(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(retry), passive, 1, 0, 0, rargs);
    return rpc_check(c, what, err, errlen);
}

static int rmq_subscribe(bus_conn *bc, const char *topic, const char *group, int prefetch,
                         char *err, size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (prefetch < 1 || prefetch > 10000)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "prefetch must be in 1..10000, got %d",
                       prefetch);
    if (c->queue[0] != '\0')
        return bus_set_err(err, errlen, BUS_PROTOCOL, "one subscription per connection");
    char q[256];
    rc = queue_names(&c->url, topic, group, q, sizeof(q), err, errlen);
    if (rc < 0)
        return rc;
    amqp_maybe_release_buffers(c->conn);
    cork(c, 0); /* the declarations are RPCs */
    rc = declare_topology(c, topic, q, err, errlen);
    if (rc < 0)
        return rc;
    amqp_basic_qos(c->conn, RMQ_CHANNEL, 0, (uint16_t)(prefetch > 65535 ? 65535 : prefetch), 0);
    rc = rpc_check(c, "basic.qos", err, errlen);
    if (rc < 0)
        return rc;
    amqp_basic_consume(c->conn, RMQ_CHANNEL, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0, 0,
                       amqp_empty_table);
    rc = rpc_check(c, "basic.consume", err, errlen);
    if (rc < 0)
        return rc;
    snprintf(c->queue, sizeof(c->queue), "%s", q);
    return BUS_OK;
}

int bus_rabbitmq_declare_group(const char *url, const char *topic, const char *group,
                               int timeout_ms, char *err, size_t errlen)
{
    bus_conn *bc = bus_rabbitmq_connect(url, "topology", timeout_ms, 0, err, errlen);
    if (bc == NULL)
        return BUS_DISCONNECTED;
    struct rmq_conn *c = (struct rmq_conn *)bc;
    char q[256];
    int rc = queue_names(&c->url, topic, group, q, sizeof(q), err, errlen);
    if (rc == BUS_OK)
        rc = declare_topology(c, topic, q, err, errlen);
    rmq_close(bc);
    return rc;
}

static int rmq_next_delivery(bus_conn *bc, int wait_ms, struct bus_delivery **out, char *err,
                             size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    /* Deliveries already received are handed out even on a broken
     * connection: acking them will fail, and the broker redelivers. */
    if (c->qhead == NULL) {
        int rc = check_usable(c, err, errlen);
        if (rc < 0)
            return rc;
        amqp_maybe_release_buffers(c->conn);
        int64_t deadline = cw_mono_ms() + (wait_ms > 0 ? wait_ms : 0);
        while (c->qhead == NULL) {
            rc = pump(c, deadline, err, errlen);
            if (rc == BUS_NONE)
                return bus_set_err(err, errlen, BUS_NONE, "no delivery within %d ms", wait_ms);
            if (rc < 0)
                return rc;
        }
    }
    struct dq *q = c->qhead;
    c->qhead = q->next;
    if (c->qhead == NULL)
        c->qtail = NULL;
    *out = q->d;
    free(q);
    return BUS_OK;
}

/* Removes the held copy of tag; NULL when tag is not held. */
static struct held *unhold(struct rmq_conn *c, uint64_t tag)
{
    for (struct held **pp = &c->held; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->tag == tag) {
            struct held *h = *pp;
            *pp = h->next;
            return h;
        }
    }
    return NULL;
}

/* Checks the tag and takes its held copy (*h, freed by the caller). */
static int take_tag(struct rmq_conn *c, const char *op, uint64_t tag, struct held **h, char *err,
                    size_t errlen)
{
    int rc = check_usable(c, err, errlen);
    if (rc < 0)
        return rc;
    if (tag == 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "%s: delivery tag 0 is never valid", op);
    /* An unknown tag would make RabbitMQ close the channel: refuse it here. */
    *h = unhold(c, tag);
    if (*h == NULL)
        return bus_set_err(err, errlen, BUS_REFUSED, "%s: unknown delivery tag %llu", op,
                       (unsigned long long)tag);
    return BUS_OK;
}


static int rmq_ack(bus_conn *bc, uint64_t tag, char *err, size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    struct held *h = NULL;
    int rc = take_tag(c, "ack", tag, &h, err, errlen);
    if (rc < 0)
        return rc;
    held_free(h);
    wd_arm(c);
    return wd_sent(c, amqp_basic_ack(c->conn, RMQ_CHANNEL, tag, 0), "ack", err, errlen);
}

/* The delayed requeue: a confirmed copy into the retry queue, then the ack
 * of the original.  If the copy is not confirmed the original stays
 * unacked, and the broker redelivers it when the caller reconnects. */
static int requeue_delayed(struct rmq_conn *c, struct held *h, int delay_ms, char *err,
                           size_t errlen)
{
    if (c->pn > 0)
        return bus_set_err(err, errlen, BUS_PROTOCOL,
                       "nack with a delay while %zu publishes await their confirms", c->pn);
    const struct bus_delivery *d = h->copy;
    struct bus_message m = {
        .topic = d->topic, .message_id = d->message_id, .type = d->type,
        .partition_key = d->partition_key, .traceparent = d->traceparent,
        .aggregate_version = d->aggregate_version, .schema_version = d->schema_version,
        .occurred_at = h->occurred_at, .payload = d->payload,
    };
    char retry[280];
    snprintf(retry, sizeof(retry), "%s.retry", c->queue);
    int rc = send_message(c, "", retry, &m, delay_ms, d->delivery_count + 1, err, errlen);
    if (rc < 0)
        return rc;
    rc = rmq_publish_confirm(&c->base, err, errlen);
    if (rc == BUS_REFUSED) {
        char why[512];
        snprintf(why, sizeof(why), "%s", err); /* err is the destination too */
        return bus_set_err(err, errlen, fail(c, BUS_REFUSED), "delayed requeue: %s", why);
    }
    if (rc < 0)
        return rc;
    wd_arm(c);
    return wd_sent(c, amqp_basic_ack(c->conn, RMQ_CHANNEL, h->tag, 0), "ack", err, errlen);
}

static int rmq_nack(bus_conn *bc, uint64_t tag, int requeue, int delay_ms, char *err,
                    size_t errlen)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    if (delay_ms < 0 || delay_ms > 3600000)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "nack delay must be in 0..3600000 ms, got %d",
                       delay_ms);
    struct held *h = NULL;
    int rc = take_tag(c, "nack", tag, &h, err, errlen);
    if (rc < 0)
        return rc;
    if (requeue && delay_ms > 0 && c->queue[0] != '\0') {
        char why[256] = "";
        rc = requeue_delayed(c, h, delay_ms, why, sizeof(why));
        held_free(h);
        if (rc < 0)
            return bus_set_err(err, errlen, rc, "%s", why);
        return BUS_OK;
    }
    held_free(h);
    wd_arm(c);
    return wd_sent(c, amqp_basic_nack(c->conn, RMQ_CHANNEL, tag, 0, requeue ? 1 : 0), "nack", err,
                   errlen);
}

static int rmq_unconfirmed(bus_conn *bc)
{
    struct rmq_conn *c = (struct rmq_conn *)bc;
    return c->broken ? 0 : (int)c->pn;
}

static const struct bus_ops rmq_ops = {
    .unconfirmed = rmq_unconfirmed,
    .close = rmq_close,
    .fd = rmq_fd,
    .publish_send = rmq_publish_send,
    .publish_confirm = rmq_publish_confirm,
    .subscribe = rmq_subscribe,
    .next_delivery = rmq_next_delivery,
    .ack = rmq_ack,
    .nack = rmq_nack,
};
