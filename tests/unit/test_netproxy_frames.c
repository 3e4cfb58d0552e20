/* test_netproxy_frames.c -- the windows' frame scanner (np_wire): each
 * frame a window names, found at the same offset however its stream is
 * split into reads; PostgreSQL's SSLRequest answer byte; AMQP's protocol
 * header, heartbeats and whole publishes; bad streams marked broken; the
 * window fault spec. */
#include "netproxy.h"

#include "check.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FOUND 32

struct found {
    int frame;
    long long at, end;
};

static size_t put32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return 4;
}

/* A PostgreSQL typed message. */
static size_t pgmsg(unsigned char *out, char type, const void *body, size_t n)
{
    out[0] = (unsigned char)type;
    put32(out + 1, (unsigned)(n + 4));
    memcpy(out + 5, body, n);
    return n + 5;
}

static size_t pgstartup(unsigned char *out, unsigned code, size_t extra)
{
    put32(out, (unsigned)(8 + extra));
    put32(out + 4, code);
    memset(out + 8, 'x', extra);
    return 8 + extra;
}

/* An AMQP frame: type, channel, payload, frame end. */
static size_t amqp_frame(unsigned char *out, int type, int channel, const void *payload,
                         size_t n)
{
    out[0] = (unsigned char)type;
    out[1] = (unsigned char)(channel >> 8);
    out[2] = (unsigned char)channel;
    put32(out + 3, (unsigned)n);
    memcpy(out + 7, payload, n);
    out[7 + n] = 0xCE;
    return n + 8;
}

/* A method frame of class.method with extra argument bytes. */
static size_t amqp_method(unsigned char *out, int channel, int cls, int method, size_t args)
{
    unsigned char p[64];
    p[0] = (unsigned char)(cls >> 8);
    p[1] = (unsigned char)cls;
    p[2] = (unsigned char)(method >> 8);
    p[3] = (unsigned char)method;
    memset(p + 4, 0, args);
    return amqp_frame(out, 1, channel, p, 4 + args);
}

/* Feeds stream dir of w in pieces cut at the offsets in cuts (ascending,
 * ncuts of them), collecting every hit.  Also checks that a hit's frame
 * was never declared safe before it was decided. */
static int feed_cut(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                    const size_t *cuts, int ncuts, struct found *out)
{
    int nf = 0;
    size_t from = 0;
    for (int c = 0; c <= ncuts; c++) {
        size_t to = c < ncuts ? cuts[c] : n;
        size_t i = from;
        while (i < to) {
            long long safe_before = np_wire_safe(w, dir);
            struct np_hit hit;
            size_t k = np_wire_feed(w, dir, buf + i, to - i, &hit);
            CHECK(k > 0);
            i += k;
            if (hit.frame >= 0 && nf < MAX_FOUND) {
                if (hit.frame != NP_FRAME_HEARTBEAT)
                    CHECK(safe_before <= hit.at); /* none of it was let pass */
                out[nf++] = (struct found){ hit.frame, hit.at, hit.end };
            }
        }
        from = to;
    }
    return nf;
}

static int feed_whole(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                      struct found *out)
{
    return feed_cut(w, dir, buf, n, NULL, 0, out);
}

/* Feeds one byte at a time. */
static int feed_bytewise(struct np_wire *w, int dir, const unsigned char *buf, size_t n,
                         struct found *out)
{
    size_t *cuts = malloc(n * sizeof(*cuts));
    for (size_t i = 0; i < n; i++)
        cuts[i] = i;
    int nf = feed_cut(w, dir, buf, n, cuts + 1, (int)n - 1, out);
    free(cuts);
    return nf;
}

static int same(const struct found *a, int na, const struct found *b, int nb)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (a[i].frame != b[i].frame || a[i].at != b[i].at || a[i].end != b[i].end)
            return 0;
    return 1;
}

/* The client's stream of a libpq session with sslmode=prefer, and the
 * server's answers; *commit_at / *complete_at where the COMMIT and its
 * CommandComplete begin. */
static void pg_session(unsigned char *up, size_t *nup, unsigned char *down, size_t *ndown,
                       long long *commit_at, long long *complete_at)
{
    size_t u = 0, d = 0;
    u += pgstartup(up + u, 80877103u, 0);             /* SSLRequest */
    down[d++] = 'N';                                  /* no TLS here */
    u += pgstartup(up + u, 196608u, 30);              /* StartupMessage */
    unsigned char auth[4] = { 0, 0, 0, 0 };
    d += pgmsg(down + d, 'R', auth, 4);               /* AuthenticationOk */
    d += pgmsg(down + d, 'S', "server_version\0" "15\0", 18);
    d += pgmsg(down + d, 'Z', "I", 1);
    u += pgmsg(up + u, 'Q', "BEGIN", 6);
    d += pgmsg(down + d, 'C', "BEGIN", 6);
    d += pgmsg(down + d, 'Z', "T", 1);
    u += pgmsg(up + u, 'Q', "INSERT INTO payments VALUES (1)", 32);
    d += pgmsg(down + d, 'C', "INSERT 0 1", 11);
    d += pgmsg(down + d, 'Z', "T", 1);
    /* a ROLLBACK tag and a COMMIT PREPARED tag are no commit_complete */
    d += pgmsg(down + d, 'C', "ROLLBACK", 9);
    d += pgmsg(down + d, 'C', "COMMIT PREPARED", 16);
    *commit_at = (long long)u;
    u += pgmsg(up + u, 'Q', "COMMIT", 7);
    *complete_at = (long long)d;
    d += pgmsg(down + d, 'C', "COMMIT", 7);
    d += pgmsg(down + d, 'Z', "I", 1);
    u += pgmsg(up + u, 'Q', "SELECT 'COMMIT'", 16);
    d += pgmsg(down + d, 'T', "\0\0", 2);
    *nup = u;
    *ndown = d;
}

static void test_pg_both_ways_at_every_split(void)
{
    unsigned char up[512], down[512];
    size_t nup, ndown;
    long long commit_at, complete_at;
    pg_session(up, &nup, down, &ndown, &commit_at, &complete_at);
    struct np_wire w;
    struct found ref_up[MAX_FOUND], ref_down[MAX_FOUND], f[MAX_FOUND];
    np_wire_init(&w, NP_PG);
    int nu = feed_whole(&w, 0, up, nup, ref_up);
    int nd = feed_whole(&w, 1, down, ndown, ref_down);
    CHECK_EQ_INT(nu, 1);
    CHECK(ref_up[0].frame == NP_FRAME_COMMIT && ref_up[0].at == commit_at);
    CHECK_EQ_INT(nd, 1);
    CHECK(ref_down[0].frame == NP_FRAME_COMMIT_COMPLETE && ref_down[0].at == complete_at);
    CHECK(!w.s[0].broken && !w.s[1].broken && w.answers_due == 0);
    CHECK(np_wire_safe(&w, 0) == (long long)nup && np_wire_safe(&w, 1) == (long long)ndown);

    /* one byte at a time */
    np_wire_init(&w, NP_PG);
    CHECK(same(f, feed_bytewise(&w, 0, up, nup, f), ref_up, nu));
    CHECK(same(f, feed_bytewise(&w, 1, down, ndown, f), ref_down, nd));

    /* split in two at every offset, and in three around the frames */
    int bad = 0;
    for (size_t k = 1; k < nup; k++) {
        np_wire_init(&w, NP_PG);
        bad += !same(f, feed_cut(&w, 0, up, nup, &k, 1, f), ref_up, nu);
        bad += !same(f, feed_whole(&w, 1, down, ndown, f), ref_down, nd);
    }
    for (size_t k = 1; k < ndown; k++) {
        np_wire_init(&w, NP_PG);
        feed_whole(&w, 0, up, nup, f);
        bad += !same(f, feed_cut(&w, 1, down, ndown, &k, 1, f), ref_down, nd);
        size_t three[2] = { (size_t)complete_at + 1, (size_t)complete_at + 6 };
        if (k < three[0]) {
            three[0] = k;
            np_wire_init(&w, NP_PG);
            feed_whole(&w, 0, up, nup, f);
            bad += !same(f, feed_cut(&w, 1, down, ndown, three, 2, f), ref_down, nd);
        }
    }
    CHECK_EQ_INT(bad, 0);

    /* while a 'C' is undecided its bytes are not safe */
    np_wire_init(&w, NP_PG);
    feed_whole(&w, 0, up, nup, f);
    feed_whole(&w, 1, down, (size_t)complete_at + 8, f); /* "C", length, "COM" */
    CHECK(np_wire_safe(&w, 1) == complete_at);
    CHECK_EQ_INT(feed_whole(&w, 1, down + complete_at + 8, ndown - (size_t)complete_at - 8, f),
                 1);
    CHECK(f[0].at == complete_at);
}

static void test_pg_answer_byte_and_encryption(void)
{
    unsigned char up[256], down[256];
    size_t u = 0, d = 0;
    struct found f[MAX_FOUND];
    struct np_wire w;

    /* GSSENCRequest refused, then SSLRequest refused: two answer bytes */
    u += pgstartup(up + u, 80877104u, 0);
    u += pgstartup(up + u, 80877103u, 0);
    u += pgstartup(up + u, 196608u, 12);
    down[d++] = 'N';
    down[d++] = 'N';
    d += pgmsg(down + d, 'C', "COMMIT", 7); /* not a plausible place, but typed */
    np_wire_init(&w, NP_PG);
    CHECK_EQ_INT(feed_whole(&w, 0, up, u, f), 0);
    CHECK_EQ_INT(w.answers_due, 2);
    CHECK_EQ_INT(feed_bytewise(&w, 1, down, d, f), 1);
    CHECK(f[0].frame == NP_FRAME_COMMIT_COMPLETE && f[0].at == 2);

    /* 'S': TLS follows, which no window reads: both ways broken, no hit */
    np_wire_init(&w, NP_PG);
    feed_whole(&w, 0, up + 8, 8, f);              /* the SSLRequest alone */
    unsigned char tls[64] = { 'S', 0x16, 0x03, 0x01 };
    pgmsg(tls + 4, 'C', "COMMIT", 7);
    CHECK_EQ_INT(feed_whole(&w, 1, tls, sizeof(tls), f), 0);
    CHECK(w.s[0].broken && w.s[1].broken);
    CHECK(np_wire_safe(&w, 1) == (long long)sizeof(tls));
    unsigned char q[32];
    size_t nq = pgmsg(q, 'Q', "COMMIT", 7);
    CHECK_EQ_INT(feed_whole(&w, 0, q, nq, f), 0);
}

static void test_pg_extended_commit(void)
{
    unsigned char up[256];
    size_t u = 0;
    u += pgstartup(up + u, 196608u, 4);
    u += pgmsg(up + u, 'P', "s1\0UPDATE t SET x=1\0\0\0", 23);
    u += pgmsg(up + u, 'S', "", 0);
    long long parse_at = (long long)u;
    u += pgmsg(up + u, 'P', "\0COMMIT\0\0\0", 10);
    u += pgmsg(up + u, 'B', "\0\0\0\0\0\0\0\0\0\0", 10);
    u += pgmsg(up + u, 'E', "\0\0\0\0\0", 5);
    u += pgmsg(up + u, 'S', "", 0);
    struct np_wire w;
    struct found f[MAX_FOUND];
    np_wire_init(&w, NP_PG);
    CHECK_EQ_INT(feed_bytewise(&w, 0, up, u, f), 1);
    /* held from the Parse on: an Execute of COMMIT would commit */
    CHECK(f[0].frame == NP_FRAME_COMMIT && f[0].at == parse_at);
}

/* One message of a session, in the order the proxy sees them. */
struct leg {
    int dir;
    char type;
    const char *body;
    size_t n;
};

/* Feeds the legs in order, each in pieces of step bytes (0: whole), and
 * collects the COMMIT hits of both ways as "U1 D0 ..." (way, marked). */
static void feed_legs(struct np_wire *w, const struct leg *legs, int nlegs, size_t step,
                      char *out, size_t outlen)
{
    out[0] = '\0';
    for (int i = 0; i < nlegs; i++) {
        unsigned char m[512];
        size_t n = pgmsg(m, legs[i].type, legs[i].body, legs[i].n);
        for (size_t at = 0; at < n;) {
            size_t want = step == 0 || n - at < step ? n - at : step;
            struct np_hit hit;
            at += np_wire_feed(w, legs[i].dir, m + at, want, &hit);
            if (hit.frame == NP_FRAME_COMMIT || hit.frame == NP_FRAME_COMMIT_COMPLETE)
                snprintf(out + strlen(out), outlen - strlen(out), "%s%c%d", out[0] ? " " : "",
                         legs[i].dir == 0 ? 'U' : 'D', hit.marked);
        }
    }
}

/* transaction_with: only a transaction that sent a statement holding the
 * text is marked, in any case, wherever the statement sits in a Query or a
 * Parse, however the stream is split; ReadyForQuery 'I' ends the mark.  A
 * marked implicit transaction's commit is its idle ReadyForQuery, unless an
 * error or a ROLLBACK ended it; a COMMIT tag is not taken twice. */
static void test_pg_transaction_marks(void)
{
#define Q(t) { 0, 'Q', t, sizeof(t) }
#define C(t) { 1, 'C', t, sizeof(t) }
#define Z(t) { 1, 'Z', t, 1 }
    static const char parse_pay[] = "s7\0WITH idem AS (INSERT INTO idempotency_records VALUES "
                                    "(1)), pay AS (insert into   payments VALUES (2)) "
                                    "INSERT INTO Payments SELECT 1\0\0\0";
    const struct leg legs[] = {
        /* the startup's ReadyForQuery closes no unit */
        { 1, 'R', "\0\0\0\0", 4 }, Z("I"),
        /* an agent's transaction on the same link: not marked */
        Q("BEGIN"), C("BEGIN"), Z("T"),
        Q("UPDATE wolverine_payments.wolverine_nodes SET x = 1"), C("UPDATE 1"), Z("T"),
        Q("COMMIT"), C("COMMIT"), Z("I"),
        /* the business transaction, its statement in a Parse: marked */
        Q("BEGIN"), C("BEGIN"), Z("T"),
        { 0, 'P', parse_pay, sizeof(parse_pay) - 1 }, { 0, 'S', "", 0 },
        { 1, '1', "", 0 }, Z("T"),
        Q("COMMIT"), C("COMMIT"), Z("I"),
        /* autocommitted (an implicit transaction): committed at its idle
         * ReadyForQuery, which is the hit */
        Q("INSERT INTO payments VALUES (3)"), C("INSERT 0 1"), Z("I"),
        /* an implicit one that failed, and an explicit one rolled back:
         * neither committed, no hit */
        Q("INSERT INTO payments VALUES (3)"), { 1, 'E', "SERROR\0\0", 8 }, Z("I"),
        Q("BEGIN"), C("BEGIN"), Z("T"),
        Q("INSERT INTO payments VALUES (6)"), C("INSERT 0 1"), Z("T"),
        Q("ROLLBACK"), C("ROLLBACK"), Z("I"),
        /* then a transaction without it: not marked */
        Q("BEGIN"), C("BEGIN"), Z("T"),
        Q("SELECT 1"), C("SELECT 1"), Z("T"),
        Q("COMMIT"), C("COMMIT"), Z("I"),
        /* one Query with the whole transaction: its CommandComplete marked */
        Q("BEGIN; insert into PAYMENTS values (4); COMMIT"), C("BEGIN"), C("INSERT 0 1"),
        C("COMMIT"), Z("I"),
        /* pipelined as Npgsql does: DISCARD ALL, BEGIN and the batch in one
         * write, before any answer; DISCARD ALL's idle ReadyForQuery comes
         * after the marked statement was sent, and is not its commit */
        Q("DISCARD ALL"), Q("BEGIN"), { 0, 'P', "\0INSERT INTO payments VALUES ($1)\0\0\0",
                                        36 }, { 0, 'S', "", 0 },
        C("DISCARD ALL"), Z("I"), C("BEGIN"), Z("T"), { 1, '1', "", 0 }, C("INSERT 0 1"), Z("T"),
        Q("COMMIT"), C("COMMIT"), Z("I"),
        /* and an implicit batch pipelined behind an agent's COMMIT: the
         * agent's tag is not marked, the batch's idle ReadyForQuery is */
        Q("BEGIN"), C("BEGIN"), Z("T"),
        Q("COMMIT"), { 0, 'P', "\0INSERT INTO payments VALUES ($1)\0\0\0", 36 },
        { 0, 'S', "", 0 },
        C("COMMIT"), Z("I"), { 1, '1', "", 0 }, C("INSERT 0 1"), Z("I"),
    };
#undef Q
#undef C
#undef Z
    int nlegs = (int)(sizeof(legs) / sizeof(legs[0]));
    struct np_wire w;
    char got[128];
    static const size_t steps[] = { 0, 1, 2, 3, 7, 13 };
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        np_wire_init(&w, NP_PG);
        unsigned char start[64];
        size_t ns = pgstartup(start, 196608u, 20);
        struct np_hit hit;
        CHECK(np_wire_feed(&w, 0, start, ns, &hit) == ns);
        np_wire_mark(&w, "insert into PAYMENTS");
        feed_legs(&w, legs, nlegs, steps[k], got, sizeof(got));
        CHECK_EQ_STR(got, "U0 D0 U1 D1 D1 U0 D0 D1 U1 D1 U0 D0 D1");
    }
    /* without a mark every COMMIT is unmarked, as before */
    np_wire_init(&w, NP_PG);
    unsigned char start[64];
    size_t ns = pgstartup(start, 196608u, 20);
    struct np_hit hit;
    np_wire_feed(&w, 0, start, ns, &hit);
    feed_legs(&w, legs, nlegs, 0, got, sizeof(got));
    CHECK_EQ_STR(got, "U0 D0 U0 D0 U0 D0 D0 U0 D0 U0 D0");

    /* the matcher goes on after a partial match: "aab" in "aaab" */
    const struct leg overlap[] = {
        { 1, 'Z', "I", 1 }, { 0, 'Q', "aaab", 5 }, { 0, 'Q', "COMMIT", 7 },
        { 1, 'C', "COMMIT", 7 },
    };
    np_wire_init(&w, NP_PG);
    np_wire_feed(&w, 0, start, ns, &hit);
    np_wire_mark(&w, "AAB");
    feed_legs(&w, overlap, 4, 1, got, sizeof(got));
    CHECK_EQ_STR(got, "U1 D1");
    /* and never across two messages: "aa" then "b" */
    const struct leg apart[] = {
        { 0, 'Q', "xaa", 4 }, { 0, 'Q', "b", 2 }, { 0, 'Q', "COMMIT", 7 },
    };
    np_wire_init(&w, NP_PG);
    np_wire_feed(&w, 0, start, ns, &hit);
    np_wire_mark(&w, "aab");
    feed_legs(&w, apart, 3, 0, got, sizeof(got));
    CHECK_EQ_STR(got, "U0");
}

static void test_pg_bad_lengths(void)
{
    struct np_wire w;
    struct found f[MAX_FOUND];
    unsigned char bad[32] = { 'C', 0, 0, 0, 2 }; /* a length under 4 */
    pgmsg(bad + 5, 'C', "COMMIT", 7);
    np_wire_init(&w, NP_PG);
    CHECK_EQ_INT(feed_whole(&w, 1, bad, sizeof(bad), f), 0);
    CHECK(w.s[1].broken);
    CHECK(np_wire_safe(&w, 1) == (long long)sizeof(bad));
    unsigned char huge[16] = { 'C', 0x7f, 0xff, 0xff, 0xff };
    np_wire_init(&w, NP_PG);
    CHECK_EQ_INT(feed_whole(&w, 1, huge, sizeof(huge), f), 0);
    CHECK(w.s[1].broken);
    unsigned char startup[16] = { 0, 0, 0, 3 }; /* a startup packet under 8 bytes */
    np_wire_init(&w, NP_PG);
    CHECK_EQ_INT(feed_whole(&w, 0, startup, sizeof(startup), f), 0);
    CHECK(w.s[0].broken);
}

/* A client publishing two messages with confirms, heartbeats between. */
static void amqp_client(unsigned char *up, size_t *nup, long long *publish_at,
                        long long *hb_at, long long *ack_at)
{
    size_t u = 0;
    memcpy(up, "AMQP\0\0\x09\x01", 8);
    u += 8;
    u += amqp_method(up + u, 0, 10, 11, 20);          /* connection.start-ok */
    u += amqp_method(up + u, 1, 20, 10, 1);           /* channel.open */
    u += amqp_method(up + u, 1, 85, 10, 1);           /* confirm.select */
    *publish_at = (long long)u;
    u += amqp_method(up + u, 1, 60, 40, 12);          /* basic.publish */
    unsigned char hdr[14] = { 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0 };
    u += amqp_frame(up + u, 2, 1, hdr, sizeof(hdr));  /* content header */
    *hb_at = (long long)u;
    u += amqp_frame(up + u, 8, 0, "", 0);             /* heartbeat, between frames */
    u += amqp_frame(up + u, 3, 1, "hello", 5);        /* body */
    *ack_at = (long long)u;
    u += amqp_method(up + u, 1, 60, 80, 9);           /* basic.ack (a consumer's) */
    u += amqp_method(up + u, 1, 60, 120, 9);          /* basic.nack */
    u += amqp_method(up + u, 1, 60, 90, 9);           /* basic.reject */
    *nup = u;
}

static void test_amqp_client_at_every_split(void)
{
    unsigned char up[512];
    size_t nup;
    long long publish_at, hb_at, ack_at;
    amqp_client(up, &nup, &publish_at, &hb_at, &ack_at);
    struct np_wire w;
    struct found ref[MAX_FOUND], f[MAX_FOUND];
    np_wire_init(&w, NP_AMQP);
    int n = feed_whole(&w, 0, up, nup, ref);
    CHECK_EQ_INT(n, 5);
    CHECK(ref[0].frame == NP_FRAME_PUBLISH && ref[0].at == publish_at);
    CHECK(ref[1].frame == NP_FRAME_HEARTBEAT && ref[1].at == hb_at && ref[1].end == hb_at + 8);
    CHECK(ref[2].frame == NP_FRAME_ACK && ref[2].at == ack_at);
    CHECK(ref[3].frame == NP_FRAME_NACK && ref[4].frame == NP_FRAME_REJECT);
    CHECK(!w.s[0].broken);
    np_wire_init(&w, NP_AMQP);
    CHECK(same(f, feed_bytewise(&w, 0, up, nup, f), ref, n));
    int bad = 0;
    for (size_t k = 1; k < nup; k++) {
        np_wire_init(&w, NP_AMQP);
        bad += !same(f, feed_cut(&w, 0, up, nup, &k, 1, f), ref, n);
    }
    CHECK_EQ_INT(bad, 0);
    /* a method frame is undecided until its class and method are in */
    np_wire_init(&w, NP_AMQP);
    feed_whole(&w, 0, up, (size_t)publish_at + 9, f);
    CHECK(np_wire_safe(&w, 0) == publish_at);
}

static void test_amqp_broker_side(void)
{
    unsigned char down[512];
    size_t d = 0;
    d += amqp_method(down + d, 0, 10, 10, 30);        /* connection.start */
    d += amqp_method(down + d, 1, 85, 11, 0);         /* confirm.select-ok */
    d += amqp_frame(down + d, 8, 0, "", 0);
    long long confirm_at = (long long)d;
    d += amqp_method(down + d, 1, 60, 80, 9);         /* basic.ack: a confirm */
    long long deliver_at = (long long)d;
    d += amqp_method(down + d, 2, 60, 60, 30);        /* basic.deliver */
    unsigned char hdr[14] = { 0, 60 };
    d += amqp_frame(down + d, 2, 2, hdr, sizeof(hdr));
    d += amqp_frame(down + d, 3, 2, "{}", 2);
    struct np_wire w;
    struct found f[MAX_FOUND];
    np_wire_init(&w, NP_AMQP);
    CHECK_EQ_INT(feed_bytewise(&w, 1, down, d, f), 3);
    CHECK(f[0].frame == NP_FRAME_HEARTBEAT);
    CHECK(f[1].frame == NP_FRAME_CONFIRM && f[1].at == confirm_at);
    CHECK(f[2].frame == NP_FRAME_DELIVER && f[2].at == deliver_at);
    CHECK(!w.s[1].broken);
}

static void test_amqp_broken(void)
{
    struct np_wire w;
    struct found f[MAX_FOUND];
    unsigned char buf[64];
    /* not the 0-9-1 header */
    np_wire_init(&w, NP_AMQP);
    CHECK_EQ_INT(feed_whole(&w, 0, (const unsigned char *)"AMQP\0\0\x09\x02", 8, f), 0);
    CHECK(w.s[0].broken);
    /* an absurd size */
    np_wire_init(&w, NP_AMQP);
    memset(buf, 0, sizeof(buf));
    buf[0] = 1;
    put32(buf + 3, 0xffffffffu);
    CHECK_EQ_INT(feed_whole(&w, 1, buf, sizeof(buf), f), 0);
    CHECK(w.s[1].broken);
    CHECK(np_wire_safe(&w, 1) == (long long)sizeof(buf));
    /* a missing frame end: nothing after it is read */
    np_wire_init(&w, NP_AMQP);
    size_t n = amqp_frame(buf, 8, 0, "", 0);
    buf[n - 1] = 0;
    n += amqp_method(buf + n, 1, 60, 80, 9);
    CHECK_EQ_INT(feed_whole(&w, 1, buf, n, f), 0);
    CHECK(w.s[1].broken);
    /* an unknown frame type, a heartbeat with a payload, a short method */
    int types[3][2] = { { 5, 0 }, { 8, 3 }, { 1, 2 } };
    for (int i = 0; i < 3; i++) {
        np_wire_init(&w, NP_AMQP);
        memset(buf, 0, sizeof(buf));
        buf[0] = (unsigned char)types[i][0];
        put32(buf + 3, (unsigned)types[i][1]);
        feed_whole(&w, 1, buf, 16, f);
        CHECK(w.s[1].broken);
    }
    /* a fake-broker link: nothing is read */
    np_wire_init(&w, NP_BROKER);
    n = amqp_method(buf, 1, 60, 80, 9);
    CHECK_EQ_INT(feed_whole(&w, 1, buf, n, f), 0);
    CHECK(np_wire_safe(&w, 1) == (long long)n);
}

static int parse(const char *text, enum np_proto proto, struct np_fault *f, char *err)
{
    cJSON *j = cJSON_Parse(text);
    int rc = np_fault_parse(j, proto, f, err, 256);
    cJSON_Delete(j);
    return rc;
}

static void test_window_spec(void)
{
    struct np_fault f;
    char err[256], text[160];
    CHECK_EQ_INT(parse("{\"fault\":\"window\",\"frame\":\"commit_complete\",\"action\":\"kill\"}",
                       NP_PG, &f, err), 0);
    CHECK(f.kind == NP_WINDOW && f.frame == NP_FRAME_COMMIT_COMPLETE &&
          f.action == NP_ACTION_KILL && f.times == 1 && f.skip == 0 && f.pid == 0);
    CHECK_EQ_INT(parse("{\"fault\":\"window\",\"frame\":\"confirm\",\"action\":\"pause\","
                       "\"times\":2,\"skip\":3}", NP_AMQP, &f, err), 0);
    CHECK(f.frame == NP_FRAME_CONFIRM && f.action == NP_ACTION_PAUSE && f.times == 2 &&
          f.skip == 3);
    np_fault_describe(&f, text, sizeof(text));
    CHECK_EQ_STR(text, "window at confirm: pause the client (x2, after 3 passed)");
    CHECK(np_frame_dir(NP_FRAME_CONFIRM) == 1 && np_frame_dir(NP_FRAME_PUBLISH) == 0);

    CHECK(parse("{\"fault\":\"window\",\"frame\":\"publish\",\"action\":\"kill\"}", NP_PG, &f,
                err) < 0);
    CHECK(strstr(err, "frame: publish is an AMQP frame, and this is a pg link") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"ack\",\"action\":\"kill\"}", NP_BROKER, &f,
                err) < 0);
    CHECK(strstr(err, "a fake-broker link") != NULL && strstr(err, "--broker rabbitmq"));
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\"}", NP_AMQP, &f,
                err) < 0);
    CHECK(strstr(err, "commit is a PostgreSQL frame") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\",\"pid\":42}",
                NP_PG, &f, err) < 0);
    CHECK(strstr(err, "pid: a fault names no process id") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\"}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "action: required by fault window") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"action\":\"kill\"}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "frame: required by fault window") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"heartbeat\",\"action\":\"kill\"}", NP_AMQP,
                &f, err) < 0);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"stop\"}", NP_PG, &f,
                err) < 0);
    CHECK(strstr(err, "action: must be one of kill, pause") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\",\"skip\":-1}",
                NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\","
                "\"direction\":\"up\"}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":5,\"skip\":1}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "skip: fault latency takes no such field") != NULL);

    CHECK_EQ_INT(parse("{\"fault\":\"window\",\"frame\":\"commit_complete\",\"action\":"
                       "\"kill\",\"transaction_with\":\"INSERT INTO payments\"}", NP_PG, &f,
                       err), 0);
    CHECK_EQ_STR(f.transaction_with, "INSERT INTO payments");
    np_fault_describe(&f, text, sizeof(text));
    CHECK_EQ_STR(text, "window at commit_complete of a transaction with \"INSERT INTO "
                       "payments\": kill the client (x1)");
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"publish\",\"action\":\"kill\","
                "\"transaction_with\":\"x\"}", NP_AMQP, &f, err) < 0);
    CHECK(strstr(err, "transaction_with: only a window at commit or commit_complete") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\","
                "\"transaction_with\":\"\"}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "transaction_with: must be statement text of 1 to 63 bytes") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\","
                "\"transaction_with\":\"a\\nb\"}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "transaction_with: byte 2 is not printable ASCII") != NULL);
    CHECK(parse("{\"fault\":\"window\",\"frame\":\"commit\",\"action\":\"kill\","
                "\"transaction_with\":7}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":5,\"transaction_with\":\"x\"}",
                NP_PG, &f, err) < 0);
}

int main(void)
{
    test_pg_both_ways_at_every_split();
    test_pg_answer_byte_and_encryption();
    test_pg_extended_commit();
    test_pg_transaction_marks();
    test_pg_bad_lengths();
    test_amqp_client_at_every_split();
    test_amqp_broker_side();
    test_amqp_broken();
    test_window_spec();
    return check_report("test_netproxy_frames");
}
