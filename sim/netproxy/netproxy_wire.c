/* netproxy_wire.c -- what the proxy understands of the protocols it
 * carries: PostgreSQL's frontend messages (enough to see a COMMIT) and the
 * broker's newline-delimited JSON frames (enough to see an op); the fault
 * spec read from a scenario.  Pure functions: see netproxy.h. */
#include "netproxy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* PostgreSQL's protocol codes of the untyped startup-phase packets. */
#define PG_SSL_REQUEST 80877103u
#define PG_GSSENC_REQUEST 80877104u
#define PG_MAX_MESSAGE (1LL << 30)

static unsigned be32(const unsigned char *p)
{
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

int np_is_commit(const char *text, size_t n)
{
    size_t i = 0;
    while (i < n && isspace((unsigned char)text[i]))
        i++;
    static const char *const words[] = { "commit", "end" };
    for (size_t w = 0; w < 2; w++) {
        size_t len = strlen(words[w]);
        if (n - i < len || strncasecmp(text + i, words[w], len) != 0)
            continue;
        size_t j = i + len;
        /* "COMMIT", "commit;", "END  " -- not "COMMIT PREPARED 'x'" nor "ending" */
        while (j < n && isspace((unsigned char)text[j]))
            j++;
        if (j == n || text[j] == ';' || text[j] == '\0')
            return 1;
        if (w == 0 && n - j >= 4 && strncasecmp(text + j, "work", 4) == 0)
            return 1;
    }
    return 0;
}

/* The message in sc is complete: 1 when it completes a COMMIT. */
static int pg_message_done(struct np_pgscan *sc)
{
    if (!sc->started)
        return 0;
    if (sc->type == 'Q')
        return np_is_commit(sc->text, strnlen(sc->text, (size_t)sc->textlen));
    if (sc->type == 'P') {
        /* Parse: statement name, NUL, query, NUL, ... */
        size_t name = strnlen(sc->text, (size_t)sc->textlen);
        if ((int)name < sc->textlen) {
            const char *q = sc->text + name + 1;
            size_t qn = strnlen(q, (size_t)sc->textlen - name - 1);
            sc->commit_parsed = np_is_commit(q, qn);
        }
        return 0;
    }
    if (sc->type == 'S' && sc->commit_parsed) {
        sc->commit_parsed = 0;
        return 1;
    }
    return 0;
}

/* The header of the current message is complete: its body length. */
static int pg_header_done(struct np_pgscan *sc)
{
    long long len;
    if (!sc->started) {
        len = be32(sc->hdr);
        unsigned code = be32(sc->hdr + 4);
        sc->type = 0;
        sc->left = len - 8;
        /* After an SSL or GSS request the real startup packet follows. */
        sc->started = code != PG_SSL_REQUEST && code != PG_GSSENC_REQUEST ? -1 : 0;
    } else {
        sc->type = sc->hdr[0];
        len = be32(sc->hdr + 1);
        sc->left = len - 4;
    }
    sc->textlen = 0;
    return len < 4 || len > PG_MAX_MESSAGE || sc->left < 0 ? -1 : 0;
}

long np_pgscan_feed(struct np_pgscan *sc, const unsigned char *buf, size_t n)
{
    long hit = -1;
    size_t i = 0;
    while (i < n && !sc->broken) {
        int need = sc->started ? 5 : 8;
        if (sc->hdrlen < need) {
            sc->hdr[sc->hdrlen++] = buf[i++];
            if (sc->hdrlen == need && pg_header_done(sc) < 0) {
                sc->broken = 1;
                break;
            }
            if (sc->hdrlen < need || sc->left > 0)
                continue;
        } else {
            size_t take = n - i;
            if ((long long)take > sc->left)
                take = (size_t)sc->left;
            if (sc->type == 'Q' || sc->type == 'P') {
                size_t room = sizeof(sc->text) - (size_t)sc->textlen;
                size_t keep = take < room ? take : room;
                memcpy(sc->text + sc->textlen, buf + i, keep);
                sc->textlen += (int)keep;
            }
            i += take;
            sc->left -= (long long)take;
            if (sc->left > 0)
                continue;
        }
        /* the message ends at offset i */
        if (pg_message_done(sc) && hit < 0)
            hit = (long)i;
        if (sc->started < 0)
            sc->started = 1;
        sc->hdrlen = 0;
    }
    return hit;
}

/* Whether a line head names op: "op":"<op>" within its first bytes. */
static int head_matches(const struct np_linescan *sc, const char *op)
{
    char want[64];
    int wn = snprintf(want, sizeof(want), "\"op\":\"%s\"", op);
    if (wn <= 0 || wn > sc->headlen)
        return 0;
    for (int i = 0; i + wn <= sc->headlen; i++)
        if (memcmp(sc->head + i, want, (size_t)wn) == 0)
            return 1;
    return 0;
}

long np_linescan_feed(struct np_linescan *sc, const char *op, const char *buf, size_t n)
{
    long start = 0; /* where the current line began in buf (0: earlier) */
    for (size_t i = 0; i < n; i++) {
        if (!sc->in_line && sc->headlen == 0)
            start = (long)i;
        if (buf[i] == '\n') {
            int decided = sc->in_line;
            sc->in_line = 0;
            sc->headlen = 0;
            if (!decided && head_matches(sc, op))
                return start;
            continue;
        }
        if (sc->in_line)
            continue;
        sc->head[sc->headlen++] = buf[i];
        if (head_matches(sc, op)) {
            sc->in_line = 1;
            return start;
        }
        if (sc->headlen == (int)sizeof(sc->head))
            sc->in_line = 1;
    }
    return -1;
}

/* ---- the fault spec ---------------------------------------------------- */

static const char *const kind_names[NP_KIND_COUNT] = {
    "latency", "bandwidth", "blackhole", "slicer", "limit_data", "reset", "down", "cut",
    "partition", "window"
};

const char *np_kind_name(enum np_kind k)
{
    return (unsigned)k < NP_KIND_COUNT ? kind_names[k] : "?";
}

const char *np_proto_name(enum np_proto p)
{
    return p == NP_PG ? "pg" : p == NP_AMQP ? "amqp" : "broker";
}

/* The fields each kind takes besides fault, direction and ms. */
static const char *const kind_fields[NP_KIND_COUNT] = {
    "latency_ms jitter_ms", "rate_kbps", "", "slice_bytes slice_delay_ms", "limit_bytes",
    "", "", "cut_after then times", "", "frame action times skip transaction_with"
};

/* Whether field is a fault field that kind takes. */
static int takes(enum np_kind k, const char *field)
{
    if (strcmp(field, "fault") == 0)
        return 1;
    if (strcmp(field, "ms") == 0)
        return k != NP_RESET; /* a reset is an instant, not a state */
    if (strcmp(field, "direction") == 0)
        return k <= NP_LIMIT_DATA || k == NP_PARTITION;
    const char *list = kind_fields[k];
    size_t fl = strlen(field);
    for (const char *p = strstr(list, field); p != NULL; p = strstr(p + 1, field))
        if ((p == list || p[-1] == ' ') && (p[fl] == ' ' || p[fl] == '\0'))
            return 1;
    return 0;
}

/* The fields of a net step that are not the fault's own. */
static int step_field(const char *field)
{
    static const char *const step[] = { "do", "op", "link", "clear", "why",
                                        "reconnect_within_ms", NULL };
    for (int i = 0; step[i] != NULL; i++)
        if (strcmp(field, step[i]) == 0)
            return 1;
    return 0;
}

/* Reads integer field name into *out if present, within [lo, hi]. */
static int int_field(const cJSON *obj, const char *name, long long lo, long long hi,
                     long long *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (v == NULL)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble) {
        snprintf(err, errlen, "%s: must be an integer", name);
        return -1;
    }
    long long x = (long long)v->valuedouble;
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s: %lld is out of range %lld..%lld", name, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* One of names (NULL-terminated) for string field name, or the default. */
static int enum_field(const cJSON *obj, const char *name, const char *const *names, int dflt,
                      int *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    *out = dflt;
    if (v == NULL)
        return 0;
    for (int i = 0; cJSON_IsString(v) && names[i] != NULL; i++)
        if (strcmp(v->valuestring, names[i]) == 0) {
            *out = i;
            return 0;
        }
    char list[128] = "";
    for (int i = 0; names[i] != NULL; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                 names[i]);
    snprintf(err, errlen, "%s: must be one of %s", name, list);
    return -1;
}

/* The numeric fields of f, each in its sane range. */
static int numbers(const cJSON *obj, struct np_fault *f, char *err, size_t errlen)
{
    long long v[8] = { 0, 0, 0, 0, 0, 0, 0, 1 };
    if (int_field(obj, "ms", 0, 600000, &v[0], err, errlen) < 0 ||
        int_field(obj, "latency_ms", 0, 60000, &v[1], err, errlen) < 0 ||
        int_field(obj, "jitter_ms", 0, 60000, &v[2], err, errlen) < 0 ||
        int_field(obj, "rate_kbps", 1, 10000000, &v[3], err, errlen) < 0 ||
        int_field(obj, "slice_bytes", 1, 1 << 20, &v[4], err, errlen) < 0 ||
        int_field(obj, "slice_delay_ms", 0, 10000, &v[5], err, errlen) < 0 ||
        int_field(obj, "limit_bytes", 0, 1LL << 40, &v[6], err, errlen) < 0 ||
        int_field(obj, "times", 1, 1000, &v[7], err, errlen) < 0)
        return -1;
    long long skip = 0;
    if (int_field(obj, "skip", 0, 100000, &skip, err, errlen) < 0)
        return -1;
    f->skip = (int)skip;
    f->ms = (int)v[0];
    f->latency_ms = (int)v[1];
    f->jitter_ms = (int)v[2];
    f->rate_kbps = (int)v[3];
    f->slice_bytes = (int)v[4];
    f->slice_delay_ms = (int)v[5];
    f->limit_bytes = v[6];
    f->times = (int)v[7];
    if (f->jitter_ms > f->latency_ms) {
        snprintf(err, errlen, "jitter_ms: %d is more than latency_ms %d", f->jitter_ms,
                 f->latency_ms);
        return -1;
    }
    return 0;
}

/* A window's transaction_with: printable text, only at a COMMIT's frame. */
static int transaction_with(const cJSON *obj, struct np_fault *f, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "transaction_with");
    if (v == NULL)
        return 0;
    if (f->frame != NP_FRAME_COMMIT && f->frame != NP_FRAME_COMMIT_COMPLETE) {
        snprintf(err, errlen, "transaction_with: only a window at commit or commit_complete "
                 "ends a transaction, not at %s", np_frame_name(f->frame));
        return -1;
    }
    size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (n == 0 || n >= NP_MARK_MAX) {
        snprintf(err, errlen, "transaction_with: must be statement text of 1 to %d bytes",
                 NP_MARK_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v->valuestring[i] < 0x20 || (unsigned char)v->valuestring[i] > 0x7e) {
            snprintf(err, errlen, "transaction_with: byte %zu is not printable ASCII", i + 1);
            return -1;
        }
    memcpy(f->transaction_with, v->valuestring, n + 1);
    return 0;
}

/* The fields a kind cannot do without, and the cut's protocol. */
static int required(const cJSON *obj, enum np_proto proto, const struct np_fault *f,
                    char *err, size_t errlen)
{
    static const char *const need[NP_KIND_COUNT] = {
        "latency_ms", "rate_kbps", NULL, "slice_bytes", "limit_bytes", NULL, NULL, "cut_after",
        NULL, "frame"
    };
    const char *n = need[f->kind];
    if (n != NULL && cJSON_GetObjectItemCaseSensitive(obj, n) == NULL) {
        snprintf(err, errlen, "%s: required by fault %s", n, np_kind_name(f->kind));
        return -1;
    }
    if (f->kind == NP_WINDOW && cJSON_GetObjectItemCaseSensitive(obj, "action") == NULL) {
        snprintf(err, errlen, "action: required by fault window (kill, pause or drop)");
        return -1;
    }
    if (f->kind == NP_WINDOW && np_frame_proto(f->frame) != proto) {
        int amqp = np_frame_proto(f->frame) == NP_AMQP;
        snprintf(err, errlen, "frame: %s is %s frame, and this is %s link%s",
                 np_frame_name(f->frame), amqp ? "an AMQP" : "a PostgreSQL",
                 proto == NP_PG ? "a pg" : proto == NP_AMQP ? "an AMQP (RabbitMQ)"
                 : "a fake-broker", proto == NP_BROKER ? " (its lines are not AMQP frames: "
                 "run with --broker rabbitmq)" : "");
        return -1;
    }
    if (f->kind != NP_CUT)
        return 0;
    int pg_cut = f->cut_after == NP_CUT_COMMIT;
    if (proto == NP_AMQP) {
        snprintf(err, errlen, "cut_after: an amqp link takes no protocol cut (the proxy does "
                 "not parse AMQP frames)");
        return -1;
    }
    if (pg_cut != (proto == NP_PG)) {
        snprintf(err, errlen, "cut_after: %s is for %s links, not a %s link",
                 pg_cut ? "commit" : f->cut_after == NP_CUT_ACK ? "ack" : "confirm",
                 pg_cut ? "pg" : "broker", np_proto_name(proto));
        return -1;
    }
    return 0;
}

int np_fault_parse(const cJSON *obj, enum np_proto proto, struct np_fault *out,
                   char *err, size_t errlen)
{
    struct np_fault f;
    memset(&f, 0, sizeof(f));
    if (!cJSON_IsObject(obj)) {
        snprintf(err, errlen, "fault: must be an object");
        return -1;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "fault");
    int k = -1;
    for (int i = 0; cJSON_IsString(kind) && i < NP_KIND_COUNT; i++)
        if (strcmp(kind->valuestring, kind_names[i]) == 0)
            k = i;
    if (k < 0) {
        snprintf(err, errlen, "fault: %s%.40s%s is not a network fault (latency, bandwidth, "
                 "blackhole, slicer, limit_data, reset, down, cut, partition, window)",
                 cJSON_IsString(kind) ? "'" : "", cJSON_IsString(kind) ? kind->valuestring :
                 "missing or not a string", cJSON_IsString(kind) ? "'" : "");
        return -1;
    }
    f.kind = (enum np_kind)k;
    if (cJSON_GetObjectItemCaseSensitive(obj, "pid") != NULL) {
        snprintf(err, errlen, "pid: a fault names no process id: a window signals the process "
                 "at the client end of its link, which the runner knows");
        return -1;
    }
    for (const cJSON *it = obj->child; it != NULL; it = it->next)
        if (!step_field(it->string) && !takes(f.kind, it->string)) {
            snprintf(err, errlen, "%.40s: fault %s takes no such field", it->string,
                     np_kind_name(f.kind));
            return -1;
        }
    static const char *const dirs[] = { "both", "up", "down", NULL };
    static const char *const cuts[] = { "commit", "confirm", "ack", NULL };
    static const char *const thens[] = { "blackhole", "reset", NULL };
    static const char *const frames[] = { "commit_complete", "commit", "publish", "ack", "nack",
                                          "reject", "confirm", "deliver", NULL };
    static const char *const actions[] = { "kill", "pause", "drop", NULL };
    int d, c, t, fr, ac;
    if (numbers(obj, &f, err, errlen) < 0 ||
        enum_field(obj, "direction", dirs, 0, &d, err, errlen) < 0 ||
        enum_field(obj, "cut_after", cuts, 0, &c, err, errlen) < 0 ||
        enum_field(obj, "then", thens, 0, &t, err, errlen) < 0 ||
        enum_field(obj, "frame", frames, 0, &fr, err, errlen) < 0 ||
        enum_field(obj, "action", actions, 0, &ac, err, errlen) < 0)
        return -1;
    f.frame = (enum np_frame)fr;
    f.action = (enum np_action)ac;
    f.dir = (enum np_dir)d;
    f.cut_after = (enum np_cut_at)c;
    f.then = (enum np_then)t;
    if (required(obj, proto, &f, err, errlen) < 0 ||
        (f.kind == NP_WINDOW && transaction_with(obj, &f, err, errlen) < 0))
        return -1;
    *out = f;
    return 0;
}

void np_fault_describe(const struct np_fault *f, char *out, size_t outlen)
{
    static const char *const dirs[] = { "", " up", " down" };
    static const char *const cuts[] = { "commit", "confirm", "ack" };
    char what[192] = "";
    switch (f->kind) {
    case NP_LATENCY:
        snprintf(what, sizeof(what), " %d+-%d ms", f->latency_ms, f->jitter_ms);
        break;
    case NP_BANDWIDTH:
        snprintf(what, sizeof(what), " %d kB/s", f->rate_kbps);
        break;
    case NP_SLICER:
        snprintf(what, sizeof(what), " %d bytes every %d ms", f->slice_bytes,
                 f->slice_delay_ms);
        break;
    case NP_LIMIT_DATA:
        snprintf(what, sizeof(what), " after %lld bytes", f->limit_bytes);
        break;
    case NP_CUT:
        snprintf(what, sizeof(what), " after %s, then %s (x%d)", cuts[f->cut_after],
                 f->then == NP_THEN_RESET ? "reset" : "blackhole", f->times);
        break;
    case NP_WINDOW:
        snprintf(what, sizeof(what), " at %s%s%s%s: %s (x%d", np_frame_name(f->frame),
                 f->transaction_with[0] ? " of a transaction with \"" : "",
                 f->transaction_with, f->transaction_with[0] ? "\"" : "",
                 f->action == NP_ACTION_DROP ? "drop it and close the link, the client lives"
                 : f->action == NP_ACTION_PAUSE ? "pause the client" : "kill the client",
                 f->times);
        if (f->skip > 0)
            snprintf(what + strlen(what), sizeof(what) - strlen(what), ", after %d passed",
                     f->skip);
        snprintf(what + strlen(what), sizeof(what) - strlen(what), ")");
        break;
    default:
        break;
    }
    char dur[32] = "";
    if (f->ms > 0)
        snprintf(dur, sizeof(dur), " for %d ms", f->ms);
    snprintf(out, outlen, "%s%s%s%s", np_kind_name(f->kind), what, dirs[f->dir], dur);
}
