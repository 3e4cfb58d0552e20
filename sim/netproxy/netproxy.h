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
 *   A fault set with ms > 0 ends by itself after ms milliseconds. */
#ifndef CW_NETPROXY_H
#define CW_NETPROXY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* NP_BROKER speaks the fake broker's protocol (its cuts read its lines);
 * NP_AMQP is a RabbitMQ link, forwarded but never parsed: every fault but
 * the protocol-aware cuts. */
enum np_proto { NP_PG = 0, NP_BROKER, NP_AMQP };

enum np_kind {
    NP_LATENCY = 0, NP_BANDWIDTH, NP_BLACKHOLE, NP_SLICER, NP_LIMIT_DATA,
    NP_RESET, NP_DOWN, NP_CUT, NP_PARTITION, NP_KIND_COUNT
};

enum np_dir { NP_BOTH = 0, NP_UP, NP_DOWNSTREAM };
enum np_cut_at { NP_CUT_COMMIT = 0, NP_CUT_CONFIRM, NP_CUT_ACK };
enum np_then { NP_THEN_BLACKHOLE = 0, NP_THEN_RESET };

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
    int times;               /* cut: how many cuts; default 1 */
};

/* Names, for messages and the report. */
const char *np_kind_name(enum np_kind k);
const char *np_proto_name(enum np_proto p);

/* Reads a fault from a JSON object ("fault", "direction", "ms",
 * "latency_ms", "jitter_ms", "rate_kbps", "slice_bytes", "slice_delay_ms",
 * "limit_bytes", "cut_after", "then", "times"), for a link of protocol
 * proto.  Every field is checked: an unknown fault, a negative or absurd
 * value, a field the fault does not take, a cut on a link of the wrong
 * protocol.  0, or -1 with "FIELD: reason" in err. */
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
 * bytes forwarded up and down, cuts fired.  -1 when no such link. */
struct np_stats {
    long long accepted, bytes_up, bytes_down, cuts, resets;
};
int netproxy_stats(netproxy *np, const char *name, struct np_stats *out);

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

#endif
