/* fakebroker.h -- an at-least-once broker for the harness, and its protocol.
 *
 * The fake broker stands in for RabbitMQ, SQS or a partitioned log.  It keeps
 * its state in SQLite (":memory:" by default, a file with --db so it survives
 * its own restart), serves many clients on one Unix socket, and writes a log
 * line for every publish, delivery, ack, nack, redelivery and control change
 * (--events FILE, JSON lines with the common cwlog header) for the invariant
 * checker.  It never deduplicates: publishing one message_id twice stores two
 * copies, as a real broker would.
 *
 * PROTOCOL
 * Newline-delimited JSON over a Unix stream socket; one object per line, at
 * most 1 MiB; every frame has "op".  Text that is not JSON, and frames over
 * the limit, get an error frame and the connection is closed; a well-formed
 * frame with an unknown op or a bad field gets an error frame and the
 * connection stays open.  Other clients are never affected.
 *
 *   error (broker -> client)
 *     {"op":"error","error":"unknown delivery tag 42"}
 *
 *   hello (optional; names the client in the log)
 *     -> {"op":"hello","client":"relay-1"}
 *     <- {"op":"hello_ok","broker":"fakebroker","version":1}
 *
 *   publish: confirmed only after the message is stored.  A client may send
 *   several publishes before reading; confirms come back in the same order.
 *     -> {"op":"publish","seq":7,"topic":"payments",
 *         "message_id":"5f0c...","type":"PaymentCreated",
 *         "partition_key":"9a1e...",
 *         "headers":{"traceparent":"00-...-01","aggregate_version":1,
 *                    "schema_version":1,"occurred_at":"2026-11-29T21:00:00Z"},
 *         "payload":"{\"EventId\":\"5f0c...\",...}"}
 *     <- {"op":"confirm","seq":7,"message_id":"5f0c...","status":"stored","offset":12}
 *     <- {"op":"confirm","seq":7,"message_id":"5f0c...","status":"refused",
 *         "error":"broker outage"}
 *   payload is a string carried byte for byte.  partition_key may be absent.
 *   A publish may carry the lease it was sent under: "claim_token" (the
 *   fencing token of the claim, logged as received) and "not_after_us" (the
 *   end of that lease, microseconds since the epoch, as the database
 *   recorded it).  One that arrives after not_after_us is refused ("lease
 *   ended before the publish arrived") and not stored: the row may be
 *   another worker's by then.  This is the broker's half of the fence; a
 *   broker that cannot check it (RabbitMQ) leaves a late publish to the
 *   consumers' inbox.
 *
 *   subscribe: join a consumer group of a topic.  Every group receives every
 *   message of its topic, including those stored before the group's first
 *   subscriber (a group reads the topic from its start); within a group a
 *   message is in flight with one consumer at a time.
 *     -> {"op":"subscribe","topic":"payments","group":"accounting","prefetch":10}
 *     <- {"op":"subscribed","topic":"payments","group":"accounting","consumer":"c7"}
 *   With ordering (on unless "ordered":false), a group never has two messages
 *   with the same partition_key in flight: a consumer sees a partition's
 *   messages in publish order unless a reorder fault is on.
 *
 *   deliver (broker -> subscriber)
 *     <- {"op":"deliver","tag":42,"topic":"payments","group":"accounting",
 *         "message_id":"5f0c...","type":"PaymentCreated","partition_key":"9a1e...",
 *         "headers":{...},"payload":"...","redelivered":false,"delivery_count":1}
 *
 *   ack / nack: no reply on success; an unknown tag gets an error frame.
 *     -> {"op":"ack","tag":42}
 *     -> {"op":"nack","tag":42,"requeue":true,"delay_ms":200}
 *   A delivery not acked is redelivered (redelivered:true, delivery_count+1)
 *   when its consumer disconnects or its visibility timeout passes.
 *
 *   control: fault switches, any subset per frame; the reply shows them all.
 *     -> {"op":"control","outage":"refuse"}     publishes refused ("hang":
 *                                               never confirmed; "off")
 *     -> {"op":"control","duplicate":true}      every delivery made twice
 *     -> {"op":"control","delay_ms":300}        deliveries held back 300 ms
 *     -> {"op":"control","reorder":true}        within a partition, newest first
 *     -> {"op":"control","drop_before_confirm":2}  store the next 2 publishes,
 *                                               then drop the connection
 *                                               instead of confirming
 *     -> {"op":"control","visibility_timeout_ms":5000}
 *     -> {"op":"control","max_payload_bytes":4096}  larger payloads refused, the
 *                                               error echoing the payload's
 *                                               first 48 bytes, as careless
 *                                               real brokers do:
 *         "payload too large (5000 > 4096 bytes): {\"EventId\":..."
 *         (0 = no limit, the default).  This is how a poison message is made.
 *     <- {"op":"control_ok","outage":"off","duplicate":false,...}
 *
 *   stats: for "is the broker quiet" waits.
 *     -> {"op":"stats"}
 *     <- {"op":"stats","stored":120,"groups":{"accounting":{"acked":118,
 *         "unacked":2,"ready":0,"delayed":0}}}
 *
 *   dump_log: the whole log, one frame per entry, then an end frame.
 *     -> {"op":"dump_log"}
 *     <- {"op":"log","ts_us":...,"event":"publish",...}   (one per entry)
 *     <- {"op":"log_end","count":57}
 *
 * LOG ENTRIES (--events FILE and dump_log), besides ts_us/proc/pid/event:
 *   publish    client, seq, message_id, type, partition_key, aggregate_version,
 *              claim_token, not_after_us (when the publish carried them),
 *              payload_sha256, status (stored|refused|unanswered), offset and
 *              stored_us (stored: the instant checked against not_after_us)
 *   deliver    group, consumer, tag, offset, message_id, redelivered,
 *              delivery_count
 *   ack        group, consumer, tag, offset, message_id
 *   nack       group, consumer, tag, offset, message_id, requeue, delay_ms
 *   redeliver  group, offset, message_id, reason (disconnect|visibility_timeout)
 *   control    the switches after the change
 *   connect / disconnect   client
 *
 * CLARIFICATIONS (fields added to the frames above; nothing above changed)
 *   - A frame is one line of at most FB_MAX_FRAME bytes (the newline not
 *     counted); a trailing "\r" and blank lines are ignored.  Unknown fields
 *     are ignored, except in control, where an unknown switch is an error
 *     (a typo must not silently leave a fault off).
 *   - error frames carry "request" (the op of the frame they answer, when
 *     known) and, for ack/nack, "tag", so a client can tell an asynchronous
 *     error (an ack of an unknown tag) from the answer it waits for.
 *   - A publish that fails validation is answered by a refused confirm (seq
 *     echoed when it was readable), never by a bare error frame, so that
 *     confirms stay in publish order for a pipelining client.
 *   - outage "hang": the publish is neither stored nor answered (logged
 *     "unanswered"); later confirms on that connection are for later
 *     publishes, so a client that timed out must reconnect (bus.h says so).
 *   - drop_before_confirm: the publish is stored and logged (status stored,
 *     "confirm":"dropped"); the rest of that connection's input is discarded
 *     and the connection closed; what was already answered is still sent.
 *   - subscribe takes "ordered" (default true on every topic); the reply adds
 *     "ordered" as the group has it (the group's first subscriber decides).
 *     One subscription per connection.  An older message of a partition
 *     holds back the newer ones only while it is ready to deliver: one nacked
 *     with a delay gives up its turn until the delay passes.
 *   - deliver adds "offset" and, for the second copy made by the duplicate
 *     fault, "duplicate":true; both copies carry the same delivery_count.  A
 *     message is done for its group when any of its deliveries is acked; a
 *     copy still out may be acked (or lost) afterwards without effect.
 *   - An ack or nack must come on the connection the delivery went to.  A
 *     delivery whose visibility timeout passed is forgotten: its tag is
 *     unknown from then on (its message is redelivered).
 *   - nack requeue:false drops the message for that group (state dropped);
 *     delay_ms 0..3600000.
 *   - control also takes "reset":true (every switch back to its default,
 *     visibility timeout back to the command line's), applied before the
 *     other switches of the same frame.  Ranges: delay_ms 0..3600000,
 *     drop_before_confirm 0..1000000, visibility_timeout_ms 1..86400000,
 *     max_payload_bytes 0..FB_MAX_FRAME.
 *   - control takes "close_connections":true, an action: every client
 *     connection but the requester's is closed at once (disconnect reason
 *     closed_by_broker; their unacked deliveries are given back), and the
 *     reply counts them in "closed_connections".
 *   - control takes "refuse_error":"TEXT" (at most FB_MAX_REFUSE_ERROR
 *     bytes; "" restores the default "broker outage"): the error that a
 *     publish refused under outage "refuse" carries in its confirm, as a
 *     real broker's refusal may carry whatever text it likes (credentials
 *     included).  The confirm gets TEXT as it is; the broker's own log, and
 *     the switches it reports, only the sanitized form (sanitize.h), as for
 *     every refusal's "error" in the log.
 *   - Heartbeats, for links that die without a word (a half-open peer, a
 *     link that swallows bytes): subscribe takes "heartbeat_ms"
 *     (100..600000).  A subscriber that has sent nothing for two intervals
 *     is disconnected (reason "heartbeat") and what it held is redelivered.
 *     Any client may send {"op":"ping"}; the broker answers {"op":"pong"},
 *     so a subscriber that hears nothing for two intervals knows the link
 *     is dead (bus_fakebroker.c pings after one quiet interval).
 *   - delay_ms holds back every message that becomes ready (stored, nacked,
 *     or requeued after a disconnect or a visibility timeout) for that long,
 *     on top of a nack's own delay_ms.
 *   - reorder: within a partition, among the messages waiting at the same
 *     moment, the newest never-delivered one goes first; once all have been
 *     delivered, the oldest.  So a consumer that nacks an early version sees
 *     the partition converge to publish order.  It takes effect only when
 *     several messages of a partition wait together (publish before
 *     subscribing, or with delay_ms).  Ordering still allows one in flight.
 *   - stats adds "topics":{"payments":120} (stored per topic), "connections",
 *     and per group "topic", "consumers", "dropped".
 *   - log entries add "topic", "conn" and "client" where they apply; ack and
 *     nack add "finished" (this ended the message for the group), nack adds
 *     "requeued"; a refused publish adds "error"; deliver adds
 *     "partition_key" and, for a copy, "duplicate"; disconnect adds "reason"
 *     (eof, bad_frame, frame_too_large, drop_before_confirm, write_error,
 *     heartbeat, shutdown) and "unread_bytes" when a partial frame was left.  More
 *     entries: "subscribe" (group, consumer, prefetch, ordered, heartbeat_ms), "hello",
 *     "bad_request" (request, tag, error, closed), "redeliver" reason
 *     "restart" (a --db broker found the delivery in flight when it
 *     started), "start", and "shutdown" (the stats at exit).  Numbers are
 *     written as integers (ts_us never in exponent form).  dump_log replays
 *     the log from the store, so with --db it covers every run of that file;
 *     the --events file gets each line after the round's commit, one
 *     write(2) per round.
 *   - Ordering of effects: every frame read in one round of the event loop
 *     is applied in one SQLite transaction, and nothing (confirm, delivery)
 *     is sent before that transaction committed.  With --db FILE the
 *     database is in WAL mode with synchronous=NORMAL: a confirmed message
 *     survives a crash of the broker process (not of the machine).  If a
 *     store operation fails, the round is rolled back, nothing of it is
 *     sent, and the broker exits 1 (fail-stop: never a half-applied change).
 *   - A broker stopped with SIGTERM/SIGINT closes its listener, removes its
 *     socket, sends what it has queued, logs "shutdown" and exits 0.  At
 *     start a socket file nobody answers on is removed; a live one is not.
 */
#ifndef CW_FAKEBROKER_H
#define CW_FAKEBROKER_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#define FB_MAX_FRAME (1024 * 1024)
#define FB_MAX_REFUSE_ERROR 2048

/* ------------------------------------------------------------------------
 * Frames (fakebroker_proto.c): splitting a byte stream into lines and
 * turning one line into a validated request.  Pure: no I/O, no globals, so
 * unit tests and the fuzz target drive it directly.
 * --------------------------------------------------------------------- */

/* Input buffer of one connection.  Bytes go in with fb_linebuf_append and
 * complete lines come out with fb_linebuf_next. */
struct fb_linebuf {
    char *buf;
    size_t len;   /* bytes held */
    size_t cap;
    size_t start; /* first byte not yet returned as a line */
    size_t scan;  /* bytes before this (from start) hold no newline */
};

void fb_linebuf_init(struct fb_linebuf *lb);
void fb_linebuf_free(struct fb_linebuf *lb);
/* Appends n bytes.  0, or -1 on out of memory (the buffer is unchanged). */
int fb_linebuf_append(struct fb_linebuf *lb, const char *data, size_t n);
/* Returns 1 with *line and *len set to the next complete line (without its
 * newline; valid until the next append), 0 when no complete line is held,
 * -1 when the pending line is already longer than FB_MAX_FRAME. */
int fb_linebuf_next(struct fb_linebuf *lb, const char **line, size_t *len);
/* Bytes held that are not yet part of a returned line. */
size_t fb_linebuf_pending(const struct fb_linebuf *lb);

enum fb_op {
    FB_OP_HELLO = 1,
    FB_OP_PUBLISH,
    FB_OP_SUBSCRIBE,
    FB_OP_ACK,
    FB_OP_NACK,
    FB_OP_CONTROL,
    FB_OP_STATS,
    FB_OP_DUMP_LOG,
    FB_OP_PING
};

enum fb_outage { FB_OUTAGE_OFF = 0, FB_OUTAGE_REFUSE, FB_OUTAGE_HANG };

/* The fault switches. */
struct fb_control {
    int outage;                /* enum fb_outage */
    int duplicate;
    int delay_ms;
    int reorder;
    int drop_before_confirm;   /* publishes still to be dropped */
    int visibility_timeout_ms;
    int max_payload_bytes;     /* 0 = no limit */
    char refuse_error[FB_MAX_REFUSE_ERROR + 1]; /* "" = "broker outage" */
};

/* Which switches a control frame sets (bits), and their new values. */
enum {
    FB_CTL_OUTAGE = 1 << 0,
    FB_CTL_DUPLICATE = 1 << 1,
    FB_CTL_DELAY = 1 << 2,
    FB_CTL_REORDER = 1 << 3,
    FB_CTL_DROP = 1 << 4,
    FB_CTL_VISIBILITY = 1 << 5,
    FB_CTL_MAX_PAYLOAD = 1 << 6,
    FB_CTL_REFUSE_ERROR = 1 << 7
};

/* A parsed request.  Every pointer borrows from root, which the frame owns:
 * release with fb_frame_free. */
struct fb_frame {
    enum fb_op op;
    cJSON *root;
    const char *client;          /* hello */
    /* publish */
    int has_seq;
    long long seq;
    const char *topic;           /* publish, subscribe */
    const char *message_id;
    const char *type;
    const char *partition_key;   /* NULL when absent or null */
    const cJSON *headers;        /* NULL when absent */
    const char *payload;         /* NULL when absent or null */
    size_t payload_len;
    long long aggregate_version; /* headers.aggregate_version, 0 if absent */
    const char *claim_token;     /* NULL when absent */
    long long not_after_us;      /* 0 when absent */
    /* subscribe */
    const char *group;
    int prefetch;
    int ordered;
    int heartbeat_ms;            /* 0 when absent */
    /* ack, nack */
    uint64_t tag;
    int requeue;
    int delay_ms;
    /* control */
    int ctl_reset;
    int ctl_close_connections; /* close every other client's connection now */
    unsigned ctl_mask;
    struct fb_control ctl;
};

/* Parses one line.  Returns 0 with *f filled; otherwise a message in err and
 *   -1  not JSON, or not an object: the connection is to be closed;
 *   -2  an object with a missing/unknown op or a bad field: answer with an
 *       error frame.  f->op is set when the op was known (a bad publish gets
 *       a refused confirm), f->has_seq/seq when seq was readable.
 * After any return, fb_frame_free(f) releases what it holds. */
int fb_parse_frame(const char *line, size_t len, struct fb_frame *f,
                   char *err, size_t errlen);
void fb_frame_free(struct fb_frame *f);

/* The default switches (visibility timeout as given). */
void fb_control_defaults(struct fb_control *c, int visibility_timeout_ms);
/* Applies a parsed control frame to c. */
void fb_control_apply(struct fb_control *c, const struct fb_frame *f,
                      int default_visibility_ms);
/* The switches as a JSON object (caller frees). */
cJSON *fb_control_json(const struct fb_control *c);
const char *fb_outage_name(int outage);

/* A growable byte buffer, always NUL-terminated, and a small JSON writer
 * over it for the frames and log lines sent at high rates (cJSON would
 * print every number through printf and re-read it with sscanf).  Keys are
 * literals of ours and are not escaped; values are.  Out of memory aborts. */
struct fb_buf {
    char *data;
    size_t len;
    size_t cap;
    int first;   /* writer: no member written yet in the current object */
};
void fb_buf_free(struct fb_buf *b);
void fb_buf_add(struct fb_buf *b, const char *s, size_t n);
void fb_jw_begin(struct fb_buf *b);                  /* '{' */
void fb_jw_end(struct fb_buf *b);                    /* '}' */
void fb_jw_str(struct fb_buf *b, const char *key, const char *val); /* NULL: null */
void fb_jw_strn(struct fb_buf *b, const char *key, const char *val, size_t n);
void fb_jw_int(struct fb_buf *b, const char *key, long long v);
void fb_jw_bool(struct fb_buf *b, const char *key, int v);
/* A member whose value is JSON text already (NULL: null). */
void fb_jw_raw(struct fb_buf *b, const char *key, const char *json);

/* Lowercase hex SHA-256 of n bytes into out[65]. */
void fb_sha256_hex(const void *data, size_t n, char out[65]);

/* ------------------------------------------------------------------------
 * Store and delivery state machine (fakebroker_store.c), on SQLite.
 *
 * Per consumer group, each message of its topic is in one state:
 *
 *        publish / group created
 *                 |
 *                 v      deliver (dcount+1, outstanding+1)
 *    +-------> READY ---------------------------------> IN_FLIGHT
 *    |       (visible_at)                                 |   |   |
 *    |                                                    |   |   | ack
 *    +--- nack requeue / disconnect / visibility timeout -+   |   v
 *         (only when no other copy is outstanding)            |  ACKED
 *                                                  nack drop  v
 *                                                          DROPPED
 *
 * Invariants:
 *   I1  a message leaves READY only through fb_store_deliver;
 *   I2  it returns to READY only when its last outstanding delivery ended
 *       without an ack (fb_store_nack with requeue, fb_store_release_conn,
 *       fb_store_expire): a consumer that dies never loses a message;
 *   I3  ACKED and DROPPED are final;
 *   I4  in an ordered group a message is delivered only if no message of its
 *       partition_key is IN_FLIGHT and (without reorder) none of that key
 *       with a smaller offset is READY and visible (one nacked with a delay
 *       gives up its turn): publish order per partition;
 *   I5  every delivery has a tag unique over the store's life (persisted).
 * --------------------------------------------------------------------- */

typedef struct fb_store fb_store;

enum fb_state { FB_READY = 0, FB_IN_FLIGHT = 1, FB_ACKED = 2, FB_DROPPED = 3 };

struct fb_group {
    int64_t id;
    char *topic;
    char *name;
    int ordered;
};

/* Opens (creating if needed) the store at path; NULL or ":memory:" keeps it
 * in memory.  Returns NULL with a message in err. */
fb_store *fb_store_open(const char *path, char *err, size_t errlen);
void fb_store_close(fb_store *st);

/* Explicit transactions: every change between begin and commit is one
 * SQLite transaction.  0 or -1. */
int fb_store_begin(fb_store *st);
int fb_store_commit(fb_store *st);
/* Undoes the open transaction, groups created in it included. */
int fb_store_rollback(fb_store *st);

/* The last SQLite error message. */
const char *fb_store_errmsg(fb_store *st);

struct fb_msg_in {
    const char *topic;
    const char *message_id;
    const char *type;
    const char *partition_key;  /* may be NULL */
    const char *headers_json;   /* may be NULL */
    const char *payload;        /* may be NULL */
    size_t payload_len;
    const char *client;
    const char *sha256;         /* hex, may be NULL */
    int64_t stored_us;
};

/* Stores a message and makes it READY (visible from visible_at_ms) in every
 * group of its topic.  Returns its offset (>= 1) or -1. */
int64_t fb_store_publish(fb_store *st, const struct fb_msg_in *m, int64_t visible_at_ms);

/* Finds or creates the group (topic, name).  A new group starts with every
 * stored message of the topic READY.  Returns its index in the group table
 * (fb_store_group_at), or -1. */
int fb_store_group(fb_store *st, const char *topic, const char *name, int ordered);
int fb_store_group_count(const fb_store *st);
const struct fb_group *fb_store_group_at(const fb_store *st, int idx);
int fb_store_group_index(const fb_store *st, int64_t gid);

/* A delivery made by fb_store_deliver; strings are owned (fb_delivery_clear). */
struct fb_delivery {
    uint64_t tag;
    int64_t gid;
    int64_t offset;
    int delivery_count;
    int duplicate;
    char *topic;
    char *message_id;
    char *type;
    char *partition_key;
    char *headers_json;
    char *payload;
    size_t payload_len;
};
void fb_delivery_clear(struct fb_delivery *d);

/* Picks the next message of group gidx that may go out at now_ms (I4; with
 * reorder the newest never-delivered one of a partition first), moves it to
 * IN_FLIGHT with a new tag owned by consumer conn until deadline_ms.
 * Returns 1 with *d filled, 0 when nothing may go out, -1 on error. */
int fb_store_deliver(fb_store *st, int gidx, uint64_t conn, int64_t now_ms,
                     int64_t deadline_ms, int reorder, struct fb_delivery *d);
/* A second copy of delivery src (the duplicate fault): same message, same
 * delivery count, a new tag owned by conn.  1 or -1. */
int fb_store_deliver_copy(fb_store *st, const struct fb_delivery *src, uint64_t conn,
                          int64_t deadline_ms, struct fb_delivery *d);

/* What ended a delivery, for the log and the owner's in-flight count. */
struct fb_release {
    uint64_t tag;
    uint64_t conn;
    int64_t gid;
    int64_t offset;
    char message_id[256];
    int requeued;   /* the message went back to READY */
    int finished;   /* ack/nack made the message ACKED/DROPPED just now */
};
typedef void (*fb_release_fn)(void *arg, const struct fb_release *r);

/* Ends delivery tag of consumer conn.  Returns 0 with *r filled, 1 when the
 * tag is unknown or not conn's, -1 on error. */
int fb_store_ack(fb_store *st, uint64_t tag, uint64_t conn, struct fb_release *r);
int fb_store_nack(fb_store *st, uint64_t tag, uint64_t conn, int requeue,
                  int64_t visible_at_ms, struct fb_release *r);
/* Ends every delivery of conn (it disconnected) / every delivery past its
 * deadline, calling fn for each.  Returns how many, or -1. */
int fb_store_release_conn(fb_store *st, uint64_t conn, int64_t visible_at_ms,
                          fb_release_fn fn, void *arg);
int fb_store_expire(fb_store *st, int64_t now_ms, int64_t visible_at_ms,
                    fb_release_fn fn, void *arg);
/* At start: every IN_FLIGHT message (a previous run's) back to READY, every
 * delay forgotten (clock values do not survive a restart). fn gets one call
 * per requeued message.  Returns how many, or -1. */
int fb_store_recover(fb_store *st, fb_release_fn fn, void *arg);

/* Earliest future moment (ms, CLOCK_MONOTONIC) something becomes due: a
 * delayed message's visible_at or a delivery's deadline; -1 when none. */
int64_t fb_store_next_due(fb_store *st, int64_t now_ms);
/* Earliest pending delivery deadline, or -1. */
int64_t fb_store_next_deadline(fb_store *st);

/* stats frame body: {"stored":..,"topics":{},"groups":{}} (caller frees). */
cJSON *fb_store_stats(fb_store *st, int64_t now_ms);

/* The broker's log, kept in the store so dump_log can replay it. */
int fb_store_log_append(fb_store *st, const char *line);
int64_t fb_store_log_last_id(fb_store *st);
/* Calls fn for up to max entries with id in (after, until]; returns the last
 * id seen (after when none), or -1 on error. */
int64_t fb_store_log_read(fb_store *st, int64_t after, int64_t until, int max,
                          void (*fn)(void *arg, const char *line), void *arg);

/* ------------------------------------------------------------------------
 * The daemon (fakebroker_server.c): one poll loop over the listening socket
 * and every connection.
 * --------------------------------------------------------------------- */

struct fb_options {
    const char *socket_path;
    const char *db_path;          /* NULL: in memory */
    const char *events_path;      /* NULL: log kept in the store only */
    int visibility_timeout_ms;
};

/* Runs the broker until SIGTERM or SIGINT.  Returns the exit status: 0 after
 * a clean shutdown, 1 on a fatal error (message on stderr). */
int fb_server_run(const struct fb_options *opt);

#endif
