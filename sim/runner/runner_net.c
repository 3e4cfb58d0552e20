/* runner_net.c -- the scenario's network: the fault proxy daemon with one
 * link per process and peer, the "net" step, and the clock of a process.
 *
 * Every process reaches PostgreSQL through "<proc>->pg" (a loopback TCP
 * port of the proxy, forwarding to the server's own loopback port) and the
 * broker through "<proc>->broker" (a Unix socket forwarding to the broker's).
 * A scenario with a standby is the exception for PostgreSQL: its
 * multi-host connection string names two servers, which one link cannot
 * stand for, so its processes reach the servers directly.  The runner
 * itself, its metrics sampler and its checks always go direct: a fault on a
 * link must never blind the witness.
 *
 * A window (netproxy.h) kills or pauses the process at the client end of
 * its link: the runner gives the proxy that process's pid with the fault,
 * and again at each restart, since a scenario cannot know it.  The proxy,
 * not the runner, sees the frame pass, so its firings are read back at the
 * end (runner_net_check) and logged at the time they happened. */
#include "runner_internal.h"

#include "brokerctl.h"
#include "cwlog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/* The network namespace the run left for one of its own ("" when it did
 * not): the proxy allows a partition only away from it. */
static char host_netns[64];

/* Appends key='value' (libpq quoting) to out. */
static void conninfo_put(char *out, size_t outlen, const char *key, const char *val)
{
    size_t n = strlen(out);
    n += (size_t)snprintf(out + n, outlen > n ? outlen - n : 0, "%s%s='", n ? " " : "", key);
    for (const char *p = val; *p != '\0' && n + 3 < outlen; p++) {
        if (*p == '\'' || *p == '\\')
            out[n++] = '\\';
        out[n++] = *p;
    }
    if (n + 2 <= outlen) {
        out[n++] = '\'';
        out[n] = '\0';
    }
}

/* The scenario's conninfo aimed at a link's port: host and port replaced,
 * TLS and GSS encryption off (the proxy reads the protocol).  NULL when
 * the conninfo cannot be parsed; the caller frees. */
static char *link_conninfo(const char *conninfo, int port)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (opts == NULL) {
        PQfreemem(perr);
        return NULL;
    }
    size_t cap = strlen(conninfo) * 2 + 256;
    char *out = calloc(1, cap);
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    for (PQconninfoOption *o = opts; out != NULL && o->keyword != NULL; o++) {
        static const char *const replaced[] = { "host", "hostaddr", "port", "sslmode",
                                                "gssencmode", NULL };
        int skip = 0;
        for (int i = 0; replaced[i] != NULL; i++)
            skip |= strcmp(o->keyword, replaced[i]) == 0;
        if (!skip && o->val != NULL && o->val[0] != '\0')
            conninfo_put(out, cap, o->keyword, o->val);
    }
    PQconninfoFree(opts);
    if (out != NULL) {
        conninfo_put(out, cap, "host", "127.0.0.1");
        conninfo_put(out, cap, "port", portstr);
        conninfo_put(out, cap, "sslmode", "disable");
        conninfo_put(out, cap, "gssencmode", "disable");
    }
    return out;
}

/* Reads the proxy's links and fills each process's addresses. */
/* The "@HOST:PORT" of an amqp:// URL: *at is where it starts, *end where
 * the path begins.  -1 when the URL has no explicit host and port. */
static int amqp_hostport(const char *url, const char **at, const char **end)
{
    const char *h = strncmp(url, "amqp://", 7) == 0 ? url + 7 : NULL;
    const char *e = h != NULL ? h + strcspn(h, "/?") : NULL;
    const char *a = h != NULL ? memchr(h, '@', (size_t)(e - h)) : NULL;
    a = a != NULL ? a + 1 : h;
    if (a == NULL || memchr(a, ':', (size_t)(e - a)) == NULL)
        return -1;
    *at = a;
    *end = e;
    return 0;
}

/* Where an amqp link forwards to: "tcp:HOST:PORT" of the node's URL. */
static int amqp_upstream(const char *url, char *out, size_t outlen)
{
    const char *a, *e;
    if (amqp_hostport(url, &a, &e) < 0)
        return -1;
    cw_fmt(out, outlen, "tcp:%.*s", (int)(e - a), a);
    return 0;
}

/* The node's URL (credentials, vhost, exchange) aimed at the link's
 * HOST:PORT, as the proxy reported it bound. */
static int amqp_via(const char *url, const char *hostport, char *out, size_t outlen)
{
    const char *a, *e;
    if (amqp_hostport(url, &a, &e) < 0)
        return -1;
    cw_fmt(out, outlen, "%.*s%s%s", (int)(a - url), url, hostport, e);
    return 0;
}

static int read_links(struct sctx *s, const cJSON *reply)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(reply, "links");
    const cJSON *l;
    cJSON_ArrayForEach(l, arr) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "name"));
        const char *bound = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "bound"));
        if (name == NULL || bound == NULL)
            continue;
        for (int i = 0; i < s->sc->nprocs; i++) {
            char want[SC_NAME_MAX + 16];
            snprintf(want, sizeof(want), "%s->broker", s->procs[i].name);
            if (strcmp(name, want) == 0 && strncmp(bound, "tcp:", 4) == 0 &&
                amqp_via(s->broker_addr, bound + 4, s->net.link_broker[i],
                         sizeof(s->net.link_broker[i])) < 0)
                return runner_fail(s, "netproxy: cannot build %s's broker URL",
                                   s->procs[i].name);
            snprintf(want, sizeof(want), "%s->pg", s->procs[i].name);
            if (strcmp(name, want) == 0 && strncmp(bound, "tcp:", 4) == 0) {
                char *ci = link_conninfo(s->db.conninfo, atoi(strrchr(bound, ':') + 1));
                s->net.link_db_env[i] = ci ? conninfo_env(ci) : NULL;
                free(ci);
                if (s->net.link_db_env[i] == NULL)
                    return runner_fail(s, "netproxy: cannot build %s's connection string",
                                       s->procs[i].name);
            }
        }
    }
    return 0;
}

/* Where a PostgreSQL link forwards to: the server's Unix socket when the
 * conninfo names a socket directory (it works from any network namespace,
 * so a run with a partition can still use --pg's server), else its IPv4
 * address and port.  -1 when neither (the processes then go direct). */
static int pg_upstream(const char *conninfo, char *out, size_t outlen)
{
    char host[PATH_MAX], port[16];
    conninfo_get(conninfo, "host", host, sizeof(host));
    conninfo_get(conninfo, "port", port, sizeof(port));
    if (port[0] == '\0')
        snprintf(port, sizeof(port), "5432");
    struct in_addr a;
    if (host[0] == '/' && strchr(host, ',') == NULL)
        cw_fmt(out, outlen, "unix:%s/.s.PGSQL.%s", host, port);
    else if (inet_pton(AF_INET, host, &a) == 1)
        cw_fmt(out, outlen, "tcp:%s:%s", host, port);
    else
        return -1;
    return 0;
}

int runner_start_netproxy(struct sctx *s)
{
    struct runner *r = s->run;
    const struct scenario *sc = s->sc;
    struct proc *p = &s->net.proxy;
    snprintf(p->name, sizeof(p->name), "netproxy");
    cw_fmt(p->events_path, sizeof(p->events_path), "%s/netproxy.events.jsonl", s->dir);
    cw_fmt(p->log_path, sizeof(p->log_path), "%s/netproxy.log", s->dir);
    p->fifo_prefix = r->fifo_prefix;
    cw_fmt(s->net.proxy_sock, sizeof(s->net.proxy_sock), "%s/n%d.sock", r->tmp, r->nsc);
    char pg_up[PATH_MAX];
    if (sc->standby || pg_upstream(s->db.conninfo, pg_up, sizeof(pg_up)) < 0)
        pg_up[0] = '\0';
    char specs[SC_MAX_PROCS * 2][PATH_MAX + 128];
    char *argv[SC_MAX_PROCS * 4 + 8];
    int n = 0, k = 0;
    argv[n++] = r->exe_netproxy;
    argv[n++] = (char *)"--control";
    argv[n++] = s->net.proxy_sock;
    if (host_netns[0] != '\0') {
        argv[n++] = (char *)"--isolated-from";
        argv[n++] = host_netns;
    }
    char amqp_up[300];
    if (runner_rabbit(r) && amqp_upstream(s->broker_addr, amqp_up, sizeof(amqp_up)) < 0)
        return runner_fail(s, "netproxy: no host:port in the broker URL");
    for (int i = 0; i < sc->nprocs; i++) {
        /* A fake-broker link is a Unix socket the proxy parses (its cuts
         * read the broker's lines); a RabbitMQ link is loopback TCP, never
         * parsed.  read_links makes the process's address of either. */
        if (!runner_rabbit(r)) {
            cw_fmt(s->net.link_broker[i], sizeof(s->net.link_broker[i]), "%s/b%d-%d.sock", r->tmp,
                r->nsc, i);
            cw_fmt(specs[k], sizeof(specs[k]), "%s->broker=broker,unix:%s,unix:%s",
                sc->procs[i].name, s->net.link_broker[i], s->broker_sock);
        } else {
            cw_fmt(specs[k], sizeof(specs[k]), "%s->broker=amqp,tcp:127.0.0.1:0,%s",
                sc->procs[i].name, amqp_up);
        }
        argv[n++] = (char *)"--link";
        argv[n++] = specs[k++];
        if (pg_up[0] != '\0') {
            cw_fmt(specs[k], sizeof(specs[k]), "%s->pg=pg,tcp:127.0.0.1:0,%s",
                sc->procs[i].name, pg_up);
            argv[n++] = (char *)"--link";
            argv[n++] = specs[k++];
        }
    }
    argv[n] = NULL;
    char err[512];
    if (proc_spawn(p, argv, NULL, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "netproxy: %s", err);
    /* Not a "start" aimed at a process: the proxy is the harness's, and
     * gets no lane of its own on the timeline (each link fault gets one). */
    cJSON *ev = runner_rev_begin(s, "netproxy_start");
    cJSON_AddNumberToObject(ev, "netproxy_pid", p->pid);
    runner_rev_emit(s, ev);
    cJSON *ask = cJSON_CreateObject();
    cJSON_AddStringToObject(ask, "op", "links");
    int64_t deadline = cw_mono_ms() + 10000;
    cJSON *reply = NULL;
    while (reply == NULL) {
        if (access(s->net.proxy_sock, F_OK) == 0)
            reply = brokerctl_call(s->net.proxy_sock, ask, "links", 1000, err, sizeof(err));
        if (reply == NULL && (!proc_poll(p) || cw_mono_ms() >= deadline)) {
            cJSON_Delete(ask);
            return runner_fail(s, "netproxy did not answer on %s within 10 s (%s)",
                               s->net.proxy_sock, err);
        }
        if (reply == NULL)
            nap(5);
    }
    cJSON_Delete(ask);
    int rc = read_links(s, reply);
    cJSON_Delete(reply);
    return rc;
}

void runner_stop_netproxy(struct sctx *s)
{
    if (s->net.proxy.pid > 0 && proc_poll(&s->net.proxy)) {
        kill(s->net.proxy.pid, SIGTERM);
        int64_t deadline = cw_mono_ms() + STOP_TIMEOUT_MS;
        while (proc_poll(&s->net.proxy) && cw_mono_ms() < deadline)
            nap(5);
        if (proc_poll(&s->net.proxy))
            proc_kill(&s->net.proxy);
    }
    for (int i = 0; i < s->sc->nprocs; i++)
        if (s->net.link_broker[i][0] == '/')
            unlink(s->net.link_broker[i]);
}

int runner_netproxy_pid(struct sctx *s)
{
    return s->net.proxy.pid > 0 && proc_poll(&s->net.proxy) ? (int)s->net.proxy.pid : 0;
}

void runner_net_free(struct sctx *s)
{
    cJSON_Delete(s->net.windows_fired);
    for (int i = 0; i < s->sc->nprocs; i++)
        free(s->net.link_db_env[i]);
}

const char *runner_broker_addr(const struct sctx *s, int idx)
{
    return s->net.link_broker[idx][0] != '\0' ? s->net.link_broker[idx] : s->broker_addr;
}

const char *runner_db_env(const struct sctx *s, int idx)
{
    return s->net.link_db_env[idx] != NULL ? s->net.link_db_env[idx] : s->db.env;
}

int runner_clock_env(const struct sctx *s, int idx, char (*buf)[160], const char **env,
                     int max)
{
    const char *spec = s->sc->procs[idx].faketime;
    if (spec[0] == '\0' || max < 4)
        return 0;
    if (access(FAKETIME_LIB, R_OK) != 0)
        return -1; /* without it the clock would silently stay right */
    snprintf(buf[0], sizeof(buf[0]), "LD_PRELOAD=%s", FAKETIME_LIB);
    snprintf(buf[1], sizeof(buf[1]), "FAKETIME=%s", spec);
    /* Only the wall clock is off: deadlines and backoff run on the
     * monotonic clock, and a real clock fault (NTP stepping the time) does
     * not touch it either. */
    snprintf(buf[2], sizeof(buf[2]), "DONT_FAKE_MONOTONIC=1");
    /* Under ASan the preload would come before ASan's runtime. */
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(buf[3], sizeof(buf[3]), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
             asan ? asan : "", asan && asan[0] ? ":" : "");
    for (int i = 0; i < 4; i++)
        env[i] = buf[i];
    return 4;
}

/* The control frame of a net step. */
static cJSON *net_frame(const struct sc_step *st)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "op", st->net_clear ? "clear" : "set");
    cJSON_AddStringToObject(f, "link", st->link);
    if (st->net_clear)
        return f;
    static const char *const dirs[] = { "both", "up", "down" };
    static const char *const cuts[] = { "commit", "confirm", "ack" };
    const struct np_fault *n = &st->net;
    cJSON_AddStringToObject(f, "fault", np_kind_name(n->kind));
    if (n->kind <= NP_LIMIT_DATA || n->kind == NP_PARTITION)
        cJSON_AddStringToObject(f, "direction", dirs[n->dir]);
    if (n->ms > 0)
        cJSON_AddNumberToObject(f, "ms", n->ms);
    switch (n->kind) {
    case NP_LATENCY:
        cJSON_AddNumberToObject(f, "latency_ms", n->latency_ms);
        cJSON_AddNumberToObject(f, "jitter_ms", n->jitter_ms);
        break;
    case NP_BANDWIDTH:
        cJSON_AddNumberToObject(f, "rate_kbps", n->rate_kbps);
        break;
    case NP_SLICER:
        cJSON_AddNumberToObject(f, "slice_bytes", n->slice_bytes);
        cJSON_AddNumberToObject(f, "slice_delay_ms", n->slice_delay_ms);
        break;
    case NP_LIMIT_DATA:
        cJSON_AddNumberToObject(f, "limit_bytes", (double)n->limit_bytes);
        break;
    case NP_CUT:
        cJSON_AddStringToObject(f, "cut_after", cuts[n->cut_after]);
        cJSON_AddStringToObject(f, "then", n->then == NP_THEN_RESET ? "reset" : "blackhole");
        cJSON_AddNumberToObject(f, "times", n->times);
        break;
    case NP_WINDOW:
        cJSON_AddStringToObject(f, "frame", np_frame_name(n->frame));
        cJSON_AddStringToObject(f, "action", np_action_name(n->action));
        cJSON_AddNumberToObject(f, "times", n->times);
        cJSON_AddNumberToObject(f, "skip", n->skip);
        if (n->transaction_with[0] != '\0')
            cJSON_AddStringToObject(f, "transaction_with", n->transaction_with);
        break;
    default:
        break;
    }
    return f;
}

/* A counter of link's proxy stats ("accepted", "open"), or -1. */
static long long link_stat(struct sctx *s, const char *link, const char *counter)
{
    cJSON *ask = cJSON_CreateObject();
    cJSON_AddStringToObject(ask, "op", "stats");
    char err[256];
    cJSON *reply = brokerctl_call(s->net.proxy_sock, ask, "stats", 3000, err, sizeof(err));
    cJSON_Delete(ask);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(reply, "links"),
                                         link), counter);
    long long v = cJSON_IsNumber(n) ? (long long)n->valuedouble : -1;
    cJSON_Delete(reply);
    return v;
}

/* The process behind st's link must open a new connection on it within
 * st->reconnect_within_ms of the fault: the bound it documents for
 * noticing a silent peer, witnessed by the proxy, not by the process. */
static int await_reconnect(struct sctx *s, const struct sc_step *st, long long before,
                           int64_t t0)
{
    int64_t deadline = t0 + st->reconnect_within_ms;
    for (;;) {
        long long now = link_stat(s, st->link, "accepted");
        if (now > before) {
            cJSON *ev = runner_rev_begin(s, "net_reconnect");
            cJSON_AddStringToObject(ev, "link", st->link);
            cJSON_AddNumberToObject(ev, "after_ms", (double)(cw_mono_ms() - t0));
            runner_rev_emit(s, ev);
            runner_progress(s, "  %s reconnected after %lld ms", st->link,
                            (long long)(cw_mono_ms() - t0));
            return 0;
        }
        if (cw_mono_ms() >= deadline || runner_interrupted())
            return runner_fail(s, "%s opened no new connection on %s within %d ms of the "
                               "fault: it does not notice a silent peer in the bound it "
                               "documents", s->procs[st->proc].name, st->link,
                               st->reconnect_within_ms);
        nap(POLL_MS);
    }
}

int runner_net_step(struct sctx *s, const struct sc_step *st)
{
    int pg = st->net_peer == NP_PG;
    if ((pg && s->net.link_db_env[st->proc] == NULL) ||
        (!pg && s->net.link_broker[st->proc][0] == '\0'))
        return runner_fail(s, "net: %s has no link of its own in this scenario", st->link);
    struct proc *p = &s->procs[st->proc];
    int window = !st->net_clear && st->net.kind == NP_WINDOW;
    if (s->step + 1 > s->net.steps_through)
        s->net.steps_through = s->step + 1;
    if (window && !proc_poll(p))
        return runner_fail(s, "net %s: a window signals %s, which is not running", st->link,
                           p->name);
    long long before = st->reconnect_within_ms > 0 ? link_stat(s, st->link, "accepted") : 0;
    int64_t t0 = cw_mono_ms();
    cJSON *f = net_frame(st);
    if (window) {
        cJSON_AddNumberToObject(f, "pid", p->pid);
        s->net.windows_set[st->proc] = 1;
    }
    char err[512];
    cJSON *reply = brokerctl_call(s->net.proxy_sock, f, "ok", 3000, err, sizeof(err));
    cJSON *ev = runner_rev_begin(s, st->net_clear ? "net_clear" : "net_fault");
    cJSON_AddStringToObject(ev, "link", st->link);
    if (!st->net_clear) {
        char what[160];
        np_fault_describe(&st->net, what, sizeof(what));
        cJSON_AddStringToObject(ev, "fault", np_kind_name(st->net.kind));
        cJSON_AddStringToObject(ev, "detail", what);
        cJSON_AddNumberToObject(ev, "ms", st->net.ms);
    }
    if (window)
        cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    runner_rev_emit(s, ev);
    cJSON_Delete(f);
    if (reply == NULL)
        return runner_fail(s, "net %s: %s", st->link, err);
    cJSON_Delete(reply);
    return st->reconnect_within_ms > 0 ? await_reconnect(s, st, before, t0) : 0;
}

int runner_net_proc_started(struct sctx *s, int idx)
{
    if (!s->net.windows_set[idx] || s->net.proxy_sock[0] == '\0')
        return 0;
    static const char *const peers[] = { "pg", "broker" };
    for (int i = 0; i < 2; i++) {
        if (i == 0 ? s->net.link_db_env[idx] == NULL : s->net.link_broker[idx][0] == '\0')
            continue; /* no link there: it goes direct */
        char link[SC_NAME_MAX + 16], err[256];
        snprintf(link, sizeof(link), "%s->%s", s->procs[idx].name, peers[i]);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "op", "pid");
        cJSON_AddStringToObject(f, "link", link);
        cJSON_AddNumberToObject(f, "pid", s->procs[idx].pid);
        cJSON *reply = brokerctl_call(s->net.proxy_sock, f, "ok", 3000, err, sizeof(err));
        cJSON_Delete(f);
        if (reply == NULL)
            return runner_fail(s, "netproxy: %s's new pid for %s: %s", s->procs[idx].name,
                               link, err);
        cJSON_Delete(reply);
    }
    return 0;
}

void runner_net_windows_fired(struct sctx *s, cJSON *fired)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, s->net.windows_fired)
        cJSON_AddItemToArray(fired, cJSON_Duplicate(w, 1));
}

/* How many firings in a link's stats were at frame. */
static int count_firings(const cJSON *stats, enum np_frame frame)
{
    int n = 0;
    const cJSON *fr;
    cJSON_ArrayForEach(fr, cJSON_GetObjectItemCaseSensitive(stats, "fired")) {
        const char *fname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fr, "frame"));
        if (fname == NULL || strcmp(fname, np_frame_name(frame)) != 0)
            continue;
        n++;
    }
    return n;
}

/* Logs every firing of link's windows once: a runner event at the time it
 * happened, shaped as the kill or pause it was (the report draws it so), or
 * for a drop a "window_drop" event (the process lives on), and a
 * faults_fired entry. */
static void record_firings(struct sctx *s, const char *link, const cJSON *stats, int proc)
{
    if (s->net.windows_fired == NULL)
        s->net.windows_fired = cJSON_CreateArray();
    const cJSON *fr;
    cJSON_ArrayForEach(fr, cJSON_GetObjectItemCaseSensitive(stats, "fired")) {
        const char *frame = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fr, "frame"));
        const char *action = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fr, "action"));
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(fr, "pid");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(fr, "ts_us");
        const cJSON *serr = cJSON_GetObjectItemCaseSensitive(fr, "signal_error");
        if (frame == NULL || action == NULL || !cJSON_IsNumber(pid) || !cJSON_IsNumber(ts))
            continue;
        int pause = strcmp(action, "pause") == 0, drop = strcmp(action, "drop") == 0;
        cJSON *ev = runner_rev_begin(s, drop ? "window_drop" : pause ? "pause" : "kill");
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "ts_us"); /* when it fired, not now */
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "step");
        cwlog_add_int64(ev, "ts_us", (int64_t)ts->valuedouble);
        cJSON_AddStringToObject(ev, "target", s->procs[proc].name);
        cJSON_AddNumberToObject(ev, "target_pid", pid->valuedouble);
        if (!drop)
            cJSON_AddStringToObject(ev, "signal", pause ? "SIGSTOP" : "SIGKILL");
        cJSON_AddStringToObject(ev, "why", "window");
        cJSON_AddStringToObject(ev, "link", link);
        cJSON_AddStringToObject(ev, "frame", frame);
        if (cJSON_IsString(serr))
            cJSON_AddStringToObject(ev, "signal_error", serr->valuestring);
        runner_rev_emit(s, ev);
        if (pause)
            s->count.pauses++; /* a kill is counted when its exit is reaped */
        char point[SC_NAME_MAX + 48];
        snprintf(point, sizeof(point), "%s/%s", link, frame);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", point);
        cJSON_AddStringToObject(o, "proc", s->procs[proc].name);
        cJSON_AddStringToObject(o, "action", action);
        cwlog_add_int64(o, "ts_us", (int64_t)ts->valuedouble);
        cJSON_AddStringToObject(o, "link", link);
        cJSON_AddItemToArray(s->net.windows_fired, o);
    }
}

void runner_net_clear_all(struct sctx *s)
{
    if (s->net.proxy.pid <= 0 || !proc_poll(&s->net.proxy))
        return;
    for (int i = 0; i < s->sc->nsteps; i++) {
        const struct sc_step *st = &s->sc->steps[i];
        if (st->verb != V_NET || st->net_clear)
            continue;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = s->sc->steps[k].verb == V_NET && !s->sc->steps[k].net_clear &&
                   strcmp(s->sc->steps[k].link, st->link) == 0;
        if (seen)
            continue;
        struct sc_step clear = *st;
        clear.net_clear = 1;
        cJSON *f = net_frame(&clear);
        char err[256];
        cJSON *reply = brokerctl_call(s->net.proxy_sock, f, "ok", 3000, err, sizeof(err));
        cJSON_Delete(f);
        cJSON *ev = runner_rev_begin(s, "net_clear");
        cJSON_AddStringToObject(ev, "link", st->link);
        cJSON_AddStringToObject(ev, "why", reply != NULL ? "heal" : err);
        runner_rev_emit(s, ev);
        cJSON_Delete(reply);
    }
}

void runner_net_print_keep(const struct sctx *s)
{
    if (s->net.proxy_sock[0] == '\0' || !proc_poll((struct proc *)&s->net.proxy))
        return;
    /* An example on a link the run has: with a standby nothing reaches
     * PostgreSQL through the proxy, and the API has no broker link. */
    const char *proc = s->sc->nprocs > 0 ? s->procs[0].name : "api";
    const char *peer = "pg";
    for (int i = 0; s->sc->standby && i < s->sc->nprocs; i++)
        if (s->sc->procs[i].kind != SC_API) {
            proc = s->procs[i].name;
            peer = "broker";
            break;
        }
    printf("      links (fault proxy pid %d): %s --control %s --send "
           "'{\"op\":\"set\",\"link\":\"%s->%s\",\"fault\":\"blackhole\",\"ms\":5000}'\n",
           (int)s->net.proxy.pid, s->run->exe_netproxy, s->net.proxy_sock, proc, peer);
    printf("        ({\"op\":\"links\"} lists them, {\"op\":\"clear\",\"link\":...} ends a "
           "fault, {\"op\":\"stats\"} counts bytes, cuts and windows)\n");
}

int runner_net_check(struct sctx *s)
{
    if (s->net.proxy_sock[0] == '\0' || !proc_poll(&s->net.proxy))
        return 0;
    cJSON *ask = cJSON_CreateObject();
    cJSON_AddStringToObject(ask, "op", "stats");
    char err[512];
    cJSON *reply = brokerctl_call(s->net.proxy_sock, ask, "stats", 3000, err, sizeof(err));
    cJSON_Delete(ask);
    if (reply == NULL)
        return runner_fail(s, "netproxy stats: %s", err);
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(reply, "links");
    const cJSON *l;
    cJSON_ArrayForEach(l, links) {
        cJSON *ev = runner_rev_begin(s, "net_stats");
        cJSON_AddStringToObject(ev, "link", l->string);
        const cJSON *f;
        cJSON_ArrayForEach(f, l)
            if (cJSON_IsNumber(f)) /* the counters; the firings are logged below */
                cJSON_AddNumberToObject(ev, f->string, f->valuedouble);
        runner_rev_emit(s, ev);
    }
    /* Each link's firings once, though several steps set windows on it. */
    for (int i = 0; i < s->net.steps_through; i++) {
        const struct sc_step *st = &s->sc->steps[i];
        if (st->verb != V_NET || st->net_clear || st->net.kind != NP_WINDOW)
            continue; /* only a window step names a link to compare */
        int first = 1;
        for (int k = 0; k < i && first; k++)
            first = !(s->sc->steps[k].verb == V_NET && !s->sc->steps[k].net_clear &&
                      s->sc->steps[k].net.kind == NP_WINDOW &&
                      strcmp(s->sc->steps[k].link, st->link) == 0);
        if (first)
            record_firings(s, st->link, cJSON_GetObjectItemCaseSensitive(links, st->link),
                           st->proc);
    }
    /* A cut or a window that never fired means the run never reached the
     * window the scenario is about: like an armed fault point that is
     * never hit. */
    int rc = 0;
    for (int i = 0; i < s->net.steps_through; i++) {
        const struct sc_step *st = &s->sc->steps[i];
        if (st->verb != V_NET || st->net_clear ||
            (st->net.kind != NP_CUT && st->net.kind != NP_WINDOW))
            continue;
        const cJSON *stats = cJSON_GetObjectItemCaseSensitive(links, st->link);
        if (st->net.kind == NP_WINDOW) {
            if (count_firings(stats, st->net.frame) < 1 &&
                !s->sc->faults_optional)
                rc = runner_fail(s, "net window on %s at %s never fired: the run never "
                                 "reached the window it is meant to test", st->link,
                                 np_frame_name(st->net.frame));
            continue;
        }
        const cJSON *cuts = cJSON_GetObjectItemCaseSensitive(stats, "cuts");
        if ((!cJSON_IsNumber(cuts) || cuts->valuedouble < 1) && !s->sc->faults_optional)
            rc = runner_fail(s, "net cut on %s never fired: the run never reached the "
                             "window it is meant to test", st->link);
    }
    cJSON_Delete(reply);
    return rc;
}

/* Whether a scenario has a partition step. */
static int wants_partition(const struct scenario *sc)
{
    for (int i = 0; i < sc->nsteps; i++)
        if (sc->steps[i].verb == V_NET && !sc->steps[i].net_clear &&
            sc->steps[i].net.kind == NP_PARTITION)
            return 1;
    return 0;
}

int runner_net_unshare(void)
{
    if (host_netns[0] != '\0')
        return 0; /* this process left the host's namespace already */
    /* Before any thread and any child: they all inherit the namespace, and
     * the host's own interfaces and rules are never seen, let alone changed. */
    ssize_t len = readlink("/proc/self/ns/net", host_netns, sizeof(host_netns) - 1);
    host_netns[len > 0 ? len : 0] = '\0';
    if (host_netns[0] == '\0' || unshare(CLONE_NEWNET) < 0) {
        host_netns[0] = '\0';
        fprintf(stderr, "crashwindow: a partition fault needs a network namespace of the "
                "run's own (unshare: %s; run as root)\n", strerror(errno));
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int ok = fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP;
    ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        fprintf(stderr, "crashwindow: cannot bring up loopback in the run's namespace: %s\n",
                strerror(errno));
        return -1;
    }
    return 0;
}

int runner_net_isolate(const struct run_opts *o, struct scenario *const *scs, int n)
{
    int need = 0;
    for (int i = 0; i < n; i++)
        need |= wants_partition(scs[i]);
    if (!need || host_netns[0] != '\0')
        return 0;
    char host[PATH_MAX];
    if (o->pg != NULL)
        conninfo_get(o->pg, "host", host, sizeof(host));
    if (o->pg != NULL && host[0] != '/') {
        fprintf(stderr, "crashwindow: a partition fault runs the whole run in a network "
                "namespace of its own, where --pg's server is reachable only through its Unix "
                "socket: give host=SOCKET_DIR in --pg, or run without --pg\n");
        return -1;
    }
    if (runner_net_unshare() < 0)
        return -1;
    printf("network: the run has a namespace of its own (partition faults use nftables "
           "in it)\n");
    return 0;
}

int runner_net_link_open(struct sctx *s, int idx)
{
    if (s->net.link_broker[idx][0] == '\0')
        return -1;
    char link[SC_NAME_MAX + 16];
    snprintf(link, sizeof(link), "%s->broker", s->procs[idx].name);
    return (int)link_stat(s, link, "open");
}
