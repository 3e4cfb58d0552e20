/* netproxy.h -- the TCP fault proxy: one link per process and peer, faults
 * set and cleared on a live link.
 *
 * Every scenario process reaches PostgreSQL and the broker through a link
 * of its own ("relay-1->pg", "accounting->broker").  A link listens on a
 * loopback TCP port or a Unix socket and forwards each accepted connection
 * to its upstream; with no fault set it is a plain pass-through.  One
 * thread runs every link of a proxy with poll(); the daemon's control thread
 * (netproxy_main.c), which the runner talks to over --control, sets and
 * clears faults (netproxy_set, netproxy_clear).
 *
 * FAULTS (Toxiproxy's vocabulary; "up" is client -> server, "down" is
 * server -> client, "both" is the default):
 *   latency     every chunk is held latency_ms (+- jitter_ms), in order
 *   bandwidth   at most rate_kbps kilobytes a second
 *   blackhole   bytes are swallowed, the connections stay open (half-open)
 *   slicer      chunks are cut into slice_bytes pieces, slice_delay_ms apart
 *   limit_data  the connection is closed after limit_bytes in that direction
 *   reset       every open connection is reset (RST) now; new ones pass
 *   down        open connections are closed and new ones refused
 *   cut         protocol-aware, times times (default 1): the link waits for
 *               cut_after, drops what follows it in the answering direction
 *               and then blackholes or resets the connection (then):
 *                 commit   (pg links)  the client's COMMIT, in the simple
 *                          ('Q') or the extended protocol (Parse of COMMIT,
 *                          then Sync), reaches the server; the server's
 *                          answer is dropped;
 *                 confirm  (broker links) the broker stores a publish; its
 *                          confirm line never reaches the client;
 *                 ack      (broker links) the consumer's ack line never
 *                          reaches the broker.
 *   partition   (TCP links) neither end hears from the other, not even a
 *               TCP ACK.  It lives in the kernel, not in the proxy's thread:
 *               the proxy daemon (netproxy_main.c, partition_set) drops the
 *               link's packets with an nftables chain on its port, and only
 *               in a network namespace of the run's own, which the runner
 *               (sim/runner) makes for a run that has a partition step.
 *   window      a crash window hit from the wire, times times (default 1),
 *               after letting skip matching frames pass (default 0): when
 *               frame passes, the link holds it and everything after it in
 *               its direction, and kills (SIGKILL) or pauses (SIGSTOP,
 *               action) the process at the client end of the link, whose
 *               pid the runner gives (a scenario may not).  After a kill the
 *               held bytes are dropped and the connection is closed: the
 *               server sees the client vanish.  After a pause they are held
 *               until the process runs again (it is resumed), then passed:
 *               what the process had not sent yet the server has not seen,
 *               whichever way the frame went.  Action drop signals nothing:
 *               the frame and what follows it are dropped and the connection
 *               closed, the process lives on -- a write its sender counts as
 *               done that the other end never got.  AMQP heartbeats (frame type
 *               8) pass meanwhile, both ways.  Frames that arrive while a
 *               connection is held are not matched again.
 *                 commit_complete (pg, server -> client) the server's
 *                          CommandComplete 'C' "COMMIT": it committed, the
 *                          client never learns it;
 *                 commit   (pg, client -> server) the client's COMMIT
 *                          ('Q', or the Parse of COMMIT onwards): the
 *                          server never sees it, and rolls back;
 *                          either pg frame, with transaction_with TEXT,
 *                          only for a transaction that sent a statement
 *                          (a Query or a Parse) whose text holds TEXT in
 *                          any case ("INSERT INTO payments"): a service
 *                          whose own agents commit on the same link
 *                          (Wolverine's) is hit at its business
 *                          transaction, not at theirs.  A transaction
 *                          ends at the server's ReadyForQuery 'I'; one
 *                          already begun when the window is set is not
 *                          marked.  commit_complete also takes a marked
 *                          implicit transaction (statements outside BEGIN,
 *                          as EF Core sends one SaveChanges batch): at the
 *                          ReadyForQuery 'I' that ends it when no COMMIT
 *                          or ROLLBACK tag and no error came before;
 *                 publish, ack, nack, reject (amqp, client -> broker) a
 *                          basic.publish (held whole, from its method frame
 *                          on, with its header and body frames) or a
 *                          consumer's settlement;
 *                 confirm, deliver (amqp, broker -> client) a basic.ack
 *                          from the broker (it sends one only as a
 *                          publisher confirm) or a basic.deliver.
 *               A frame that began before the window was set is not
 *               matched; a stream the scanner cannot read (TLS, bad
 *               lengths) is forwarded unparsed and never fires a window.
 *   A fault set with ms > 0 ends by itself after ms milliseconds. */
#ifndef CW_NETPROXY_H
#define CW_NETPROXY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* NP_BROKER speaks the fake broker's protocol (its cuts read its lines);
 * NP_AMQP is a RabbitMQ link (AMQP 0-9-1): every fault but the cuts, and
 * the windows on AMQP frames. */
enum np_proto { NP_PG = 0, NP_BROKER, NP_AMQP };

enum np_kind {
    NP_LATENCY = 0, NP_BANDWIDTH, NP_BLACKHOLE, NP_SLICER, NP_LIMIT_DATA,
    NP_RESET, NP_DOWN, NP_CUT, NP_PARTITION, NP_WINDOW, NP_KIND_COUNT
};

enum np_dir { NP_BOTH = 0, NP_UP, NP_DOWNSTREAM };
enum np_cut_at { NP_CUT_COMMIT = 0, NP_CUT_CONFIRM, NP_CUT_ACK };
enum np_then { NP_THEN_BLACKHOLE = 0, NP_THEN_RESET };

/* The frames a window names (see FAULTS above), and the scanner's one
 * more: a heartbeat, which is never a window's but passes a held stream. */
enum np_frame {
    NP_FRAME_COMMIT_COMPLETE = 0, NP_FRAME_COMMIT, NP_FRAME_PUBLISH, NP_FRAME_ACK,
    NP_FRAME_NACK, NP_FRAME_REJECT, NP_FRAME_CONFIRM, NP_FRAME_DELIVER, NP_FRAME_COUNT,
    NP_FRAME_HEARTBEAT = NP_FRAME_COUNT
};
enum np_action { NP_ACTION_KILL = 0, NP_ACTION_PAUSE, NP_ACTION_DROP };

/* The longest statement text a window can key a transaction by, with its NUL. */
#define NP_MARK_MAX 64
/* Marked units a connection keeps in flight (sent, not yet answered idle). */
#define NP_MARKS_MAX 4

/* One fault as a scenario states it. */
struct np_fault {
    enum np_kind kind;
    enum np_dir dir;
    int ms;                  /* how long; 0: until cleared */
    int latency_ms, jitter_ms;
    int rate_kbps;
    int slice_bytes, slice_delay_ms;
    long long limit_bytes;
    enum np_cut_at cut_after;
    enum np_then then;
    int times;               /* cut, window: how many firings; default 1 */
    enum np_frame frame;     /* window */
    enum np_action action;
    int skip;                /* window: matching frames let pass first */
    char transaction_with[NP_MARK_MAX]; /* window at a COMMIT: fires only for a
                              * transaction one of whose statements held this
                              * text (any case); "" any transaction */
    int pid;                 /* window: the client's process (the runner's, never a
                              * scenario's: np_fault_parse refuses it) */
};

/* Names, for messages and the report. */
const char *np_kind_name(enum np_kind k);
const char *np_proto_name(enum np_proto p);
const char *np_frame_name(enum np_frame f);
const char *np_action_name(enum np_action a);

/* The protocol a frame belongs to (NP_PG or NP_AMQP) and the direction it
 * travels: 0 client -> server, 1 server -> client. */
enum np_proto np_frame_proto(enum np_frame f);
int np_frame_dir(enum np_frame f);

/* Reads a fault from a JSON object ("fault", "direction", "ms",
 * "latency_ms", "jitter_ms", "rate_kbps", "slice_bytes", "slice_delay_ms",
 * "limit_bytes", "cut_after", "then", "times", "frame", "action", "skip"),
 * for a link of protocol proto.  Every field is checked: an unknown fault,
 * a negative or absurd value, a field the fault does not take, a cut or a
 * window frame on a link of the wrong protocol, a "pid" (the daemon takes
 * the runner's apart, see netproxy_main.c).  0, or -1 with "FIELD: reason"
 * in err. */
int np_fault_parse(const cJSON *obj, enum np_proto proto, struct np_fault *out,
                   char *err, size_t errlen);

/* One line in words ("latency 200+-50 ms up for 3000 ms"). */
void np_fault_describe(const struct np_fault *f, char *out, size_t outlen);

/* ---- the proxy ---------------------------------------------------------- */

typedef struct netproxy netproxy;

/* A proxy with no link yet and its thread running.  NULL with err. */
netproxy *netproxy_new(char *err, size_t errlen);

/* Stops the thread and closes every link and connection.  NULL is a no-op. */
void netproxy_free(netproxy *np);

/* Adds link name (at most 63 bytes) of protocol proto: listens on listen_at
 * ("tcp:127.0.0.1:0" picks a free port; "unix:PATH") and forwards to
 * upstream ("tcp:HOST:PORT" or "unix:PATH").  bound receives where it
 * listens ("tcp:127.0.0.1:PORT" or "unix:PATH").  0, or -1 with err. */
int netproxy_add_link(netproxy *np, const char *name, enum np_proto proto,
                      const char *listen_at, const char *upstream,
                      char *bound, size_t boundlen, char *err, size_t errlen);

/* Sets fault f on link name (a fault of the same kind and direction is
 * replaced).  0, or -1 with err (unknown link, too many faults). */
int netproxy_set(netproxy *np, const char *name, const struct np_fault *f,
                 char *err, size_t errlen);

/* Clears every fault of link name.  0, or -1 when no such link. */
int netproxy_clear(netproxy *np, const char *name);

/* Counters of a link, for tests and the report: connections accepted,
 * bytes forwarded up and down, cuts and windows fired.  -1 when no such
 * link. */
struct np_stats {
    long long accepted, bytes_up, bytes_down, cuts, resets, windows;
    long long open;          /* connections open now: the client holds a session */
};
int netproxy_stats(netproxy *np, const char *name, struct np_stats *out);

/* One firing of a window: when (wall clock, microseconds), at which frame,
 * what was done to which process, and whether the signal reached it. */
struct np_firing {
    long long ts_us;
    enum np_frame frame;
    enum np_action action;
    int pid;
    int signal_errno;        /* 0, or kill(2)'s errno */
};

/* The last max firings of link name's windows into out, oldest first (a
 * link keeps its last NP_MAX_FIRINGS; np_stats.windows counts them all).
 * The count, or -1 when no such link.  A scenario that fires a window a
 * thousand times (scripts/bench-window-target) still gets each one: the
 * runner reads them once, at the scenario's end. */
#define NP_MAX_FIRINGS 1024
int netproxy_firings(netproxy *np, const char *name, struct np_firing *out, int max);

/* The process at the client end of link name is now pid (the runner
 * restarted it): every window of the link signals that one from now on.
 * 0, or -1 when no such link. */
int netproxy_set_pid(netproxy *np, const char *name, int pid);

/* ---- the wire parsers (pure; exported for the unit tests) --------------- */

/* The PostgreSQL frontend protocol as seen from the client's side:
 * message boundaries, and whether a COMMIT was sent. */
struct np_pgscan {
    int started;             /* the startup packet is done */
    unsigned char hdr[8];
    int hdrlen;              /* header bytes collected of the current message */
    int type;                /* current message type, 0 during startup */
    long long left;          /* body bytes still to pass */
    char text[80];           /* first bytes of a Q or P body */
    int textlen;
    int commit_parsed;       /* a Parse of COMMIT awaits its Sync */
    int broken;              /* unparseable: scanning stopped */
};

/* Feeds n client bytes.  Returns the offset just past the message that
 * completes a COMMIT (a 'Q' COMMIT, or the Sync after a Parse of COMMIT),
 * or -1 when these bytes complete none.  Scanning goes on after a hit. */
long np_pgscan_feed(struct np_pgscan *sc, const unsigned char *buf, size_t n);

/* Whether query text (not NUL-terminated, n bytes) is a COMMIT or END. */
int np_is_commit(const char *text, size_t n);

/* Newline-delimited JSON frames: finds the first line whose op is op,
 * keeping only each line's head (its first bytes, where both the broker
 * and the bus write "op"). */
struct np_linescan {
    char head[48];
    int headlen;
    int in_line;             /* inside a line whose head is decided */
};

/* Feeds n bytes.  Returns the offset in buf from which to drop (where the
 * matching line starts, or 0 when it began in an earlier buffer: a head
 * fragment already passed is harmless, its line never completes), or -1
 * when no line of op is decided in these bytes. */
long np_linescan_feed(struct np_linescan *sc, const char *op, const char *buf, size_t n);

/* The frames of both directions of one connection, for the windows
 * (netproxy_frames.c).  PostgreSQL: the client's startup packets, then
 * typed messages both ways; the server answers each SSLRequest or
 * GSSENCRequest with one untyped byte, which the client's side announces
 * (answers_due).  AMQP 0-9-1: the client's 8-byte protocol header, then
 * frames both ways.  A stream that breaks the protocol (a bad length, an
 * unknown frame type, a missing frame end, TLS) is marked broken: from
 * there its bytes pass unread and none is a hit.  Offsets count the bytes
 * of one direction from the connection's start, so a frame is found at
 * the same offset however its bytes are split into reads. */
struct np_stream {
    long long pos;           /* bytes fed so far */
    long long frame_at;      /* where the current frame began */
    unsigned char hdr[8];
    int hdrlen;              /* header bytes collected of the current frame */
    int started;             /* past the startup packets / protocol header */
    int type;                /* current frame or message type */
    long long left;          /* its bytes still to come (AMQP: with the frame end) */
    unsigned char body[80];  /* the first bytes of a frame that may be a hit */
    int bodylen;
    int pending;             /* the current frame may be a hit, undecided */
    int broken;
};

struct np_wire {
    enum np_proto proto;
    struct np_stream s[2];   /* 0 client -> server, 1 server -> client */
    int answers_due;         /* pg: SSL/GSS requests the server has not answered */
    /* pg: the statement text that marks a transaction (np_wire_mark), as a
     * streaming matcher over each Query's and Parse's body (Knuth-Morris-
     * Pratt, so no byte is looked at twice and any split of the body into
     * reads finds the same match) */
    char mark[NP_MARK_MAX];
    int marklen;
    int mark_fail[NP_MARK_MAX];
    int mark_at;             /* bytes of mark matched so far in this message */
    long long marks[NP_MARKS_MAX]; /* units with a statement holding mark, not
                              * yet closed by an idle ReadyForQuery, ascending */
    int nmarks;
    int tx_ended;            /* a COMMIT or ROLLBACK tag or an error came since
                              * the last idle ReadyForQuery */
    /* pg: units (netproxy_frames.c, pg_count_unit) */
    long long units;         /* the client's Query, Sync and FunctionCall messages */
    long long stmt_unit;     /* the unit of the client's current message */
    long long ready;         /* the server's ReadyForQuery messages */
    long long z_unit;        /* the unit the current ReadyForQuery closes (0: startup) */
    long long resp_unit;     /* the unit the server's current answer belongs to */
};

/* A decided frame: a window's frame or a heartbeat, at stream offsets
 * [at, end) (end known for heartbeats only: their frame is complete). */
struct np_hit {
    int frame;               /* enum np_frame, NP_FRAME_HEARTBEAT, or -1: none */
    long long at, end;
    int marked;              /* a COMMIT's: its transaction was marked */
};

/* A fresh scanner for a connection of protocol proto (NP_BROKER: reads
 * nothing, finds nothing). */
void np_wire_init(struct np_wire *w, enum np_proto proto);

/* From now on, marks each transaction of w that sends a statement holding
 * text (any case; at most NP_MARK_MAX - 1 bytes; NULL or "": none), and
 * tells at each COMMIT's hit whether its transaction was marked.  The
 * transaction under way is not marked. */
void np_wire_mark(struct np_wire *w, const char *text);

/* Feeds up to n bytes of direction dir.  Stops right after the byte that
 * decides a hit (hit->frame >= 0) and returns how many bytes it took; with
 * no hit it takes them all (hit->frame -1). */
size_t np_wire_feed(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                    struct np_hit *hit);

/* The offset before which every byte of direction dir is decided: the
 * start of a frame that may still turn out to be a hit, else everything
 * fed. */
long long np_wire_safe(const struct np_wire *w, int dir);

#endif
