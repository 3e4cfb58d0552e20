/* report_events.c -- the event model behind a scenario's timeline: its
 * timeline.jsonl read into lanes, events, message ids and the shaded windows
 * the events imply (contracts and the shading rules are in report_timeline.h;
 * report_timeline.c draws what is built here).
 *
 * Parsing keeps, for each event, only what drawing needs: time, lane, kind,
 * the message indices it concerns and a pre-rendered hover text.  The raw
 * JSON is dropped line by line so a long run does not hold every parsed tree
 * in memory.  The JSON-lines reader here serves the metric samples too
 * (report_charts.c). */
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSGS_PER_EVENT 32
#define MAX_LINE (1u << 20)
#define TITLE_MAX 700
#define MAX_WINDOWS 4000

const char *const rtl_win_names[] = {"fault", "down", "paused", "net", "db", "broker",
                                       "clock"};

/* ---- message ids and lanes ----------------------------------------------- */

/* A copy of s, or NULL on out of memory. */
char *report_strdup(const char *s)
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
    char *copy = report_strdup(s);
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
    char *copy = report_strdup(name);
    if (copy == NULL)
        return t->nlanes > 0 ? t->nlanes - 1 : -1;
    t->lanes[t->nlanes].name = copy;
    t->lanes[t->nlanes].last_pid = 0;
    return t->nlanes++;
}

/* ---- one event: its role, kind, hover text and messages ------------------ */

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

enum role rtl_role_of(const char *proc)
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
        s = report_strdup("");
    } else if (b.overflow) {
        /* keep what fitted, marked as cut */
        s = malloc(b.len + 5);
        if (s != NULL)
            snprintf(s, b.len + 5, "%s ...", b.data);
    } else {
        s = report_strdup(b.data);
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
    enum role role = rtl_role_of(proc);
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

/* ---- shaded windows (the rules: report_timeline.h) ------------------------ */

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
    w->label = report_strdup(label ? label : "");
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

/* Whether e is an event called name (its hover text begins with it). */
static int event_is(const struct rev *e, const char *name)
{
    size_t n = strlen(name);
    return e->text != NULL && strncmp(e->text, name, n) == 0 && e->text[n] == '\n';
}

/* Whether e is the runner's net_fault or net_clear event on link (e's own
 * link when link is NULL). */
static int is_net_event(const struct rev *e, const char *name, const char *link)
{
    if (!event_is(e, name))
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

/* An outage on the lane of what was out ("postgres", or "broker" for a
 * broker crash): the runner logs its db_fault when the outage is over, with
 * the time it began (started_us), or later with the time it ended
 * (ended_us). */
static void add_db_window(struct rtl *t, const struct rev *e)
{
    char started[32], ended[32], action[48], detail[120], label[200], target[32];
    text_field(e, "target", target, sizeof(target));
    int broker = strcmp(target, "broker") == 0;
    text_field(e, "started_us", started, sizeof(started));
    text_field(e, "ended_us", ended, sizeof(ended));
    text_field(e, "action", action, sizeof(action));
    text_field(e, "detail", detail, sizeof(detail));
    int64_t from = atoll(started);
    int64_t to = atoll(ended);
    if (to <= 0 || to > e->ts)
        to = e->ts;
    if (from <= 0 || from > to)
        from = to;
    snprintf(label, sizeof(label), "%s %s%s%s", broker ? "broker" : "database",
             action[0] ? action : "fault", detail[0] ? ": " : "", detail);
    add_window(t, lane_get(t, broker ? "broker" : "postgres"), broker ? W_BROKER : W_DB, from,
               to, label);
}

/* True when the space-separated words of an event's field name the broker
 * switch sw (a word is "outage" or "outage=refuse"). */
static int lists_switch(const struct rev *e, const char *field, const char *sw)
{
    char words[300];
    text_field(e, field, words, sizeof(words));
    size_t n = strlen(sw);
    for (const char *w = words; *w != '\0'; w += strspn(w, " ")) {
        size_t len = strcspn(w, " ");
        if (len >= n && strncmp(w, sw, n) == 0 && (len == n || w[n] == '='))
            return 1;
        w += len;
    }
    return 0;
}

/* Broker switches turned on (faults_on of a broker_control), each a window
 * on the broker's lane until a later broker_control turns it off or sets it
 * again, or the run ends; an action such as close_connections is an
 * instant. */
static void add_broker_windows(struct rtl *t, size_t i, int64_t end)
{
    const struct rev *e = &t->ev[i];
    char on[300], label[200];
    text_field(e, "faults_on", on, sizeof(on));
    for (const char *w = on; *w != '\0'; w += strspn(w, " ")) {
        size_t len = strcspn(w, " ");
        char word[96], sw[96];
        snprintf(word, sizeof(word), "%.*s", (int)len, w);
        snprintf(sw, sizeof(sw), "%.*s", (int)strcspn(word, "="), word);
        w += len;
        int64_t to = strcmp(sw, "close_connections") == 0 ? e->ts : end;
        for (size_t j = i + 1; j < t->n && to == end; j++)
            if (event_is(&t->ev[j], "broker_control") &&
                (lists_switch(&t->ev[j], "faults_off", sw) ||
                 lists_switch(&t->ev[j], "faults_on", sw)))
                to = t->ev[j].ts;
        snprintf(label, sizeof(label), "broker fault %s", word);
        add_window(t, lane_get(t, "broker"), W_BROKER, e->ts, to, label);
    }
}

/* A process started with a shifted clock ("clock" on its start): a window
 * on its lane while that incarnation runs. */
static void add_clock_window(struct rtl *t, size_t i, int64_t end)
{
    const struct rev *e = &t->ev[i];
    char clock[64], label[120];
    text_field(e, "clock", clock, sizeof(clock));
    if (clock[0] == '\0' || e->target < 0)
        return;
    int64_t to = end;
    for (size_t j = i + 1; j < t->n; j++) {
        const struct rev *f = &t->ev[j];
        if (f->target == e->target &&
            (f->kind == K_KILL || f->kind == K_EXIT || f->kind == K_STOP ||
             f->kind == K_RESTART || f->kind == K_START)) {
            to = f->ts;
            break;
        }
    }
    snprintf(label, sizeof(label), "clock shifted (libfaketime %s)", clock);
    add_window(t, e->target, W_CLOCK, e->ts, to, label);
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
        if ((e->kind == K_START || e->kind == K_RESTART) && e->target >= 0)
            add_clock_window(t, i, end);
        if (is_net_event(e, "net_fault", NULL)) {
            add_net_window(t, i, end);
        } else if (event_is(e, "db_fault")) {
            add_db_window(t, e);
        } else if (event_is(e, "broker_control")) {
            add_broker_windows(t, i, end);
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
/* ---- lane order ---------------------------------------------------------- */

static int lane_rank(const char *name)
{
    switch (rtl_role_of(name)) {
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

/* ---- reading JSON lines (the metric samples too) ------------------------- */

int report_read_jsonl(const char *path, const struct jsonl_sink *sink, char *err,
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

/* ---- the calls of report_timeline.h -------------------------------------- */

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
    if (report_read_jsonl(path, &sink, err, errlen) < 0) {
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
        if (strcmp(rtl_win_names[t->win[i].type], type) == 0)
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
