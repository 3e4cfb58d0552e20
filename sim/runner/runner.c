/* runner.c -- `crashwindow run`; see runner.h for the phases.
 *
 * One struct sctx holds everything about the scenario being run: its
 * processes, the faults armed in each incarnation, the HTTP log, counters
 * and the first error.  Steps are executed in order by the main thread; a
 * step that cannot do its job (a wait that timed out, a process that would
 * not start) records the error and skips the remaining steps, but the heal
 * phase and the checker still run, so a failed scenario still produces its
 * witnesses and its timeline.
 *
 * Layout of a run directory:
 *   DIR/result.json
 *   DIR/<scenario>/scenario.json        the file as run
 *   DIR/<scenario>/<proc>.events.jsonl  each process (restarts append)
 *   DIR/<scenario>/<proc>.log           its stdout and stderr
 *   DIR/<scenario>/broker.events.jsonl  the broker's log
 *   DIR/<scenario>/runner.events.jsonl  the runner's own decisions
 *   DIR/<scenario>/timeline.jsonl       all of the above, by ts_us
 *   DIR/<scenario>/metrics.jsonl        samples every ~250 ms
 * Sockets and libfiu FIFOs live in a short per-run directory under /tmp
 * (Unix socket paths are limited to 108 bytes; FIFO prefixes must be
 * hyphen-free because fiu-ls splits on '-'). */
#include "runner.h"
#include "report.h"
#include "brokerctl.h"
#include "checker.h"
#include "cwlog.h"
#include "evlog.h"
#include "httpc.h"
#include "pgx.h"
#include "procs.h"
#include "runner_db.h"
#include "runner_metrics.h"
#include "scenario.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CW_SOURCE_DIR
#define CW_SOURCE_DIR "."
#endif

#define POLL_MS 20
#define MAX_ARMED 64
#define STOP_TIMEOUT_MS 3000

/* ---- interruption ------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

int runner_interrupted(void)
{
    return interrupted != 0;
}

void runner_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* snprintf for paths and messages: output that does not fit is cut, which
 * the callers accept (their buffers hold any path this runner makes). */
__attribute__((format(printf, 3, 4)))
static int fmt(char *out, size_t outlen, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(out, outlen, format, ap);
    va_end(ap);
    return n;
}

static void nap(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- paths -------------------------------------------------------------- */

const char *runner_source_dir(void)
{
    const char *env = getenv("CW_SOURCE_DIR");
    return env != NULL && env[0] != '\0' ? env : CW_SOURCE_DIR;
}

int runner_build_dir(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';              /* <build>/sim */
    slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';          /* <build> */
    snprintf(out, outlen, "%s", exe);
    return 0;
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int runner_all_scenarios(char ***files)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/scenarios", runner_source_dir());
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    char **v = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d)) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **nv = realloc(v, (size_t)cap * sizeof(char *));
            if (nv == NULL)
                break;
            v = nv;
        }
        size_t pl = strlen(dir) + len + 2;
        v[n] = malloc(pl);
        if (v[n] == NULL)
            break;
        snprintf(v[n], pl, "%s/%s", dir, de->d_name);
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(v, (size_t)n, sizeof(char *), cmp_str);
    *files = v;
    return n;
}

char **runner_load_points(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/fault-points/catalogue.json", runner_source_dir());
    cJSON *arr = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *text = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&text, &cap, '\0', f);
    fclose(f);
    if (len <= 0) {
        free(text);
        return NULL;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (root != NULL)
        arr = cJSON_GetObjectItemCaseSensitive(root, "points");
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(root);
        return NULL;
    }
    int n = cJSON_GetArraySize(arr);
    char **pts = calloc((size_t)n + 1, sizeof(char *));
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (pts != NULL && cJSON_IsString(name))
            pts[k++] = strdup(name->valuestring);
    }
    cJSON_Delete(root);
    return pts;
}

void runner_free_points(char **points)
{
    for (int i = 0; points != NULL && points[i] != NULL; i++)
        free(points[i]);
    free(points);
}

/* ---- the run and the scenario contexts ---------------------------------- */

struct runner {
    const struct run_opts *o;
    char bin[PATH_MAX];
    char out[PATH_MAX];
    char tmp[PATH_MAX];         /* sockets and FIFOs */
    char fifo_prefix[PATH_MAX];
    char pg_script[PATH_MAX];
    char exe_api[PATH_MAX], exe_relay[PATH_MAX], exe_consumer[PATH_MAX];
    char exe_outboxctl[PATH_MAX], exe_broker[PATH_MAX];
    struct rdb db;
    cJSON *result;
    cJSON *scenarios;
    long t_scen, t_passed, t_inv, t_faults, t_kills, t_pauses, t_restarts, t_events;
    int nsc;                    /* scenarios run so far (for socket names) */
};

struct armed {
    int proc;
    int pid;
    char point[96];
    char action[24];
    int runtime;                /* enabled through fiu-ctrl */
    int disabled;
};

struct sctx {
    struct runner *run;
    const struct scenario *sc;
    int rep;
    char label[96];             /* the directory name */
    char dir[PATH_MAX];
    char dbname[64];
    char *conninfo;
    char *db_env;               /* "CW_DB=<conninfo>": children read it, argv never holds it */
    PGconn *conn;
    struct proc broker;
    char broker_sock[PATH_MAX];
    struct proc procs[SC_MAX_PROCS];
    int port[SC_MAX_PROCS];
    struct armed armed[MAX_ARMED];
    int narmed;
    int kills, pauses, restarts;
    struct http_rec *http;
    int nhttp, caphttp;
    pthread_mutex_t lock;       /* http log and runner events (payment threads) */
    FILE *ev;
    char error[1024];
    cJSON *expects;
    int step;
    int64_t deadline;           /* mono ms: the whole scenario */
    int tearing_down;           /* exits now are the end of the run, not events */
    metrics *metrics;
};

/* ---- runner events and progress ----------------------------------------- */

static cJSON *rev_begin(struct sctx *s, const char *event)
{
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddNumberToObject(ev, "ts_us", (double)cw_now_us());
    cJSON_AddStringToObject(ev, "proc", "runner");
    cJSON_AddNumberToObject(ev, "pid", (double)getpid());
    cJSON_AddStringToObject(ev, "event", event);
    if (s->step >= 0)
        cJSON_AddNumberToObject(ev, "step", s->step + 1);
    return ev;
}

static void rev_emit(struct sctx *s, cJSON *ev)
{
    char *text = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (text == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->ev != NULL) {
        fprintf(s->ev, "%s\n", text);
        fflush(s->ev);
    }
    pthread_mutex_unlock(&s->lock);
    cJSON_free(text);
}

static void rev_proc(struct sctx *s, const char *event, const char *proc, int pid,
                     const char *key, const char *value)
{
    cJSON *ev = rev_begin(s, event);
    cJSON_AddStringToObject(ev, "target", proc);
    if (pid > 0)
        cJSON_AddNumberToObject(ev, "target_pid", pid);
    if (key != NULL)
        cJSON_AddStringToObject(ev, key, value ? value : "");
    rev_emit(s, ev);
}

__attribute__((format(printf, 2, 3)))
static void progress(struct sctx *s, const char *fmt, ...)
{
    if (s->run->o->brief)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("    ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

__attribute__((format(printf, 2, 3)))
static int fail(struct sctx *s, const char *fmt, ...)
{
    if (s->error[0] != '\0')
        return -1;
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (s->step >= 0)
        snprintf(s->error, sizeof(s->error), "steps[%d]: %s", s->step, msg);
    else
        snprintf(s->error, sizeof(s->error), "%s", msg);
    cJSON *ev = rev_begin(s, "error");
    cJSON_AddStringToObject(ev, "error", s->error);
    rev_emit(s, ev);
    return -1;
}

/* An expectation result ("expect" array of result.json). */
static void add_expect(struct sctx *s, const char *check, int ok, const char *detail)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "check", check);
    cJSON_AddStringToObject(o, "verdict", ok ? "pass" : "fail");
    cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddItemToArray(s->expects, o);
    if (!ok)
        progress(s, "  expectation failed: %s: %s", check, detail);
}

/* The last non-empty line of a process's log, for error messages. */
static void log_tail(const struct proc *p, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 0)
            snprintf(out, outlen, "%s", line);
    }
    fclose(f);
}

/* ---- process bookkeeping ------------------------------------------------ */

/* Reports every exit not reported yet, whoever reaped it (a wait, a stop,
 * this function): one "exit" event each, and a count of SIGKILL deaths --
 * from the runner or from a crash fault -- outside the final teardown. */
static void reap_all(struct sctx *s)
{
    struct proc *all[SC_MAX_PROCS + 1];
    int n = 0;
    all[n++] = &s->broker;
    for (int i = 0; i < s->sc->nprocs; i++)
        all[n++] = &s->procs[i];
    for (int i = 0; i < n; i++) {
        struct proc *p = all[i];
        if (p->starts == 0 || p->exit_reported || proc_poll(p))
            continue;
        p->exit_reported = 1;
        char how[64];
        proc_exit_text(p, how, sizeof(how));
        rev_proc(s, "exit", p->name, p->pid, "how", how);
        if (WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGKILL && !s->tearing_down)
            s->kills++;
    }
}

/* Records the faults a CW_FAULTS value arms in incarnation pid. */
static void arm_env_faults(struct sctx *s, int idx, int pid, const char *spec)
{
    char buf[1024];
    const char *names[32];
    int n = scenario_fault_points(spec, buf, sizeof(buf), names, 32);
    char copy[1024];
    snprintf(copy, sizeof(copy), "%s", spec);
    for (int i = 0; i < n && s->narmed < MAX_ARMED; i++) {
        struct armed *a = &s->armed[s->narmed++];
        memset(a, 0, sizeof(*a));
        a->proc = idx;
        a->pid = pid;
        snprintf(a->point, sizeof(a->point), "%s", names[i]);
        /* The action is what follows "NAME=" in the original text. */
        char key[128];
        snprintf(key, sizeof(key), "%s=", names[i]);
        const char *at = strstr(copy, key);
        if (at != NULL) {
            at += strlen(key);
            size_t len = strcspn(at, ";");
            snprintf(a->action, sizeof(a->action), "%.*s", (int)len, at);
        }
    }
}

/* The API's bound port: from its "listening" event (port or host:port),
 * falling back to "127.0.0.1:PORT" in its output since start_off. */
static int api_port(struct sctx *s, int idx, long start_off)
{
    const struct proc *p = &s->procs[idx];
    cJSON *evs = evlog_read(p->events_path, NULL);
    int port = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        double pid = 0, v = 0;
        ev_num(ev, (const char *const[]){ "pid", NULL }, &pid);
        if ((int)pid != p->pid)
            continue;
        const char *name = ev_name(ev);
        if (strcmp(name, "listening") != 0 && strcmp(name, "listen") != 0 &&
            strcmp(name, "ready") != 0 && strcmp(name, "started") != 0 &&
            strcmp(name, "start") != 0)
            continue;
        if (ev_num(ev, (const char *const[]){ "port", NULL }, &v) && v > 0 && v < 65536) {
            port = (int)v;
            break;
        }
        const char *addr = ev_str(ev, (const char *const[]){ "listen", "addr", "address",
                                                               "url", "bound", NULL });
        const char *colon = addr ? strrchr(addr, ':') : NULL;
        if (colon != NULL && atoi(colon + 1) > 0) {
            port = atoi(colon + 1);
            break;
        }
    }
    cJSON_Delete(evs);
    if (port > 0)
        return port;
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return 0;
    fseek(f, start_off, SEEK_SET);
    char line[512];
    while (port == 0 && fgets(line, sizeof(line), f) != NULL) {
        const char *at = strstr(line, "127.0.0.1:");
        if (at != NULL && atoi(at + 10) > 0)
            port = atoi(at + 10);
    }
    fclose(f);
    return port;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static int fifo_ready(const struct proc *p)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s-%d.out", p->fifo_prefix, (int)p->pid);
    return access(path, F_OK) == 0;
}

/* Starts scenario process idx (a restart when it ran before): builds its
 * command line, spawns it with faults (may be NULL), and waits until it is
 * ready (the API: its port is known; others: the fault control FIFO
 * exists).  0 or -1 (error recorded). */
static int start_proc(struct sctx *s, int idx, const char *faults)
{
    struct runner *r = s->run;
    const struct sc_proc *sp = &s->sc->procs[idx];
    struct proc *p = &s->procs[idx];
    if (proc_poll(p))
        return fail(s, "%s is already running (pid %d)", p->name, (int)p->pid);
    char *argv[2 * SC_MAX_ARGS + 16];
    int n = 0;
    int has_name = 0;
    for (int j = 0; j < sp->nargs; j++)
        has_name |= strcmp(sp->arg_key[j], "name") == 0;
    switch (sp->kind) {
    case SC_API:
        argv[n++] = r->exe_api;
        argv[n++] = (char *)"--listen";
        argv[n++] = (char *)"127.0.0.1:0";
        /* The API of a sound build never publishes; a dual-write mutant
         * does, and must reach the same broker to be caught. */
        argv[n++] = (char *)"--broker";
        argv[n++] = s->broker_sock;
        break;
    case SC_RELAY:
        argv[n++] = r->exe_relay;
        argv[n++] = (char *)"--broker";
        argv[n++] = s->broker_sock;
        if (!has_name) {
            argv[n++] = (char *)"--name";
            argv[n++] = p->name;
        }
        break;
    case SC_CONSUMER:
        argv[n++] = r->exe_consumer;
        argv[n++] = (char *)"--broker";
        argv[n++] = s->broker_sock;
        break;
    }
    argv[n++] = (char *)"--events";
    argv[n++] = p->events_path;
    char flags[SC_MAX_ARGS][48];
    for (int j = 0; j < sp->nargs; j++) {
        snprintf(flags[j], sizeof(flags[j]), "--%s", sp->arg_key[j]);
        argv[n++] = flags[j];
        if (sp->arg_val[j] != NULL)
            argv[n++] = sp->arg_val[j];
    }
    argv[n] = NULL;

    int restart = p->starts > 0;
    long off = file_size(p->log_path);
    char err[512];
    const char *env[] = { s->db_env, NULL };
    if (proc_spawn(p, argv, faults, env, err, sizeof(err)) < 0)
        return fail(s, "%s", err);
    if (restart)
        s->restarts++;
    s->port[idx] = 0;
    if (faults != NULL)
        arm_env_faults(s, idx, p->pid, faults);
    cJSON *ev = rev_begin(s, restart ? "restart" : "start");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "kind", sc_kind_name(sp->kind));
    if (faults != NULL)
        cJSON_AddStringToObject(ev, "faults", faults);
    rev_emit(s, ev);

    char pidtext[16];
    snprintf(pidtext, sizeof(pidtext), "%d", (int)p->pid);
    int64_t deadline = cw_mono_ms() + 10000;
    for (;;) {
        if (sp->kind == SC_API) {
            s->port[idx] = api_port(s, idx, off);
            if (s->port[idx] > 0)
                break;
        } else if (fifo_ready(p) || evlog_count(p->events_path, NULL, "pid", pidtext) > 0) {
            break;
        }
        if (!proc_poll(p)) {
            char how[64], tail[400];
            proc_exit_text(p, how, sizeof(how));
            log_tail(p, tail, sizeof(tail));
            reap_all(s);
            return fail(s, "%s exited while starting (%s): %s", p->name, how,
                        tail[0] ? tail : "(no output)");
        }
        if (cw_mono_ms() >= deadline || runner_interrupted()) {
            if (sp->kind == SC_API)
                return fail(s, "%s did not report its listening port within 10 s", p->name);
            break; /* built without fault points: no FIFO to wait for */
        }
        nap(5);
    }
    return 0;
}

static int start_broker(struct sctx *s)
{
    struct runner *r = s->run;
    struct proc *b = &s->broker;
    char vis[32];
    char *argv[10];
    int n = 0;
    argv[n++] = r->exe_broker;
    argv[n++] = (char *)"--socket";
    argv[n++] = s->broker_sock;
    argv[n++] = (char *)"--events";
    argv[n++] = b->events_path;
    if (s->sc->visibility_timeout_ms > 0) {
        snprintf(vis, sizeof(vis), "%d", s->sc->visibility_timeout_ms);
        argv[n++] = (char *)"--visibility-timeout-ms";
        argv[n++] = vis;
    }
    argv[n] = NULL;
    unlink(s->broker_sock);
    char err[512];
    int restart = b->starts > 0;
    if (proc_spawn(b, argv, NULL, NULL, err, sizeof(err)) < 0)
        return fail(s, "%s", err);
    if (restart)
        s->restarts++;
    rev_proc(s, restart ? "restart" : "start", "broker", b->pid, "kind", "broker");
    /* Ready means answering: the socket file appears at bind(), a moment
     * before listen(), and a connect in between is refused. */
    int64_t deadline = cw_mono_ms() + 10000;
    for (;;) {
        if (access(s->broker_sock, F_OK) == 0) {
            cJSON *st = brokerctl_stats(s->broker_sock, 1000, err, sizeof(err));
            if (st != NULL) {
                cJSON_Delete(st);
                return 0;
            }
        }
        if (!proc_poll(b)) {
            char how[64], tail[400];
            proc_exit_text(b, how, sizeof(how));
            log_tail(b, tail, sizeof(tail));
            return fail(s, "the broker exited while starting (%s): %s", how, tail);
        }
        if (cw_mono_ms() >= deadline)
            return fail(s, "the broker did not answer on %s within 10 s (%s)", s->broker_sock,
                        err);
        nap(5);
    }
}

/* ---- fault control through libfiu's remote control ---------------------- */

/* Runs fiu-ctrl -c command against p.  A stopped process cannot answer
 * (fiu-ctrl would block), so the caller must not ask one. */
static int fiu_ctrl(struct proc *p, const char *command, int timeout_ms, char *err,
                    size_t errlen)
{
    int64_t deadline = cw_mono_ms() + 5000;
    while (!fifo_ready(p)) {
        if (!proc_poll(p) || cw_mono_ms() >= deadline) {
            snprintf(err, errlen, "%s has no fault control FIFO (not running, or built without "
                     "fault points)", p->name);
            return -1;
        }
        nap(5);
    }
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)p->pid);
    char *argv[] = { (char *)"/usr/bin/fiu-ctrl", (char *)"-f", (char *)p->fifo_prefix,
                     (char *)"-c", (char *)command, pid, NULL };
    if (access(argv[0], X_OK) != 0)
        argv[0] = (char *)"/usr/local/bin/fiu-ctrl";
    char out[1024];
    int rc = proc_run_capture(argv, NULL, timeout_ms, out, sizeof(out));
    if (rc != 0 || strstr(out, "Error") != NULL || strstr(out, "returned error") != NULL) {
        size_t n = strlen(out);
        while (n > 0 && out[n - 1] == '\n')
            out[--n] = '\0';
        snprintf(err, errlen, "fiu-ctrl '%s' on %s failed: %s", command, p->name,
                 out[0] ? out : "no output");
        return -1;
    }
    return 0;
}

static int action_failinfo(const char *action)
{
    if (strcmp(action, "crash") == 0)
        return 0;
    if (strcmp(action, "fail") == 0)
        return 1;
    if (strcmp(action, "park") == 0)
        return 2;
    return atoi(action + 6); /* stall:MS, validated at load */
}

/* ---- HTTP --------------------------------------------------------------- */

static void http_log_add(struct sctx *s, const struct http_rec *h)
{
    pthread_mutex_lock(&s->lock);
    if (s->nhttp == s->caphttp) {
        int ncap = s->caphttp ? s->caphttp * 2 : 64;
        struct http_rec *nv = realloc(s->http, (size_t)ncap * sizeof(*nv));
        if (nv == NULL) {
            pthread_mutex_unlock(&s->lock);
            free(h->body);
            return;
        }
        s->http = nv;
        s->caphttp = ncap;
    }
    s->http[s->nhttp++] = *h;
    pthread_mutex_unlock(&s->lock);
}

/* One request, recorded in the HTTP log and the runner's events.  When out
 * is not NULL it receives a copy of the record whose body the caller frees
 * (the log keeps its own). */
static void do_http(struct sctx *s, int port, int step, const char *name, const char *method,
                    const char *path, const char *key, const cJSON *extra_headers,
                    const char *body, int timeout_ms, struct http_rec *out)
{
    struct http_rec h;
    memset(&h, 0, sizeof(h));
    h.step = step;
    snprintf(h.name, sizeof(h.name), "%s", name ? name : "");
    snprintf(h.method, sizeof(h.method), "%s", method);
    snprintf(h.path, sizeof(h.path), "%s", path);
    snprintf(h.key, sizeof(h.key), "%s", key ? key : "");
    h.creation = strcmp(method, "POST") == 0 && strcmp(path, "/payments") == 0;
    const char *headers[24];
    char hbuf[24][256];
    int nh = 0;
    if (key != NULL) {
        snprintf(hbuf[nh], sizeof(hbuf[nh]), "Idempotency-Key: %s", key);
        headers[nh] = hbuf[nh];
        nh++;
    }
    /* Idempotency keys belong to a client: the API's default one unless
     * the request names another. */
    snprintf(h.client, sizeof(h.client), "%s", CHK_DEFAULT_CLIENT);
    const cJSON *it;
    cJSON_ArrayForEach(it, extra_headers) {
        if (nh >= 22)
            break;
        snprintf(hbuf[nh], sizeof(hbuf[nh]), "%s: %s", it->string, it->valuestring);
        headers[nh] = hbuf[nh];
        nh++;
        if (strcasecmp(it->string, "X-Client-Id") == 0)
            snprintf(h.client, sizeof(h.client), "%s", it->valuestring);
    }
    headers[nh] = NULL;
    h.t0_us = cw_now_us();
    struct http_resp resp;
    if (port <= 0) {
        memset(&resp, 0, sizeof(resp));
        snprintf(resp.error, sizeof(resp.error), "the API is not running");
    } else {
        http_request(port, method, path, headers, body, timeout_ms, &resp);
    }
    h.t1_us = cw_now_us();
    h.status = resp.status;
    h.body = resp.body ? resp.body : strdup("");
    snprintf(h.error, sizeof(h.error), "%s", resp.error);
    if (h.status >= 200 && h.status < 300) {
        cJSON *j = cJSON_Parse(h.body);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
        if (!cJSON_IsString(id))
            id = cJSON_GetObjectItemCaseSensitive(j, "payment_id");
        if (cJSON_IsString(id))
            snprintf(h.payment_id, sizeof(h.payment_id), "%s", id->valuestring);
        cJSON_Delete(j);
    }
    cJSON *ev = rev_begin(s, "http");
    cJSON_AddStringToObject(ev, "method", method);
    cJSON_AddStringToObject(ev, "path", path);
    if (name != NULL)
        cJSON_AddStringToObject(ev, "name", name);
    if (key != NULL)
        cJSON_AddStringToObject(ev, "key", key);
    cJSON_AddNumberToObject(ev, "status", h.status);
    if (h.status == 0)
        cJSON_AddStringToObject(ev, "error", h.error);
    if (h.payment_id[0])
        cJSON_AddStringToObject(ev, "payment_id", h.payment_id);
    cJSON_AddNumberToObject(ev, "duration_us", (double)(h.t1_us - h.t0_us));
    rev_emit(s, ev);
    if (out != NULL) {
        *out = h;
        out->body = strdup(h.body);
    }
    http_log_add(s, &h);
}

static const struct http_rec *http_find(struct sctx *s, const char *name)
{
    for (int i = s->nhttp - 1; i >= 0; i--)
        if (strcmp(s->http[i].name, name) == 0)
            return &s->http[i];
    return NULL;
}

/* Replaces {NAME.id} in path with the payment id the named request got. */
static int expand_path(struct sctx *s, const char *path, char *out, size_t outlen)
{
    size_t n = 0;
    for (const char *p = path; *p && n + 1 < outlen;) {
        if (*p == '{') {
            const char *end = strchr(p, '}');
            const char *dot = end ? memchr(p, '.', (size_t)(end - p)) : NULL;
            if (end != NULL && dot != NULL && strncmp(dot, ".id}", 4) == 0) {
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int)(dot - p - 1), p + 1);
                const struct http_rec *h = http_find(s, name);
                if (h == NULL || h->payment_id[0] == '\0')
                    return fail(s, "path %s: request '%s' gave no payment id", path, name);
                n += (size_t)snprintf(out + n, outlen - n, "%s", h->payment_id);
                p = end + 1;
                continue;
            }
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
    return 0;
}

struct pay_job {
    struct sctx *s;
    const struct sc_step *st;
    int port;
    int step;
    int worker;
    int created, failed;
};

static void *pay_worker(void *arg)
{
    struct pay_job *j = arg;
    const struct sc_step *st = j->st;
    for (int i = j->worker; i < st->count && !runner_interrupted(); i += st->concurrency) {
        char key[160], body[160], amount[32];
        snprintf(key, sizeof(key), "%s-%d", st->key_prefix, i + 1);
        if (st->amount != NULL)
            snprintf(amount, sizeof(amount), "%s", st->amount);
        else
            snprintf(amount, sizeof(amount), "%d.%02d", 10 + i % 90, (i * 37) % 100);
        snprintf(body, sizeof(body), "{\"amount\":\"%s\",\"currency\":\"%s\"}", amount,
                 st->currency);
        struct http_rec h;
        do_http(j->s, j->port, j->step, NULL, "POST", "/payments", key, NULL, body,
                st->timeout_ms, &h);
        for (int k = 0; k < st->retries; k++) {
            do_http(j->s, j->port, j->step, NULL, "POST", "/payments", key, NULL, body,
                    st->timeout_ms, NULL);
        }
        if (h.status < 200 || h.status > 299 || h.payment_id[0] == '\0') {
            j->failed++;
            free(h.body);
            continue;
        }
        j->created++;
        const char *verbs[2] = { "authorize", "capture" };
        int nverbs = st->capture ? 2 : st->authorize ? 1 : 0;
        for (int v = 0; v < nverbs; v++) {
            char path[160], k2[200];
            snprintf(path, sizeof(path), "/payments/%s/%s", h.payment_id, verbs[v]);
            snprintf(k2, sizeof(k2), "%s-%s", key, verbs[v]);
            struct http_rec h2;
            do_http(j->s, j->port, j->step, NULL, "POST", path, k2, NULL, "{}",
                    st->timeout_ms, &h2);
            int ok = h2.status >= 200 && h2.status < 300;
            free(h2.body);
            if (!ok) {
                j->failed++;
                break;
            }
        }
        free(h.body);
    }
    return NULL;
}

/* ---- database helpers --------------------------------------------------- */

/* The first column of the first row as a number; -1 with an error set. */
static long long sql_value(struct sctx *s, const char *sql, int n, const char *const *params,
                           char *err, size_t errlen)
{
    if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
        PQfinish(s->conn);
        s->conn = pgx_connect(s->conninfo, err, errlen);
        if (s->conn == NULL)
            return -1;
    }
    PGresult *r = pgx_exec(s->conn, sql, n, params, NULL, err, errlen);
    if (r == NULL)
        return -1;
    long long v = 0;
    if (PQntuples(r) > 0 && PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Is every committed event published or dead-lettered, and every published
 * one applied (or parked) by every consumer group that runs, with nothing
 * left in flight at the broker?  1 yes, 0 no (why says what is missing). */
static int pipeline_quiet(struct sctx *s, char *why, size_t whylen)
{
    char err[256];
    long long pending = sql_value(s,
        "SELECT count(*) FROM outbox_messages WHERE published_at IS NULL AND dead_lettered_at IS NULL",
        0, NULL, err, sizeof(err));
    if (pending < 0) {
        snprintf(why, whylen, "database: %s", err);
        return 0;
    }
    if (pending > 0) {
        snprintf(why, whylen, "%lld outbox rows still pending", pending);
        return 0;
    }
    const char *seen[SC_MAX_PROCS];
    int nseen = 0;
    int have_consumers = 0;
    for (int i = 0; i < s->sc->nprocs; i++) {
        const struct sc_proc *sp = &s->sc->procs[i];
        if (sp->kind != SC_CONSUMER)
            continue;
        have_consumers = 1;
        int dup = 0;
        for (int k = 0; k < nseen; k++)
            dup |= strcmp(seen[k], sp->consumer_name) == 0;
        if (dup)
            continue;
        seen[nseen++] = sp->consumer_name;
        const char *p[1] = { sp->consumer_name };
        /* The checker's own definition of "not consumed yet": heal waits
         * for exactly what nothing_lost will judge. */
        long long missing = sql_value(s, checker_unconsumed_count_sql(), 1, p, err, sizeof(err));
        if (missing != 0) {
            if (missing < 0)
                snprintf(why, whylen, "database: %s", err);
            else
                snprintf(why, whylen, "%lld published events not yet consumed by %s", missing,
                         sp->consumer_name);
            return 0;
        }
    }
    if (!have_consumers)
        return 1;
    cJSON *stats = brokerctl_stats(s->broker_sock, 2000, err, sizeof(err));
    if (stats == NULL) {
        snprintf(why, whylen, "broker stats: %s", err);
        return 0;
    }
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(stats, "groups");
    const cJSON *g;
    int quiet = 1;
    cJSON_ArrayForEach(g, groups) {
        double unacked = 0, ready = 0, delayed = 0;
        ev_num(g, (const char *const[]){ "unacked", NULL }, &unacked);
        ev_num(g, (const char *const[]){ "ready", NULL }, &ready);
        ev_num(g, (const char *const[]){ "delayed", NULL }, &delayed);
        if (unacked + ready + delayed > 0) {
            snprintf(why, whylen, "broker group %s: %.0f unacked, %.0f ready, %.0f delayed",
                     g->string, unacked, ready, delayed);
            quiet = 0;
            break;
        }
    }
    cJSON_Delete(stats);
    return quiet;
}

/* ---- waits -------------------------------------------------------------- */

/* The last fault_hit of incarnation pid in path: its point, or "". */
static void last_fault_hit(const char *path, int pid, char *point, size_t len)
{
    point[0] = '\0';
    cJSON *evs = evlog_read(path, NULL);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        double p = 0;
        ev_num(ev, (const char *const[]){ "pid", NULL }, &p);
        if ((int)p != pid || strcmp(ev_name(ev), "fault_hit") != 0)
            continue;
        const char *pt = ev_str(ev, (const char *const[]){ "point", NULL });
        snprintf(point, len, "%s", pt ? pt : "");
    }
    cJSON_Delete(evs);
}

/* One evaluation of a wait condition: 1 met, 0 not yet, -1 never will be
 * (the process it waits on is gone).  last describes the current state. */
static int wait_check(struct sctx *s, const struct sc_step *st, char *last, size_t lastlen)
{
    char err[256];
    struct proc *p = st->proc >= 0 ? &s->procs[st->proc] : NULL;
    long long v;
    switch (st->until) {
    case U_EXITED:
        if (!proc_poll(p)) {
            proc_exit_text(p, last, lastlen);
            return 1;
        }
        snprintf(last, lastlen, "running, state %c", proc_state(p->pid));
        return 0;
    case U_PARKED:
        if (!proc_poll(p)) {
            char how[64];
            proc_exit_text(p, how, sizeof(how));
            snprintf(last, lastlen, "%s (%s) instead of parking", p->name, how);
            return -1;
        }
        if (!proc_stopped(p)) {
            snprintf(last, lastlen, "running, state %c", proc_state(p->pid));
            return 0;
        }
        if (st->point != NULL) {
            char pt[96];
            last_fault_hit(p->events_path, p->pid, pt, sizeof(pt));
            if (strcmp(pt, st->point) != 0) {
                snprintf(last, lastlen, "stopped, last fault hit '%s'", pt);
                return 0;
            }
        }
        s->pauses++;
        snprintf(last, lastlen, "parked");
        return 1;
    case U_EVENT: {
        const char *path = p ? p->events_path : s->broker.events_path;
        int n = evlog_count(path, st->event, st->where_key, st->where_value);
        snprintf(last, lastlen, "%d x %s", n, st->event);
        if (n >= st->count)
            return 1;
        if (p != NULL && !proc_poll(p)) {
            /* Exited: a last look, since it may have logged before dying. */
            n = evlog_count(path, st->event, st->where_key, st->where_value);
            if (n >= st->count)
                return 1;
            char how[64];
            proc_exit_text(p, how, sizeof(how));
            snprintf(last, lastlen, "%d x %s, and %s exited (%s)", n, st->event, p->name, how);
            return -1;
        }
        return 0;
    }
    case U_PUBLISHED:
        v = sql_value(s, "SELECT count(*) FROM outbox_messages WHERE published_at IS NOT NULL",
                      0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld published", v);
        return v >= st->count;
    case U_CONSUMED: {
        const char *prm[1] = { st->consumer };
        v = sql_value(s, "SELECT count(*) FROM inbox_messages WHERE consumer_name = $1", 1, prm,
                      err, sizeof(err));
        snprintf(last, lastlen, "%lld consumed", v);
        return v >= st->count;
    }
    case U_DEAD_LETTERED:
        v = sql_value(s, "SELECT count(*) FROM outbox_messages WHERE dead_lettered_at IS NOT NULL",
                      0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld dead-lettered", v);
        return v >= st->count;
    case U_LEASE_EXPIRED:
        v = sql_value(s,
            "SELECT count(*) FROM outbox_messages"
            " WHERE published_at IS NULL AND dead_lettered_at IS NULL"
            "   AND lock_id IS NOT NULL AND locked_until < now()", 0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld expired leases", v);
        return v >= st->count;
    case U_QUIET:
        if (pipeline_quiet(s, last, lastlen)) {
            snprintf(last, lastlen, "quiet");
            return 1;
        }
        return 0;
    case U_SQL:
        v = sql_value(s, st->sql, 0, NULL, err, sizeof(err));
        if (v < 0 && err[0] != '\0') {
            snprintf(last, lastlen, "sql failed: %s", err);
            return -1;
        }
        snprintf(last, lastlen, "value %lld", v);
        return v >= st->count;
    }
    return -1;
}

static int do_wait(struct sctx *s, const struct sc_step *st)
{
    char what[512], last[512] = "";
    scenario_step_describe(s->sc, st, what, sizeof(what));
    int64_t start = cw_mono_ms();
    int64_t deadline = start + st->timeout_ms;
    if (s->run->o->wait_cap_ms > 0 && st->timeout_ms > s->run->o->wait_cap_ms)
        deadline = start + s->run->o->wait_cap_ms;
    if (deadline > s->deadline)
        deadline = s->deadline;
    for (;;) {
        int r = wait_check(s, st, last, sizeof(last));
        reap_all(s);
        if (r == 1) {
            cJSON *ev = rev_begin(s, "wait_done");
            cJSON_AddStringToObject(ev, "until", sc_until_name(st->until));
            cJSON_AddNumberToObject(ev, "waited_ms", (double)(cw_mono_ms() - start));
            rev_emit(s, ev);
            return 0;
        }
        if (r < 0)
            return fail(s, "%s: gave up: %s", what, last);
        if (runner_interrupted())
            return fail(s, "%s: interrupted", what);
        if (cw_mono_ms() >= deadline)
            return fail(s, "%s: timed out after %lld ms (last: %s)", what,
                        (long long)(cw_mono_ms() - start), last);
        nap(POLL_MS);
    }
}

/* ---- steps -------------------------------------------------------------- */

static int step_start(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (st->verb == V_RESTART && proc_poll(p)) {
        rev_proc(s, "stop", p->name, p->pid, "signal", "SIGTERM");
        if (proc_stop(p, STOP_TIMEOUT_MS) == 1)
            rev_proc(s, "kill", p->name, p->pid, "why", "did not stop on SIGTERM");
        reap_all(s);
    }
    return start_proc(s, st->proc, st->faults);
}

static int step_signal(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p)) {
        char how[64];
        proc_exit_text(p, how, sizeof(how));
        return fail(s, "%s %s: it is not running (%s)", sc_verb_name(st->verb), p->name, how);
    }
    int pid = p->pid;
    switch (st->verb) {
    case V_STOP: {
        rev_proc(s, "stop", p->name, pid, "signal", "SIGTERM");
        if (proc_stop(p, st->timeout_ms) == 1)
            rev_proc(s, "kill", p->name, pid, "why", "did not stop on SIGTERM");
        reap_all(s);
        return 0;
    }
    case V_KILL:
        rev_proc(s, "kill", p->name, pid, "signal", "SIGKILL");
        if (proc_kill(p) < 0)
            return fail(s, "%s (pid %d) did not die on SIGKILL", p->name, pid);
        reap_all(s);
        return 0;
    case V_PAUSE: {
        rev_proc(s, "pause", p->name, pid, "signal", "SIGSTOP");
        proc_signal(p, SIGSTOP);
        int64_t deadline = cw_mono_ms() + st->timeout_ms;
        while (!proc_stopped(p)) {
            if (!proc_poll(p) || cw_mono_ms() >= deadline)
                return fail(s, "%s did not stop on SIGSTOP (state %c)", p->name,
                            proc_state(p->pid));
            nap(2);
        }
        s->pauses++;
        return 0;
    }
    case V_RESUME: {
        rev_proc(s, "resume", p->name, pid, "signal", "SIGCONT");
        proc_signal(p, SIGCONT);
        int64_t deadline = cw_mono_ms() + st->timeout_ms;
        while (proc_stopped(p)) {
            if (cw_mono_ms() >= deadline)
                return fail(s, "%s stayed stopped after SIGCONT", p->name);
            nap(2);
        }
        return 0;
    }
    default:
        return fail(s, "not a signal step");
    }
}

static int step_fault(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p))
        return fail(s, "fault: %s is not running", p->name);
    if (proc_stopped(p))
        return fail(s, "fault: %s is stopped; libfiu's remote control cannot reach it "
                    "(resume it first)", p->name);
    char cmd[192], err[1200];
    if (st->disable)
        snprintf(cmd, sizeof(cmd), "disable name=%s", st->point);
    else
        snprintf(cmd, sizeof(cmd), "enable name=%s,failinfo=%d", st->point,
                 action_failinfo(st->action));
    if (fiu_ctrl(p, cmd, 5000, err, sizeof(err)) < 0)
        return fail(s, "%s", err);
    if (st->disable) {
        for (int i = 0; i < s->narmed; i++)
            if (s->armed[i].proc == st->proc && s->armed[i].pid == p->pid &&
                strcmp(s->armed[i].point, st->point) == 0)
                s->armed[i].disabled = 1;
    } else if (s->narmed < MAX_ARMED) {
        struct armed *a = &s->armed[s->narmed++];
        memset(a, 0, sizeof(*a));
        a->proc = st->proc;
        a->pid = p->pid;
        a->runtime = 1;
        snprintf(a->point, sizeof(a->point), "%s", st->point);
        snprintf(a->action, sizeof(a->action), "%s", st->action);
    }
    cJSON *ev = rev_begin(s, "fault");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "point", st->point);
    cJSON_AddStringToObject(ev, "command", cmd);
    rev_emit(s, ev);
    return 0;
}

static int step_http(struct sctx *s, const struct sc_step *st)
{
    char path[512];
    if (expand_path(s, st->path, path, sizeof(path)) < 0)
        return -1;
    struct proc *p = &s->procs[st->proc];
    int port = proc_poll(p) ? s->port[st->proc] : 0;
    struct http_rec h;
    do_http(s, port, s->step, st->name, st->method, path, st->key, st->headers, st->body,
            st->timeout_ms, &h);
    if (h.status == 0)
        progress(s, "  -> no response: %s", h.error);
    else
        progress(s, "  -> HTTP %d %.100s", h.status, h.body);
    char check[64], detail[600];
    if (st->expect_status != 0) {
        snprintf(check, sizeof(check), "steps[%d].expect_status", s->step);
        fmt(detail, sizeof(detail), "%s %s got %d%s%s (want %d)", st->method, path,
                 h.status, h.status ? "" : ": ", h.status ? "" : h.error, st->expect_status);
        add_expect(s, check, h.status == st->expect_status, detail);
    }
    if (st->same_as != NULL) {
        const struct http_rec *ref = NULL;
        for (int i = 0; i < s->nhttp - 1; i++)
            if (strcmp(s->http[i].name, st->same_as) == 0)
                ref = &s->http[i];
        snprintf(check, sizeof(check), "steps[%d].same_as", s->step);
        int same = ref != NULL && ref->status == h.status && strcmp(ref->body, h.body) == 0;
        snprintf(detail, sizeof(detail), "%s: HTTP %d %.200s; %s: HTTP %d %.200s",
                 st->same_as, ref ? ref->status : 0, ref ? ref->body : "",
                 st->name ? st->name : "this request", h.status, h.body);
        add_expect(s, check, same, detail);
    }
    free(h.body);
    return 0;
}

static int step_payments(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p))
        return fail(s, "payments: %s is not running", p->name);
    struct pay_job jobs[64];
    pthread_t th[64];
    int started = 0;
    for (int w = 0; w < st->concurrency; w++) {
        memset(&jobs[w], 0, sizeof(jobs[w]));
        jobs[w].s = s;
        jobs[w].st = st;
        jobs[w].port = s->port[st->proc];
        jobs[w].step = s->step;
        jobs[w].worker = w;
        if (st->concurrency == 1) {
            pay_worker(&jobs[w]);
            started = 0;
            break;
        }
        if (pthread_create(&th[w], NULL, pay_worker, &jobs[w]) != 0)
            break;
        started++;
    }
    for (int w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    int created = 0, failed = 0;
    int nw = st->concurrency == 1 ? 1 : started;
    for (int w = 0; w < nw; w++) {
        created += jobs[w].created;
        failed += jobs[w].failed;
    }
    progress(s, "  -> %d payments created, %d requests without success", created, failed);
    cJSON *ev = rev_begin(s, "payments");
    cJSON_AddNumberToObject(ev, "created", created);
    cJSON_AddNumberToObject(ev, "failed", failed);
    rev_emit(s, ev);
    return 0;
}

static int step_broker(struct sctx *s, const struct sc_step *st)
{
    char err[512];
    if (brokerctl_control(s->broker_sock, st->control, 3000, err, sizeof(err)) < 0)
        return fail(s, "broker control: %s", err);
    cJSON *ev = rev_begin(s, "broker_control");
    cJSON_AddItemToObject(ev, "control", cJSON_Duplicate(st->control, 1));
    rev_emit(s, ev);
    return 0;
}

static int step_sql(struct sctx *s, const struct sc_step *st)
{
    char err[512], state[6];
    if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) {
        PQfinish(s->conn);
        s->conn = pgx_connect(s->conninfo, err, sizeof(err));
        if (s->conn == NULL)
            return fail(s, "sql: %s", err);
    }
    PGresult *r = pgx_exec(s->conn, st->sql, 0, NULL, state, err, sizeof(err));
    if (r == NULL)
        return fail(s, "sql failed (%s): %s", state, err);
    long rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : atol(PQcmdTuples(r));
    PQclear(r);
    progress(s, "  -> %ld rows", rows);
    if (st->expect_rows >= 0) {
        char check[64], detail[128];
        snprintf(check, sizeof(check), "steps[%d].expect_rows", s->step);
        snprintf(detail, sizeof(detail), "%ld rows (want %d)", rows, st->expect_rows);
        add_expect(s, check, rows == st->expect_rows, detail);
    }
    cJSON *ev = rev_begin(s, "sql");
    cJSON_AddNumberToObject(ev, "rows", (double)rows);
    rev_emit(s, ev);
    return 0;
}

static int step_outboxctl(struct sctx *s, const struct sc_step *st)
{
    char *argv[24];
    int n = 0;
    argv[n++] = s->run->exe_outboxctl;
    for (int i = 0; i < st->argc; i++)
        argv[n++] = (char *)st->argv[i];
    argv[n] = NULL;
    char out[16384];
    const char *env[] = { s->db_env, NULL };
    int rc = proc_run_capture(argv, env, st->timeout_ms, out, sizeof(out));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/outboxctl.step%d.log", s->dir, s->step + 1);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(out, f);
        fclose(f);
    }
    char first[200];
    fmt(first, sizeof(first), "%s", out);
    first[strcspn(first, "\n")] = '\0';
    progress(s, "  -> exit %d: %s", rc, first);
    cJSON *ev = rev_begin(s, "outboxctl");
    cJSON *args = cJSON_CreateArray();
    for (int i = 0; i < st->argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(st->argv[i]));
    cJSON_AddItemToObject(ev, "args", args);
    cJSON_AddNumberToObject(ev, "exit", rc);
    rev_emit(s, ev);
    if (rc < 0)
        return fail(s, "outboxctl: %s", out);
    char check[64], detail[400];
    if (st->expect_exit >= 0) {
        snprintf(check, sizeof(check), "steps[%d].expect_exit", s->step);
        snprintf(detail, sizeof(detail), "outboxctl exited %d (want %d): %.200s", rc,
                 st->expect_exit, first);
        add_expect(s, check, rc == st->expect_exit, detail);
    }
    if (st->expect_output != NULL) {
        snprintf(check, sizeof(check), "steps[%d].expect_output", s->step);
        snprintf(detail, sizeof(detail), "output %s \"%s\"",
                 strstr(out, st->expect_output) ? "contains" : "lacks", st->expect_output);
        add_expect(s, check, strstr(out, st->expect_output) != NULL, detail);
    }
    return 0;
}

static int run_step(struct sctx *s, const struct sc_step *st)
{
    switch (st->verb) {
    case V_START:
    case V_RESTART:
        return step_start(s, st);
    case V_STOP:
    case V_KILL:
    case V_PAUSE:
    case V_RESUME:
        return step_signal(s, st);
    case V_FAULT:
        return step_fault(s, st);
    case V_HTTP:
        return step_http(s, st);
    case V_PAYMENTS:
        return step_payments(s, st);
    case V_BROKER:
        return step_broker(s, st);
    case V_SQL:
        return step_sql(s, st);
    case V_OUTBOXCTL:
        return step_outboxctl(s, st);
    case V_WAIT:
        return do_wait(s, st);
    }
    return fail(s, "unknown step");
}

/* ---- heal --------------------------------------------------------------- */

/* Turns off every fault still armed in the running incarnation of idx.
 * fiu-ctrl cannot reach a stopped process, so it is woken first; a process
 * that parks again before the command lands is woken and asked again, a
 * bounded number of times, and finally replaced by a fresh incarnation. */
static void heal_faults(struct sctx *s, int idx)
{
    struct proc *p = &s->procs[idx];
    for (int i = 0; i < s->narmed; i++) {
        struct armed *a = &s->armed[i];
        if (a->proc != idx || a->pid != p->pid || a->disabled || !proc_poll(p))
            continue;
        char cmd[192], err[1200];
        snprintf(cmd, sizeof(cmd), "disable name=%s", a->point);
        int done = 0;
        for (int attempt = 0; attempt < 5 && !done && proc_poll(p); attempt++) {
            kill(p->pid, SIGCONT);
            done = fiu_ctrl(p, cmd, 1000, err, sizeof(err)) == 0;
        }
        if (done) {
            a->disabled = 1;
            rev_proc(s, "fault_off", p->name, p->pid, "point", a->point);
        } else if (proc_poll(p)) {
            rev_proc(s, "kill", p->name, p->pid, "why", "its fault could not be turned off");
            proc_kill(p);
            reap_all(s);
        }
    }
}

static int heal(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    int saved_step = s->step;
    s->step = -1;
    int64_t start = cw_mono_ms();
    int heal_ms = sc->heal_timeout_ms;
    if (s->run->o->heal_cap_ms > 0 && heal_ms > s->run->o->heal_cap_ms)
        heal_ms = s->run->o->heal_cap_ms;
    int64_t deadline = start + heal_ms;
    rev_proc(s, "heal_start", "pipeline", 0, NULL, NULL);
    progress(s, "heal: faults off, broker reset, every process running (deadline %d ms)",
             heal_ms);
    char err[512];
    reap_all(s);
    if (!proc_poll(&s->broker) && start_broker(s) < 0)
        return -1;
    if (brokerctl_reset(s->broker_sock, 3000, err, sizeof(err)) < 0)
        return fail(s, "heal: broker reset: %s", err);
    for (int i = 0; i < sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        if (proc_poll(p) && proc_stopped(p)) {
            rev_proc(s, "resume", p->name, p->pid, "signal", "SIGCONT");
            kill(p->pid, SIGCONT);
        }
        heal_faults(s, i);
    }
    reap_all(s);
    int restarts[SC_MAX_PROCS] = { 0 };
    char why[512] = "";
    int quiet_since = 0;
    for (;;) {
        for (int i = 0; i < sc->nprocs; i++) {
            struct proc *p = &s->procs[i];
            if (!sc->procs[i].heal || proc_poll(p))
                continue;
            /* Never started, killed, crashed: a fresh incarnation without
             * faults.  Bounded, so a process that dies at start cannot
             * spin here. */
            if (restarts[i]++ >= 5)
                return fail(s, "heal: %s keeps exiting", p->name);
            if (start_proc(s, i, NULL) < 0)
                return -1;
        }
        if (proc_stopped(&s->broker))
            kill(s->broker.pid, SIGCONT);
        if (pipeline_quiet(s, why, sizeof(why))) {
            /* Twice in a row, a poll apart: a delivery in flight between
             * the SQL and the stats query must not pass for quiet. */
            if (quiet_since++ >= 1)
                break;
        } else {
            quiet_since = 0;
        }
        reap_all(s);
        if (runner_interrupted())
            return fail(s, "heal: interrupted");
        if (cw_mono_ms() >= deadline)
            return fail(s, "heal: the pipeline did not converge within %d ms: %s",
                        heal_ms, why);
        nap(50);
    }
    cJSON *ev = rev_begin(s, "heal_done");
    cJSON_AddNumberToObject(ev, "converged_ms", (double)(cw_mono_ms() - start));
    rev_emit(s, ev);
    progress(s, "heal: converged in %lld ms", (long long)(cw_mono_ms() - start));
    s->step = saved_step;
    return 0;
}

/* ---- teardown and outputs ----------------------------------------------- */

static void teardown(struct sctx *s)
{
    struct proc *all[SC_MAX_PROCS + 1];
    int n = 0;
    reap_all(s);
    s->tearing_down = 1;
    for (int i = 0; i < s->sc->nprocs; i++)
        all[n++] = &s->procs[i];
    all[n++] = &s->broker;
    /* Signal everyone at once, then wait against one deadline. */
    for (int i = 0; i < n; i++) {
        if (!proc_poll(all[i]))
            continue;
        kill(all[i]->pid, SIGCONT);
        kill(all[i]->pid, SIGTERM);
    }
    int64_t deadline = cw_mono_ms() + STOP_TIMEOUT_MS;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < n; i++)
            alive += proc_poll(all[i]);
        if (alive == 0 || cw_mono_ms() >= deadline)
            break;
        nap(5);
    }
    for (int i = 0; i < n; i++) {
        if (!proc_poll(all[i]))
            continue;
        rev_proc(s, "kill", all[i]->name, all[i]->pid, "why", "did not stop on SIGTERM");
        proc_kill(all[i]);
    }
    unlink(s->broker_sock);
}

struct tl_item {
    cJSON *ev;
    int64_t ts;
    long seq;
};

static int cmp_tl(const void *a, const void *b)
{
    const struct tl_item *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Merges every events file of the scenario into timeline.jsonl, naming
 * each line after the scenario's process.  Returns the number of events. */
static long write_timeline(struct sctx *s)
{
    const char *paths[SC_MAX_PROCS + 2];
    const char *names[SC_MAX_PROCS + 2];
    char runner_path[PATH_MAX + 32];
    int n = 0;
    for (int i = 0; i < s->sc->nprocs; i++) {
        paths[n] = s->procs[i].events_path;
        names[n++] = s->procs[i].name;
    }
    paths[n] = s->broker.events_path;
    names[n++] = "broker";
    snprintf(runner_path, sizeof(runner_path), "%s/runner.events.jsonl", s->dir);
    paths[n] = runner_path;
    names[n++] = "runner";
    struct tl_item *items = NULL;
    long count = 0, cap = 0;
    cJSON *arrays[SC_MAX_PROCS + 2];
    for (int i = 0; i < n; i++) {
        arrays[i] = evlog_read(paths[i], NULL);
        cJSON *ev;
        cJSON_ArrayForEach(ev, arrays[i]) {
            const cJSON *pr = cJSON_GetObjectItemCaseSensitive(ev, "proc");
            if (!cJSON_IsString(pr) || strcmp(pr->valuestring, names[i]) != 0) {
                if (cJSON_IsString(pr))
                    cJSON_AddStringToObject(ev, "self", pr->valuestring);
                cJSON_DeleteItemFromObjectCaseSensitive(ev, "proc");
                cJSON_AddStringToObject(ev, "proc", names[i]);
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 1024;
                struct tl_item *ni = realloc(items, (size_t)cap * sizeof(*ni));
                if (ni == NULL)
                    break;
                items = ni;
            }
            items[count].ev = ev;
            items[count].ts = ev_ts(ev);
            items[count].seq = count;
            count++;
        }
    }
    if (count > 0)
        qsort(items, (size_t)count, sizeof(*items), cmp_tl);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/timeline.jsonl", s->dir);
    FILE *f = fopen(path, "w");
    for (long i = 0; f != NULL && i < count; i++) {
        char *text = cJSON_PrintUnformatted(items[i].ev);
        if (text != NULL) {
            fprintf(f, "%s\n", text);
            cJSON_free(text);
        }
    }
    if (f != NULL)
        fclose(f);
    free(items);
    for (int i = 0; i < n; i++)
        cJSON_Delete(arrays[i]);
    return count;
}

/* faults_fired from every fault_hit event; faults_not_hit from what was
 * armed and never fired in that incarnation. */
static void fault_report(struct sctx *s, const cJSON *const *proc_events, cJSON *fired,
                         cJSON *not_hit)
{
    for (int i = 0; i < s->sc->nprocs; i++) {
        const cJSON *ev;
        cJSON_ArrayForEach(ev, proc_events[i]) {
            if (strcmp(ev_name(ev), "fault_hit") != 0)
                continue;
            cJSON *o = cJSON_CreateObject();
            const char *pt = ev_str(ev, (const char *const[]){ "point", NULL });
            const char *ac = ev_str(ev, (const char *const[]){ "action", NULL });
            cJSON_AddStringToObject(o, "point", pt ? pt : "");
            cJSON_AddStringToObject(o, "proc", s->procs[i].name);
            cJSON_AddStringToObject(o, "action", ac ? ac : "");
            cJSON_AddNumberToObject(o, "ts_us", (double)ev_ts(ev));
            cJSON_AddItemToArray(fired, o);
        }
    }
    for (int i = 0; i < s->narmed; i++) {
        const struct armed *a = &s->armed[i];
        int hit = 0;
        const cJSON *ev;
        cJSON_ArrayForEach(ev, proc_events[a->proc]) {
            double pid = 0;
            ev_num(ev, (const char *const[]){ "pid", NULL }, &pid);
            const char *pt = ev_str(ev, (const char *const[]){ "point", NULL });
            if ((int)pid == a->pid && strcmp(ev_name(ev), "fault_hit") == 0 && pt != NULL &&
                strcmp(pt, a->point) == 0)
                hit = 1;
        }
        if (hit)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", a->point);
        cJSON_AddStringToObject(o, "proc", s->procs[a->proc].name);
        cJSON_AddStringToObject(o, "action", a->action);
        cJSON_AddItemToArray(not_hit, o);
    }
}

/* Fails the scenario naming every armed fault that never fired. */
static void fail_not_hit(struct sctx *s, const cJSON *not_hit)
{
    char list[600] = "";
    size_t n = 0;
    const cJSON *nh;
    cJSON_ArrayForEach(nh, not_hit) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(nh, "point");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(nh, "proc");
        const cJSON *ac = cJSON_GetObjectItemCaseSensitive(nh, "action");
        int w = snprintf(list + n, sizeof(list) - n, "%s%s=%s in %s", n ? ", " : "",
                         cJSON_IsString(pt) ? pt->valuestring : "?",
                         cJSON_IsString(ac) ? ac->valuestring : "?",
                         cJSON_IsString(pr) ? pr->valuestring : "?");
        if (w < 0 || (size_t)w >= sizeof(list) - n)
            break; /* truncated: faults_not_hit in result.json has them all */
        n += (size_t)w;
    }
    fail(s, "armed fault%s never hit: %s: the run never reached the window it is meant "
         "to test (make the workload reach it, or mark the scenario faults_optional)",
         cJSON_GetArraySize(not_hit) == 1 ? "" : "s", list);
}

static void print_keep(struct sctx *s)
{
    printf("    --keep: the system stays up. To poke it:\n");
    int hidden = 0;
    char *shown = conninfo_for_display(s->conninfo, &hidden);
    printf("      psql \"%s\"%s\n", shown ? shown : "(connection string unreadable)",
           hidden ? "   (password not shown: give it with PGPASSWORD)" : "");
    free(shown);
    for (int i = 0; i < s->sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        if (!proc_poll(p))
            continue;
        printf("      %-12s pid %d: fiu-ctrl -f %s -c \"enable name=%s/...,failinfo=2\" %d\n",
               p->name, (int)p->pid, p->fifo_prefix,
               s->sc->procs[i].kind == SC_API ? "api" :
               s->sc->procs[i].kind == SC_RELAY ? "relay" : "consumer", (int)p->pid);
        if (s->sc->procs[i].kind == SC_API && s->port[i] > 0)
            printf("      curl -s -X POST -H 'Idempotency-Key: try-1' -H 'Content-Type: "
                   "application/json' -d '{\"amount\":\"12.50\",\"currency\":\"EUR\"}' "
                   "http://127.0.0.1:%d/payments\n", s->port[i]);
    }
    printf("      broker socket: %s (pid %d)\n", s->broker_sock, (int)s->broker.pid);
    printf("      stop it all: kill");
    for (int i = 0; i < s->sc->nprocs; i++)
        if (proc_poll(&s->procs[i]))
            printf(" %d", (int)s->procs[i].pid);
    printf(" %d\n", (int)s->broker.pid);
}

/* ---- one scenario ------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    fputc('\n', f);
    return fclose(f);
}

static cJSON *run_scenario(struct runner *r, const struct scenario *sc, int rep, int index,
                           int total)
{
    struct sctx *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->run = r;
    s->sc = sc;
    s->rep = rep;
    s->step = -1;
    s->expects = cJSON_CreateArray();
    pthread_mutex_init(&s->lock, NULL);
    int64_t t0 = cw_mono_ms();
    int64_t started_us = cw_now_us();
    s->deadline = t0 + sc->timeout_ms;
    if (r->o->repeat > 1)
        snprintf(s->label, sizeof(s->label), "%s.r%d", sc->name, rep);
    else
        snprintf(s->label, sizeof(s->label), "%s", sc->name);
    fmt(s->dir, sizeof(s->dir), "%s/%s", r->out, s->label);
    r->nsc++;
    fmt(s->broker_sock, sizeof(s->broker_sock), "%s/b%d.sock", r->tmp, r->nsc);
    printf("[%d/%d] %s: %s\n", index, total, s->label, sc->title);
    fflush(stdout);

    char err[1024];
    mkdir_p(s->dir);
    char path[PATH_MAX + 64];
    char *text = cJSON_Print(sc->root);
    snprintf(path, sizeof(path), "%s/scenario.json", s->dir);
    if (text != NULL)
        write_file(path, text);
    cJSON_free(text);
    snprintf(path, sizeof(path), "%s/runner.events.jsonl", s->dir);
    s->ev = fopen(path, "a");

    snprintf(s->broker.name, sizeof(s->broker.name), "broker");
    fmt(s->broker.events_path, sizeof(s->broker.events_path), "%s/broker.events.jsonl", s->dir);
    fmt(s->broker.log_path, sizeof(s->broker.log_path), "%s/broker.log", s->dir);
    s->broker.fifo_prefix = r->fifo_prefix;
    for (int i = 0; i < sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        snprintf(p->name, sizeof(p->name), "%s", sc->procs[i].name);
        fmt(p->events_path, sizeof(p->events_path), "%s/%s.events.jsonl", s->dir, p->name);
        fmt(p->log_path, sizeof(p->log_path), "%s/%s.log", s->dir, p->name);
        p->fifo_prefix = r->fifo_prefix;
    }

    cJSON *ev = rev_begin(s, "scenario_start");
    cJSON_AddStringToObject(ev, "scenario", sc->name);
    cJSON_AddStringToObject(ev, "crash_window", sc->crash_window);
    rev_emit(s, ev);

    s->conninfo = rdb_create_db(&r->db, s->label, s->dbname, err, sizeof(err));
    if (s->conninfo != NULL)
        s->db_env = conninfo_env(s->conninfo);
    if (s->conninfo == NULL || s->db_env == NULL) {
        fail(s, "database: %s", s->conninfo == NULL ? err : "out of memory");
    } else {
        s->conn = pgx_connect(s->conninfo, err, sizeof(err));
        if (s->conn == NULL)
            fail(s, "database: %s", err);
    }
    if (s->error[0] == '\0' && start_broker(s) == 0) {
        if (sc->broker_control != NULL) {
            cJSON *sw = cJSON_Duplicate(sc->broker_control, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(sw, "visibility_timeout_ms");
            if (brokerctl_control(s->broker_sock, sw, 3000, err, sizeof(err)) < 0)
                fail(s, "broker switches: %s", err);
            cJSON_Delete(sw);
        }
        snprintf(path, sizeof(path), "%s/metrics.jsonl", s->dir);
        s->metrics = metrics_start(s->conninfo, path, 250);
        for (int i = 0; i < sc->nprocs && s->error[0] == '\0'; i++) {
            if (!sc->procs[i].autostart)
                continue;
            if (start_proc(s, i, sc->procs[i].faults) == 0)
                progress(s, "started %s (pid %d%s%s)", sc->procs[i].name, (int)s->procs[i].pid,
                         sc->procs[i].faults ? ", CW_FAULTS=" : "",
                         sc->procs[i].faults ? sc->procs[i].faults : "");
        }
        for (int i = 0; i < sc->nsteps && s->error[0] == '\0'; i++) {
            char d[512];
            s->step = i;
            scenario_step_describe(sc, &sc->steps[i], d, sizeof(d));
            progress(s, "step %d/%d %s", i + 1, sc->nsteps, d);
            ev = rev_begin(s, "step");
            cJSON_AddStringToObject(ev, "do", sc_verb_name(sc->steps[i].verb));
            cJSON_AddStringToObject(ev, "what", d);
            rev_emit(s, ev);
            run_step(s, &sc->steps[i]);
            reap_all(s);
            if (runner_interrupted())
                fail(s, "interrupted");
            if (cw_mono_ms() >= s->deadline)
                fail(s, "the scenario ran past its %d ms deadline", sc->timeout_ms);
        }
        if (s->error[0] != '\0')
            progress(s, "error: %s", s->error);
        s->step = -1;
        if (!runner_interrupted())
            heal(s);
    }

    /* The checker runs whatever happened above: a failed scenario still
     * gets its witnesses. */
    struct chk_result res;
    memset(&res, 0, sizeof(res));
    cJSON *proc_events[SC_MAX_PROCS] = { 0 };
    cJSON *broker_events = NULL;
    int checked = 0;
    if (s->conn != NULL) {
        for (int i = 0; i < sc->nprocs; i++)
            proc_events[i] = evlog_read(s->procs[i].events_path, NULL);
        broker_events = evlog_read(s->broker.events_path, NULL);
        struct chk_input in;
        memset(&in, 0, sizeof(in));
        in.sc = sc;
        in.conn = s->conn;
        for (int i = 0; i < sc->nprocs; i++)
            in.proc_events[i] = proc_events[i];
        in.broker_events = broker_events;
        in.http = s->http;
        in.nhttp = s->nhttp;
        if (checker_run(&in, &res) < 0 && s->error[0] == '\0')
            fail(s, "%s", res.error);
        for (int i = 0; i < sc->nexpect; i++) {
            char detail[600];
            int ok = checker_expect(&in, &res, &sc->expect[i], detail, sizeof(detail));
            add_expect(s, sc->expect[i].check, ok, detail);
        }
        checked = 1;
    }
    if (s->metrics != NULL)
        metrics_stop(s->metrics);
    s->metrics = NULL;
    if (r->o->keep)
        print_keep(s);
    else
        teardown(s);
    reap_all(s);

    /* Faults: a scenario whose armed fault never fired did not reach the
     * window it is about, and proves nothing about it. */
    cJSON *fired = cJSON_CreateArray(), *not_hit = cJSON_CreateArray();
    const cJSON *pe[SC_MAX_PROCS];
    cJSON *empty = cJSON_CreateArray();
    for (int i = 0; i < sc->nprocs; i++)
        pe[i] = proc_events[i] ? proc_events[i] : empty;
    if (checked)
        fault_report(s, pe, fired, not_hit);
    if (checked && !sc->faults_optional && cJSON_GetArraySize(not_hit) > 0)
        fail_not_hit(s, not_hit);

    /* Verdict. */
    int pass = s->error[0] == '\0' && checked;
    int ninv_checked = 0;
    for (int i = 0; i < INV_COUNT && checked; i++) {
        ninv_checked++;
        if (!checker_inv_pass(&res, sc, i))
            pass = 0;
    }
    const cJSON *x;
    cJSON_ArrayForEach(x, s->expects) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
        if (cJSON_IsString(v) && strcmp(v->valuestring, "pass") != 0)
            pass = 0;
    }
    if (s->ev != NULL) {
        ev = rev_begin(s, "scenario_end");
        cJSON_AddStringToObject(ev, "verdict", pass ? "pass" : "fail");
        rev_emit(s, ev);
    }
    long nevents = write_timeline(s);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sc->name);
    cJSON_AddStringToObject(o, "title", sc->title);
    cJSON_AddStringToObject(o, "crash_window", sc->crash_window);
    if (sc->article_case > 0)
        cJSON_AddNumberToObject(o, "article_case", sc->article_case);
    else
        cJSON_AddNullToObject(o, "article_case");
    cJSON_AddStringToObject(o, "file", sc->path);
    if (r->o->repeat > 1)
        cJSON_AddNumberToObject(o, "repeat", rep);
    cJSON_AddStringToObject(o, "verdict", pass ? "pass" : "fail");
    cJSON_AddNumberToObject(o, "duration_ms", (double)(cw_mono_ms() - t0));
    char iso[40];
    us_to_iso(started_us, iso, sizeof(iso));
    cJSON_AddStringToObject(o, "started_at", iso);
    cJSON_AddStringToObject(o, "dir", s->label);
    cJSON_AddItemToObject(o, "faults_fired", fired);
    cJSON_AddItemToObject(o, "faults_not_hit", not_hit);
    cJSON_AddNumberToObject(o, "kills", s->kills);
    cJSON_AddNumberToObject(o, "pauses", s->pauses);
    cJSON_AddNumberToObject(o, "restarts", s->restarts);
    cJSON_AddNumberToObject(o, "events", (double)nevents);
    cJSON_AddNumberToObject(o, "http_requests", s->nhttp);
    cJSON_AddItemToObject(o, "counts", checker_counts_json(&res));
    cJSON_AddItemToObject(o, "classification", checker_class_json(&res));
    cJSON_AddItemToObject(o, "invariants", checked ? checker_invariants_json(&res, sc)
                                                   : cJSON_CreateArray());
    cJSON_AddItemToObject(o, "expect", s->expects);
    s->expects = NULL;
    if (s->error[0] != '\0')
        cJSON_AddStringToObject(o, "error", s->error);
    else
        cJSON_AddNullToObject(o, "error");

    /* Terminal summary. */
    printf("    %s: %s in %.1f s (%d invariants, %d faults fired, %d kills, %d pauses, "
           "%d restarts)\n", s->label, pass ? "PASS" : "FAIL",
           (double)(cw_mono_ms() - t0) / 1000.0, ninv_checked, cJSON_GetArraySize(fired),
           s->kills, s->pauses, s->restarts);
    if (!pass) {
        if (s->error[0])
            printf("      error: %s\n", s->error);
        for (int i = 0; i < INV_COUNT && checked; i++) {
            if (checker_inv_pass(&res, sc, i))
                continue;
            const cJSON *w = res.inv[i].witnesses;
            const char *first = cJSON_GetArraySize(w) > 0 ? cJSON_GetArrayItem(w, 0)->valuestring
                                : res.inv[i].checked == 0 ? "vacuous: nothing checked" : "";
            printf("      invariant %s failed (%ld violations)%s%s\n",
                   sc_invariant_name((enum sc_invariant)i), res.inv[i].violations,
                   first[0] ? ": " : "", first);
        }
        const cJSON *exps = cJSON_GetObjectItemCaseSensitive(o, "expect");
        cJSON_ArrayForEach(x, exps) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
            if (strcmp(v->valuestring, "pass") != 0)
                printf("      expectation %s failed: %s\n",
                       cJSON_GetObjectItemCaseSensitive(x, "check")->valuestring,
                       cJSON_GetObjectItemCaseSensitive(x, "detail")->valuestring);
        }
    }
    for (int i = 0; i < cJSON_GetArraySize(not_hit); i++) {
        const cJSON *nh = cJSON_GetArrayItem(not_hit, i);
        printf("      note: fault %s armed in %s was never hit\n",
               cJSON_GetObjectItemCaseSensitive(nh, "point")->valuestring,
               cJSON_GetObjectItemCaseSensitive(nh, "proc")->valuestring);
    }
    fflush(stdout);

    r->t_scen++;
    r->t_passed += pass;
    r->t_inv += ninv_checked;
    r->t_faults += cJSON_GetArraySize(fired);
    r->t_kills += s->kills;
    r->t_pauses += s->pauses;
    r->t_restarts += s->restarts;
    r->t_events += nevents;

    checker_free(&res);
    cJSON_Delete(empty);
    for (int i = 0; i < sc->nprocs; i++)
        cJSON_Delete(proc_events[i]);
    cJSON_Delete(broker_events);
    PQfinish(s->conn);
    if (!r->o->keep && s->dbname[0] != '\0')
        rdb_drop_db(&r->db, s->dbname, err, sizeof(err));
    for (int i = 0; i < s->nhttp; i++)
        free(s->http[i].body);
    free(s->http);
    free(s->conninfo);
    free(s->db_env);
    cJSON_Delete(s->expects);
    if (s->ev != NULL)
        fclose(s->ev);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return o;
}

/* ---- the run ------------------------------------------------------------ */

static int find_exe(const char *bin, const char *name, char *out, size_t outlen)
{
    static const char *const subs[] = { "src/", "sim/", "", NULL };
    for (int i = 0; subs[i] != NULL; i++) {
        fmt(out, outlen, "%s/%s%s", bin, subs[i], name);
        if (access(out, X_OK) == 0)
            return 0;
    }
    fmt(out, outlen, "%s/src/%s", bin, name);
    return -1;
}

static void git_commit(char *out, size_t outlen)
{
    char buf[256];
    char *argv[] = { (char *)"/usr/bin/git", (char *)"-C", (char *)runner_source_dir(),
                     (char *)"rev-parse", (char *)"HEAD", NULL };
    snprintf(out, outlen, "unknown");
    if (access(argv[0], X_OK) != 0)
        return;
    if (proc_run_capture(argv, NULL, 5000, buf, sizeof(buf)) == 0 && strlen(buf) >= 40) {
        buf[40] = '\0';
        snprintf(out, outlen, "%s", buf);
    }
}

static void write_result(struct runner *r, int64_t t0, int pass)
{
    cJSON *res = r->result;
    cJSON_ReplaceItemInObjectCaseSensitive(res, "duration_ms",
                                           cJSON_CreateNumber((double)(cw_mono_ms() - t0)));
    cJSON_ReplaceItemInObjectCaseSensitive(res, "verdict", cJSON_CreateString(pass ? "pass" : "fail"));
    cJSON *tot = cJSON_CreateObject();
    cJSON_AddNumberToObject(tot, "scenarios", (double)r->t_scen);
    cJSON_AddNumberToObject(tot, "passed", (double)r->t_passed);
    cJSON_AddNumberToObject(tot, "invariants_checked", (double)r->t_inv);
    cJSON_AddNumberToObject(tot, "faults_fired", (double)r->t_faults);
    cJSON_AddNumberToObject(tot, "kills", (double)r->t_kills);
    cJSON_AddNumberToObject(tot, "pauses", (double)r->t_pauses);
    cJSON_AddNumberToObject(tot, "restarts", (double)r->t_restarts);
    cJSON_AddNumberToObject(tot, "events", (double)r->t_events);
    cJSON_ReplaceItemInObjectCaseSensitive(res, "totals", tot);
    char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
    snprintf(path, sizeof(path), "%s/result.json", r->out);
    snprintf(tmp, sizeof(tmp), "%s/.result.json.tmp", r->out);
    char *text = cJSON_Print(res);
    /* Written whole then renamed: a reader never sees half a result. */
    if (text != NULL && write_file(tmp, text) == 0)
        rename(tmp, path);
    cJSON_free(text);
}

static void rm_tmpdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d)) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[PATH_MAX + 256];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int runner_run(const struct run_opts *o, cJSON **result_out)
{
    char err[1024];
    char **files = NULL;
    int nfiles = 0, owned_files = 0;
    int rc = 2;
    struct scenario *scs[256];
    int nsc = 0;
    char **points = runner_load_points();
    struct runner *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 2;
    r->o = o;
    if (result_out != NULL)
        *result_out = NULL;

    if (o->all) {
        nfiles = runner_all_scenarios(&files);
        owned_files = 1;
        if (nfiles <= 0) {
            fprintf(stderr, "crashwindow: no scenario files in %s/scenarios\n", runner_source_dir());
            goto out;
        }
    } else {
        files = (char **)o->files;
        nfiles = o->nfiles;
    }
    if (nfiles > 256) {
        fprintf(stderr, "crashwindow: more than 256 scenario files\n");
        goto out;
    }
    for (int i = 0; i < nfiles; i++) {
        scs[nsc] = scenario_load(files[i], (const char *const *)points, err, sizeof(err));
        if (scs[nsc] == NULL) {
            fprintf(stderr, "crashwindow: %s\n", err);
            goto out;
        }
        nsc++;
    }
    if (o->dry_run) {
        for (int i = 0; i < nsc; i++) {
            scenario_print(scs[i], stdout);
            printf("\n");
        }
        rc = 0;
        goto out;
    }

    /* Binaries and tools. */
    if (o->bin != NULL)
        snprintf(r->bin, sizeof(r->bin), "%s", o->bin);
    else if (runner_build_dir(r->bin, sizeof(r->bin)) < 0)
        snprintf(r->bin, sizeof(r->bin), ".");
    int need[3] = { 0 };
    for (int i = 0; i < nsc; i++)
        for (int j = 0; j < scs[i]->nprocs; j++)
            need[scs[i]->procs[j].kind] = 1;
    struct { char *path; const char *name; int needed; } exes[] = {
        { r->exe_api, "payments-api", need[SC_API] },
        { r->exe_relay, "outbox-relay", need[SC_RELAY] },
        { r->exe_consumer, "accounting-consumer", need[SC_CONSUMER] },
        { r->exe_outboxctl, "outboxctl", 1 },
        { r->exe_broker, "fakebroker", 1 },
    };
    for (size_t i = 0; i < sizeof(exes) / sizeof(exes[0]); i++) {
        if (find_exe(r->bin, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (o->bin_fallback != NULL &&
            find_exe(o->bin_fallback, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (exes[i].needed) {
            fprintf(stderr, "crashwindow: %s not found in %s (build it, or give --bin DIR)\n",
                    exes[i].name, r->bin);
            goto out;
        }
    }
    snprintf(r->pg_script, sizeof(r->pg_script), "%s/scripts/pg-cluster", runner_source_dir());

    /* Output directory. */
    if (o->out != NULL) {
        snprintf(r->out, sizeof(r->out), "%s", o->out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        snprintf(r->out, sizeof(r->out), "%s/reports/run-%s", runner_source_dir(), stamp);
    }
    if (mkdir_p(r->out) < 0) {
        fprintf(stderr, "crashwindow: cannot create %s: %s\n", r->out, strerror(errno));
        goto out;
    }
    snprintf(r->tmp, sizeof(r->tmp), "/tmp/cwrunXXXXXX");
    if (mkdtemp(r->tmp) == NULL) {
        fprintf(stderr, "crashwindow: mkdtemp: %s\n", strerror(errno));
        goto out;
    }
    fmt(r->fifo_prefix, sizeof(r->fifo_prefix), "%s/fiu", r->tmp);

    int64_t t0 = cw_mono_ms();
    char iso[40], commit[64], host[128] = "unknown";
    us_to_iso(cw_now_us(), iso, sizeof(iso));
    git_commit(commit, sizeof(commit));
    gethostname(host, sizeof(host) - 1);

    /* PostgreSQL. */
    rc = 1;
    printf("crashwindow run: %d scenario%s%s, output in %s\n", nsc, nsc == 1 ? "" : "s",
           o->repeat > 1 ? " (repeated)" : "", r->out);
    fflush(stdout);
    if (o->pg != NULL) {
        if (rdb_use(&r->db, o->pg, err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow: %s\n", err);
            rc = 2;
            goto out_tmp;
        }
    } else if (rdb_start_cluster(&r->db, r->pg_script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        goto out_tmp;
    }
    char tag[32];
    snprintf(tag, sizeof(tag), "%d_%lld", (int)getpid(), (long long)(cw_now_us() % 1000000));
    if (rdb_make_template(&r->db, r->exe_outboxctl, tag, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        rdb_finish(&r->db, r->pg_script, o->keep);
        goto out_tmp;
    }
    printf("postgres %s ready in %.1f s\n", r->db.server_version,
           (double)(cw_mono_ms() - t0) / 1000.0);

    r->result = cJSON_CreateObject();
    cJSON_AddStringToObject(r->result, "tool", "crashwindow");
    cJSON_AddStringToObject(r->result, "kind", "run");
    cJSON_AddNumberToObject(r->result, "version", 1);
    cJSON_AddStringToObject(r->result, "started_at", iso);
    cJSON_AddNumberToObject(r->result, "duration_ms", 0);
    cJSON_AddStringToObject(r->result, "commit", commit);
    cJSON *machine = cJSON_AddObjectToObject(r->result, "machine");
    cJSON_AddStringToObject(machine, "hostname", host);
    cJSON_AddNumberToObject(machine, "cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddStringToObject(machine, "postgres", r->db.server_version);
    cJSON_AddStringToObject(r->result, "bin", r->bin);
    if (o->mutant != NULL)
        cJSON_AddStringToObject(r->result, "mutant", o->mutant);
    else
        cJSON_AddNullToObject(r->result, "mutant");
    cJSON_AddStringToObject(r->result, "verdict", "fail");
    cJSON_AddObjectToObject(r->result, "totals");
    r->scenarios = cJSON_AddArrayToObject(r->result, "scenarios");

    int total = nsc * (o->repeat > 0 ? o->repeat : 1);
    int index = 0;
    for (int rep = 1; rep <= (o->repeat > 0 ? o->repeat : 1) && !runner_interrupted(); rep++) {
        for (int i = 0; i < nsc && !runner_interrupted(); i++) {
            cJSON *one = run_scenario(r, scs[i], rep, ++index, total);
            if (one != NULL)
                cJSON_AddItemToArray(r->scenarios, one);
            write_result(r, t0, r->t_passed == r->t_scen);
        }
    }
    int pass = r->t_scen == total && r->t_passed == r->t_scen && !runner_interrupted();
    write_result(r, t0, pass);
    if (o->keep) {
        printf("--keep: sockets and fault FIFOs stay in %s\n", r->tmp);
        if (r->db.cluster_dir[0] != '\0')
            printf("--keep: the cluster stays up; stop it with: %s stop %s\n", r->pg_script,
                   r->db.cluster_dir);
    }
    rdb_finish(&r->db, r->pg_script, o->keep);
    printf("crashwindow run: %s: %ld/%ld scenarios passed in %.1f s; %ld invariants checked, "
           "%ld faults fired, %ld kills, %ld pauses, %ld restarts, %ld events\n",
           pass ? "PASS" : "FAIL", r->t_passed, r->t_scen, (double)(cw_mono_ms() - t0) / 1000.0,
           r->t_inv, r->t_faults, r->t_kills, r->t_pauses, r->t_restarts, r->t_events);
    printf("result: %s/result.json\n", r->out);
    rc = pass ? 0 : 1;
    if (o->report != NULL) {
        char rerr[512];
        if (report_write(r->out, o->report, rerr, sizeof(rerr)) < 0) {
            fprintf(stderr, "crashwindow run: could not write the report: %s\n", rerr);
            rc = 1;
        } else {
            printf("report: %s\n", o->report);
        }
    }
    fflush(stdout);
    if (result_out != NULL) {
        *result_out = r->result;
        r->result = NULL;
    }
out_tmp:
    if (!o->keep)
        rm_tmpdir(r->tmp);
out:
    for (int i = 0; i < nsc; i++)
        scenario_free(scs[i]);
    if (owned_files) {
        for (int i = 0; i < nfiles; i++)
            free(files[i]);
        free(files);
    }
    runner_free_points(points);
    cJSON_Delete(r->result);
    free(r);
    return rc;
}

static void run_usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow run [SCENARIO.json...|--all] [--pg CONNINFO] [--out DIR]\n"
        "                       [--keep] [--dry-run] [--repeat N] [--bin DIR]\n"
        "                       [--report FILE.html]\n"
        "  --all        every scenario in scenarios/\n"
        "  --pg         use this PostgreSQL server instead of a throwaway cluster\n"
        "  --out        run directory (default reports/run-<timestamp>)\n"
        "  --keep       leave the cluster, broker and processes running; print how to poke them\n"
        "  --dry-run    print what each scenario will do, do nothing\n"
        "  --repeat N   run the whole list N times\n"
        "  --bin DIR    where the binaries are (default: this build tree)\n"
        "  --brief      one line per scenario, no step lines\n"
        "  --report     write the self-contained HTML report of the run to FILE.html\n"
        "exit status: 0 every invariant held, 1 one did not, 2 bad usage or scenario file\n");
}

int runner_main(int argc, char **argv)
{
    struct run_opts o;
    memset(&o, 0, sizeof(o));
    o.repeat = 1;
    const char **files = calloc((size_t)argc + 1, sizeof(char *));
    if (files == NULL)
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (strcmp(a, "--all") == 0) {
            o.all = 1;
        } else if (strcmp(a, "--keep") == 0) {
            o.keep = 1;
        } else if (strcmp(a, "--dry-run") == 0) {
            o.dry_run = 1;
        } else if (strcmp(a, "--brief") == 0) {
            o.brief = 1;
        } else if (strcmp(a, "--pg") == 0 && has_val) {
            o.pg = argv[++i];
        } else if (strcmp(a, "--out") == 0 && has_val) {
            o.out = argv[++i];
        } else if (strcmp(a, "--bin") == 0 && has_val) {
            o.bin = argv[++i];
        } else if (strcmp(a, "--report") == 0 && has_val) {
            o.report = argv[++i];
        } else if (strcmp(a, "--repeat") == 0 && has_val) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end != '\0' || n < 1 || n > 10000) {
                fprintf(stderr, "crashwindow run: --repeat takes a number from 1 to 10000\n");
                free(files);
                return 2;
            }
            o.repeat = (int)n;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            run_usage(stdout);
            free(files);
            return 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "crashwindow run: unknown option or missing value: '%s'\n", a);
            run_usage(stderr);
            free(files);
            return 2;
        } else {
            files[o.nfiles++] = a;
        }
    }
    if (o.all == (o.nfiles > 0)) {
        fprintf(stderr, "crashwindow run: give scenario files or --all (not both)\n");
        run_usage(stderr);
        free(files);
        return 2;
    }
    o.files = files;
    runner_install_signals();
    int rc = runner_run(&o, NULL);
    free(files);
    return rc;
}
