/* report_timeline.c -- per-scenario SVG timeline and metric charts for the
 * HTML report (contracts and the shading rules are in report_timeline.h).
 *
 * Parsing keeps, for each event, only what drawing needs: time, lane, kind,
 * the message indices it concerns and a pre-rendered hover text.  The raw
 * JSON is dropped line by line so a long run does not hold every parsed tree
 * in memory.  Every piece of outside text reaches the page through rbuf_esc;
 * numbers are formatted by us; element ids and data-m values are built from
 * integers only, never from names taken from the run. */
#include "report_timeline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LANES 40
#define MAX_MSGS_PER_EVENT 32
#define MAX_LINE (1u << 20)
#define TITLE_MAX 700
#define MAX_WINDOWS 4000
#define MAX_WITNESS_LINES 24

/* Geometry of the timeline drawing, in SVG user units (pixels). */
#define TL_WIDTH 1180
#define TL_LEFT 128    /* lane labels live left of this */
#define TL_RIGHT 14
#define TL_TOP 26      /* time axis labels above the lanes */
#define TL_LANE_H 34
#define TL_BUCKET_PX 5 /* width of one density bar */

/* ---- event kinds --------------------------------------------------------- */

enum shape { SH_CIRCLE, SH_SQUARE, SH_DIAMOND, SH_TRI, SH_CROSS, SH_TICK, SH_BAR,
             SH_PLAY, SH_STAR, SH_DOT, SH_KILL, SH_START };

enum kind {
    K_START, K_REQUEST, K_COMMIT, K_API_ODD, K_CLAIM, K_PUBLISH, K_PUB_ERR, K_MARK,
    K_RETRY, K_DEAD, K_LEASE_LOST, K_BROKER_PUB, K_DELIVER, K_REDELIVER, K_APPLY,
    K_DUP, K_ANOMALY, K_ACK, K_NACK, K_FAULT, K_FAULT_END, K_ARM, K_KILL, K_STOP,
    K_EXIT, K_PAUSE, K_RESUME, K_RESTART, K_RECONNECT, K_RUNNER, K_OTHER, K_COUNT
};

struct kind_info {
    const char *cls;   /* CSS class suffix, also the short name in titles */
    const char *label; /* legend text */
    enum shape shape;
    int row;           /* 0 top, 1 middle, 2 bottom of the lane */
    int routine;       /* may be folded into density bars */
};

static const struct kind_info kinds[K_COUNT] = {
    [K_START] = {"start", "process start", SH_START, 1, 0},
    [K_REQUEST] = {"request", "HTTP request", SH_TICK, 0, 1},
    [K_COMMIT] = {"commit", "commit (payment + outbox row)", SH_SQUARE, 1, 1},
    [K_API_ODD] = {"apiodd", "replay / conflict / ambiguous commit", SH_DIAMOND, 2, 0},
    [K_CLAIM] = {"claim", "claim (lease)", SH_DIAMOND, 0, 1},
    [K_PUBLISH] = {"publish", "publish confirmed", SH_CIRCLE, 1, 1},
    [K_PUB_ERR] = {"puberr", "publish failed", SH_CIRCLE, 1, 0},
    [K_MARK] = {"mark", "marked published", SH_TICK, 2, 1},
    [K_RETRY] = {"retry", "retry scheduled", SH_TRI, 2, 0},
    [K_DEAD] = {"dead", "dead-lettered", SH_CROSS, 2, 0},
    [K_LEASE_LOST] = {"leaselost", "lease lost", SH_CROSS, 0, 0},
    [K_BROKER_PUB] = {"bpublish", "broker stored", SH_CIRCLE, 0, 1},
    [K_DELIVER] = {"deliver", "delivery", SH_TRI, 0, 1},
    [K_REDELIVER] = {"redeliver", "redelivery", SH_TRI, 0, 0},
    [K_APPLY] = {"apply", "applied (ledger entry)", SH_CIRCLE, 1, 1},
    [K_DUP] = {"dup", "duplicate absorbed by inbox", SH_DIAMOND, 1, 0},
    [K_ANOMALY] = {"anomaly", "gap / stale / parked", SH_DIAMOND, 2, 0},
    [K_ACK] = {"ack", "ack", SH_TICK, 2, 1},
    [K_NACK] = {"nack", "nack", SH_TICK, 2, 0},
    [K_FAULT] = {"fault", "fault point hit", SH_STAR, 1, 0},
    [K_FAULT_END] = {"faultend", "fault resumed", SH_DOT, 1, 0},
    [K_ARM] = {"arm", "fault armed / disarmed by the runner", SH_DOT, 0, 0},
    [K_KILL] = {"kill", "kill (SIGKILL)", SH_KILL, 1, 0},
    [K_STOP] = {"stop", "stop (SIGTERM)", SH_SQUARE, 1, 0},
    [K_EXIT] = {"exit", "process exited", SH_CROSS, 1, 0},
    [K_PAUSE] = {"pause", "pause (SIGSTOP)", SH_BAR, 1, 0},
    [K_RESUME] = {"resume", "resume (SIGCONT)", SH_PLAY, 1, 0},
    [K_RESTART] = {"restart", "restart", SH_PLAY, 1, 0},
    [K_RECONNECT] = {"reconnect", "reconnect", SH_DOT, 0, 0},
    [K_RUNNER] = {"runner", "runner step / check", SH_DOT, 1, 0},
    [K_OTHER] = {"other", "other event", SH_DOT, 1, 1},
};

/* ---- data ---------------------------------------------------------------- */

struct rev {
    int64_t ts;
    int lane;
    int kind;
    int target;       /* lane a runner action aims at, or -1 */
    long pid;
    int nmsgs;
    int *msgs;        /* message indices, owned */
    char *text;       /* hover text: event name and fields, owned */
};

enum win_type { W_FAULT, W_DOWN, W_PAUSED, W_NET };
static const char *const win_names[] = {"fault", "down", "paused", "net"};

struct rwin {
    int lane;
    enum win_type type;
    int64_t from, to;
    char *label; /* owned, raw */
};

struct lane {
    char *name;
    long last_pid;
};

struct rtl {
    struct rev *ev;
    size_t n, cap;
    size_t bad_lines, dropped;
    struct lane lanes[MAX_LANES];
    int nlanes;
    /* message ids: open-addressing table of indices into ids[] */
    char **ids;
    unsigned char *witness;
    size_t nids, idcap;
    int *slots;
    size_t nslots;
    struct rwin *win;
    size_t nwin;
};

/* ---- small helpers ------------------------------------------------------- */

static char *xstrdup(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d != NULL)
        memcpy(d, s, n + 1);
    return d;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

/* Index of message id s, added when new; -1 on out of memory. */
static int msg_index(struct rtl *t, const char *s)
{
    if (t->nids * 2 >= t->nslots) {
        size_t ns = t->nslots ? t->nslots * 2 : 256;
        int *sl = malloc(ns * sizeof(*sl));
        if (sl == NULL)
            return -1;
        for (size_t i = 0; i < ns; i++)
            sl[i] = -1;
        for (size_t i = 0; i < t->nids; i++) {
            size_t h = hash_str(t->ids[i]) & (ns - 1);
            while (sl[h] >= 0)
                h = (h + 1) & (ns - 1);
            sl[h] = (int)i;
        }
        free(t->slots);
        t->slots = sl;
        t->nslots = ns;
    }
    size_t h = hash_str(s) & (t->nslots - 1);
    while (t->slots[h] >= 0) {
        if (strcmp(t->ids[t->slots[h]], s) == 0)
            return t->slots[h];
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->nids == t->idcap) {
        size_t nc = t->idcap ? t->idcap * 2 : 128;
        char **ni = realloc(t->ids, nc * sizeof(*ni));
        if (ni == NULL)
            return -1;
        t->ids = ni;
        unsigned char *nw = realloc(t->witness, nc);
        if (nw == NULL)
            return -1;
        t->witness = nw;
        t->idcap = nc;
    }
    char *copy = xstrdup(s);
    if (copy == NULL)
        return -1;
    t->ids[t->nids] = copy;
    t->witness[t->nids] = 0;
    t->slots[h] = (int)t->nids;
    return (int)t->nids++;
}

static int lane_find(const struct rtl *t, const char *name)
{
    for (int i = 0; i < t->nlanes; i++)
        if (strcmp(t->lanes[i].name, name) == 0)
            return i;
    return -1;
}

/* Lane of a process name, created when new; the last lane collects the
 * overflow when a run has more processes than lanes. */
static int lane_get(struct rtl *t, const char *name)
{
    int i = lane_find(t, name);
    if (i >= 0)
        return i;
    if (t->nlanes == MAX_LANES - 1) {
        i = lane_find(t, "(other processes)");
        if (i >= 0)
            return i;
        name = "(other processes)";
    }
    char *copy = xstrdup(name);
    if (copy == NULL)
        return t->nlanes > 0 ? t->nlanes - 1 : -1;
    t->lanes[t->nlanes].name = copy;
    t->lanes[t->nlanes].last_pid = 0;
    return t->nlanes++;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jtrue(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsTrue(v) || (cJSON_IsNumber(v) && v->valuedouble != 0);
}

/* Roles a process name implies; the event names overlap between roles
 * ("publish" is a relay's and the broker's, "deliver" a consumer's and the
 * broker's), so the role picks the kind. */
enum role { R_OTHER, R_API, R_RELAY, R_BROKER, R_RUNNER, R_CONSUMER };

static enum role role_of(const char *proc)
{
    if (strncmp(proc, "api", 3) == 0 || strncmp(proc, "payments", 8) == 0)
        return R_API;
    if (strncmp(proc, "relay", 5) == 0 || strncmp(proc, "outbox-relay", 12) == 0)
        return R_RELAY;
    if (strncmp(proc, "fakebroker", 10) == 0 || strncmp(proc, "broker", 6) == 0)
        return R_BROKER;
    if (strcmp(proc, "runner") == 0 || strcmp(proc, "crashwindow") == 0)
        return R_RUNNER;
    return R_CONSUMER; /* accounting, notifications and any other subscriber */
}

static int kind_of(enum role role, const char *ev, const cJSON *o)
{
    if (strcmp(ev, "fault_hit") == 0)
        return K_FAULT;
    if (strcmp(ev, "fault_resumed") == 0)
        return K_FAULT_END;
    if (strcmp(ev, "start") == 0 || strcmp(ev, "listening") == 0)
        return K_START;
    if (strcmp(ev, "reconnect") == 0)
        return K_RECONNECT;
    if (strcmp(ev, "dead_letter") == 0)
        return K_DEAD;
    if (strcmp(ev, "nack") == 0)
        return K_NACK;
    if (strcmp(ev, "ack") == 0)
        return K_ACK;
    if (strcmp(ev, "redeliver") == 0)
        return K_REDELIVER;
    if (strcmp(ev, "deliver") == 0)
        return jtrue(o, "redelivered") ? K_REDELIVER : K_DELIVER;
    switch (role) {
    case R_API:
        if (strcmp(ev, "request") == 0)
            return K_REQUEST;
        if (strcmp(ev, "commit") == 0)
            return K_COMMIT;
        if (strcmp(ev, "replay") == 0 || strcmp(ev, "conflict") == 0 ||
            strcmp(ev, "ambiguous_commit") == 0)
            return K_API_ODD;
        break;
    case R_RELAY:
        if (strcmp(ev, "claim") == 0)
            return K_CLAIM;
        if (strcmp(ev, "publish") == 0) {
            const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
            int failed = cJSON_IsFalse(ok) || jstr(o, "error") != NULL;
            return failed ? K_PUB_ERR : K_PUBLISH;
        }
        if (strcmp(ev, "mark") == 0)
            return K_MARK;
        if (strcmp(ev, "retry") == 0)
            return K_RETRY;
        if (strcmp(ev, "lease_lost") == 0)
            return K_LEASE_LOST;
        break;
    case R_BROKER:
        if (strcmp(ev, "publish") == 0)
            return K_BROKER_PUB;
        break;
    case R_RUNNER:
        if (strcmp(ev, "kill") == 0)
            return K_KILL;
        if (strcmp(ev, "pause") == 0)
            return K_PAUSE;
        if (strcmp(ev, "resume") == 0)
            return K_RESUME;
        if (strcmp(ev, "restart") == 0)
            return K_RESTART;
        if (strcmp(ev, "stop") == 0)
            return K_STOP;
        if (strcmp(ev, "exit") == 0)
            return K_EXIT;
        if (strcmp(ev, "fault") == 0 || strcmp(ev, "fault_off") == 0)
            return K_ARM;
        if (strcmp(ev, "http") == 0)
            return K_REQUEST; /* the workload: routine, may be folded */
        return K_RUNNER;
    case R_CONSUMER:
        if (strcmp(ev, "apply") == 0)
            return K_APPLY;
        if (strcmp(ev, "inbox_dup") == 0)
            return K_DUP;
        if (strcmp(ev, "gap") == 0 || strcmp(ev, "stale") == 0 || strcmp(ev, "park") == 0)
            return K_ANOMALY;
        break;
    case R_OTHER:
        break;
    }
    return K_OTHER;
}

/* Appends one value to the hover text, bounded. */
static void text_value(struct rbuf *b, const cJSON *v, int depth)
{
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        rbuf_put(b, v->valuestring, n > 160 ? 160 : n);
        if (n > 160)
            rbuf_puts(b, "...");
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 9e15)
            rbuf_printf(b, "%lld", (long long)d);
        else
            rbuf_printf(b, "%g", d);
    } else if (cJSON_IsBool(v)) {
        rbuf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        rbuf_puts(b, "null");
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int open = cJSON_IsArray(v) ? '[' : '{';
        rbuf_put(b, open == '[' ? "[" : "{", 1);
        if (depth > 1) {
            rbuf_puts(b, "...");
        } else {
            int i = 0, total = cJSON_GetArraySize(v);
            const cJSON *c;
            cJSON_ArrayForEach(c, v) {
                if (i == 6) {
                    rbuf_printf(b, ", ... %d more", total - i);
                    break;
                }
                if (i > 0)
                    rbuf_puts(b, ", ");
                if (open == '{' && c->string != NULL) {
                    rbuf_puts(b, c->string);
                    rbuf_puts(b, ": ");
                }
                text_value(b, c, depth + 1);
                i++;
            }
        }
        rbuf_puts(b, open == '[' ? "]" : "}");
    }
}

/* The hover text of an event: its fields other than the common header,
 * one per line.  Raw text; escaped when written. */
static char *event_text(const cJSON *o)
{
    struct rbuf b;
    rbuf_init(&b, TITLE_MAX);
    const cJSON *c;
    cJSON_ArrayForEach(c, o) {
        if (c->string == NULL || strcmp(c->string, "ts_us") == 0 ||
            strcmp(c->string, "proc") == 0 || strcmp(c->string, "pid") == 0 ||
            strcmp(c->string, "event") == 0)
            continue;
        rbuf_puts(&b, "\n");
        rbuf_puts(&b, c->string);
        rbuf_puts(&b, "=");
        text_value(&b, c, 0);
        if (b.overflow)
            break;
    }
    char *s;
    if (b.len == 0) {
        s = xstrdup("");
    } else if (b.overflow) {
        /* keep what fitted, marked as cut */
        s = malloc(b.len + 5);
        if (s != NULL)
            snprintf(s, b.len + 5, "%s ...", b.data);
    } else {
        s = xstrdup(b.data);
    }
    rbuf_free(&b);
    return s;
}

static void add_msg(struct rtl *t, int *msgs, int *n, const char *id)
{
    if (*n >= MAX_MSGS_PER_EVENT || id == NULL || id[0] == '\0')
        return;
    int m = msg_index(t, id);
    if (m < 0)
        return;
    for (int i = 0; i < *n; i++)
        if (msgs[i] == m)
            return;
    msgs[(*n)++] = m;
}

/* The lane a runner action aims at: a process name in target/process/name
 * (or similar), else a pid matched against the processes seen so far. */
static int runner_target(struct rtl *t, const cJSON *o)
{
    static const char *const keys[] = {"target", "process", "name", "proc_name", "of",
                                       "which"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *s = jstr(o, keys[i]);
        if (s != NULL && s[0] != '\0')
            return lane_get(t, s);
    }
    static const char *const pkeys[] = {"target_pid", "child_pid", "pid_of"};
    for (size_t i = 0; i < sizeof(pkeys) / sizeof(pkeys[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, pkeys[i]);
        if (!cJSON_IsNumber(v))
            continue;
        for (int l = 0; l < t->nlanes; l++)
            if (t->lanes[l].last_pid == (long)v->valuedouble)
                return l;
    }
    return -1;
}

static int add_event(struct rtl *t, const cJSON *o)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "ts_us");
    if (!cJSON_IsNumber(ts) || ts->valuedouble <= 0)
        return -1;
    const char *proc = jstr(o, "proc");
    const char *name = jstr(o, "event");
    if (proc == NULL || proc[0] == '\0')
        proc = "(unknown process)";
    if (name == NULL)
        name = "(no event name)";
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        struct rev *ne = realloc(t->ev, nc * sizeof(*ne));
        if (ne == NULL)
            return -1;
        t->ev = ne;
        t->cap = nc;
    }
    struct rev *e = &t->ev[t->n];
    memset(e, 0, sizeof(*e));
    e->ts = (int64_t)ts->valuedouble;
    e->lane = lane_get(t, proc);
    if (e->lane < 0)
        return -1;
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
    e->pid = cJSON_IsNumber(pid) ? (long)pid->valuedouble : 0;
    enum role role = role_of(proc);
    e->kind = kind_of(role, name, o);
    e->target = -1;
    /* the runner's actions on a process are drawn on that process's lane */
    if (role == R_RUNNER &&
        (e->kind == K_START || e->kind == K_RESTART || e->kind == K_STOP ||
         e->kind == K_EXIT || e->kind == K_KILL || e->kind == K_PAUSE ||
         e->kind == K_RESUME || e->kind == K_ARM))
        e->target = runner_target(t, o);
    t->lanes[e->lane].last_pid = e->pid;

    int msgs[MAX_MSGS_PER_EVENT], nm = 0;
    add_msg(t, msgs, &nm, jstr(o, "id"));
    add_msg(t, msgs, &nm, jstr(o, "message_id"));
    /* a claim names its batch as "ids" (or "message_ids") */
    static const char *const arrays[] = {"ids", "message_ids"};
    for (size_t a = 0; a < sizeof(arrays) / sizeof(arrays[0]); a++) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, arrays[a]);
        const cJSON *c;
        if (cJSON_IsArray(ids))
            cJSON_ArrayForEach(c, ids)
                if (cJSON_IsString(c))
                    add_msg(t, msgs, &nm, c->valuestring);
    }
    if (nm > 0) {
        e->msgs = malloc((size_t)nm * sizeof(int));
        if (e->msgs == NULL)
            return -1;
        memcpy(e->msgs, msgs, (size_t)nm * sizeof(int));
        e->nmsgs = nm;
    }
    char *fields = event_text(o);
    size_t need = strlen(name) + (fields ? strlen(fields) : 0) + 1;
    e->text = malloc(need);
    if (e->text != NULL)
        snprintf(e->text, need, "%s%s", name, fields ? fields : "");
    free(fields);
    t->n++;
    return 0;
}

static int cmp_ev(const void *a, const void *b)
{
    const struct rev *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return 0;
}

static void add_window(struct rtl *t, int lane, enum win_type type, int64_t from,
                       int64_t to, const char *label)
{
    if (t->nwin >= MAX_WINDOWS || lane < 0)
        return;
    struct rwin *nw = realloc(t->win, (t->nwin + 1) * sizeof(*nw));
    if (nw == NULL)
        return;
    t->win = nw;
    struct rwin *w = &t->win[t->nwin];
    w->lane = lane;
    w->type = type;
    w->from = from;
    w->to = to;
    w->label = xstrdup(label ? label : "");
    t->nwin++;
}

/* The value of field key in an event's hover text ("how=killed by SIGKILL"). */
static void text_field(const struct rev *e, const char *key, char *out, size_t len)
{
    char pat[40];
    snprintf(pat, sizeof(pat), "\n%s=", key);
    const char *p = e->text ? strstr(e->text, pat) : NULL;
    out[0] = '\0';
    if (p == NULL)
        return;
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* True when event f ends a fault window opened on lane by a process pid. */
static int ends_fault(const struct rev *f, int lane, long pid)
{
    if (f->lane == lane && f->target < 0)
        return f->kind == K_FAULT_END || (f->pid == pid && f->kind != K_FAULT) ||
               (f->pid != pid && f->kind == K_START);
    return f->target == lane &&
           (f->kind == K_KILL || f->kind == K_EXIT || f->kind == K_RESUME ||
            f->kind == K_RESTART || f->kind == K_START);
}

/* True when event f brings a process on lane back up. */
static int ends_down(const struct rev *f, int lane)
{
    if (f->target == lane)
        return f->kind == K_RESTART || f->kind == K_START;
    return f->lane == lane && f->target < 0 && f->kind == K_START;
}

/* Whether e is the runner's net_fault or net_clear event on link (e's own
 * link when link is NULL). */
static int is_net_event(const struct rev *e, const char *name, const char *link)
{
    size_t n = strlen(name);
    if (e->text == NULL || strncmp(e->text, name, n) != 0 || e->text[n] != '\n')
        return 0;
    char l[96];
    text_field(e, "link", l, sizeof(l));
    return l[0] != '\0' && (link == NULL || strcmp(l, link) == 0);
}

/* A network fault window on the lane of its link ("net relay-1->pg"): from
 * net_fault to its own end (ms), the link's next net_fault or net_clear,
 * or the end of the run. */
static void add_net_window(struct rtl *t, size_t i, int64_t end)
{
    const struct rev *e = &t->ev[i];
    char link[96], detail[120], ms[24], lane[112];
    text_field(e, "link", link, sizeof(link));
    text_field(e, "detail", detail, sizeof(detail));
    text_field(e, "ms", ms, sizeof(ms));
    int64_t to = end;
    if (atoll(ms) > 0 && e->ts + atoll(ms) * 1000 < to)
        to = e->ts + atoll(ms) * 1000;
    for (size_t j = i + 1; j < t->n; j++)
        if (t->ev[j].ts < to && (is_net_event(&t->ev[j], "net_fault", link) ||
                                 is_net_event(&t->ev[j], "net_clear", link))) {
            to = t->ev[j].ts;
            break;
        }
    snprintf(lane, sizeof(lane), "net %s", link);
    add_window(t, lane_get(t, lane), W_NET, e->ts, to, detail[0] ? detail : "network fault");
}

/* Derives the shaded windows (see the header for the rules). */
static void build_windows(struct rtl *t)
{
    int64_t end = t->n ? t->ev[t->n - 1].ts : 0;
    int64_t down_until[MAX_LANES];
    for (int l = 0; l < MAX_LANES; l++)
        down_until[l] = INT64_MIN;
    for (size_t i = 0; i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        char label[200], how[120];
        int64_t to = end;
        if (is_net_event(e, "net_fault", NULL)) {
            add_net_window(t, i, end);
        } else if (e->kind == K_FAULT) {
            for (size_t j = i + 1; j < t->n; j++)
                if (ends_fault(&t->ev[j], e->lane, e->pid)) {
                    to = t->ev[j].ts;
                    break;
                }
            char point[128], action[32];
            text_field(e, "point", point, sizeof(point));
            text_field(e, "action", action, sizeof(action));
            snprintf(label, sizeof(label), "fault %s (%s)", point[0] ? point : "?",
                     action[0] ? action : "?");
            add_window(t, e->lane, W_FAULT, e->ts, to, label);
        } else if ((e->kind == K_KILL || e->kind == K_EXIT) && e->target >= 0) {
            /* a kill is followed by the exit it caused: one window for both */
            if (e->ts < down_until[e->target])
                continue;
            for (size_t j = i + 1; j < t->n; j++)
                if (ends_down(&t->ev[j], e->target)) {
                    to = t->ev[j].ts;
                    break;
                }
            text_field(e, "how", how, sizeof(how));
            if (e->kind == K_KILL)
                snprintf(label, sizeof(label), "process down (killed)");
            else
                snprintf(label, sizeof(label), "process down (exited%s%s)", how[0] ? ": " : "",
                         how);
            add_window(t, e->target, W_DOWN, e->ts, to, label);
            down_until[e->target] = to;
        } else if (e->kind == K_PAUSE && e->target >= 0) {
            for (size_t j = i + 1; j < t->n; j++) {
                const struct rev *f = &t->ev[j];
                if (f->target == e->target &&
                    (f->kind == K_RESUME || f->kind == K_KILL || f->kind == K_EXIT ||
                     f->kind == K_RESTART)) {
                    to = f->ts;
                    break;
                }
            }
            add_window(t, e->target, W_PAUSED, e->ts, to, "process paused (SIGSTOP)");
        }
    }
}

/* Lane order: runner, api, relays, broker, consumers, then the rest, each
 * group by name, so that a message flows top to bottom. */
static int lane_rank(const char *name)
{
    switch (role_of(name)) {
    case R_RUNNER: return 0;
    case R_API: return 1;
    case R_RELAY: return 2;
    case R_BROKER: return 3;
    case R_CONSUMER: return 4;
    case R_OTHER: break;
    }
    return 5;
}

static void order_lanes(struct rtl *t)
{
    int map[MAX_LANES], order[MAX_LANES];
    for (int i = 0; i < t->nlanes; i++)
        order[i] = i;
    /* insertion sort: at most MAX_LANES entries */
    for (int i = 1; i < t->nlanes; i++) {
        int k = order[i], j = i - 1;
        while (j >= 0) {
            int o = order[j];
            int ro = lane_rank(t->lanes[o].name), rk = lane_rank(t->lanes[k].name);
            if (ro < rk || (ro == rk && strcmp(t->lanes[o].name, t->lanes[k].name) <= 0))
                break;
            order[j + 1] = o;
            j--;
        }
        order[j + 1] = k;
    }
    struct lane sorted[MAX_LANES];
    for (int i = 0; i < t->nlanes; i++) {
        sorted[i] = t->lanes[order[i]];
        map[order[i]] = i;
    }
    memcpy(t->lanes, sorted, (size_t)t->nlanes * sizeof(sorted[0]));
    for (size_t i = 0; i < t->n; i++) {
        t->ev[i].lane = map[t->ev[i].lane];
        if (t->ev[i].target >= 0)
            t->ev[i].target = map[t->ev[i].target];
    }
}

/* Where read_jsonl hands the lines of a file: add takes one JSON object and returns
 * < 0 to count it as bad; *n is the count add keeps, compared against max. */
struct jsonl_sink {
    int (*add)(void *ctx, const cJSON *o);
    void *ctx;
    const size_t *n;
    size_t max;
    size_t *dropped, *bad_lines;
};

/* Reads the JSON-lines file at path into sink. Empty lines are skipped; once *sink->n
 * reaches sink->max further lines only count in *dropped; a line longer than MAX_LINE,
 * not a JSON object, or refused by add counts in *bad_lines. 0 on success, -1 with
 * the reason in err when the file cannot be opened or read (what was added stays). */
static int read_jsonl(const char *path, const struct jsonl_sink *sink, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        if (len <= 1)
            continue;
        if (*sink->n >= sink->max) {
            (*sink->dropped)++;
            continue;
        }
        cJSON *o = (size_t)len > MAX_LINE ? NULL : cJSON_ParseWithLength(line, (size_t)len);
        if (!cJSON_IsObject(o) || sink->add(sink->ctx, o) < 0)
            (*sink->bad_lines)++;
        cJSON_Delete(o);
    }
    free(line);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    return 0;
}

static int add_event_cb(void *ctx, const cJSON *o) { return add_event(ctx, o); }

struct rtl *rtl_load(const char *path, size_t max_events, char *err, size_t errlen)
{
    struct rtl *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct jsonl_sink sink = { add_event_cb, t, &t->n, max_events, &t->dropped,
                               &t->bad_lines };
    if (read_jsonl(path, &sink, err, errlen) < 0) {
        rtl_free(t);
        return NULL;
    }
    /* The runner writes the merge sorted; sorting again costs little and
     * keeps the window rules right for a hand-merged file. */
    qsort(t->ev, t->n, sizeof(*t->ev), cmp_ev);
    order_lanes(t);
    build_windows(t);
    return t;
}

void rtl_free(struct rtl *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->ev[i].msgs);
        free(t->ev[i].text);
    }
    free(t->ev);
    for (int i = 0; i < t->nlanes; i++)
        free(t->lanes[i].name);
    for (size_t i = 0; i < t->nids; i++)
        free(t->ids[i]);
    free(t->ids);
    free(t->witness);
    free(t->slots);
    for (size_t i = 0; i < t->nwin; i++)
        free(t->win[i].label);
    free(t->win);
    free(t);
}

size_t rtl_count(const struct rtl *t) { return t ? t->n : 0; }
size_t rtl_bad_lines(const struct rtl *t) { return t ? t->bad_lines : 0; }
int rtl_lanes(const struct rtl *t) { return t ? t->nlanes : 0; }

size_t rtl_windows(const struct rtl *t, const char *type)
{
    size_t n = 0;
    for (size_t i = 0; t != NULL && i < t->nwin; i++)
        if (strcmp(win_names[t->win[i].type], type) == 0)
            n++;
    return n;
}

size_t rtl_mark_witnesses(struct rtl *t, const char *const *texts, size_t n)
{
    size_t marked = 0;
    for (size_t m = 0; t != NULL && m < t->nids; m++) {
        if (strlen(t->ids[m]) < 6)
            continue; /* too short to name one message unambiguously */
        for (size_t i = 0; i < n; i++) {
            if (texts[i] != NULL && strstr(texts[i], t->ids[m]) != NULL) {
                if (!t->witness[m])
                    marked++;
                t->witness[m] = 1;
                break;
            }
        }
    }
    return marked;
}

/* ---- shared drawing helpers --------------------------------------------- */

double report_nice_step(double span, int n)
{
    if (!(span > 0) || n < 1)
        return 1;
    double raw = span / n;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    double nice = f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10;
    return nice * p;
}

/* Formats a time offset in milliseconds for an axis with the given step:
 * seconds once the step reaches 100 ms, with as many decimals as the step
 * needs, milliseconds below. */
static void fmt_offset(char *out, size_t len, double ms, double step_ms)
{
    if (fabs(ms) < step_ms * 1e-6)
        ms = 0; /* never "-0.0 s" */
    if (step_ms >= 100) {
        int dec = fmod(step_ms, 1000) == 0 ? 0 : fmod(step_ms, 100) == 0 ? 1 : 2;
        snprintf(out, len, "%.*f s", dec, ms / 1000);
    } else {
        int dec = step_ms >= 1 ? 0 : step_ms >= 0.1 ? 1 : 2;
        snprintf(out, len, "%.*f ms", dec, ms);
    }
}

static void fmt_value(char *out, size_t len, double v)
{
    if (fabs(v) >= 10000)
        snprintf(out, len, "%.0f", v);
    else if (v == floor(v))
        snprintf(out, len, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(out, len, "%.1f", v);
    else
        snprintf(out, len, "%.2f", v);
}

/* ---- the timeline SVG ---------------------------------------------------- */

struct geo {
    int64_t t0, t1;   /* shown */
    double x0, w;
    int64_t origin;   /* labels count from here */
};

static double xpos(const struct geo *g, int64_t ts)
{
    if (g->t1 <= g->t0)
        return g->x0;
    double f = (double)(ts - g->t0) / (double)(g->t1 - g->t0);
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    return g->x0 + f * g->w;
}

static double row_y(int lane, int row)
{
    return TL_TOP + lane * TL_LANE_H + 8 + row * 9;
}

/* Appends the geometry of a shape at (x, y) as the start of an element
 * (without its closing): the caller adds attributes and the title. */
static void shape_open(struct rbuf *b, enum shape s, double x, double y)
{
    switch (s) {
    case SH_CIRCLE:
        rbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.6\"", x, y);
        break;
    case SH_SQUARE:
        rbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6.4\" height=\"6.4\"", x - 3.2,
                    y - 3.2);
        break;
    case SH_DIAMOND:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl4.5 4.5-4.5 4.5-4.5-4.5z\"", x, y - 4.5);
        break;
    case SH_TRI:
        rbuf_printf(b, "<path d=\"M%.1f %.1fh9l-4.5-8z\"", x - 4.5, y + 4);
        break;
    case SH_CROSS:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl8 8m0-8l-8 8\"", x - 4, y - 4);
        break;
    case SH_TICK:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv9\"", x, y - 4.5);
        break;
    case SH_BAR:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv12m5-12v12\"", x - 2.5, y - 6);
        break;
    case SH_PLAY:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv12l9-6z\"", x - 3, y - 6);
        break;
    case SH_STAR:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl2.4 5.6 5.6 2.4-5.6 2.4-2.4 5.6-2.4-5.6-5.6-2.4 "
                       "5.6-2.4z\"", x, y - 8);
        break;
    case SH_DOT:
        rbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"", x, y);
        break;
    case SH_KILL:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv%dM%.1f %.1fl10 10m0-10l-10 10\"", x,
                    y - TL_LANE_H / 2.0 + 1, TL_LANE_H - 2, x - 5, y - 5);
        break;
    case SH_START:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv14\"", x, y - 7);
        break;
    }
}

static void legend_icon(struct rbuf *b, int k)
{
    rbuf_puts(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"16\" height=\"18\" "
                 "viewBox=\"0 0 16 18\" aria-hidden=\"true\">");
    enum shape s = kinds[k].shape;
    /* the kill marker spans a lane: shrink it for the legend */
    if (s == SH_KILL)
        s = SH_CROSS;
    shape_open(b, s, 8, 9);
    rbuf_printf(b, " class=\"mk k-%s\"/></svg>", kinds[k].cls);
}

static void msg_attr(struct rbuf *b, const struct rtl *t, const struct rev *e, int scen,
                     int *is_witness)
{
    *is_witness = 0;
    if (e->nmsgs == 0)
        return;
    rbuf_puts(b, " data-m=\"");
    for (int i = 0; i < e->nmsgs; i++) {
        rbuf_printf(b, "%s%d-%d", i ? " " : "", scen, e->msgs[i]);
        if (t->witness[e->msgs[i]])
            *is_witness = 1;
    }
    rbuf_puts(b, "\"");
}

static void title_of(struct rbuf *b, const struct rtl *t, const struct rev *e,
                     int64_t origin)
{
    rbuf_printf(b, "<title>+%.3f s ", (double)(e->ts - origin) / 1e6);
    rbuf_esc(b, t->lanes[e->lane].name, 80);
    rbuf_printf(b, " (pid %ld) ", e->pid);
    rbuf_esc(b, e->text, 0);
    if (e->target >= 0) {
        rbuf_puts(b, "\n-> ");
        rbuf_esc(b, t->lanes[e->target].name, 80);
    }
    /* ids the fields above do not already show in full (a long claim's
     * "ids" list is cut at six) */
    int listed = 0;
    for (int i = 0; i < e->nmsgs; i++) {
        const char *id = t->ids[e->msgs[i]];
        if (e->text != NULL && strstr(e->text, id) != NULL)
            continue;
        rbuf_puts(b, listed++ ? ", " : "\nmessages: ");
        rbuf_esc(b, id, 80);
    }
    rbuf_puts(b, "</title>");
}

/* Where an event is drawn: runner actions on the lane they aim at. */
static int draw_lane(const struct rev *e)
{
    return e->target >= 0 ? e->target : e->lane;
}

static int is_individual(const struct rtl *t, const struct rev *e, int folding)
{
    if (!folding || !kinds[e->kind].routine)
        return 1;
    for (int i = 0; i < e->nmsgs; i++)
        if (t->witness[e->msgs[i]])
            return 1;
    return 0;
}

/* Vertical grid lines and labels (time since the origin) over [t0, t1]. */
static void draw_axis(struct rbuf *b, const struct geo *g, int height)
{
    double from_ms = (double)(g->t0 - g->origin) / 1000.0;
    double to_ms = (double)(g->t1 - g->origin) / 1000.0;
    double step = report_nice_step(to_ms - from_ms, 10);
    rbuf_puts(b, "<g class=\"axis\">");
    int n = 0;
    for (double ms = ceil(from_ms / step - 1e-9) * step; ms <= to_ms + step * 1e-9 && n < 40;
         ms += step, n++) {
        double x = xpos(g, g->origin + (int64_t)llround(ms * 1000));
        char lab[48];
        fmt_offset(lab, sizeof(lab), ms, step);
        rbuf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                       "<text x=\"%.1f\" y=\"%d\">%s</text>",
                    x, TL_TOP - 4, x, height - 4, x, TL_TOP - 8, lab);
    }
    rbuf_puts(b, "</g>");
}

/* rtl_svg draws in layers, back to front, one helper each: lanes, axis,
 * shaded windows, density bars, witness lines, markers; then the legend and
 * notes below the drawing.  What the legend and notes need to know about
 * the drawing is gathered here as it is drawn. */
struct tl_drawn {
    size_t early;            /* events before the view, not drawn */
    size_t folded;           /* routine events drawn as density */
    size_t over_cap;         /* events past the marker cap */
    int lines;               /* witness lines drawn */
    int present[K_COUNT];    /* kinds drawn as markers */
};

/* The figure and svg elements, the hatch pattern for down windows (its id
 * made unique in the page by scen) and one labelled band per lane. */
static void draw_lanes(struct rbuf *b, const struct rtl *t, int scen, int height)
{
    rbuf_printf(b, "<figure class=\"timeline\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
                   "class=\"timeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "role=\"img\" aria-label=\"timeline: one lane per process\">",
                TL_WIDTH, height, TL_WIDTH, height);
    rbuf_printf(b, "<defs><pattern id=\"hatch-%d\" width=\"6\" height=\"6\" "
                   "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
                   "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"hatchline\"/>"
                   "</pattern></defs>", scen);
    for (int l = 0; l < t->nlanes; l++) {
        int y = TL_TOP + l * TL_LANE_H;
        rbuf_printf(b, "<rect class=\"lane%s\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\"/>"
                       "<text class=\"lanelabel\" x=\"6\" y=\"%d\">",
                    l % 2 ? " odd" : "", y, TL_WIDTH, TL_LANE_H, y + TL_LANE_H / 2 + 4);
        rbuf_esc(b, t->lanes[l].name, 16);
        rbuf_puts(b, "</text>");
    }
}

/* Shaded windows: a faint band over every lane for faults (so the charts
 * below and the other lanes show when a fault was active), and the
 * stronger shade on the lane of the process concerned. */
static void draw_windows(struct rbuf *b, const struct rtl *t, const struct geo *g, int scen)
{
    for (size_t i = 0; i < t->nwin; i++) {
        const struct rwin *w = &t->win[i];
        if (w->to < g->t0)
            continue;
        double x = xpos(g, w->from), x2 = xpos(g, w->to);
        double wd = x2 - x < 2 ? 2 : x2 - x;
        if (w->type == W_FAULT)
            rbuf_printf(b, "<rect class=\"faultband\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                           "height=\"%d\"/>", x, TL_TOP, wd, t->nlanes * TL_LANE_H);
        rbuf_printf(b, "<rect class=\"win-%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                       "height=\"%d\"", win_names[w->type], x,
                    TL_TOP + w->lane * TL_LANE_H + 1, wd, TL_LANE_H - 2);
        if (w->type == W_DOWN)
            rbuf_printf(b, " fill=\"url(#hatch-%d)\"", scen);
        rbuf_puts(b, "><title>");
        rbuf_esc(b, w->label, 200);
        rbuf_puts(b, " in ");
        rbuf_esc(b, t->lanes[w->lane].name, 80);
        rbuf_printf(b, ": +%.3f s to +%.3f s (%.1f ms)</title></rect>",
                    (double)(w->from - g->origin) / 1e6, (double)(w->to - g->origin) / 1e6,
                    (double)(w->to - w->from) / 1000.0);
    }
}

/* Density bars for folded routine events: one path per lane (a bar per
 * bucket, integer coordinates) with one hover text giving the lane's
 * folded counts by kind; a rect and title per bar would cost ten times
 * the bytes.  Returns the number of events folded (0 when out of memory:
 * nothing is drawn then). */
static size_t draw_density(struct rbuf *b, const struct rtl *t, const struct geo *g)
{
    size_t folded = 0;
    int nb = (int)(g->w / TL_BUCKET_PX) + 1;
    size_t cells = (size_t)t->nlanes * (size_t)nb;
    unsigned *cnt = calloc(cells, sizeof(unsigned));
    size_t *kc = calloc((size_t)t->nlanes * K_COUNT, sizeof(size_t));
    if (cnt == NULL || kc == NULL)
        goto out;
    unsigned max = 1;
    for (size_t i = 0; i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (e->ts < g->t0 || is_individual(t, e, 1))
            continue;
        int bk = (int)((xpos(g, e->ts) - g->x0) / TL_BUCKET_PX);
        size_t c = (size_t)draw_lane(e) * (size_t)nb + (size_t)bk;
        cnt[c]++;
        kc[(size_t)draw_lane(e) * K_COUNT + (size_t)e->kind]++;
        if (cnt[c] > max)
            max = cnt[c];
        folded++;
    }
    rbuf_puts(b, "<g class=\"density\">");
    for (int l = 0; l < t->nlanes; l++) {
        int any = 0;
        for (int bk = 0; bk < nb; bk++) {
            unsigned n = cnt[(size_t)l * (size_t)nb + (size_t)bk];
            if (n == 0)
                continue;
            int h = (int)lround(3 + (TL_LANE_H - 8) * log1p(n) / log1p(max));
            if (!any)
                rbuf_puts(b, "<path d=\"");
            any = 1;
            rbuf_printf(b, "M%d %dv%dh%dv%dz",
                        (int)lround(g->x0) + bk * TL_BUCKET_PX,
                        TL_TOP + (l + 1) * TL_LANE_H - 2, -h, TL_BUCKET_PX - 1, h);
        }
        if (!any)
            continue;
        rbuf_puts(b, "\"><title>");
        rbuf_esc(b, t->lanes[l].name, 80);
        rbuf_puts(b, ": routine events drawn as density (bar height grows with the "
                     "log of the count):");
        for (int k = 0; k < K_COUNT; k++) {
            size_t nk = kc[(size_t)l * K_COUNT + (size_t)k];
            if (nk > 0)
                rbuf_printf(b, " %s %zu", kinds[k].cls, nk);
        }
        rbuf_puts(b, "</title></path>");
    }
    rbuf_puts(b, "</g>");
out:
    free(cnt);
    free(kc);
    return folded;
}

/* Witness messages: one dashed line through all their markers, at most
 * MAX_WITNESS_LINES.  Returns the number of lines drawn. */
static int draw_witness_lines(struct rbuf *b, const struct rtl *t, const struct geo *g,
                              int scen)
{
    int lines = 0;
    for (size_t m = 0; m < t->nids && lines < MAX_WITNESS_LINES; m++) {
        if (!t->witness[m])
            continue;
        int pts = 0;
        for (size_t i = 0; i < t->n; i++) {
            const struct rev *e = &t->ev[i];
            if (e->ts < g->t0)
                continue;
            for (int k = 0; k < e->nmsgs; k++) {
                if (e->msgs[k] != (int)m)
                    continue;
                if (pts == 0)
                    rbuf_printf(b, "<polyline class=\"wline\" data-m=\"%d-%zu\" points=\"",
                                scen, m);
                rbuf_printf(b, "%s%.1f,%.1f", pts ? " " : "", xpos(g, e->ts),
                            row_y(draw_lane(e), kinds[e->kind].row));
                pts++;
            }
        }
        if (pts > 0) {
            rbuf_puts(b, "\"><title>witness message ");
            rbuf_esc(b, t->ids[m], 100);
            rbuf_puts(b, "</title></polyline>");
            lines++;
        }
    }
    return lines;
}

/* One event's marker: its shape, class, data-m and hover title. */
static void draw_marker(struct rbuf *b, const struct rtl *t, const struct rev *e,
                        const struct geo *g, int scen)
{
    int lane = draw_lane(e);
    shape_open(b, kinds[e->kind].shape, xpos(g, e->ts), row_y(lane, kinds[e->kind].row));
    int wit;
    /* data-m before class so that the witness flag is known */
    struct rbuf tmp;
    rbuf_init(&tmp, 4096);
    msg_attr(&tmp, t, e, scen, &wit);
    rbuf_printf(b, " class=\"mk k-%s%s\"", kinds[e->kind].cls, wit ? " w" : "");
    if (tmp.len > 0)
        rbuf_put(b, tmp.data, tmp.len);
    rbuf_free(&tmp);
    rbuf_puts(b, ">");
    title_of(b, t, e, g->origin);
    switch (kinds[e->kind].shape) {
    case SH_CIRCLE: case SH_DOT: rbuf_puts(b, "</circle>"); break;
    case SH_SQUARE: rbuf_puts(b, "</rect>"); break;
    default: rbuf_puts(b, "</path>"); break;
    }
}

/* Markers for the events in view that are not folded, up to cap of them;
 * the rest are counted in d->over_cap. */
static void draw_markers(struct rbuf *b, const struct rtl *t, const struct geo *g, int scen,
                         int folding, size_t cap, struct tl_drawn *d)
{
    size_t individual = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (e->ts < g->t0 || !is_individual(t, e, folding))
            continue;
        if (individual >= cap) {
            d->over_cap++;
            continue;
        }
        individual++;
        d->present[e->kind] = 1;
        draw_marker(b, t, e, g, scen);
    }
}

/* The caption: a legend of only the kinds present plus the shadings, and a
 * note for everything that was drawn otherwise or not at all. */
static void draw_caption(struct rbuf *b, const struct rtl *t, const struct geo *g,
                         size_t cap, const struct tl_drawn *d)
{
    rbuf_puts(b, "<figcaption><ul class=\"legend\">");
    for (int k = 0; k < K_COUNT; k++) {
        if (!d->present[k])
            continue;
        rbuf_puts(b, "<li>");
        legend_icon(b, k);
        rbuf_puts(b, kinds[k].label);
        rbuf_puts(b, "</li>");
    }
    if (rtl_windows(t, "fault"))
        rbuf_puts(b, "<li><span class=\"sw sw-fault\"></span>fault window</li>");
    if (rtl_windows(t, "down"))
        rbuf_puts(b, "<li><span class=\"sw sw-down\"></span>process down</li>");
    if (rtl_windows(t, "paused"))
        rbuf_puts(b, "<li><span class=\"sw sw-paused\"></span>process paused</li>");
    if (rtl_windows(t, "net"))
        rbuf_puts(b, "<li><span class=\"sw sw-net\"></span>network fault on a link</li>");
    if (d->lines > 0)
        rbuf_puts(b, "<li><span class=\"sw sw-witness\"></span>message named in a failure "
                     "witness</li>");
    if (d->folded > 0)
        rbuf_puts(b, "<li><span class=\"sw sw-density\"></span>routine events (density)"
                     "</li>");
    rbuf_puts(b, "</ul>");
    if (d->folded > 0)
        rbuf_printf(b, "<p class=\"note\">%zu events: %zu routine events are drawn as "
                       "density bars (hover a lane's bars for its counts); faults, kills, retries, "
                       "duplicates and witness messages are drawn one by one.</p>",
                    t->n - d->early, d->folded);
    if (d->early > 0)
        rbuf_printf(b, "<p class=\"note\">The time axis starts at +%.2f s, just before the "
                       "first step; the %zu events of process start-up before it are not "
                       "drawn.</p>", (double)(g->t0 - g->origin) / 1e6, d->early);
    if (d->over_cap > 0)
        rbuf_printf(b, "<p class=\"note\">%zu more events are not drawn (cap of %zu "
                       "markers).</p>", d->over_cap, cap);
    if (t->bad_lines > 0 || t->dropped > 0)
        rbuf_printf(b, "<p class=\"note\">%zu malformed lines skipped, %zu lines past the "
                       "read limit ignored.</p>", t->bad_lines, t->dropped);
    rbuf_puts(b, "</figcaption></figure>");
}

int rtl_svg(struct rbuf *b, const struct rtl *t, int scen, const struct rview *v,
            size_t cap)
{
    if (t == NULL || t->n == 0) {
        rbuf_puts(b, "<p class=\"note\">No timeline events were recorded for this "
                     "scenario.</p>");
        return b->overflow ? -1 : 0;
    }
    struct geo g = {v->t0, v->t1, TL_LEFT, TL_WIDTH - TL_LEFT - TL_RIGHT, v->origin};
    int height = TL_TOP + t->nlanes * TL_LANE_H + 6;
    struct tl_drawn d;
    memset(&d, 0, sizeof(d));
    while (d.early < t->n && t->ev[d.early].ts < g.t0)
        d.early++;
    int folding = t->n - d.early > cap;

    draw_lanes(b, t, scen, height);
    draw_axis(b, &g, height);
    draw_windows(b, t, &g, scen);
    if (folding)
        d.folded = draw_density(b, t, &g);
    d.lines = draw_witness_lines(b, t, &g, scen);
    draw_markers(b, t, &g, scen, folding, cap, &d);
    rbuf_puts(b, "</svg>");
    draw_caption(b, t, &g, cap, &d);
    return b->overflow ? -1 : 0;
}

/* ---- metrics --------------------------------------------------------------- */

enum mfield { M_PENDING, M_OLDEST, M_ATTEMPTS, M_DEAD, M_DUPS, M_PUBLISHED, M_PUB50,
              M_PUB99, M_PROC50, M_PROC99, M_NFIELDS };
static const char *const mfield_keys[M_NFIELDS] = {
    "pending", "oldest_pending_age_ms", "attempts_total", "dead_letters",
    "duplicates_ignored", "published", "publish_latency_p50_ms", "publish_latency_p99_ms",
    "processing_latency_p50_ms", "processing_latency_p99_ms"};

#define MAX_CONSUMERS 6

struct rsample {
    int64_t ts;
    double v[M_NFIELDS];
    double consumed[MAX_CONSUMERS];
};

struct rmetrics {
    struct rsample *s;
    size_t n, cap;
    size_t bad_lines, dropped;
    char *consumers[MAX_CONSUMERS];
    int nconsumers;
};

static int consumer_slot(struct rmetrics *m, const char *name)
{
    for (int i = 0; i < m->nconsumers; i++)
        if (strcmp(m->consumers[i], name) == 0)
            return i;
    if (m->nconsumers == MAX_CONSUMERS)
        return -1;
    m->consumers[m->nconsumers] = xstrdup(name);
    if (m->consumers[m->nconsumers] == NULL)
        return -1;
    return m->nconsumers++;
}

static int add_sample(struct rmetrics *m, const cJSON *o)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "ts_us");
    if (!cJSON_IsNumber(ts) || ts->valuedouble <= 0)
        return -1;
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        struct rsample *ns = realloc(m->s, nc * sizeof(*ns));
        if (ns == NULL)
            return -1;
        m->s = ns;
        m->cap = nc;
    }
    struct rsample *s = &m->s[m->n];
    s->ts = (int64_t)ts->valuedouble;
    for (int i = 0; i < M_NFIELDS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, mfield_keys[i]);
        s->v[i] = cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : NAN;
    }
    for (int i = 0; i < MAX_CONSUMERS; i++)
        s->consumed[i] = NAN;
    const cJSON *cons = cJSON_GetObjectItemCaseSensitive(o, "consumed");
    const cJSON *c;
    if (cJSON_IsObject(cons)) {
        cJSON_ArrayForEach(c, cons) {
            if (c->string == NULL || !cJSON_IsNumber(c) || !isfinite(c->valuedouble))
                continue;
            int slot = consumer_slot(m, c->string);
            if (slot >= 0)
                s->consumed[slot] = c->valuedouble;
        }
    } else if (cJSON_IsNumber(cons) && isfinite(cons->valuedouble)) {
        int slot = consumer_slot(m, "consumed");
        if (slot >= 0)
            s->consumed[slot] = cons->valuedouble;
    }
    m->n++;
    return 0;
}

static int add_sample_cb(void *ctx, const cJSON *o) { return add_sample(ctx, o); }

static int cmp_sample(const void *a, const void *b)
{
    const struct rsample *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

struct rmetrics *rmetrics_load(const char *path, size_t max_samples, char *err,
                               size_t errlen)
{
    struct rmetrics *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct jsonl_sink sink = { add_sample_cb, m, &m->n, max_samples, &m->dropped,
                               &m->bad_lines };
    if (read_jsonl(path, &sink, err, errlen) < 0) {
        rmetrics_free(m);
        return NULL;
    }
    qsort(m->s, m->n, sizeof(*m->s), cmp_sample);
    return m;
}

void rmetrics_free(struct rmetrics *m)
{
    if (m == NULL)
        return;
    free(m->s);
    for (int i = 0; i < m->nconsumers; i++)
        free(m->consumers[i]);
    free(m);
}

size_t rmetrics_count(const struct rmetrics *m) { return m ? m->n : 0; }

int rtl_view(const struct rtl *t, const struct rmetrics *m, struct rview *v)
{
    int64_t a = INT64_MAX, z = INT64_MIN;
    if (t != NULL && t->n > 0) {
        a = t->ev[0].ts;
        z = t->ev[t->n - 1].ts;
    }
    if (m != NULL && m->n > 0) {
        if (m->s[0].ts < a)
            a = m->s[0].ts;
        if (m->s[m->n - 1].ts > z)
            z = m->s[m->n - 1].ts;
    }
    if (a > z) {
        v->origin = v->t0 = v->t1 = 0;
        return 0;
    }
    v->origin = v->t0 = a;
    v->t1 = z > a ? z : a + 1000;
    /* the runner's first step: start-up before it is context, not the story */
    for (size_t i = 0; t != NULL && i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (role_of(t->lanes[e->lane].name) != R_RUNNER || e->text == NULL ||
            strncmp(e->text, "step", 4) != 0 || (e->text[4] != '\0' && e->text[4] != '\n'))
            continue;
        if (e->ts - a > (v->t1 - a) / 5) {
            int64_t margin = (v->t1 - e->ts) / 30;
            v->t0 = e->ts - margin > a ? e->ts - margin : a;
        }
        break;
    }
    return 1;
}

/* Geometry of one small chart. */
#define CH_W 372
#define CH_H 150
#define CH_L 46
#define CH_R 10
#define CH_T 30
#define CH_B 22

struct series {
    const char *label;
    int field;     /* M_* or -1 for a consumer column */
    int consumer;  /* index when field < 0 */
    int dashed;    /* p99 lines are dashed: readable without colour */
};

static double sample_value(const struct rsample *s, const struct series *se)
{
    return se->field >= 0 ? s->v[se->field] : s->consumed[se->consumer];
}

/* chart draws one small chart through the helpers below: scale, shaded
 * windows, axes, one line per series, and the key. */

/* The samples in view and the y scale that fits them. */
struct chart_scale {
    size_t first, last;   /* the samples in view: [first, last) */
    size_t have;          /* values (not null) among them */
    double step, ymax;    /* y grid step and the top of the y axis */
    double ph;            /* plot height */
};

static void chart_fit(const struct rmetrics *m, const struct rview *v,
                      const struct series *se, int nse, struct chart_scale *cs)
{
    size_t first = 0, last = m->n;
    while (first < last && m->s[first].ts < v->t0)
        first++;
    while (last > first && m->s[last - 1].ts > v->t1)
        last--;
    double max = 0;
    size_t have = 0;
    int integral = 1;
    for (size_t i = first; i < last; i++)
        for (int k = 0; k < nse; k++) {
            double val = sample_value(&m->s[i], &se[k]);
            if (isnan(val))
                continue;
            have++;
            if (val > max)
                max = val;
            if (val != floor(val))
                integral = 0;
        }
    double step = report_nice_step(max > 0 ? max : 1, 3);
    if (integral && step < 1)
        step = 1; /* counts: no 0.5 rows */
    cs->first = first;
    cs->last = last;
    cs->have = have;
    cs->step = step;
    cs->ymax = ceil((max > 0 ? max : 1) / step) * step;
    cs->ph = CH_H - CH_T - CH_B;
}

/* Fault, down and paused windows, as in the timeline. */
static void chart_windows(struct rbuf *b, const struct rtl *t, const struct rview *v,
                          const struct geo *g, double ph)
{
    for (size_t i = 0; t != NULL && i < t->nwin; i++) {
        if (t->win[i].to < v->t0)
            continue;
        double x = xpos(g, t->win[i].from), x2 = xpos(g, t->win[i].to);
        rbuf_printf(b, "<rect class=\"cwin-%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                       "height=\"%.0f\"><title>",
                    win_names[t->win[i].type], x, CH_T, x2 - x < 1.5 ? 1.5 : x2 - x, ph);
        rbuf_esc(b, t->win[i].label, 200);
        rbuf_puts(b, " in ");
        rbuf_esc(b, t->lanes[t->win[i].lane].name, 80);
        rbuf_puts(b, "</title></rect>");
    }
}

/* The y grid with its labels, and the x labels: time since the scenario's
 * start, as on the timeline. */
static void chart_axes(struct rbuf *b, const struct rview *v, const struct geo *g,
                       const struct chart_scale *cs)
{
    rbuf_puts(b, "<g class=\"axis\">");
    for (double y0 = 0; y0 <= cs->ymax + cs->step * 1e-9; y0 += cs->step) {
        double y = CH_T + cs->ph - y0 / cs->ymax * cs->ph;
        char lab[32];
        fmt_value(lab, sizeof(lab), y0);
        rbuf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                       "<text class=\"ylab\" x=\"%d\" y=\"%.1f\">%s</text>",
                    CH_L, y, CH_W - CH_R, y, CH_L - 4, y + 3.5, lab);
    }
    double from_ms = (double)(v->t0 - v->origin) / 1000.0;
    double to_ms = (double)(v->t1 - v->origin) / 1000.0;
    double xstep = report_nice_step(to_ms - from_ms, 4);
    int nt = 0;
    for (double ms = ceil(from_ms / xstep - 1e-9) * xstep;
         to_ms > from_ms && ms <= to_ms + xstep * 1e-9 && nt < 12; ms += xstep, nt++) {
        char lab[48];
        fmt_offset(lab, sizeof(lab), ms, xstep);
        double x = xpos(g, v->origin + (int64_t)llround(ms * 1000));
        rbuf_printf(b, "<text class=\"xlab\" x=\"%.1f\" y=\"%d\">%s</text>", x, CH_H - 6, lab);
    }
    rbuf_puts(b, "</g>");
}

/* Series k as one path; a missing or null sample breaks the line.  About
 * one point per pixel of the plot is all a line can show. */
static void chart_line(struct rbuf *b, const struct rmetrics *m, const struct geo *g,
                       const struct series *se, int k, const struct chart_scale *cs)
{
    size_t stride = cs->last - cs->first > 320 ? (cs->last - cs->first) / 320 + 1 : 1;
    rbuf_printf(b, "<path class=\"s%d%s\" d=\"", k, se[k].dashed ? " dashed" : "");
    int pen = 0;
    size_t npts = 0;
    double lx = 0, ly = 0;
    for (size_t i = cs->first; i < cs->last; i += stride) {
        double val = sample_value(&m->s[i], &se[k]);
        if (isnan(val)) {
            pen = 0;
            continue;
        }
        lx = xpos(g, m->s[i].ts);
        ly = CH_T + cs->ph - val / cs->ymax * cs->ph;
        rbuf_printf(b, "%s%.1f %.1f", pen ? "L" : "M", lx, ly);
        pen = 1;
        npts++;
    }
    /* a lone point would be invisible as a path: give it a short stroke */
    if (npts == 1)
        rbuf_printf(b, "M%.1f %.1fh2", lx - 1, ly);
    rbuf_puts(b, "\"><title>");
    rbuf_esc(b, se[k].label, 80);
    rbuf_puts(b, "</title></path>");
}

/* The key in HTML so it wraps; line styles make it readable in grey. */
static void chart_key(struct rbuf *b, const struct series *se, int nse)
{
    rbuf_puts(b, "<div class=\"ckey\">");
    for (int k = 0; k < nse; k++) {
        rbuf_printf(b, "<span><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"22\" "
                       "height=\"8\" aria-hidden=\"true\"><path class=\"s%d%s\" "
                       "d=\"M1 4h20\"/></svg>", k, se[k].dashed ? " dashed" : "");
        rbuf_esc(b, se[k].label, 40);
        rbuf_puts(b, "</span>");
    }
    rbuf_puts(b, "</div>");
}

static void chart(struct rbuf *b, const struct rmetrics *m, const struct rtl *t,
                  const struct rview *v, const char *title, const struct series *se,
                  int nse)
{
    struct chart_scale cs;
    chart_fit(m, v, se, nse, &cs);
    struct geo g = {v->t0, v->t1, CH_L, CH_W - CH_L - CH_R, v->origin};

    rbuf_puts(b, "<figure class=\"chartbox\">");
    rbuf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" "
                   "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">",
                CH_W, CH_H, CH_W, CH_H, title);
    rbuf_printf(b, "<text class=\"ctitle\" x=\"4\" y=\"14\">%s</text>", title);
    chart_windows(b, t, v, &g, cs.ph);
    chart_axes(b, v, &g, &cs);
    if (cs.have == 0) {
        rbuf_printf(b, "<text class=\"nodata\" x=\"%d\" y=\"%d\">no samples</text>",
                    CH_L + 10, CH_T + (int)cs.ph / 2);
    }
    for (int k = 0; k < nse && cs.have > 0; k++)
        chart_line(b, m, &g, se, k, &cs);
    rbuf_puts(b, "</svg>");
    if (nse > 1)
        chart_key(b, se, nse);
    rbuf_puts(b, "</figure>");
}

int rmetrics_svg(struct rbuf *b, const struct rmetrics *m, const struct rtl *t,
                 const struct rview *v)
{
    if (m == NULL || m->n == 0) {
        rbuf_puts(b, "<p class=\"note\">No metric samples were recorded for this "
                     "scenario.</p>");
        return b->overflow ? -1 : 0;
    }
    rbuf_puts(b, "<div class=\"charts\">");
    struct series one[1] = {{NULL, 0, 0, 0}};
    static const struct { int field; const char *title; } singles[] = {
        {M_PENDING, "pending outbox rows"},
        {M_OLDEST, "oldest pending row age (ms)"},
        {M_ATTEMPTS, "publish attempts (total)"},
        {M_DEAD, "dead letters"},
        {M_DUPS, "inbox duplicates ignored"},
    };
    for (size_t i = 0; i < sizeof(singles) / sizeof(singles[0]); i++) {
        one[0].label = singles[i].title;
        one[0].field = singles[i].field;
        chart(b, m, t, v, singles[i].title, one, 1);
    }
    struct series flow[1 + MAX_CONSUMERS];
    int nflow = 0;
    flow[nflow++] = (struct series){"published", M_PUBLISHED, 0, 0};
    for (int i = 0; i < m->nconsumers; i++)
        flow[nflow++] = (struct series){m->consumers[i], -1, i, 1};
    chart(b, m, t, v, "published / consumed", flow, nflow);
    struct series pub[2] = {{"p50", M_PUB50, 0, 0}, {"p99", M_PUB99, 0, 1}};
    chart(b, m, t, v, "publish latency (ms)", pub, 2);
    struct series proc[2] = {{"p50", M_PROC50, 0, 0}, {"p99", M_PROC99, 0, 1}};
    chart(b, m, t, v, "processing latency (ms)", proc, 2);
    rbuf_puts(b, "</div>");
    if (m->bad_lines > 0 || m->dropped > 0)
        rbuf_printf(b, "<p class=\"note\">%zu malformed metric lines skipped, %zu past the "
                       "read limit ignored.</p>", m->bad_lines, m->dropped);
    return b->overflow ? -1 : 0;
}
