/* fakebroker_server.c -- the fake broker's event loop.
 *
 * One thread, one ppoll() over the listening socket and every connection.
 * Sockets are non-blocking; each connection has an input line buffer (a
 * frame may be at most FB_MAX_FRAME bytes) and an output buffer.  A round of
 * the loop is:
 *
 *   1. ppoll (SIGTERM/SIGINT are unblocked only inside it, so a signal can
 *      never slip in between the check of the stop flag and the wait);
 *   2. BEGIN; accept; read every readable connection and apply its complete
 *      frames; expire deliveries past their visibility timeout; release the
 *      deliveries of connections that went away; hand ready messages to
 *      consumers with room; COMMIT;
 *   3. append the round's log lines to the events file; send the queued
 *      output.
 *
 * So nothing leaves the broker (confirm, delivery, log line) before the
 * transaction that made it true committed, and a whole pipelined burst of
 * publishes costs one commit.  Reading is capped per connection and round,
 * so one busy publisher cannot starve the others; a connection whose output
 * backs up is not read until it drains (it is not answering its replies).
 *
 * The log is written by this module rather than through cwlog_emit: lines
 * are collected during the round and written after COMMIT in one write(2),
 * and the same text goes into the store for dump_log.  Lines carry cwlog's
 * header (ts_us, proc, pid, event; cwlog_proc and cw_now_us) and are printed
 * with the small writer of fakebroker_proto.c: at tens of thousands of lines
 * a second, cJSON's printf/sscanf round trip per number was a third of the
 * broker's time (and it printed some timestamps in exponent form). */
#include "fakebroker.h"
#include "cwlog.h"
#include "fault.h"
#include "sanitize.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define READ_BUDGET (1024 * 1024)      /* bytes per connection per round */
#define OUT_HIGH (8 * 1024 * 1024)     /* stop reading a connection above this */
#define DUMP_LOW (256 * 1024)          /* refill a dump below this much output */
#define DUMP_BATCH 512
#define MAX_CONNS 1024
#define CLOSE_GRACE_MS 2000
#define MAX_WAIT_MS 1000

struct conn {
    struct conn *next;
    int fd;
    uint64_t id;
    char client[72];
    char consumer[32];
    struct fb_linebuf in;
    struct fb_buf out;
    size_t outoff;       /* bytes of out already sent */
    int dead;            /* gone: released and freed in this or the next round */
    const char *why;     /* reason logged at disconnect */
    int closing;         /* send what is queued, then close */
    int64_t close_by;    /* give up sending at this time */
    int gidx;            /* subscription: group index, -1 for none */
    int prefetch;
    int inflight;
    int heartbeat_ms;    /* subscription: 0 for none */
    int64_t last_rx;     /* when the client last sent bytes */
    int dumping;
    int64_t dump_after;
    int64_t dump_until;
    int64_t dump_count;
};

struct server {
    const struct fb_options *opt;
    fb_store *st;
    int lfd;
    int events_fd;
    struct conn *conns;
    int nconns;
    uint64_t next_conn;
    struct fb_control ctl;
    unsigned char *dirty;   /* per group index: dispatch needed */
    int *rr;                /* per group index: round-robin cursor */
    int ngroups;
    int64_t now;
    int64_t next_due;
    long long pid;
    int failed;             /* a store call failed this round: fail-stop */
    struct fb_buf line;     /* the log line being built */
    struct fb_buf events;   /* log lines of the current round */
};

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- output and logging ----------------------------------------------- */

static size_t out_pending(const struct conn *c)
{
    return c->out.len - c->outoff;
}

/* Prints a cJSON frame onto c's output (newline added) and frees it; for the
 * rare frames (stats, control_ok).  The hot ones use the writer directly. */
static void send_json(struct conn *c, cJSON *frame)
{
    char *text = cJSON_PrintUnformatted(frame);
    cJSON_Delete(frame);
    if (text == NULL)
        abort();
    fb_buf_add(&c->out, text, strlen(text));
    fb_buf_add(&c->out, "\n", 1);
    cJSON_free(text);
}

/* Starts a frame on c's output: {"op":OP */
static struct fb_buf *frame_begin(struct conn *c, const char *op)
{
    fb_jw_begin(&c->out);
    fb_jw_str(&c->out, "op", op);
    return &c->out;
}

static void frame_end(struct conn *c)
{
    fb_jw_end(&c->out);
    fb_buf_add(&c->out, "\n", 1);
}

static void send_error(struct conn *c, const char *request, const char *msg,
                       int has_tag, uint64_t tag)
{
    struct fb_buf *b = frame_begin(c, "error");
    fb_jw_str(b, "error", msg);
    if (request != NULL)
        fb_jw_str(b, "request", request);
    if (has_tag)
        fb_jw_int(b, "tag", (long long)tag);
    frame_end(c);
}

/* A store call failed: the round is rolled back and the broker stops, so
 * no half-applied change is ever committed and nothing it said is sent. */
static void store_failed(struct server *s, const char *what)
{
    if (!s->failed)
        cwlog_warn("store failure (%s): %s", what, fb_store_errmsg(s->st));
    s->failed = 1;
}

/* Starts a log line with cwlog's common header. */
static struct fb_buf *ev_begin(struct server *s, const char *event)
{
    s->line.len = 0;
    fb_jw_begin(&s->line);
    fb_jw_int(&s->line, "ts_us", (long long)cw_now_us());
    fb_jw_str(&s->line, "proc", cwlog_proc());
    fb_jw_int(&s->line, "pid", s->pid);
    fb_jw_str(&s->line, "event", event);
    return &s->line;
}

/* Ends the log line: into the store (dump_log) and, after the round's
 * commit, the events file. */
static void ev_emit(struct server *s)
{
    fb_jw_end(&s->line);
    if (fb_store_log_append(s->st, s->line.data) < 0)
        store_failed(s, "log entry");
    if (s->events_fd >= 0) {
        fb_buf_add(&s->events, s->line.data, s->line.len);
        fb_buf_add(&s->events, "\n", 1);
    }
}

static void write_events(struct server *s)
{
    size_t off = 0;
    while (off < s->events.len) {
        ssize_t w = write(s->events_fd, s->events.data + off, s->events.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            cwlog_warn("could not write events file: %s", strerror(errno));
            break;
        }
        off += (size_t)w;
    }
    s->events.len = 0;
}

static void ev_conn(struct fb_buf *b, const struct conn *c)
{
    fb_jw_int(b, "conn", (long long)c->id);
    fb_jw_str(b, "client", c->client);
}

/* A cJSON object's members as members of the log line. */
static void ev_members(struct fb_buf *b, const cJSON *obj)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        char *text = cJSON_PrintUnformatted(it);
        if (text == NULL)
            abort();
        fb_jw_raw(b, it->string, text);
        cJSON_free(text);
    }
}

/* ---- groups ----------------------------------------------------------- */

static void sync_groups(struct server *s)
{
    int n = fb_store_group_count(s->st);
    if (n <= s->ngroups)
        return;
    unsigned char *d = realloc(s->dirty, (size_t)n);
    if (d == NULL)
        abort();
    s->dirty = d;
    int *r = realloc(s->rr, sizeof(int) * (size_t)n);
    if (r == NULL)
        abort();
    s->rr = r;
    for (int i = s->ngroups; i < n; i++) {
        d[i] = 1;
        r[i] = 0;
    }
    s->ngroups = n;
}

static void mark_all_dirty(struct server *s)
{
    for (int i = 0; i < s->ngroups; i++)
        s->dirty[i] = 1;
}

static void mark_topic_dirty(struct server *s, const char *topic)
{
    for (int i = 0; i < s->ngroups; i++) {
        const struct fb_group *g = fb_store_group_at(s->st, i);
        if (g != NULL && strcmp(g->topic, topic) == 0)
            s->dirty[i] = 1;
    }
}

static void mark_gid_dirty(struct server *s, int64_t gid)
{
    int i = fb_store_group_index(s->st, gid);
    if (i >= 0 && i < s->ngroups)
        s->dirty[i] = 1;
}

static const char *group_name(struct server *s, int64_t gid)
{
    const struct fb_group *g = fb_store_group_at(s->st, fb_store_group_index(s->st, gid));
    return g ? g->name : "?";
}

static struct conn *conn_by_id(struct server *s, uint64_t id)
{
    for (struct conn *c = s->conns; c != NULL; c = c->next) {
        if (c->id == id)
            return c;
    }
    return NULL;
}

/* When a message that becomes READY now may go out (the delay fault adds
 * to a nack's own delay); 0 means at once, and keeps the row out of the
 * store's index of delayed messages. */
static int64_t ready_at(struct server *s, int extra_ms)
{
    int64_t delay = (int64_t)extra_ms + (int64_t)s->ctl.delay_ms;
    return delay > 0 ? s->now + delay : 0;
}

/* ---- requests --------------------------------------------------------- */

static void confirm(struct conn *c, const struct fb_frame *f, const char *status,
                    int64_t offset, const char *error)
{
    struct fb_buf *b = frame_begin(c, "confirm");
    if (f->has_seq)
        fb_jw_int(b, "seq", f->seq);
    if (f->message_id != NULL)
        fb_jw_str(b, "message_id", f->message_id);
    fb_jw_str(b, "status", status);
    if (offset > 0)
        fb_jw_int(b, "offset", offset);
    if (error != NULL)
        fb_jw_str(b, "error", error);
    frame_end(c);
}

/* Starts the publish log line; the caller adds offset/error and emits. */
static struct fb_buf *publish_log(struct server *s, const struct conn *c,
                                  const struct fb_frame *f, const char *status, const char *sha)
{
    struct fb_buf *b = ev_begin(s, "publish");
    ev_conn(b, c);
    if (f->has_seq)
        fb_jw_int(b, "seq", f->seq);
    if (f->topic != NULL)
        fb_jw_str(b, "topic", f->topic);
    if (f->message_id != NULL)
        fb_jw_str(b, "message_id", f->message_id);
    if (f->type != NULL)
        fb_jw_str(b, "type", f->type);
    if (f->partition_key != NULL)
        fb_jw_str(b, "partition_key", f->partition_key);
    fb_jw_int(b, "aggregate_version", f->aggregate_version);
    if (f->claim_token != NULL)
        fb_jw_str(b, "claim_token", f->claim_token);
    if (f->not_after_us > 0)
        fb_jw_int(b, "not_after_us", f->not_after_us);
    if (sha != NULL)
        fb_jw_str(b, "payload_sha256", sha);
    fb_jw_str(b, "status", status);
    return b;
}

/* Length of at most max bytes of s that does not split a UTF-8 sequence. */
static size_t utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* The client gets why as it is (a careless broker's words are the fault);
 * the broker's own log only its sanitized form. */
static void refuse(struct server *s, struct conn *c, const struct fb_frame *f,
                   const char *sha, const char *why)
{
    char safe[CW_ERROR_MAX + 1];
    confirm(c, f, "refused", 0, why);
    cw_sanitize_error(why, safe, sizeof(safe));
    struct fb_buf *b = publish_log(s, c, f, "refused", sha);
    fb_jw_str(b, "error", safe);
    ev_emit(s);
}

static void handle_publish(struct server *s, struct conn *c, const struct fb_frame *f)
{
    char sha[65];
    const char *shap = NULL;
    if (f->payload != NULL) {
        fb_sha256_hex(f->payload, f->payload_len, sha);
        shap = sha;
    }
    if (s->ctl.outage == FB_OUTAGE_HANG) {
        publish_log(s, c, f, "unanswered", shap);
        ev_emit(s);
        return;
    }
    /* One instant for the deadline check and the stored time the log
     * records, so that the log can be checked against the deadline. */
    int64_t now_us = cw_now_us();
    if (f->not_after_us > 0 && now_us > f->not_after_us) {
        refuse(s, c, f, shap, "lease ended before the publish arrived");
        return;
    }
    if (s->ctl.outage == FB_OUTAGE_REFUSE) {
        refuse(s, c, f, shap, s->ctl.refuse_error[0] ? s->ctl.refuse_error : "broker outage");
        return;
    }
    if (s->ctl.max_payload_bytes > 0 && f->payload_len > (size_t)s->ctl.max_payload_bytes) {
        /* The careless broker of the poison-message scenario: its refusal
         * echoes the start of the payload (see fakebroker.h). */
        char msg[192];
        size_t n = utf8_prefix(f->payload, f->payload_len, 48);
        snprintf(msg, sizeof(msg), "payload too large (%zu > %d bytes): %.*s",
                 f->payload_len, s->ctl.max_payload_bytes, (int)n, f->payload);
        refuse(s, c, f, shap, msg);
        return;
    }

    char *headers = f->headers ? cJSON_PrintUnformatted(f->headers) : NULL;
    struct fb_msg_in m = {
        .topic = f->topic,
        .message_id = f->message_id,
        .type = f->type,
        .partition_key = f->partition_key,
        .headers_json = headers,
        .payload = f->payload,
        .payload_len = f->payload_len,
        .client = c->client,
        .sha256 = shap,
        .stored_us = now_us,
    };
    int64_t off = fb_store_publish(s->st, &m, ready_at(s, 0));
    cJSON_free(headers);
    if (off < 0) {
        store_failed(s, "publish");
        return;
    }
    mark_topic_dirty(s, f->topic);
    struct fb_buf *b = publish_log(s, c, f, "stored", shap);
    fb_jw_int(b, "offset", off);
    fb_jw_int(b, "stored_us", now_us);
    if (s->ctl.drop_before_confirm > 0) {
        /* Stored, never confirmed: the publisher cannot know, and must
         * publish again (same id) after it reconnects. */
        s->ctl.drop_before_confirm--;
        fb_jw_str(b, "confirm", "dropped");
        ev_emit(s);
        c->closing = 1;
        c->close_by = s->now + CLOSE_GRACE_MS;
        c->why = "drop_before_confirm";
        return;
    }
    ev_emit(s);
    confirm(c, f, "stored", off, NULL);
}

static void handle_subscribe(struct server *s, struct conn *c, const struct fb_frame *f)
{
    if (c->gidx >= 0) {
        send_error(c, "subscribe", "already subscribed on this connection", 0, 0);
        return;
    }
    int gidx = fb_store_group(s->st, f->topic, f->group, f->ordered);
    if (gidx < 0) {
        store_failed(s, "subscribe");
        return;
    }
    sync_groups(s);
    const struct fb_group *g = fb_store_group_at(s->st, gidx);
    c->gidx = gidx;
    c->prefetch = f->prefetch;
    c->heartbeat_ms = f->heartbeat_ms;
    s->dirty[gidx] = 1;

    struct fb_buf *b = frame_begin(c, "subscribed");
    fb_jw_str(b, "topic", g->topic);
    fb_jw_str(b, "group", g->name);
    fb_jw_str(b, "consumer", c->consumer);
    fb_jw_bool(b, "ordered", g->ordered);
    frame_end(c);

    b = ev_begin(s, "subscribe");
    ev_conn(b, c);
    fb_jw_str(b, "topic", g->topic);
    fb_jw_str(b, "group", g->name);
    fb_jw_str(b, "consumer", c->consumer);
    fb_jw_int(b, "prefetch", c->prefetch);
    fb_jw_bool(b, "ordered", g->ordered);
    if (c->heartbeat_ms > 0)
        fb_jw_int(b, "heartbeat_ms", c->heartbeat_ms);
    ev_emit(s);
}

/* Starts an ack/nack/redeliver log line for release r. */
static struct fb_buf *release_log(struct server *s, const char *event, const struct conn *c,
                                  const struct fb_release *r)
{
    struct fb_buf *b = ev_begin(s, event);
    fb_jw_str(b, "group", group_name(s, r->gid));
    if (c != NULL) {
        fb_jw_str(b, "consumer", c->consumer);
        ev_conn(b, c);
    }
    if (r->tag)
        fb_jw_int(b, "tag", (long long)r->tag);
    fb_jw_int(b, "offset", r->offset);
    fb_jw_str(b, "message_id", r->message_id);
    return b;
}

static void handle_ack(struct server *s, struct conn *c, const struct fb_frame *f)
{
    struct fb_release r;
    int rc = f->op == FB_OP_ACK
                 ? fb_store_ack(s->st, f->tag, c->id, &r)
                 : fb_store_nack(s->st, f->tag, c->id, f->requeue, ready_at(s, f->delay_ms), &r);
    const char *op = f->op == FB_OP_ACK ? "ack" : "nack";
    if (rc < 0) {
        store_failed(s, op);
        return;
    }
    if (rc > 0) {
        char e[160];
        snprintf(e, sizeof(e), "unknown delivery tag %llu", (unsigned long long)f->tag);
        send_error(c, op, e, 1, f->tag);
        struct fb_buf *b = ev_begin(s, "bad_request");
        ev_conn(b, c);
        fb_jw_str(b, "request", op);
        fb_jw_int(b, "tag", (long long)f->tag);
        fb_jw_str(b, "error", e);
        fb_jw_bool(b, "closed", 0);
        ev_emit(s);
        return;
    }
    if (c->inflight > 0)
        c->inflight--;
    mark_gid_dirty(s, r.gid);
    struct fb_buf *b = release_log(s, op, c, &r);
    if (f->op == FB_OP_NACK) {
        fb_jw_bool(b, "requeue", f->requeue);
        fb_jw_int(b, "delay_ms", f->delay_ms);
        fb_jw_bool(b, "requeued", r.requeued);
    }
    fb_jw_bool(b, "finished", r.finished);
    ev_emit(s);
}

static void handle_control(struct server *s, struct conn *c, const struct fb_frame *f)
{
    fb_control_apply(&s->ctl, f, s->opt->visibility_timeout_ms);
    mark_all_dirty(s);
    /* An action, not a switch: the broker drops every other client at once,
     * as RabbitMQ's close_all_connections does.  The round's reap gives
     * their unacked deliveries back. */
    int closed = 0;
    for (struct conn *k = s->conns; f->ctl_close_connections && k != NULL; k = k->next) {
        if (k == c || k->dead)
            continue;
        k->dead = 1;
        k->why = "closed_by_broker";
        closed++;
    }
    cJSON *sw = fb_control_json(&s->ctl);
    if (f->ctl_close_connections)
        cJSON_AddNumberToObject(sw, "closed_connections", closed);
    struct fb_buf *b = ev_begin(s, "control");
    ev_conn(b, c);
    ev_members(b, sw);
    ev_emit(s);
    cJSON_AddStringToObject(sw, "op", "control_ok");
    send_json(c, sw);
}

static void handle_stats(struct server *s, struct conn *c)
{
    cJSON *o = fb_store_stats(s->st, s->now);
    cJSON_AddStringToObject(o, "op", "stats");
    cJSON_AddNumberToObject(o, "connections", s->nconns);
    cJSON *groups = cJSON_GetObjectItemCaseSensitive(o, "groups");
    cJSON *it;
    /* Consumers per group: fb_store_stats keys groups by name, or by
     * "topic/name" when a name is used on two topics. */
    cJSON_ArrayForEach(it, groups) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "topic");
        const char *name = it->string;
        if (cJSON_IsString(t) && strncmp(name, t->valuestring, strlen(t->valuestring)) == 0 &&
            name[strlen(t->valuestring)] == '/')
            name += strlen(t->valuestring) + 1;
        int consumers = 0;
        for (struct conn *k = s->conns; k != NULL; k = k->next) {
            const struct fb_group *g = fb_store_group_at(s->st, k->gidx);
            consumers += !k->dead && g != NULL && cJSON_IsString(t) &&
                         strcmp(g->topic, t->valuestring) == 0 && strcmp(g->name, name) == 0;
        }
        cJSON_AddNumberToObject(it, "consumers", consumers);
    }
    send_json(c, o);
}

static void bad_request(struct server *s, struct conn *c, const char *request, const char *err,
                        int closed)
{
    struct fb_buf *b = ev_begin(s, "bad_request");
    ev_conn(b, c);
    if (request != NULL)
        fb_jw_str(b, "request", request);
    fb_jw_str(b, "error", err);
    fb_jw_bool(b, "closed", closed);
    ev_emit(s);
}

static void start_closing(struct server *s, struct conn *c, const char *why)
{
    c->closing = 1;
    c->close_by = s->now + CLOSE_GRACE_MS;
    c->why = why;
}

static void handle_line(struct server *s, struct conn *c, const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i == len)
        return; /* blank line */

    struct fb_frame f;
    char err[256];
    int rc = fb_parse_frame(line, len, &f, err, sizeof(err));
    if (rc == -1) {
        /* Not JSON at all: the stream cannot be trusted any further. */
        send_error(c, NULL, err, 0, 0);
        start_closing(s, c, "bad_frame");
        bad_request(s, c, NULL, err, 1);
    } else if (rc == -2) {
        if (f.op == FB_OP_PUBLISH) {
            char e[300];
            snprintf(e, sizeof(e), "bad publish: %s", err);
            refuse(s, c, &f, NULL, e);
        } else {
            const cJSON *op = cJSON_GetObjectItemCaseSensitive(f.root, "op");
            const char *req = cJSON_IsString(op) ? op->valuestring : NULL;
            int has_tag = (f.op == FB_OP_ACK || f.op == FB_OP_NACK) && f.tag > 0;
            send_error(c, req, err, has_tag, f.tag);
            bad_request(s, c, req, err, 0);
        }
    } else {
        switch (f.op) {
        case FB_OP_HELLO: {
            if (f.client != NULL && f.client[0] != '\0')
                snprintf(c->client, sizeof(c->client), "%s", f.client);
            struct fb_buf *b = frame_begin(c, "hello_ok");
            fb_jw_str(b, "broker", "fakebroker");
            fb_jw_int(b, "version", 1);
            fb_jw_int(b, "conn", (long long)c->id);
            frame_end(c);
            b = ev_begin(s, "hello");
            ev_conn(b, c);
            ev_emit(s);
            break;
        }
        case FB_OP_PUBLISH: handle_publish(s, c, &f); break;
        case FB_OP_SUBSCRIBE: handle_subscribe(s, c, &f); break;
        case FB_OP_ACK:
        case FB_OP_NACK: handle_ack(s, c, &f); break;
        case FB_OP_CONTROL: handle_control(s, c, &f); break;
        case FB_OP_STATS: handle_stats(s, c); break;
        case FB_OP_PING:
            frame_begin(c, "pong");
            frame_end(c);
            break;
        case FB_OP_DUMP_LOG:
            c->dumping = 1;
            c->dump_after = 0;
            c->dump_count = 0;
            c->dump_until = fb_store_log_last_id(s->st);
            break;
        }
    }
    fb_frame_free(&f);
}

/* ---- connections ------------------------------------------------------ */

static void conn_accept(struct server *s)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                errno != ECONNABORTED)
                cwlog_warn("accept: %s", strerror(errno));
            return;
        }
        if (s->nconns >= MAX_CONNS) {
            cwlog_warn("too many connections (%d): refusing one", MAX_CONNS);
            close(fd);
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (c == NULL)
            abort();
        c->fd = fd;
        c->id = ++s->next_conn;
        c->gidx = -1;
        c->last_rx = s->now;
        snprintf(c->client, sizeof(c->client), "conn-%llu", (unsigned long long)c->id);
        snprintf(c->consumer, sizeof(c->consumer), "c%llu", (unsigned long long)c->id);
        fb_linebuf_init(&c->in);
        c->next = s->conns;
        s->conns = c;
        s->nconns++;
        struct fb_buf *b = ev_begin(s, "connect");
        ev_conn(b, c);
        ev_emit(s);
    }
}

static void conn_read(struct server *s, struct conn *c)
{
    char buf[READ_CHUNK];
    size_t budget = READ_BUDGET;
    while (budget > 0 && !c->dead && !c->closing && out_pending(c) < OUT_HIGH) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            c->dead = 1;
            c->why = n == 0 ? "eof" : "read_error";
            break;
        }
        budget -= (size_t)n < budget ? (size_t)n : budget;
        c->last_rx = s->now;
        if (fb_linebuf_append(&c->in, buf, (size_t)n) < 0)
            abort();
        const char *line;
        size_t len;
        int rc;
        while (!c->closing && (rc = fb_linebuf_next(&c->in, &line, &len)) != 0) {
            if (rc < 0) {
                send_error(c, NULL, "frame larger than 1 MiB", 0, 0);
                start_closing(s, c, "frame_too_large");
                bad_request(s, c, NULL, "frame larger than 1 MiB", 1);
                break;
            }
            handle_line(s, c, line, len);
        }
    }
}

struct release_ctx {
    struct server *s;
    const char *reason;
};

static void on_release(void *arg, const struct fb_release *r)
{
    struct release_ctx *x = arg;
    struct conn *c = conn_by_id(x->s, r->conn);
    if (c != NULL && c->inflight > 0)
        c->inflight--;
    mark_gid_dirty(x->s, r->gid);
    if (!r->requeued)
        return;
    struct fb_buf *b = release_log(x->s, "redeliver", c, r);
    fb_jw_str(b, "reason", x->reason);
    ev_emit(x->s);
}

/* Frees the dead connections, giving their deliveries back (I2). */
static void reap(struct server *s)
{
    struct conn **pp = &s->conns;
    while (*pp != NULL) {
        struct conn *c = *pp;
        if (!c->dead) {
            pp = &c->next;
            continue;
        }
        struct release_ctx x = {s, "disconnect"};
        if (fb_store_release_conn(s->st, c->id, ready_at(s, 0), on_release, &x) < 0)
            store_failed(s, "release");
        struct fb_buf *b = ev_begin(s, "disconnect");
        ev_conn(b, c);
        fb_jw_str(b, "reason", c->why ? c->why : "eof");
        if (fb_linebuf_pending(&c->in) > 0)
            fb_jw_int(b, "unread_bytes", (long long)fb_linebuf_pending(&c->in));
        ev_emit(s);
        *pp = c->next;
        close(c->fd);
        fb_linebuf_free(&c->in);
        fb_buf_free(&c->out);
        free(c);
        s->nconns--;
    }
}

static void dump_line(void *arg, const char *line)
{
    struct conn *c = arg;
    /* Each stored entry is an object: splice "op":"log" in front. */
    fb_buf_add(&c->out, "{\"op\":\"log\",", 12);
    fb_buf_add(&c->out, line + 1, strlen(line + 1));
    fb_buf_add(&c->out, "\n", 1);
    c->dump_count++;
}

static void dump_fill(struct server *s, struct conn *c)
{
    while (c->dumping && out_pending(c) < DUMP_LOW) {
        int64_t last = fb_store_log_read(s->st, c->dump_after, c->dump_until, DUMP_BATCH,
                                         dump_line, c);
        if (last < 0) {
            send_error(c, "dump_log", "could not read the log", 0, 0);
            c->dumping = 0;
            break;
        }
        if (last == c->dump_after) {
            struct fb_buf *b = frame_begin(c, "log_end");
            fb_jw_int(b, "count", c->dump_count);
            frame_end(c);
            c->dumping = 0;
            break;
        }
        c->dump_after = last;
    }
}

static void conn_flush(struct server *s, struct conn *c)
{
    if (c->dead)
        return;
    dump_fill(s, c);
    while (c->outoff < c->out.len) {
        ssize_t w = send(c->fd, c->out.data + c->outoff, c->out.len - c->outoff,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0) {
            c->dead = 1;
            c->why = "write_error";
            return;
        }
        c->outoff += (size_t)w;
        if (c->outoff == c->out.len && c->dumping) {
            c->outoff = 0;
            c->out.len = 0;
            dump_fill(s, c);
        }
    }
    if (c->outoff == c->out.len) {
        c->outoff = 0;
        c->out.len = 0;
    } else if (c->outoff > c->out.cap / 2) {
        memmove(c->out.data, c->out.data + c->outoff, c->out.len - c->outoff);
        c->out.len -= c->outoff;
        c->outoff = 0;
    }
    if (c->closing && (out_pending(c) == 0 || s->now >= c->close_by))
        c->dead = 1;
}

/* ---- dispatch --------------------------------------------------------- */

static void send_delivery(struct server *s, struct conn *c, const struct fb_delivery *d)
{
    const char *gname = group_name(s, d->gid);
    struct fb_buf *b = frame_begin(c, "deliver");
    fb_jw_int(b, "tag", (long long)d->tag);
    fb_jw_str(b, "topic", d->topic ? d->topic : "");
    fb_jw_str(b, "group", gname);
    fb_jw_str(b, "message_id", d->message_id ? d->message_id : "");
    fb_jw_str(b, "type", d->type ? d->type : "");
    if (d->partition_key != NULL)
        fb_jw_str(b, "partition_key", d->partition_key);
    /* headers were printed by cJSON from a parsed object when stored. */
    fb_jw_raw(b, "headers", d->headers_json ? d->headers_json : "{}");
    fb_jw_strn(b, "payload", d->payload, d->payload_len);
    fb_jw_bool(b, "redelivered", d->delivery_count > 1);
    fb_jw_int(b, "delivery_count", d->delivery_count);
    fb_jw_int(b, "offset", d->offset);
    if (d->duplicate)
        fb_jw_bool(b, "duplicate", 1);
    frame_end(c);

    b = ev_begin(s, "deliver");
    fb_jw_str(b, "topic", d->topic ? d->topic : "");
    fb_jw_str(b, "group", gname);
    fb_jw_str(b, "consumer", c->consumer);
    ev_conn(b, c);
    fb_jw_int(b, "tag", (long long)d->tag);
    fb_jw_int(b, "offset", d->offset);
    fb_jw_str(b, "message_id", d->message_id ? d->message_id : "");
    if (d->partition_key != NULL)
        fb_jw_str(b, "partition_key", d->partition_key);
    fb_jw_bool(b, "redelivered", d->delivery_count > 1);
    fb_jw_int(b, "delivery_count", d->delivery_count);
    if (d->duplicate)
        fb_jw_bool(b, "duplicate", 1);
    ev_emit(s);
}

static int has_room(const struct conn *c, int gidx)
{
    return !c->dead && !c->closing && c->gidx == gidx && c->inflight < c->prefetch;
}

/* The next consumer of gidx with room, round robin; NULL when none. */
static struct conn *next_consumer(struct server *s, int gidx, const struct conn *not_this)
{
    int n = 0;
    for (struct conn *c = s->conns; c != NULL; c = c->next)
        n += c->gidx == gidx;
    for (int tries = 0; tries < n; tries++) {
        int want = (int)((unsigned)s->rr[gidx]++ % (unsigned)n);
        int i = 0;
        for (struct conn *c = s->conns; c != NULL; c = c->next) {
            if (c->gidx != gidx)
                continue;
            if (i++ == want) {
                if (has_room(c, gidx) && c != not_this)
                    return c;
                break;
            }
        }
    }
    return NULL;
}

static void dispatch_group(struct server *s, int gidx)
{
    int vt = s->ctl.visibility_timeout_ms;
    /* Each pass delivers one message or stops; bounded by the room left. */
    for (int pass = 0; pass < 1000000; pass++) {
        struct conn *c = next_consumer(s, gidx, NULL);
        if (c == NULL)
            break;
        struct fb_delivery d;
        int rc = fb_store_deliver(s->st, gidx, c->id, s->now, s->now + vt, s->ctl.reorder, &d);
        if (rc < 0)
            store_failed(s, "deliver");
        if (rc <= 0)
            break;
        c->inflight++;
        send_delivery(s, c, &d);
        if (s->ctl.duplicate) {
            /* The twin goes to another consumer of the group when one has
             * room, else to the same one (one over its prefetch). */
            struct conn *c2 = next_consumer(s, gidx, c);
            if (c2 == NULL)
                c2 = c;
            struct fb_delivery d2;
            if (fb_store_deliver_copy(s->st, &d, c2->id, s->now + vt, &d2) > 0) {
                c2->inflight++;
                send_delivery(s, c2, &d2);
                fb_delivery_clear(&d2);
            } else {
                store_failed(s, "duplicate");
            }
        }
        fb_delivery_clear(&d);
    }
}

static void dispatch(struct server *s)
{
    for (int i = 0; i < s->ngroups; i++) {
        if (s->dirty[i]) {
            s->dirty[i] = 0;
            dispatch_group(s, i);
        }
    }
}

/* ---- setup and the loop ----------------------------------------------- */

static int listen_on(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        cwlog_warn("socket path too long (max %zu bytes): %s", sizeof(sa.sun_path) - 1, path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);

    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode)) {
            cwlog_warn("%s exists and is not a socket: not removing it", path);
            return -1;
        }
        /* A socket nobody answers on is a leftover of a killed broker. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            close(probe);
            cwlog_warn("another broker is listening on %s", path);
            return -1;
        }
        if (probe >= 0)
            close(probe);
        if (unlink(path) < 0) {
            cwlog_warn("could not remove stale socket %s: %s", path, strerror(errno));
            return -1;
        }
    }
    /* Bound under a temporary name and renamed into place once listening:
     * whoever sees the socket file can connect at once. */
    struct sockaddr_un tmp = sa;
    int n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%ld", path, (long)getpid());
    int staged = n > 0 && (size_t)n < sizeof(tmp.sun_path);
    if (!staged)
        tmp = sa; /* no room for a suffix: bind the name itself */
    else
        unlink(tmp.sun_path); /* a leftover of an earlier process with our pid */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        cwlog_warn("socket: %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&tmp, sizeof(tmp)) < 0 || listen(fd, 128) < 0 ||
        (staged && rename(tmp.sun_path, path) < 0)) {
        cwlog_warn("could not listen on %s: %s", path, strerror(errno));
        if (staged)
            unlink(tmp.sun_path);
        close(fd);
        return -1;
    }
    return fd;
}

/* A subscriber that asked for heartbeats and has sent nothing for two
 * intervals is gone, whatever its socket says: a half-open link (a peer
 * whose machine or network vanished) never reads as closed.  Dropping it
 * redelivers what it held, as an AMQP broker does on a missed heartbeat. */
static int64_t silent_until(const struct conn *c)
{
    return c->last_rx + 2 * (int64_t)c->heartbeat_ms;
}

static void drop_silent(struct server *s)
{
    for (struct conn *c = s->conns; c != NULL; c = c->next) {
        if (!c->dead && c->heartbeat_ms > 0 && s->now >= silent_until(c)) {
            c->dead = 1;
            c->why = "heartbeat";
        }
    }
}

static int poll_timeout(struct server *s)
{
    int64_t wait = MAX_WAIT_MS;
    for (struct conn *c = s->conns; c != NULL; c = c->next) {
        if (c->dead)
            return 0;
        if (c->closing && c->close_by - s->now < wait)
            wait = c->close_by - s->now;
        if (c->heartbeat_ms > 0 && silent_until(c) - s->now < wait)
            wait = silent_until(c) - s->now;
    }
    if (s->next_due >= 0 && s->next_due - s->now < wait)
        wait = s->next_due - s->now;
    return wait < 0 ? 0 : (int)wait;
}

static int round_once(struct server *s, struct pollfd *pfd, struct conn **who, int n)
{
    s->now = cw_mono_ms();
    if (fb_store_begin(s->st) < 0) {
        cwlog_warn("could not begin: %s", fb_store_errmsg(s->st));
        return -1;
    }
    if (s->next_due >= 0 && s->now >= s->next_due)
        mark_all_dirty(s);
    for (int i = 1; i < n; i++) {
        if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
            conn_read(s, who[i]);
    }
    if (pfd[0].revents & POLLIN)
        conn_accept(s);
    drop_silent(s);
    struct release_ctx x = {s, "visibility_timeout"};
    if (fb_store_expire(s->st, s->now, ready_at(s, 0), on_release, &x) < 0)
        store_failed(s, "expire");
    reap(s);
    dispatch(s);
    if (s->failed) {
        fb_store_rollback(s->st);
        return -1;
    }
    if (fb_store_commit(s->st) < 0) {
        cwlog_warn("could not commit: %s", fb_store_errmsg(s->st));
        return -1;
    }
    if (s->events_fd >= 0)
        write_events(s);
    for (struct conn *c = s->conns; c != NULL; c = c->next)
        conn_flush(s, c);
    s->next_due = fb_store_next_due(s->st, s->now);
    return 0;
}

static void shutdown_server(struct server *s)
{
    s->now = cw_mono_ms();
    for (struct conn *c = s->conns; c != NULL; c = c->next) {
        conn_flush(s, c);
        c->dead = 1;
        c->why = "shutdown";
    }
    if (fb_store_begin(s->st) == 0) {
        reap(s);
        cJSON *st = fb_store_stats(s->st, s->now);
        struct fb_buf *b = ev_begin(s, "shutdown");
        ev_members(b, st);
        ev_emit(s);
        cJSON_Delete(st);
        if (fb_store_commit(s->st) < 0)
            cwlog_warn("could not commit at shutdown: %s", fb_store_errmsg(s->st));
    }
    if (s->events_fd >= 0)
        write_events(s);
}

static void on_recover(void *arg, const struct fb_release *r)
{
    struct server *s = arg;
    struct fb_buf *b = release_log(s, "redeliver", NULL, r);
    fb_jw_str(b, "reason", "restart");
    ev_emit(s);
}

static void free_conns(struct server *s)
{
    while (s->conns != NULL) {
        struct conn *c = s->conns;
        s->conns = c->next;
        close(c->fd);
        fb_linebuf_free(&c->in);
        fb_buf_free(&c->out);
        free(c);
    }
}

/* Opens the events file and the store, recovers, listens.  0 or -1. */
static int setup(struct server *s)
{
    const struct fb_options *opt = s->opt;
    if (opt->events_path != NULL && strcmp(opt->events_path, "-") != 0) {
        s->events_fd = open(opt->events_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (s->events_fd < 0) {
            cwlog_warn("could not open events file %s: %s", opt->events_path, strerror(errno));
            return -1;
        }
    }
    char err[512];
    s->st = fb_store_open(opt->db_path, err, sizeof(err));
    if (s->st == NULL) {
        cwlog_warn("%s", err);
        return -1;
    }
    sync_groups(s);
    s->now = cw_mono_ms();
    if (fb_store_begin(s->st) < 0)
        goto store_fail;
    int recovered = fb_store_recover(s->st, on_recover, s);
    if (recovered < 0)
        goto store_fail;
    s->lfd = listen_on(opt->socket_path);
    if (s->lfd < 0)
        return -1;
    struct fb_buf *b = ev_begin(s, "start");
    fb_jw_str(b, "socket", opt->socket_path);
    fb_jw_str(b, "db", opt->db_path ? opt->db_path : ":memory:");
    fb_jw_int(b, "visibility_timeout_ms", opt->visibility_timeout_ms);
    fb_jw_int(b, "recovered", recovered);
    fb_jw_str(b, "fault_fifo", fault_fifo_prefix());
    ev_emit(s);
    if (fb_store_commit(s->st) < 0)
        goto store_fail;
    if (s->events_fd >= 0)
        write_events(s);
    return 0;
store_fail:
    cwlog_warn("store error: %s", fb_store_errmsg(s->st));
    return -1;
}

int fb_server_run(const struct fb_options *opt)
{
    struct server srv;
    struct server *s = &srv;
    int status = 1;
    memset(s, 0, sizeof(*s));
    s->opt = opt;
    s->lfd = -1;
    s->events_fd = -1;
    s->next_due = -1;
    s->pid = (long long)getpid();
    fb_control_defaults(&s->ctl, opt->visibility_timeout_ms);

    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &orig);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t waitmask = orig;
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGINT);

    struct pollfd *pfd = NULL;
    struct conn **who = NULL;
    int cap = 0;
    if (setup(s) < 0)
        goto out;
    while (!stop_requested) {
        if (cap < s->nconns + 1) {
            cap = s->nconns + 64;
            struct pollfd *np = realloc(pfd, sizeof(*pfd) * (size_t)cap);
            if (np == NULL)
                abort();
            pfd = np;
            struct conn **nw = realloc(who, sizeof(*who) * (size_t)cap);
            if (nw == NULL)
                abort();
            who = nw;
        }
        int n = 0;
        pfd[n].fd = s->lfd;
        pfd[n].events = s->nconns < MAX_CONNS ? POLLIN : 0;
        pfd[n].revents = 0;
        who[n++] = NULL;
        for (struct conn *c = s->conns; c != NULL; c = c->next) {
            short mask = 0;
            if (!c->closing && out_pending(c) < OUT_HIGH)
                mask |= POLLIN;
            if (out_pending(c) > 0 || c->dumping)
                mask |= POLLOUT;
            pfd[n].fd = c->fd;
            pfd[n].events = mask;
            pfd[n].revents = 0;
            who[n++] = c;
        }
        s->now = cw_mono_ms();
        int wait = poll_timeout(s);
        struct timespec ts = {wait / 1000, (long)(wait % 1000) * 1000000L};
        int rc = ppoll(pfd, (nfds_t)n, &ts, &waitmask);
        if (rc < 0 && errno != EINTR) {
            cwlog_warn("poll: %s", strerror(errno));
            break;
        }
        if (rc < 0)
            continue;
        if (round_once(s, pfd, who, n) < 0)
            break;
    }
    status = stop_requested && !s->failed ? 0 : 1;
    close(s->lfd);
    s->lfd = -1;
    unlink(opt->socket_path);
    if (!s->failed)
        shutdown_server(s);
out:
    free(pfd);
    free(who);
    if (s->lfd >= 0) {
        close(s->lfd);
        unlink(opt->socket_path);
    }
    free_conns(s);
    fb_store_close(s->st);
    free(s->dirty);
    free(s->rr);
    fb_buf_free(&s->line);
    fb_buf_free(&s->events);
    if (s->events_fd >= 0)
        close(s->events_fd);
    sigprocmask(SIG_SETMASK, &orig, NULL);
    return status;
}
