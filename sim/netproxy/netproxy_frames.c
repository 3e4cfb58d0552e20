/* netproxy_frames.c -- the frames a window names, found in both directions
 * of a PostgreSQL or AMQP 0-9-1 connection.  Pure functions: see
 * netproxy.h (struct np_wire).
 *
 * The scanner walks each direction frame by frame and never looks back: it
 * keeps a frame's header and, for a frame that may be a hit, its first
 * bytes (a query's text, a tag, a method's class and id), so a frame split
 * over any number of reads is decided at the same byte.  Until then the
 * frame is "pending", and np_wire_safe says where it began: the proxy holds
 * those bytes back, because once the frame turns out to be a window's it
 * must not have been forwarded in part. */
#include "netproxy.h"

#include <ctype.h>
#include <string.h>

#define PG_SSL_REQUEST 80877103u
#define PG_GSSENC_REQUEST 80877104u
#define PG_MAX_MESSAGE (1LL << 30)
#define PG_MAX_STARTUP 10000     /* PostgreSQL's own limit on a startup packet */
#define PG_QUERY_KEEP 80         /* a query's first bytes: enough to tell a COMMIT */

#define AMQP_MAX_FRAME (1LL << 27)
#define AMQP_FRAME_END 0xCE
#define AMQP_CLASS_BASIC 60

static const unsigned char amqp_header[8] = { 'A', 'M', 'Q', 'P', 0, 0, 9, 1 };

static const char *const frame_names[NP_FRAME_COUNT] = {
    "commit_complete", "commit", "publish", "ack", "nack", "reject", "confirm", "deliver"
};

const char *np_frame_name(enum np_frame f)
{
    return (unsigned)f < NP_FRAME_COUNT ? frame_names[f] : "?";
}

const char *np_action_name(enum np_action a)
{
    return a == NP_ACTION_PAUSE ? "pause" : a == NP_ACTION_DROP ? "drop" : "kill";
}

enum np_proto np_frame_proto(enum np_frame f)
{
    return f == NP_FRAME_COMMIT_COMPLETE || f == NP_FRAME_COMMIT ? NP_PG : NP_AMQP;
}

int np_frame_dir(enum np_frame f)
{
    return f == NP_FRAME_COMMIT_COMPLETE || f == NP_FRAME_CONFIRM || f == NP_FRAME_DELIVER;
}

static unsigned be32(const unsigned char *p)
{
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

static unsigned be16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

void np_wire_init(struct np_wire *w, enum np_proto proto)
{
    memset(w, 0, sizeof(*w));
    w->proto = proto;
}

long long np_wire_safe(const struct np_wire *w, int dir)
{
    const struct np_stream *s = &w->s[dir];
    return s->pending && !s->broken ? s->frame_at : s->pos;
}

/* ---- PostgreSQL ----------------------------------------------------------- */

void np_wire_mark(struct np_wire *w, const char *text)
{
    size_t n = text != NULL ? strnlen(text, NP_MARK_MAX - 1) : 0;
    for (size_t i = 0; i < n; i++)
        w->mark[i] = (char)tolower((unsigned char)text[i]);
    w->mark[n] = '\0';
    w->marklen = (int)n;
    w->mark_at = 0;
    w->nmarks = 0;
    w->tx_ended = 0;
    /* mark_fail[i]: the longest proper prefix of mark[0..i] that is also
     * its suffix, where the match goes on after a mismatch */
    int k = 0;
    if (n > 0)
        w->mark_fail[0] = 0;
    for (size_t i = 1; i < n; i++) {
        while (k > 0 && w->mark[i] != w->mark[k])
            k = w->mark_fail[k - 1];
        if (w->mark[i] == w->mark[k])
            k++;
        w->mark_fail[i] = k;
    }
}

/* A statement holding the mark was sent in the client's unit u. */
static void mark_add(struct np_wire *w, long long u)
{
    if (w->nmarks > 0 && w->marks[w->nmarks - 1] == u)
        return;
    if (w->nmarks == NP_MARKS_MAX)
        w->nmarks--; /* more transactions in flight than kept: the latest wins */
    w->marks[w->nmarks++] = u;
}

/* Whether a statement holding the mark was sent in unit u or before it,
 * since the last idle ReadyForQuery. */
static int marked_upto(const struct np_wire *w, long long u)
{
    return w->nmarks > 0 && w->marks[0] <= u;
}

/* Statement bytes of a Query or a Parse, through the matcher. */
static void mark_feed(struct np_wire *w, const unsigned char *buf, size_t n)
{
    int k = w->mark_at;
    for (size_t i = 0; i < n; i++) {
        char c = (char)tolower(buf[i]);
        while (k > 0 && w->mark[k] != c)
            k = w->mark_fail[k - 1];
        if (w->mark[k] == c)
            k++;
        if (k == w->marklen) {
            mark_add(w, w->stmt_unit);
            k = w->mark_fail[k - 1];
        }
    }
    w->mark_at = k;
}

/* How many first bytes of a typed message of type decide it, in direction
 * dir: 0 when it is never a hit. */
static int pg_keep(const struct np_wire *w, int dir, int type)
{
    if (dir == 0)
        return type == 'Q' || type == 'P' ? PG_QUERY_KEEP : 0;
    if (type == 'Z')
        return w->marklen > 0 ? 1 : 0; /* the status: a marked implicit commit */
    return type == 'C' ? 8 : 0;        /* "COMMIT\0", or "ROLLBACK"'s first 8 */
}

/* The verdict on a pending message whose first bytes are in s->body; sets
 * *marked for a COMMIT's hit. */
static int pg_decide(struct np_wire *w, const struct np_stream *s, int dir, int *marked)
{
    const char *t = (const char *)s->body;
    size_t n = (size_t)s->bodylen;
    if (dir == 1 && s->type == 'Z') {
        /* ReadyForQuery 'I' ends unit z_unit idle: the transaction is over.
         * A marked one that no COMMIT or ROLLBACK tag and no error ended
         * was implicit (a batch or a statement outside BEGIN, as EF Core
         * sends one SaveChanges batch): it committed at this message. */
        if (n != 1 || t[0] != 'I' || w->z_unit == 0)
            return -1;
        *marked = marked_upto(w, w->z_unit);
        int implicit = *marked && !w->tx_ended;
        int keep = 0;
        for (int i = 0; i < w->nmarks; i++)
            if (w->marks[i] > w->z_unit)
                w->marks[keep++] = w->marks[i]; /* a later unit's, sent ahead */
        w->nmarks = keep;
        w->tx_ended = 0;
        return implicit ? NP_FRAME_COMMIT_COMPLETE : -1;
    }
    if (dir == 1) {
        if (n >= 7 && (memcmp(t, "COMMIT", 7) == 0 || memcmp(t, "ROLLBACK", 8) == 0))
            w->tx_ended = 1;
        *marked = marked_upto(w, w->resp_unit);
        return n >= 7 && memcmp(t, "COMMIT", 7) == 0 ? NP_FRAME_COMMIT_COMPLETE : -1;
    }
    *marked = marked_upto(w, w->stmt_unit);
    if (s->type == 'P') {
        /* Parse: statement name, NUL, query, NUL, ... */
        size_t name = strnlen(t, n);
        if (name == n)
            return -1;
        t += name + 1;
        n -= name + 1;
    }
    return np_is_commit(t, strnlen(t, n)) ? NP_FRAME_COMMIT : -1;
}

/* The client's untyped startup packets: length(4), code(4), rest. */
static int pg_startup_header(struct np_wire *w, struct np_stream *s)
{
    long long len = be32(s->hdr);
    unsigned code = be32(s->hdr + 4);
    if (len < 8 || len > PG_MAX_STARTUP)
        return -1;
    s->left = len - 8;
    if (code == PG_SSL_REQUEST || code == PG_GSSENC_REQUEST)
        w->answers_due++;
    else
        s->started = -1; /* the startup packet: typed messages follow it */
    return 0;
}

/* Units: the server answers each Query, Sync and FunctionCall with one
 * ReadyForQuery, in order, so the client's k-th of them and the server's
 * k-th ReadyForQuery after the startup's one close the same unit k, however
 * far the client pipelines ahead (Npgsql sends DISCARD ALL, BEGIN and a
 * batch in one write).  A statement belongs to the unit its message ends
 * (a Query) or the next Sync ends (a Parse); an answer, to the unit the
 * next ReadyForQuery closes. */
static void pg_count_unit(struct np_wire *w, int dir, int type)
{
    if (dir == 0) {
        w->mark_at = 0; /* a match never spans two messages */
        if (type == 'Q' || type == 'S' || type == 'F')
            w->units++;
        w->stmt_unit = type == 'Q' || type == 'S' || type == 'F' ? w->units : w->units + 1;
    } else if (type == 'Z') {
        w->z_unit = w->ready++; /* 0: the startup's */
    } else {
        w->resp_unit = w->ready;
        if (type == 'E')
            w->tx_ended = 1; /* an error: whatever was under way will not commit */
    }
}

/* One step of a PostgreSQL stream: consumes at least one byte of buf. */
static size_t pg_step(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                      struct np_hit *hit)
{
    struct np_stream *s = &w->s[dir];
    if (dir == 1 && w->answers_due > 0 && s->hdrlen == 0 && s->left == 0) {
        /* The server's one-byte answer to SSLRequest or GSSENCRequest:
         * 'N' goes on in plain text; anything else is encryption. */
        w->answers_due--;
        if (buf[0] != 'N') {
            w->s[0].broken = w->s[1].broken = 1;
        }
        s->pos++;
        return 1;
    }
    int typed = dir == 1 || s->started > 0;
    int need = typed ? 5 : 8;
    size_t i = 0;
    if (s->hdrlen < need) {
        if (s->hdrlen == 0) {
            s->frame_at = s->pos;
            s->bodylen = 0;
            s->type = typed ? buf[0] : 0;
            s->pending = typed && pg_keep(w, dir, s->type) > 0;
            if (typed)
                pg_count_unit(w, dir, s->type);
        }
        while (i < n && s->hdrlen < need)
            s->hdr[s->hdrlen++] = buf[i++];
        s->pos += (long long)i;
        if (s->hdrlen < need)
            return i;
        if (!typed) {
            if (pg_startup_header(w, s) < 0) {
                s->broken = 1;
                return i;
            }
        } else {
            long long len = be32(s->hdr + 1);
            if (len < 4 || len > PG_MAX_MESSAGE) {
                s->broken = 1;
                return i;
            }
            s->left = len - 4;
        }
    } else {
        size_t take = n;
        if ((long long)take > s->left)
            take = (size_t)s->left;
        int keep = s->pending ? pg_keep(w, dir, s->type) : 0;
        if (s->bodylen < keep) {
            size_t room = (size_t)(keep - s->bodylen);
            size_t k = take < room ? take : room;
            memcpy(s->body + s->bodylen, buf, k);
            s->bodylen += (int)k;
        }
        if (dir == 0 && w->marklen > 0 && (s->type == 'Q' || s->type == 'P'))
            mark_feed(w, buf, take);
        s->left -= (long long)take;
        s->pos += (long long)take;
        i = take;
    }
    if (s->pending && (s->left == 0 || s->bodylen == pg_keep(w, dir, s->type))) {
        s->pending = 0;
        int marked;
        int f = pg_decide(w, s, dir, &marked);
        if (f >= 0) {
            hit->frame = f;
            hit->at = s->frame_at;
            hit->marked = marked;
        }
    }
    if (s->left == 0) {
        s->hdrlen = 0; /* the message ends here */
        if (s->started < 0)
            s->started = 1;
    }
    return i;
}

/* ---- AMQP 0-9-1 ------------------------------------------------------------ */

/* The frame a method is, for the window of direction dir, or -1. */
static int amqp_method_frame(int dir, unsigned cls, unsigned method)
{
    if (cls != AMQP_CLASS_BASIC)
        return -1;
    if (dir == 0)
        return method == 40 ? NP_FRAME_PUBLISH : method == 80 ? NP_FRAME_ACK
             : method == 120 ? NP_FRAME_NACK : method == 90 ? NP_FRAME_REJECT : -1;
    return method == 80 ? NP_FRAME_CONFIRM : method == 60 ? NP_FRAME_DELIVER : -1;
}

/* One step of an AMQP stream: consumes at least one byte of buf. */
static size_t amqp_step(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                        struct np_hit *hit)
{
    struct np_stream *s = &w->s[dir];
    if (dir == 0 && !s->started) {
        /* The protocol header, client side only: compared byte by byte. */
        if (buf[0] != amqp_header[s->hdrlen]) {
            s->broken = 1;
            return 0;
        }
        s->pos++;
        if (++s->hdrlen == (int)sizeof(amqp_header)) {
            s->started = 1;
            s->hdrlen = 0;
        }
        return 1;
    }
    size_t i = 0;
    if (s->hdrlen < 7) {
        if (s->hdrlen == 0) {
            s->frame_at = s->pos;
            s->bodylen = 0;
            s->type = buf[0];
            s->pending = s->type == 1;
        }
        while (i < n && s->hdrlen < 7)
            s->hdr[s->hdrlen++] = buf[i++];
        s->pos += (long long)i;
        if (s->hdrlen < 7)
            return i;
        long long size = be32(s->hdr + 3);
        int t = s->type;
        if ((t != 1 && t != 2 && t != 3 && t != 8) || size > AMQP_MAX_FRAME ||
            (t == 8 && size != 0) || (t == 1 && size < 4)) {
            s->broken = 1;
            return i;
        }
        s->left = size + 1; /* the payload and the frame end */
        return i;
    }
    if (s->left == 1) {
        /* the frame end */
        s->pos++;
        s->left = 0;
        s->hdrlen = 0;
        if (buf[0] != AMQP_FRAME_END) {
            s->broken = 1;
            return 1;
        }
        if (s->type == 8) {
            hit->frame = NP_FRAME_HEARTBEAT;
            hit->at = s->frame_at;
            hit->end = s->pos;
        }
        return 1;
    }
    size_t take = n;
    if ((long long)take > s->left - 1)
        take = (size_t)(s->left - 1);
    if (s->pending && s->bodylen < 4) {
        size_t k = take < (size_t)(4 - s->bodylen) ? take : (size_t)(4 - s->bodylen);
        memcpy(s->body + s->bodylen, buf, k);
        s->bodylen += (int)k;
    }
    s->left -= (long long)take;
    s->pos += (long long)take;
    if (s->pending && s->bodylen == 4) {
        s->pending = 0;
        int f = amqp_method_frame(dir, be16(s->body), be16(s->body + 2));
        if (f >= 0) {
            hit->frame = f;
            hit->at = s->frame_at;
        }
    }
    return take;
}

size_t np_wire_feed(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                    struct np_hit *hit)
{
    struct np_stream *s = &w->s[dir];
    hit->frame = -1;
    hit->at = hit->end = 0;
    hit->marked = 0;
    size_t i = 0;
    if (w->proto == NP_PG || w->proto == NP_AMQP) {
        while (i < n && !s->broken && hit->frame < 0)
            i += w->proto == NP_PG ? pg_step(w, dir, buf + i, n - i, hit)
                                   : amqp_step(w, dir, buf + i, n - i, hit);
        if (hit->frame >= 0)
            return i;
    }
    /* A broken stream, or one the scanner does not read: the rest passes. */
    s->pos += (long long)(n - i);
    return n;
}
