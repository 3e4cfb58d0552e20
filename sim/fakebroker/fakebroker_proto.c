/* fakebroker_proto.c -- the fake broker's frames: line splitting, request
 * validation, the fault switches and the payload digest.
 *
 * Everything here is pure (no sockets, no store, no globals) so that the
 * unit tests and the fuzz target reach every branch with plain byte strings.
 * A request is parsed once into struct fb_frame, whose fields borrow from the
 * cJSON tree; the server then never touches raw JSON of a request again.
 * Validation is strict about types and ranges (a bad field is an error naming
 * the field) and lenient about unknown fields, except in control frames,
 * where a misspelt switch must not silently leave a fault off. */
#include "fakebroker.h"
#include "sanitize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define FB_MAX_NAME 255            /* topic, group, message_id, type, key, client */
#define FB_MAX_PREFETCH 10000
#define FB_MIN_HEARTBEAT_MS 100
#define FB_MAX_HEARTBEAT_MS 600000
#define FB_MAX_DELAY_MS 3600000
#define FB_MAX_DROP 1000000
#define FB_MAX_VISIBILITY_MS 86400000

/* ---- line buffer ------------------------------------------------------ */

void fb_linebuf_init(struct fb_linebuf *lb)
{
    memset(lb, 0, sizeof(*lb));
}

void fb_linebuf_free(struct fb_linebuf *lb)
{
    free(lb->buf);
    memset(lb, 0, sizeof(*lb));
}

int fb_linebuf_append(struct fb_linebuf *lb, const char *data, size_t n)
{
    /* Drop the lines already returned before growing: a long-lived
     * connection then keeps a buffer the size of its largest frame. */
    if (lb->start > 0) {
        size_t keep = lb->len - lb->start;
        memmove(lb->buf, lb->buf + lb->start, keep);
        lb->len = keep;
        lb->start = 0;
    }
    if (n > SIZE_MAX - lb->len - 1)
        return -1;
    if (lb->len + n + 1 > lb->cap) {
        size_t cap = lb->cap ? lb->cap : 4096;
        while (cap < lb->len + n + 1)
            cap *= 2;
        char *nb = realloc(lb->buf, cap);
        if (nb == NULL)
            return -1;
        lb->buf = nb;
        lb->cap = cap;
    }
    memcpy(lb->buf + lb->len, data, n);
    lb->len += n;
    lb->buf[lb->len] = '\0';
    return 0;
}

int fb_linebuf_next(struct fb_linebuf *lb, const char **line, size_t *len)
{
    size_t from = lb->start + lb->scan;
    const char *nl = NULL;
    if (from < lb->len)
        nl = memchr(lb->buf + from, '\n', lb->len - from);
    if (nl == NULL) {
        lb->scan = lb->len - lb->start;
        return lb->scan > FB_MAX_FRAME ? -1 : 0;
    }
    size_t n = (size_t)(nl - (lb->buf + lb->start));
    if (n > FB_MAX_FRAME)
        return -1;
    *line = lb->buf + lb->start;
    *len = n;
    lb->start += n + 1;
    lb->scan = 0;
    return 1;
}

size_t fb_linebuf_pending(const struct fb_linebuf *lb)
{
    return lb->len - lb->start;
}

/* ---- field helpers ---------------------------------------------------- */

/* A required (or, with optional, possibly absent/null) string field of at
 * most max bytes and no NUL inside.  0 ok, -1 bad (message in err). */
static int get_string(const cJSON *root, const char *key, int optional, size_t max,
                      const char **out, char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = NULL;
    if (it == NULL || cJSON_IsNull(it)) {
        if (optional)
            return 0;
        snprintf(err, errlen, "missing field %s", key);
        return -1;
    }
    if (!cJSON_IsString(it) || it->valuestring == NULL) {
        snprintf(err, errlen, "field %s must be a string", key);
        return -1;
    }
    size_t n = strlen(it->valuestring);
    if (n == 0 && max > 0 && !optional) {
        snprintf(err, errlen, "field %s must not be empty", key);
        return -1;
    }
    if (max > 0 && n > max) {
        snprintf(err, errlen, "field %s longer than %zu bytes", key, max);
        return -1;
    }
    *out = it->valuestring;
    return 0;
}

/* An integral number in [lo, hi].  Absent: *out = dflt when optional. */
static int get_int(const cJSON *root, const char *key, int optional, double lo, double hi,
                   long long dflt, long long *out, char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (it == NULL) {
        if (optional) {
            *out = dflt;
            return 0;
        }
        snprintf(err, errlen, "missing field %s", key);
        return -1;
    }
    double v = it->valuedouble;
    /* Range first: only then is the cast to an integer defined (and no
     * libm floor() is needed). */
    if (!cJSON_IsNumber(it) || !isfinite(v) || v < lo || v > hi ||
        v != (double)(long long)v) {
        snprintf(err, errlen, "field %s must be an integer in %.0f..%.0f", key, lo, hi);
        return -1;
    }
    *out = (long long)v;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, int dflt, int *out,
                    char *err, size_t errlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (it == NULL) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(it)) {
        snprintf(err, errlen, "field %s must be true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return 0;
}

/* ---- requests --------------------------------------------------------- */

static int parse_publish(struct fb_frame *f, char *err, size_t errlen)
{
    const cJSON *r = f->root;
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(r, "seq");
    if (seq != NULL) {
        long long v;
        if (get_int(r, "seq", 0, 0, 9007199254740991.0, 0, &v, err, errlen) < 0)
            return -1;
        f->has_seq = 1;
        f->seq = v;
    }
    if (get_string(r, "topic", 0, FB_MAX_NAME, &f->topic, err, errlen) < 0 ||
        get_string(r, "message_id", 0, FB_MAX_NAME, &f->message_id, err, errlen) < 0 ||
        get_string(r, "type", 0, FB_MAX_NAME, &f->type, err, errlen) < 0 ||
        get_string(r, "partition_key", 1, FB_MAX_NAME, &f->partition_key, err, errlen) < 0 ||
        get_string(r, "payload", 1, 0, &f->payload, err, errlen) < 0 ||
        get_string(r, "claim_token", 1, FB_MAX_NAME, &f->claim_token, err, errlen) < 0 ||
        get_int(r, "not_after_us", 1, 0, 9007199254740991.0, 0, &f->not_after_us, err,
                errlen) < 0)
        return -1;
    if (f->payload != NULL)
        f->payload_len = strlen(f->payload);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "headers");
    if (h != NULL && !cJSON_IsNull(h)) {
        if (!cJSON_IsObject(h)) {
            snprintf(err, errlen, "field headers must be an object");
            return -1;
        }
        f->headers = h;
        const cJSON *av = cJSON_GetObjectItemCaseSensitive(h, "aggregate_version");
        if (av != NULL) {
            long long v;
            /* Not negative: a consumer takes no delivery whose version
             * is not one (bus_fakebroker.c), so storing one would make a
             * message no consumer can ever take. */
            if (get_int(h, "aggregate_version", 0, 0, 9007199254740991.0,
                        0, &v, err, errlen) < 0)
                return -1;
            f->aggregate_version = v;
        }
        const char *tp;
        if (get_string(h, "traceparent", 1, FB_MAX_NAME, &tp, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int parse_subscribe(struct fb_frame *f, char *err, size_t errlen)
{
    long long prefetch, heartbeat;
    if (get_string(f->root, "topic", 0, FB_MAX_NAME, &f->topic, err, errlen) < 0 ||
        get_string(f->root, "group", 0, FB_MAX_NAME, &f->group, err, errlen) < 0 ||
        get_int(f->root, "prefetch", 1, 1, FB_MAX_PREFETCH, 1, &prefetch, err, errlen) < 0 ||
        get_bool(f->root, "ordered", 1, &f->ordered, err, errlen) < 0 ||
        get_int(f->root, "heartbeat_ms", 1, FB_MIN_HEARTBEAT_MS, FB_MAX_HEARTBEAT_MS, 0,
                &heartbeat, err, errlen) < 0)
        return -1;
    f->prefetch = (int)prefetch;
    f->heartbeat_ms = (int)heartbeat;
    return 0;
}

static int parse_tag(struct fb_frame *f, char *err, size_t errlen)
{
    long long tag;
    if (get_int(f->root, "tag", 0, 1, 9007199254740991.0, 0, &tag, err, errlen) < 0)
        return -1;
    f->tag = (uint64_t)tag;
    return 0;
}

static int parse_nack(struct fb_frame *f, char *err, size_t errlen)
{
    long long delay;
    if (parse_tag(f, err, errlen) < 0 ||
        get_bool(f->root, "requeue", 1, &f->requeue, err, errlen) < 0 ||
        get_int(f->root, "delay_ms", 1, 0, FB_MAX_DELAY_MS, 0, &delay, err, errlen) < 0)
        return -1;
    f->delay_ms = (int)delay;
    return 0;
}

static int parse_control(struct fb_frame *f, char *err, size_t errlen)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, f->root) {
        const char *k = it->string;
        long long v;
        int b;
        if (strcmp(k, "op") == 0)
            continue;
        if (strcmp(k, "reset") == 0) {
            if (get_bool(f->root, k, 0, &b, err, errlen) < 0)
                return -1;
            f->ctl_reset = b;
        } else if (strcmp(k, "close_connections") == 0) {
            if (get_bool(f->root, k, 0, &b, err, errlen) < 0)
                return -1;
            f->ctl_close_connections = b;
        } else if (strcmp(k, "outage") == 0) {
            const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
            if (s != NULL && strcmp(s, "off") == 0)
                f->ctl.outage = FB_OUTAGE_OFF;
            else if (s != NULL && strcmp(s, "refuse") == 0)
                f->ctl.outage = FB_OUTAGE_REFUSE;
            else if (s != NULL && strcmp(s, "hang") == 0)
                f->ctl.outage = FB_OUTAGE_HANG;
            else {
                snprintf(err, errlen, "field outage must be \"off\", \"refuse\" or \"hang\"");
                return -1;
            }
            f->ctl_mask |= FB_CTL_OUTAGE;
        } else if (strcmp(k, "duplicate") == 0) {
            if (get_bool(f->root, k, 0, &f->ctl.duplicate, err, errlen) < 0)
                return -1;
            f->ctl_mask |= FB_CTL_DUPLICATE;
        } else if (strcmp(k, "reorder") == 0) {
            if (get_bool(f->root, k, 0, &f->ctl.reorder, err, errlen) < 0)
                return -1;
            f->ctl_mask |= FB_CTL_REORDER;
        } else if (strcmp(k, "delay_ms") == 0) {
            if (get_int(f->root, k, 0, 0, FB_MAX_DELAY_MS, 0, &v, err, errlen) < 0)
                return -1;
            f->ctl.delay_ms = (int)v;
            f->ctl_mask |= FB_CTL_DELAY;
        } else if (strcmp(k, "drop_before_confirm") == 0) {
            if (get_int(f->root, k, 0, 0, FB_MAX_DROP, 0, &v, err, errlen) < 0)
                return -1;
            f->ctl.drop_before_confirm = (int)v;
            f->ctl_mask |= FB_CTL_DROP;
        } else if (strcmp(k, "visibility_timeout_ms") == 0) {
            if (get_int(f->root, k, 0, 1, FB_MAX_VISIBILITY_MS, 0, &v, err, errlen) < 0)
                return -1;
            f->ctl.visibility_timeout_ms = (int)v;
            f->ctl_mask |= FB_CTL_VISIBILITY;
        } else if (strcmp(k, "refuse_error") == 0) {
            if (!cJSON_IsString(it) || strlen(it->valuestring) > FB_MAX_REFUSE_ERROR) {
                snprintf(err, errlen, "field refuse_error must be a string of at most %d bytes",
                         FB_MAX_REFUSE_ERROR);
                return -1;
            }
            snprintf(f->ctl.refuse_error, sizeof(f->ctl.refuse_error), "%s", it->valuestring);
            f->ctl_mask |= FB_CTL_REFUSE_ERROR;
        } else if (strcmp(k, "max_payload_bytes") == 0) {
            if (get_int(f->root, k, 0, 0, FB_MAX_FRAME, 0, &v, err, errlen) < 0)
                return -1;
            f->ctl.max_payload_bytes = (int)v;
            f->ctl_mask |= FB_CTL_MAX_PAYLOAD;
        } else {
            snprintf(err, errlen, "unknown control switch %.64s", k);
            return -1;
        }
    }
    return 0;
}

static const struct {
    const char *name;
    enum fb_op op;
} op_names[] = {
    {"hello", FB_OP_HELLO},         {"publish", FB_OP_PUBLISH},
    {"subscribe", FB_OP_SUBSCRIBE}, {"ack", FB_OP_ACK},
    {"nack", FB_OP_NACK},           {"control", FB_OP_CONTROL},
    {"stats", FB_OP_STATS},         {"dump_log", FB_OP_DUMP_LOG},
    {"ping", FB_OP_PING},
};

int fb_parse_frame(const char *line, size_t len, struct fb_frame *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    const char *end = NULL;
    f->root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (f->root == NULL) {
        snprintf(err, errlen, "frame is not JSON");
        return -1;
    }
    /* One value per line: anything but blanks after it is garbage. */
    for (const char *p = end; p != NULL && p < line + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r') {
            snprintf(err, errlen, "trailing bytes after the JSON object");
            return -1;
        }
    }
    if (!cJSON_IsObject(f->root)) {
        snprintf(err, errlen, "frame is not a JSON object");
        return -1;
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(f->root, "op");
    if (!cJSON_IsString(op) || op->valuestring == NULL) {
        snprintf(err, errlen, "frame has no op");
        return -2;
    }
    for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++) {
        if (strcmp(op->valuestring, op_names[i].name) == 0)
            f->op = op_names[i].op;
    }
    int rc = 0;
    switch (f->op) {
    case FB_OP_HELLO:
        rc = get_string(f->root, "client", 1, 64, &f->client, err, errlen);
        break;
    case FB_OP_PUBLISH:
        rc = parse_publish(f, err, errlen);
        break;
    case FB_OP_SUBSCRIBE:
        rc = parse_subscribe(f, err, errlen);
        break;
    case FB_OP_ACK:
        rc = parse_tag(f, err, errlen);
        break;
    case FB_OP_NACK:
        rc = parse_nack(f, err, errlen);
        break;
    case FB_OP_CONTROL:
        rc = parse_control(f, err, errlen);
        break;
    case FB_OP_STATS:
    case FB_OP_DUMP_LOG:
    case FB_OP_PING:
        break;
    default:
        snprintf(err, errlen, "unknown op %.64s", op->valuestring);
        return -2;
    }
    return rc < 0 ? -2 : 0;
}

void fb_frame_free(struct fb_frame *f)
{
    if (f == NULL)
        return;
    cJSON_Delete(f->root);
    f->root = NULL;
}

/* ---- fault switches --------------------------------------------------- */

void fb_control_defaults(struct fb_control *c, int visibility_timeout_ms)
{
    memset(c, 0, sizeof(*c));
    c->outage = FB_OUTAGE_OFF;
    c->visibility_timeout_ms = visibility_timeout_ms;
}

void fb_control_apply(struct fb_control *c, const struct fb_frame *f, int default_visibility_ms)
{
    if (f->ctl_reset)
        fb_control_defaults(c, default_visibility_ms);
    unsigned m = f->ctl_mask;
    if (m & FB_CTL_OUTAGE)
        c->outage = f->ctl.outage;
    if (m & FB_CTL_DUPLICATE)
        c->duplicate = f->ctl.duplicate;
    if (m & FB_CTL_DELAY)
        c->delay_ms = f->ctl.delay_ms;
    if (m & FB_CTL_REORDER)
        c->reorder = f->ctl.reorder;
    if (m & FB_CTL_DROP)
        c->drop_before_confirm = f->ctl.drop_before_confirm;
    if (m & FB_CTL_VISIBILITY)
        c->visibility_timeout_ms = f->ctl.visibility_timeout_ms;
    if (m & FB_CTL_MAX_PAYLOAD)
        c->max_payload_bytes = f->ctl.max_payload_bytes;
    if (m & FB_CTL_REFUSE_ERROR)
        memcpy(c->refuse_error, f->ctl.refuse_error, sizeof(c->refuse_error));
}

const char *fb_outage_name(int outage)
{
    switch (outage) {
    case FB_OUTAGE_REFUSE: return "refuse";
    case FB_OUTAGE_HANG: return "hang";
    default: return "off";
    }
}

cJSON *fb_control_json(const struct fb_control *c)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        abort();
    cJSON_AddStringToObject(o, "outage", fb_outage_name(c->outage));
    cJSON_AddBoolToObject(o, "duplicate", c->duplicate);
    cJSON_AddNumberToObject(o, "delay_ms", c->delay_ms);
    cJSON_AddBoolToObject(o, "reorder", c->reorder);
    cJSON_AddNumberToObject(o, "drop_before_confirm", c->drop_before_confirm);
    cJSON_AddNumberToObject(o, "visibility_timeout_ms", c->visibility_timeout_ms);
    cJSON_AddNumberToObject(o, "max_payload_bytes", c->max_payload_bytes);
    /* Reported (and so logged) sanitized only: the text is a fault's, and
     * may carry what a careless broker would say. */
    char safe[CW_ERROR_MAX + 1];
    cw_sanitize_error(c->refuse_error[0] ? c->refuse_error : "broker outage", safe, sizeof(safe));
    cJSON_AddStringToObject(o, "refuse_error", safe);
    return o;
}

/* ---- digest ----------------------------------------------------------- */

void fb_sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    static const char hex[] = "0123456789abcdef";
    if (EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        out[0] = '\0';
        return;
    }
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

/* ---- JSON writer ------------------------------------------------------ */

void fb_buf_free(struct fb_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void fb_buf_add(struct fb_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *nd = realloc(b->data, cap);
        if (nd == NULL)
            abort();
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void fb_jw_begin(struct fb_buf *b)
{
    fb_buf_add(b, "{", 1);
    b->first = 1;
}

void fb_jw_end(struct fb_buf *b)
{
    fb_buf_add(b, "}", 1);
    b->first = 0;
}

static void jw_key(struct fb_buf *b, const char *key)
{
    if (!b->first)
        fb_buf_add(b, ",", 1);
    b->first = 0;
    fb_buf_add(b, "\"", 1);
    fb_buf_add(b, key, strlen(key));
    fb_buf_add(b, "\":", 2);
}

void fb_jw_strn(struct fb_buf *b, const char *key, const char *val, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    jw_key(b, key);
    if (val == NULL) {
        fb_buf_add(b, "null", 4);
        return;
    }
    fb_buf_add(b, "\"", 1);
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)val[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        fb_buf_add(b, val + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (ch) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            len = 6;
            break;
        }
        fb_buf_add(b, esc, len);
    }
    fb_buf_add(b, val + run, n - run);
    fb_buf_add(b, "\"", 1);
}

void fb_jw_str(struct fb_buf *b, const char *key, const char *val)
{
    fb_jw_strn(b, key, val, val ? strlen(val) : 0);
}

void fb_jw_int(struct fb_buf *b, const char *key, long long v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", v);
    jw_key(b, key);
    fb_buf_add(b, num, (size_t)n);
}

void fb_jw_bool(struct fb_buf *b, const char *key, int v)
{
    jw_key(b, key);
    if (v)
        fb_buf_add(b, "true", 4);
    else
        fb_buf_add(b, "false", 5);
}

void fb_jw_raw(struct fb_buf *b, const char *key, const char *json)
{
    jw_key(b, key);
    if (json == NULL)
        fb_buf_add(b, "null", 4);
    else
        fb_buf_add(b, json, strlen(json));
}
