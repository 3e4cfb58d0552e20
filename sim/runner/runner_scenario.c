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
 * This file is the orchestration: a run (scenarios, binaries, PostgreSQL,
 * result.json) and the phases of each scenario (start processes, drive
 * steps, heal, check, write results), plus the process and event helpers
 * every phase uses (runner_internal.h).  What each step verb does lives in
 * runner_steps.c, the heal phase in runner_heal.c.
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
 * Sockets and libfiu FIFOs live in a short per-run directory under /tmp,
 * made by mkdtemp (mode 0700: libfiu obeys whoever can write its FIFOs)
 * (Unix socket paths are limited to 108 bytes; FIFO prefixes must be
 * hyphen-free because fiu-ls splits on '-'). */
#include "runner.h"
#include "runner_internal.h"
#include "report.h"
#include "brokerctl.h"
#include "checker.h"
#include "fstree.h"
#include "cwlog.h"
#include "evlog.h"
#include "history.h"
#include "httpc.h"
#include "pgx.h"
#include "procs.h"
#include "runner_db.h"
#include "runner_metrics.h"
#include "rundir.h"
#include "scenario.h"
#include "shard.h"

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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CW_SOURCE_DIR
#define CW_SOURCE_DIR "."
#endif

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

/* ---- runner events and progress ----------------------------------------- */

cJSON *runner_rev_begin(struct sctx *s, const char *event)
{
    cJSON *ev = cJSON_CreateObject();
    cwlog_add_int64(ev, "ts_us", cw_now_us());
    cJSON_AddStringToObject(ev, "proc", "runner");
    cJSON_AddNumberToObject(ev, "pid", (double)getpid());
    cJSON_AddStringToObject(ev, "event", event);
    if (s->step >= 0)
        cJSON_AddNumberToObject(ev, "step", s->step + 1);
    return ev;
}

void runner_rev_emit(struct sctx *s, cJSON *ev)
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

void runner_rev_proc(struct sctx *s, const char *event, const char *proc, int pid,
                     const char *key, const char *value)
{
    cJSON *ev = runner_rev_begin(s, event);
    cJSON_AddStringToObject(ev, "target", proc);
    if (pid > 0)
        cJSON_AddNumberToObject(ev, "target_pid", pid);
    if (key != NULL)
        cJSON_AddStringToObject(ev, key, value ? value : "");
    runner_rev_emit(s, ev);
}

void runner_progress(struct sctx *s, const char *format, ...)
{
    if (s->run->o->brief)
        return;
    va_list ap;
    va_start(ap, format);
    printf("    ");
    vprintf(format, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

int runner_fail(struct sctx *s, const char *format, ...)
{
    if (s->error[0] != '\0')
        return -1;
    char msg[900];
    va_list ap;
    va_start(ap, format);
    vsnprintf(msg, sizeof(msg), format, ap);
    va_end(ap);
    if (s->step >= 0)
        snprintf(s->error, sizeof(s->error), "steps[%d]: %s", s->step, msg);
    else
        snprintf(s->error, sizeof(s->error), "%s", msg);
    cJSON *ev = runner_rev_begin(s, "error");
    cJSON_AddStringToObject(ev, "error", s->error);
    runner_rev_emit(s, ev);
    return -1;
}

/* An expectation result ("expect" array of result.json). */
void runner_add_expect(struct sctx *s, const char *check, int ok, const char *detail)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "check", check);
    cJSON_AddStringToObject(o, "verdict", ok ? "pass" : "fail");
    cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddItemToArray(s->expects, o);
    if (!ok)
        runner_progress(s, "  expectation failed: %s: %s", check, detail);
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
void runner_reap_all(struct sctx *s)
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
        runner_rev_proc(s, "exit", p->name, p->pid, "how", how);
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

/* The API's bound port: from its "listening" event (its "port"), falling
 * back to "127.0.0.1:PORT" in its output since start_off. */
static int api_port(struct sctx *s, int idx, long start_off)
{
    const struct proc *p = &s->procs[idx];
    cJSON *evs = evlog_read(p->events_path, NULL);
    int port = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        double pid = 0, v = 0;
        ev_num(ev, "pid", &pid);
        if ((int)pid != p->pid || strcmp(ev_name(ev), "listening") != 0)
            continue;
        if (ev_num(ev, "port", &v) && v > 0 && v < 65536) {
            port = (int)v;
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
int runner_start_proc(struct sctx *s, int idx, const char *faults)
{
    struct runner *r = s->run;
    const struct sc_proc *sp = &s->sc->procs[idx];
    struct proc *p = &s->procs[idx];
    if (proc_poll(p))
        return runner_fail(s, "%s is already running (pid %d)", p->name, (int)p->pid);
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
        argv[n++] = (char *)runner_broker_addr(s, idx);
        break;
    case SC_RELAY:
        argv[n++] = r->exe_relay;
        argv[n++] = (char *)"--broker";
        argv[n++] = (char *)runner_broker_addr(s, idx);
        if (!has_name) {
            argv[n++] = (char *)"--name";
            argv[n++] = p->name;
        }
        break;
    case SC_CONSUMER:
        argv[n++] = r->exe_consumer;
        argv[n++] = (char *)"--broker";
        argv[n++] = (char *)runner_broker_addr(s, idx);
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
    /* libpq takes application_name from PGAPPNAME: every session of the
     * process carries its scenario name, which "db terminate" aims at. */
    char appname[SC_NAME_MAX + 16];
    fmt(appname, sizeof(appname), "PGAPPNAME=%s", p->name);
    const char *env[8] = { runner_db_env(s, idx), appname, NULL };
    char deadline_var[48];
    int nenv = 2;
    if (sp->db_deadline_ms > 0) {
        fmt(deadline_var, sizeof(deadline_var), "CW_DB_DEADLINE_MS=%d", sp->db_deadline_ms);
        env[nenv++] = deadline_var;
    }
    char clock[4][160];
    int nclock = runner_clock_env(s, idx, clock, env + nenv, 4);
    if (nclock < 0)
        return runner_fail(s, "%s has a \"clock\", but libfaketime is not installed "
                           "(Debian package libfaketime; scripts/setup installs it)", p->name);
    nenv += nclock;
    env[nenv] = NULL;
    if (proc_spawn(p, argv, faults, env, err, sizeof(err)) < 0)
        return runner_fail(s, "%s", err);
    if (restart)
        s->restarts++;
    s->port[idx] = 0;
    if (faults != NULL)
        arm_env_faults(s, idx, p->pid, faults);
    cJSON *ev = runner_rev_begin(s, restart ? "restart" : "start");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "kind", sc_kind_name(sp->kind));
    if (faults != NULL)
        cJSON_AddStringToObject(ev, "faults", faults);
    runner_rev_emit(s, ev);

    char pidtext[16];
    snprintf(pidtext, sizeof(pidtext), "%d", (int)p->pid);
    /* A process whose wall clock runs slow also waits longer for what it
     * times on it (libpq's connect_timeout among them). */
    int start_ms = sp->clock_rate < 1.0 ? (int)(10000 / sp->clock_rate) : 10000;
    int64_t deadline = cw_mono_ms() + start_ms;
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
            runner_reap_all(s);
            return runner_fail(s, "%s exited while starting (%s): %s", p->name, how,
                               tail[0] ? tail : "(no output)");
        }
        if (cw_mono_ms() >= deadline || runner_interrupted()) {
            if (sp->kind == SC_API)
                return runner_fail(s, "%s did not report its listening port within %d s",
                                   p->name, start_ms / 1000);
            break; /* built without fault points: no FIFO to wait for */
        }
        nap(5);
    }
    return 0;
}

static int start_broker_argv(struct sctx *s, char **argv);

int runner_start_broker(struct sctx *s)
{
    struct runner *r = s->run;
    struct proc *b = &s->broker;
    char vis[32];
    char *argv[12];
    int n = 0;
    argv[n++] = r->exe_broker;
    argv[n++] = (char *)"--socket";
    argv[n++] = s->broker_sock;
    argv[n++] = (char *)"--events";
    argv[n++] = b->events_path;
    char store[PATH_MAX + 32];
    if (runner_rabbit(r)) {
        char *rargv[8 + 2 * SC_MAX_PROCS + 1];
        runner_rabbit_bridge_argv(s, rargv, (int)(sizeof(rargv) / sizeof(rargv[0])));
        int first = s->broker.starts == 0;
        if (start_broker_argv(s, rargv) < 0)
            return -1;
        return first ? runner_rabbit_settle(s) : 0;
    }
    if (s->sc->broker_durable) {
        /* A file, not :memory:: what the broker confirmed survives its
         * crash (SQLite in WAL mode, the commit in the OS before the
         * confirm). */
        fmt(store, sizeof(store), "%s/broker.sqlite", s->dir);
        argv[n++] = (char *)"--db";
        argv[n++] = store;
    }
    if (s->sc->visibility_timeout_ms > 0) {
        snprintf(vis, sizeof(vis), "%d", s->sc->visibility_timeout_ms);
        argv[n++] = (char *)"--visibility-timeout-ms";
        argv[n++] = vis;
    }
    argv[n] = NULL;
    return start_broker_argv(s, argv);
}

/* Spawns the broker (the fake broker, or rabbit-bridge in front of a
 * RabbitMQ node) and waits until it answers on its socket. */
static int start_broker_argv(struct sctx *s, char **argv)
{
    struct proc *b = &s->broker;
    unlink(s->broker_sock);
    char err[512];
    int restart = b->starts > 0;
    if (proc_spawn(b, argv, NULL, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "%s", err);
    if (restart)
        s->restarts++;
    runner_rev_proc(s, restart ? "restart" : "start", "broker", b->pid, "kind", "broker");
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
            return runner_fail(s, "the broker exited while starting (%s): %s", how, tail);
        }
        if (cw_mono_ms() >= deadline)
            return runner_fail(s, "the broker did not answer on %s within 10 s (%s)",
                               s->broker_sock, err);
        nap(5);
    }
}

/* ---- fault control through libfiu's remote control ---------------------- */

/* Runs fiu-ctrl -c command against p.  A stopped process cannot answer
 * (fiu-ctrl would block), so the caller must not ask one. */
int runner_fiu_ctrl(struct proc *p, const char *command, int timeout_ms, char *err,
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

/* ---- database helpers --------------------------------------------------- */

/* The first column of the first row as a number; -1 with an error set. */
int runner_connect(struct sctx *s, char *err, size_t errlen)
{
    PQfinish(s->conn);
    s->conn = pgx_connect(s->conninfo, err, errlen);
    if (s->conn == NULL)
        return -1;
    /* The server's notices ("terminating connection due to immediate
     * shutdown" when a "db" step crashes it) are the scenario's doing, not
     * news for the terminal. */
    PQsetNoticeProcessor(s->conn, rdb_quiet_notices, NULL);
    return 0;
}

long long runner_sql_value(struct sctx *s, const char *sql, int n, const char *const *params,
                           char *err, size_t errlen)
{
    if ((s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK) &&
        runner_connect(s, err, errlen) < 0)
        return -1;
    char sqlstate[6] = "";
    PGresult *r = pgx_exec(s->conn, sql, n, params, sqlstate, err, errlen);
    if (r == NULL) {
        /* A server that went away (a "db" step): drop the connection, so
         * that callers see it gone and the next call connects again. */
        if (sqlstate[0] == '\0' || pgx_conn_lost(s->conn, sqlstate)) {
            PQfinish(s->conn);
            s->conn = NULL;
        }
        return -1;
    }
    long long v = 0;
    if (PQntuples(r) > 0 && PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* ---- teardown and outputs ----------------------------------------------- */

static void teardown(struct sctx *s)
{
    struct proc *all[SC_MAX_PROCS + 1];
    int n = 0;
    runner_reap_all(s);
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
        runner_rev_proc(s, "kill", all[i]->name, all[i]->pid, "why", "did not stop on SIGTERM");
        proc_kill(all[i]);
    }
    unlink(s->broker_sock);
    runner_stop_netproxy(s);
}

/* A parsed line holds its numbers as doubles, and cJSON would print some
 * microsecond values in exponent form; the timeline keeps the digits the
 * process wrote.  Done last, just before printing: a raw item is no longer
 * a number to the readers of the event. */
static void us_fields_as_integers(cJSON *ev)
{
    cJSON *it = ev->child;
    while (it != NULL) {
        cJSON *next = it->next;
        size_t n = it->string ? strlen(it->string) : 0;
        if (cJSON_IsNumber(it) && n > 3 && strcmp(it->string + n - 3, "_us") == 0 &&
            it->valuedouble >= -9e18 && it->valuedouble <= 9e18) {
            char text[24];
            snprintf(text, sizeof(text), "%lld", (long long)it->valuedouble);
            cJSON *raw = cJSON_CreateRaw(text);
            if (raw != NULL)
                cJSON_ReplaceItemInObjectCaseSensitive(ev, it->string, raw);
        }
        it = next;
    }
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
        us_fields_as_integers(items[i].ev);
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
            const char *pt = ev_str(ev, "point");
            const char *ac = ev_str(ev, "action");
            cJSON_AddStringToObject(o, "point", pt ? pt : "");
            cJSON_AddStringToObject(o, "proc", s->procs[i].name);
            cJSON_AddStringToObject(o, "action", ac ? ac : "");
            cwlog_add_int64(o, "ts_us", (int64_t)ev_ts(ev));
            cJSON_AddItemToArray(fired, o);
        }
    }
    for (int i = 0; i < s->narmed; i++) {
        const struct armed *a = &s->armed[i];
        int hit = 0;
        const cJSON *ev;
        cJSON_ArrayForEach(ev, proc_events[a->proc]) {
            double pid = 0;
            ev_num(ev, "pid", &pid);
            const char *pt = ev_str(ev, "point");
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
    runner_fail(s, "armed fault%s never hit: %s: the run never reached the window it is meant "
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
            printf("      curl -s -X POST -H 'X-Client-Id: me' -H 'Idempotency-Key: try-1' "
                   "-H 'Content-Type: application/json' "
                   "-d '{\"amount\":\"12.50\",\"currency\":\"EUR\"}' "
                   "http://127.0.0.1:%d/payments\n", s->port[i]);
    }
    printf("      broker socket: %s (pid %d)\n", s->broker_sock, (int)s->broker.pid);
    runner_net_print_keep(s);
    printf("      stop it all: kill");
    for (int i = 0; i < s->sc->nprocs; i++)
        if (proc_poll(&s->procs[i]))
            printf(" %d", (int)s->procs[i].pid);
    printf(" %d", (int)s->broker.pid);
    if (s->netproxy.pid > 0 && proc_poll(&s->netproxy))
        printf(" %d", (int)s->netproxy.pid);
    printf("\n");
}

/* ---- one scenario ------------------------------------------------------- */

/* What the checks of a scenario found, carried from the checker to the
 * verdict, result.json, the terminal summary and the run's totals. */
struct outcome {
    struct chk_result res;
    cJSON *proc_events[SC_MAX_PROCS];   /* each process's events; NULL unless checked */
    cJSON *broker_events;
    int checked;                        /* the checker ran */
    cJSON *fired, *not_hit;             /* faults_fired, faults_not_hit (result.json owns) */
    int pass;
    int ninv_checked;
    long nevents;                       /* lines of timeline.jsonl */
    cJSON *recovery;                    /* runner_recovery_json (result.json owns) */
    int hazard_caught;                  /* every hazard invariant failed */
};

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    fputc('\n', f);
    return fclose(f);
}

/* A context for repetition rep of sc: its clock started, its directory and
 * broker socket named, its "[index/total]" line printed.  NULL when out of
 * memory. */
static struct sctx *sctx_new(struct runner *r, const struct scenario *sc, int rep, int index,
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
    s->t0 = cw_mono_ms();
    s->started_us = cw_now_us();
    s->deadline = s->t0 + sc->timeout_ms;
    if (r->o->repeat > 1)
        snprintf(s->label, sizeof(s->label), "%s.r%d", sc->name, rep);
    else
        snprintf(s->label, sizeof(s->label), "%s", sc->name);
    fmt(s->dir, sizeof(s->dir), "%s/%s", r->out, s->label);
    r->nsc++;
    fmt(s->broker_sock, sizeof(s->broker_sock), "%s/b%d.sock", r->tmp, r->nsc);
    fmt(s->broker_addr, sizeof(s->broker_addr), "%s", s->broker_sock);
    if (runner_rabbit(r))
        runner_rabbit_address(s);
    printf("[%d/%d] %s: %s\n", index, total, s->label, sc->title);
    fflush(stdout);
    return s;
}

/* The scenario's directory: scenario.json as run, the runner's events file
 * (open for the whole scenario), every process's file names; then the
 * scenario_start event. */
static void scenario_files(struct sctx *s)
{
    struct runner *r = s->run;
    const struct scenario *sc = s->sc;
    /* A fresh directory: the event logs are appended to, so the files of an
     * earlier run into the same --out would be read as this run's (a
     * passing scenario would fail on another run's publishes). */
    fstree_remove(s->dir);
    fstree_mkdir_p(s->dir);
    char path[PATH_MAX + 64];
    char *text = cJSON_Print(sc->root);
    snprintf(path, sizeof(path), "%s/scenario.json", s->dir);
    if (text != NULL)
        write_file(path, text);
    cJSON_free(text);
    fmt(s->run_events_path, sizeof(s->run_events_path), "%s/runner.events.jsonl", s->dir);
    s->ev = fopen(s->run_events_path, "a");

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

    cJSON *ev = runner_rev_begin(s, "scenario_start");
    cJSON_AddStringToObject(ev, "scenario", sc->name);
    cJSON_AddStringToObject(ev, "crash_window", sc->crash_window);
    runner_rev_emit(s, ev);
}

/* The scenario's own database, cloned from the run's template, and the
 * runner's connection to it.  On failure the error is recorded. */
static void open_database(struct sctx *s)
{
    char err[1024];
    if (s->sc->standby) {
        /* Always a pair of its own, even with --pg: a failover must not
         * leave a dead primary behind for the scenarios that follow. */
        runner_open_standby_db(s);
        return;
    }
    const char *dir = s->run->db.cluster_dir[0] != '\0' ? s->run->db.cluster_dir
                      : s->run->o->pg_dir != NULL ? s->run->o->pg_dir : "";
    fmt(s->pg_dir, sizeof(s->pg_dir), "%s", dir);
    s->conninfo = rdb_create_db(&s->run->db, s->label, s->dbname, err, sizeof(err));
    if (s->conninfo != NULL)
        s->db_env = conninfo_env(s->conninfo);
    if (s->conninfo == NULL || s->db_env == NULL) {
        runner_fail(s, "database: %s", s->conninfo == NULL ? err : "out of memory");
    } else {
        if (runner_connect(s, err, sizeof(err)) < 0)
            runner_fail(s, "database: %s", err);
    }
}

/* With the broker up: the scenario's broker switches, the metrics sampler
 * and every autostart process, up to the first error. */
static void start_processes(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    char err[1024];
    if (sc->broker_control != NULL) {
        cJSON *sw = cJSON_Duplicate(sc->broker_control, 1);
        /* Start-up settings, not switches: the broker's command line has them. */
        cJSON_DeleteItemFromObjectCaseSensitive(sw, "visibility_timeout_ms");
        cJSON_DeleteItemFromObjectCaseSensitive(sw, "durable");
        if (brokerctl_control(s->broker_sock, sw, 3000, err, sizeof(err)) < 0)
            runner_fail(s, "broker switches: %s", err);
        cJSON_Delete(sw);
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", s->dir);
    s->metrics = metrics_start(s->conninfo, path, 250);
    for (int i = 0; i < sc->nprocs && s->error[0] == '\0'; i++) {
        if (!sc->procs[i].autostart)
            continue;
        if (runner_start_proc(s, i, sc->procs[i].faults) == 0)
            runner_progress(s, "started %s (pid %d%s%s)", sc->procs[i].name,
                            (int)s->procs[i].pid,
                            sc->procs[i].faults ? ", CW_FAULTS=" : "",
                            sc->procs[i].faults ? sc->procs[i].faults : "");
    }
}

/* The steps in order, up to the first error, an interruption or the
 * scenario's deadline; a step's error ends the steps, not the scenario. */
static void drive_steps(struct sctx *s)
{
    const struct scenario *sc = s->sc;
    for (int i = 0; i < sc->nsteps && s->error[0] == '\0'; i++) {
        char d[512];
        s->step = i;
        scenario_step_describe(sc, &sc->steps[i], d, sizeof(d));
        runner_progress(s, "step %d/%d %s", i + 1, sc->nsteps, d);
        cJSON *ev = runner_rev_begin(s, "step");
        cJSON_AddStringToObject(ev, "do", sc_verb_name(sc->steps[i].verb));
        cJSON_AddStringToObject(ev, "what", d);
        runner_rev_emit(s, ev);
        runner_run_step(s, &sc->steps[i]);
        runner_reap_all(s);
        if (runner_interrupted())
            runner_fail(s, "interrupted");
        if (cw_mono_ms() >= s->deadline)
            runner_fail(s, "the scenario ran past its %d ms deadline", sc->timeout_ms);
    }
    if (s->error[0] != '\0')
        runner_progress(s, "error: %s", s->error);
    s->step = -1;
}

/* The invariant checker and the scenario's expectations, over the database
 * and every events file; nothing to check without a database connection
 * (oc->checked stays 0). */
static void check_scenario(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    char err[512];
    /* After a database fault the runner's connection may be gone (a crash,
     * a failover): one probe, and a new connection when it fails. */
    if (s->conninfo == NULL)
        return; /* the database was never created */
    if (runner_sql_value(s, "SELECT 1", 0, NULL, err, sizeof(err)) < 0 &&
        runner_sql_value(s, "SELECT 1", 0, NULL, err, sizeof(err)) < 0)
        runner_fail(s, "check: database: %s", err);
    if (s->conn == NULL)
        return;
    /* The sampler's last line is the state the checker sees, and its file
     * is complete before it is read as evidence. */
    if (s->metrics != NULL)
        metrics_stop(s->metrics);
    s->metrics = NULL;
    /* The history is the input: saved first, then read back and checked
     * exactly as `crashwindow check` checks a stored run. */
    if (history_save(s->conn, s->dir, s->http, s->nhttp, err, sizeof(err)) < 0) {
        runner_fail(s, "check: saving the history: %s", err);
        return;
    }
    struct history h;
    if (history_read(sc, s->dir, &h, err, sizeof(err)) < 0) {
        runner_fail(s, "check: %s", err);
        return;
    }
    cJSON *expects = cJSON_CreateArray();
    if (history_check(sc, &h, s->conn, &oc->res, expects) < 0 && s->error[0] == '\0')
        runner_fail(s, "%s", oc->res.error);
    const cJSON *x;
    cJSON_ArrayForEach(x, expects)
        runner_add_expect(s, cJSON_GetObjectItemCaseSensitive(x, "check")->valuestring,
                          strcmp(cJSON_GetObjectItemCaseSensitive(x, "verdict")->valuestring,
                                 "pass") == 0,
                          cJSON_GetObjectItemCaseSensitive(x, "detail")->valuestring);
    cJSON_Delete(expects);
    for (int i = 0; i < sc->nprocs; i++) {
        oc->proc_events[i] = h.proc_events[i];
        h.proc_events[i] = NULL;
    }
    oc->broker_events = h.broker_events;
    h.broker_events = NULL;
    history_free(&h);
    oc->checked = 1;
    oc->recovery = runner_recovery_json(s, (const cJSON *const *)oc->proc_events);
}

/* Stops the metrics sampler and every process, or with --keep leaves them
 * running and prints how to reach them. */
static void stop_scenario(struct sctx *s)
{
    if (s->metrics != NULL)
        metrics_stop(s->metrics);
    s->metrics = NULL;
    if (s->run->o->keep)
        print_keep(s);
    else
        teardown(s);
    runner_reap_all(s);
}

/* faults_fired and faults_not_hit.  A scenario whose armed fault never
 * fired did not reach the window it is about, and proves nothing about it:
 * that fails it, unless it says faults_optional. */
static void collect_faults(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    oc->fired = cJSON_CreateArray();
    oc->not_hit = cJSON_CreateArray();
    const cJSON *pe[SC_MAX_PROCS];
    cJSON *empty = cJSON_CreateArray();
    for (int i = 0; i < sc->nprocs; i++)
        pe[i] = oc->proc_events[i] ? oc->proc_events[i] : empty;
    if (oc->checked)
        fault_report(s, pe, oc->fired, oc->not_hit);
    cJSON_Delete(empty);
    if (oc->checked && !sc->faults_optional && cJSON_GetArraySize(oc->not_hit) > 0)
        fail_not_hit(s, oc->not_hit);
}

static int is_hazard(const struct scenario *sc, int inv)
{
    for (int i = 0; i < sc->nhazard; i++)
        if ((int)sc->hazard[i] == inv)
            return 1;
    return 0;
}

/* The scenario's "hazard" object: what the setting risks, whether the
 * checker caught it, and by which invariants with their first witness. */
static cJSON *hazard_json(const struct sctx *s, const struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "why", sc->hazard_why);
    cJSON_AddBoolToObject(h, "caught", oc->hazard_caught);
    cJSON *by = cJSON_AddArrayToObject(h, "caught_by");
    for (int i = 0; i < sc->nhazard; i++) {
        const struct chk_inv *inv = &oc->res.inv[sc->hazard[i]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "invariant", sc_invariant_name(sc->hazard[i]));
        cJSON_AddNumberToObject(o, "violations", oc->checked ? (double)inv->violations : 0);
        const cJSON *w = oc->checked ? inv->witnesses : NULL;
        if (cJSON_GetArraySize(w) > 0)
            cJSON_AddStringToObject(o, "witness", cJSON_GetArrayItem(w, 0)->valuestring);
        cJSON_AddItemToArray(by, o);
    }
    return h;
}

/* The verdict: checked, no error, every invariant and every expectation
 * held; in a hazard scenario, every hazard invariant caught its loss and
 * every other one held.  Logged as scenario_end. */
static void decide_verdict(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    oc->pass = s->error[0] == '\0' && oc->checked;
    oc->ninv_checked = 0;
    oc->hazard_caught = sc->nhazard > 0 && oc->checked;
    for (int i = 0; i < INV_COUNT && oc->checked; i++) {
        oc->ninv_checked++;
        if (is_hazard(sc, i)) {
            /* The loss this setting is known for must be caught: the
             * invariant fails on violations, never on having checked
             * nothing. */
            if (oc->res.inv[i].violations == 0)
                oc->hazard_caught = 0;
        } else if (!checker_inv_pass(&oc->res, sc, i)) {
            oc->pass = 0;
        }
    }
    if (sc->nhazard > 0 && !oc->hazard_caught)
        oc->pass = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, s->expects) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
        if (cJSON_IsString(v) && strcmp(v->valuestring, "pass") != 0)
            oc->pass = 0;
    }
    if (s->ev != NULL) {
        cJSON *ev = runner_rev_begin(s, "scenario_end");
        cJSON_AddStringToObject(ev, "verdict", oc->pass ? "pass" : "fail");
        runner_rev_emit(s, ev);
    }
}

/* The scenario's entry in result.json.  It takes over fired, not_hit and
 * the expectations. */
static cJSON *scenario_json(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sc->name);
    cJSON_AddStringToObject(o, "title", sc->title);
    cJSON_AddStringToObject(o, "crash_window", sc->crash_window);
    if (sc->article_case > 0)
        cJSON_AddNumberToObject(o, "article_case", sc->article_case);
    else
        cJSON_AddNullToObject(o, "article_case");
    cJSON_AddStringToObject(o, "file", sc->path);
    if (s->run->o->repeat > 1)
        cJSON_AddNumberToObject(o, "repeat", s->rep);
    cJSON_AddStringToObject(o, "verdict", oc->pass ? "pass" : "fail");
    cJSON_AddNumberToObject(o, "duration_ms", (double)(cw_mono_ms() - s->t0));
    char iso[40];
    us_to_iso(s->started_us, iso, sizeof(iso));
    cJSON_AddStringToObject(o, "started_at", iso);
    cJSON_AddStringToObject(o, "dir", s->label);
    cJSON_AddItemToObject(o, "faults_fired", oc->fired);
    cJSON_AddItemToObject(o, "faults_not_hit", oc->not_hit);
    cJSON_AddNumberToObject(o, "kills", s->kills);
    cJSON_AddNumberToObject(o, "pauses", s->pauses);
    cJSON_AddNumberToObject(o, "restarts", s->restarts);
    cJSON_AddNumberToObject(o, "events", (double)oc->nevents);
    cJSON_AddNumberToObject(o, "http_requests", s->nhttp);
    cJSON_AddItemToObject(o, "counts", checker_counts_json(&oc->res));
    cJSON_AddItemToObject(o, "classification", checker_class_json(&oc->res));
    cJSON_AddItemToObject(o, "invariants", oc->checked ? checker_invariants_json(&oc->res, sc)
                                                       : cJSON_CreateArray());
    cJSON_AddItemToObject(o, "expect", s->expects);
    s->expects = NULL;
    if (sc->nhazard > 0)
        cJSON_AddItemToObject(o, "hazard", hazard_json(s, oc));
    cJSON_AddItemToObject(o, "recovery", oc->recovery ? oc->recovery : cJSON_CreateArray());
    oc->recovery = NULL;
    if (s->error[0] != '\0')
        cJSON_AddStringToObject(o, "error", s->error);
    else
        cJSON_AddNullToObject(o, "error");
    return o;
}

/* For a hazard scenario, whether the checker caught the loss and how; for
 * every database or broker fault, how long until a consumer applied again. */
static void print_hazard_and_recovery(const struct sctx *s, const struct outcome *oc,
                                      const cJSON *o)
{
    const struct scenario *sc = s->sc;
    for (int i = 0; i < sc->nhazard && oc->checked; i++) {
        const struct chk_inv *inv = &oc->res.inv[sc->hazard[i]];
        const cJSON *w = inv->witnesses;
        printf("      hazard %s by %s (%ld violations)%s%s\n",
               inv->violations > 0 ? "caught" : "NOT caught", sc_invariant_name(sc->hazard[i]),
               inv->violations, cJSON_GetArraySize(w) > 0 ? ": " : "",
               cJSON_GetArraySize(w) > 0 ? cJSON_GetArrayItem(w, 0)->valuestring : "");
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(o, "recovery")) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "recovery_ms");
        const char *t = cJSON_GetObjectItemCaseSensitive(r, "target")->valuestring;
        const char *a = cJSON_GetObjectItemCaseSensitive(r, "action")->valuestring;
        if (cJSON_IsNumber(ms))
            printf("      recovery after %s %s: %.0f ms to the next applied event\n", t, a,
                   ms->valuedouble);
        else
            printf("      recovery after %s %s: no event applied afterwards\n", t, a);
    }
}

/* The invariants that examined nothing, listed or not: a listed one fails
 * (and is shown with the failures), an unlisted one is only named here, so
 * that a reader never takes "pass" for "checked". */
static void print_vacuous(const struct sctx *s, const struct outcome *oc)
{
    char names[512] = "";
    size_t n = 0;
    for (int i = 0; i < INV_COUNT && oc->checked; i++) {
        if (!checker_inv_vacuous(&oc->res, i) || is_hazard(s->sc, i))
            continue;
        int w = snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "",
                         sc_invariant_name((enum sc_invariant)i));
        if (w > 0 && (size_t)w < sizeof(names) - n)
            n += (size_t)w;
    }
    if (n > 0)
        printf("      vacuous (examined nothing): %s\n", names);
}

/* The terminal summary: one line, then for a failure what failed, and a
 * note for every armed fault that never fired. */
static void print_summary(const struct sctx *s, const struct outcome *oc, const cJSON *o)
{
    const struct scenario *sc = s->sc;
    printf("    %s: %s in %.1f s (%d invariants, %d faults fired, %d kills, %d pauses, "
           "%d restarts)\n", s->label, oc->pass ? "PASS" : "FAIL",
           (double)(cw_mono_ms() - s->t0) / 1000.0, oc->ninv_checked,
           cJSON_GetArraySize(oc->fired), s->kills, s->pauses, s->restarts);
    print_hazard_and_recovery(s, oc, o);
    print_vacuous(s, oc);
    if (!oc->pass) {
        if (s->error[0])
            printf("      error: %s\n", s->error);
        for (int i = 0; i < INV_COUNT && oc->checked; i++) {
            if (is_hazard(sc, i) || checker_inv_pass(&oc->res, sc, i))
                continue;
            const struct chk_inv *inv = &oc->res.inv[i];
            const cJSON *w = inv->witnesses;
            const char *first = cJSON_GetArraySize(w) > 0 ? cJSON_GetArrayItem(w, 0)->valuestring
                                : inv->checked == 0 ? "vacuous: nothing checked" : "";
            printf("      invariant %s failed (%ld violations)%s%s\n",
                   sc_invariant_name((enum sc_invariant)i), inv->violations,
                   first[0] ? ": " : "", first);
        }
        const cJSON *exps = cJSON_GetObjectItemCaseSensitive(o, "expect");
        const cJSON *x;
        cJSON_ArrayForEach(x, exps) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
            if (strcmp(v->valuestring, "pass") != 0)
                printf("      expectation %s failed: %s\n",
                       cJSON_GetObjectItemCaseSensitive(x, "check")->valuestring,
                       cJSON_GetObjectItemCaseSensitive(x, "detail")->valuestring);
        }
    }
    for (int i = 0; i < cJSON_GetArraySize(oc->not_hit); i++) {
        const cJSON *nh = cJSON_GetArrayItem(oc->not_hit, i);
        printf("      note: fault %s armed in %s was never hit\n",
               cJSON_GetObjectItemCaseSensitive(nh, "point")->valuestring,
               cJSON_GetObjectItemCaseSensitive(nh, "proc")->valuestring);
    }
    fflush(stdout);
}

static void add_totals(struct runner *r, const struct sctx *s, const struct outcome *oc)
{
    r->t_scen++;
    r->t_passed += oc->pass;
    r->t_inv += oc->ninv_checked;
    r->t_faults += cJSON_GetArraySize(oc->fired);
    r->t_kills += s->kills;
    r->t_pauses += s->pauses;
    r->t_restarts += s->restarts;
    r->t_events += oc->nevents;
}

static void outcome_free(struct outcome *oc, int nprocs)
{
    cJSON_Delete(oc->recovery);
    checker_free(&oc->res);
    for (int i = 0; i < nprocs; i++)
        cJSON_Delete(oc->proc_events[i]);
    cJSON_Delete(oc->broker_events);
}

/* Closes the scenario's connection and drops its database (kept with
 * --keep), then frees the context. */
static void sctx_free(struct sctx *s)
{
    char err[1024];
    PQfinish(s->conn);
    if (s->sc->standby)
        runner_close_own_cluster(s);
    else if (!s->run->o->keep && s->dbname[0] != '\0')
        rdb_drop_db(&s->run->db, s->dbname, err, sizeof(err));
    for (int i = 0; i < s->nhttp; i++)
        free(s->http[i].body);
    free(s->http);
    free(s->conninfo);
    free(s->db_env);
    for (int i = 0; i < s->sc->nprocs; i++)
        free(s->link_db_env[i]);
    cJSON_Delete(s->expects);
    if (s->ev != NULL)
        fclose(s->ev);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* Runs one scenario through the phases runner.h lists and returns its
 * entry in result.json (NULL when out of memory).  A phase that fails
 * records the error; the steps stop there, but whatever can still run
 * does, so a failed scenario is still healed, checked and reported. */
static cJSON *run_scenario(struct runner *r, const struct scenario *sc, int rep, int index,
                           int total)
{
    struct sctx *s = sctx_new(r, sc, rep, index, total);
    if (s == NULL)
        return NULL;
    scenario_files(s);
    open_database(s);
    if (s->error[0] == '\0' && runner_start_netproxy(s) == 0 && runner_start_broker(s) == 0) {
        start_processes(s);
        drive_steps(s);
        if (!runner_interrupted())
            runner_heal(s);
    }
    runner_payments_join(s); /* when the heal did not run */

    /* The checker runs whatever happened above: a failed scenario still
     * gets its witnesses. */
    struct outcome oc;
    memset(&oc, 0, sizeof(oc));
    check_scenario(s, &oc);
    runner_net_check(s);
    stop_scenario(s);
    collect_faults(s, &oc);
    decide_verdict(s, &oc);
    oc.nevents = write_timeline(s);
    cJSON *o = scenario_json(s, &oc);
    print_summary(s, &oc, o);
    add_totals(r, s, &oc);
    outcome_free(&oc, sc->nprocs);
    sctx_free(s);
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

/* The scenarios of a run. */
struct run_list {
    char **files;
    int nfiles;
    int owned_files;            /* runner_all_scenarios made the list: free it */
    struct scenario *scs[256];
    int nsc;
    cJSON *shard;               /* --shard: result.json's "shard" (NULL: not sharded) */
};

/* --shard-weights DIR: each scenario's mean duration in DIR's result.json
 * (any earlier run or merge); one DIR lacks weighs the mean of the others.
 * 0, or -1 with the reason printed. */
static int load_weights(const char *dir, const struct run_list *l, double *w)
{
    char err[1024];
    cJSON *res = rundir_load(dir, err, sizeof(err));
    if (res == NULL) {
        fprintf(stderr, "crashwindow run: --shard-weights: %s\n", err);
        return -1;
    }
    double sum = 0;
    int known = 0;
    for (int i = 0; i < l->nsc; i++) {
        double total = 0;
        int n = 0;
        const cJSON *sc;
        cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(res, "scenarios")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(sc, "name");
            const cJSON *ms = cJSON_GetObjectItemCaseSensitive(sc, "duration_ms");
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, l->scs[i]->name) == 0 &&
                cJSON_IsNumber(ms) && ms->valuedouble >= 0 && ms->valuedouble < 1e9) {
                total += ms->valuedouble;
                n++;
            }
        }
        w[i] = n > 0 ? total / n : -1;
        if (n > 0) {
            sum += w[i];
            known++;
        }
    }
    for (int i = 0; i < l->nsc; i++)
        if (w[i] < 0)
            w[i] = known > 0 ? sum / known : 1;
    cJSON_Delete(res);
    return 0;
}

/* --shard K/N: keeps share K of the loaded scenarios and describes the
 * whole list in l->shard: every name in order, the share of each ("plan"),
 * and a digest of names and contents, so that a merge refuses shards of
 * other scenario files or of another split.  0, or -1 with the reason
 * printed. */
static int select_share(const struct run_opts *o, struct run_list *l)
{
    struct shard sh = { o->shard_index, o->shard_count };
    if (sh.count > l->nsc) {
        fprintf(stderr, "crashwindow run: --shard %d/%d: only %d scenario%s to share, so at "
                "most %d shards\n", sh.index, sh.count, l->nsc, l->nsc == 1 ? "" : "s", l->nsc);
        return -1;
    }
    double weights[256];
    int plan[256];
    if (o->shard_weights != NULL && load_weights(o->shard_weights, l, weights) < 0)
        return -1;
    shard_plan(o->shard_weights != NULL ? weights : NULL, l->nsc, sh.count, plan);
    l->shard = shard_json(&sh);
    cJSON *work = cJSON_AddArrayToObject(l->shard, "work");
    cJSON *pj = cJSON_AddArrayToObject(l->shard, "plan");
    cJSON_AddBoolToObject(l->shard, "weighted", o->shard_weights != NULL);
    uint64_t digest = SHARD_DIGEST_INIT;
    int kept = 0;
    for (int i = 0; i < l->nsc; i++) {
        char *text = cJSON_PrintUnformatted(l->scs[i]->root);
        digest = shard_digest(shard_digest(digest, l->scs[i]->name), text ? text : "");
        cJSON_free(text);
        cJSON_AddItemToArray(work, cJSON_CreateString(l->scs[i]->name));
        cJSON_AddItemToArray(pj, cJSON_CreateNumber(plan[i]));
        if (plan[i] == sh.index)
            l->scs[kept++] = l->scs[i];
        else
            scenario_free(l->scs[i]);
    }
    l->nsc = kept;
    char hex[24];
    shard_digest_hex(digest, hex, sizeof(hex));
    cJSON_AddStringToObject(l->shard, "digest", hex);
    cJSON_AddNumberToObject(l->shard, "repeat", o->repeat > 0 ? o->repeat : 1);
    return 0;
}

/* Loads the run's scenario files (--all: every one of the source tree),
 * each validated against the fault catalogue points.  0, or -1 with the
 * reason printed. */
static int load_scenarios(const struct run_opts *o, char **points, struct run_list *l)
{
    char err[1024];
    if (o->all) {
        l->nfiles = runner_all_scenarios(&l->files);
        l->owned_files = 1;
        if (l->nfiles <= 0) {
            fprintf(stderr, "crashwindow: no scenario files in %s/scenarios\n",
                    runner_source_dir());
            return -1;
        }
    } else {
        l->files = (char **)o->files;
        l->nfiles = o->nfiles;
    }
    if (l->nfiles > 256) {
        fprintf(stderr, "crashwindow: more than 256 scenario files\n");
        return -1;
    }
    for (int i = 0; i < l->nfiles; i++) {
        l->scs[l->nsc] = scenario_load(l->files[i], (const char *const *)points, err,
                                       sizeof(err));
        if (l->scs[l->nsc] == NULL) {
            fprintf(stderr, "crashwindow: %s\n", err);
            return -1;
        }
        l->nsc++;
    }
    return o->shard_count > 0 ? select_share(o, l) : 0;
}

static void run_list_free(struct run_list *l)
{
    cJSON_Delete(l->shard);
    for (int i = 0; i < l->nsc; i++)
        scenario_free(l->scs[i]);
    if (l->owned_files) {
        for (int i = 0; i < l->nfiles; i++)
            free(l->files[i]);
        free(l->files);
    }
}

/* The binaries and tools: each from --bin (or this build tree), else from
 * the fallback directory.  A binary no scenario runs may be missing.  0, or
 * -1 with the missing one printed. */
static int find_binaries(struct runner *r, const struct run_list *l)
{
    const struct run_opts *o = r->o;
    if (o->bin != NULL)
        snprintf(r->bin, sizeof(r->bin), "%s", o->bin);
    else if (runner_build_dir(r->bin, sizeof(r->bin)) < 0)
        snprintf(r->bin, sizeof(r->bin), ".");
    int need[3] = { 0 };
    for (int i = 0; i < l->nsc; i++)
        for (int j = 0; j < l->scs[i]->nprocs; j++)
            need[l->scs[i]->procs[j].kind] = 1;
    struct { char *path; const char *name; int needed; } exes[] = {
        { r->exe_api, "payments-api", need[SC_API] },
        { r->exe_relay, "outbox-relay", need[SC_RELAY] },
        { r->exe_consumer, "accounting-consumer", need[SC_CONSUMER] },
        { r->exe_outboxctl, "outboxctl", 1 },
        { r->exe_broker, "fakebroker", 1 },
        { r->exe_bridge, "rabbit-bridge", runner_rabbit(r) },
    };
    /* The fault proxy is the harness's own, like crashwindow: from this
     * build, whatever --bin names as the binaries under test. */
    char own[PATH_MAX];
    if (runner_build_dir(own, sizeof(own)) < 0 ||
        find_exe(own, "netproxy", r->exe_netproxy, PATH_MAX) < 0) {
        fprintf(stderr, "crashwindow: netproxy not found in %s (build it)\n", own);
        return -1;
    }
    for (size_t i = 0; i < sizeof(exes) / sizeof(exes[0]); i++) {
        if (find_exe(r->bin, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (o->bin_fallback != NULL &&
            find_exe(o->bin_fallback, exes[i].name, exes[i].path, PATH_MAX) == 0)
            continue;
        if (exes[i].needed) {
            fprintf(stderr, "crashwindow: %s not found in %s (build it, or give --bin DIR)\n",
                    exes[i].name, r->bin);
            return -1;
        }
    }
    snprintf(r->pg_script, sizeof(r->pg_script), "%s/scripts/pg-cluster", runner_source_dir());
    snprintf(r->rabbit_script, sizeof(r->rabbit_script), "%s/scripts/rabbit-node",
             runner_source_dir());
    return 0;
}

/* The output directory (--out, or reports/run-<UTC timestamp>) and the
 * short per-run directory for sockets and FIFOs.  0, or -1 with the reason
 * printed. */
static int make_dirs(struct runner *r)
{
    if (r->o->out != NULL) {
        snprintf(r->out, sizeof(r->out), "%s", r->o->out);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        snprintf(r->out, sizeof(r->out), "%s/reports/run-%s", runner_source_dir(), stamp);
    }
    if (fstree_mkdir_p(r->out) < 0) {
        fprintf(stderr, "crashwindow: cannot create %s: %s\n", r->out, strerror(errno));
        return -1;
    }
    snprintf(r->tmp, sizeof(r->tmp), "/tmp/cwrunXXXXXX");
    if (mkdtemp(r->tmp) == NULL) {
        fprintf(stderr, "crashwindow: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    fmt(r->fifo_prefix, sizeof(r->fifo_prefix), "%s/fiu", r->tmp);
    return 0;
}

/* PostgreSQL for the run: --pg's server or a throwaway cluster, and the
 * migrated template every scenario's database is cloned from.  0, or the
 * exit code with the reason printed: 2 when --pg's server cannot be used
 * (bad usage), 1 otherwise. */
static int start_postgres(struct runner *r, int64_t t0)
{
    const struct run_opts *o = r->o;
    char err[1024];
    if (o->pg != NULL) {
        if (rdb_use(&r->db, o->pg, err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow: %s\n", err);
            return 2;
        }
    } else if (rdb_start_cluster(&r->db, r->pg_script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        return 1;
    }
    char tag[32];
    snprintf(tag, sizeof(tag), "%d_%lld", (int)getpid(), (long long)(cw_now_us() % 1000000));
    if (rdb_make_template(&r->db, r->exe_outboxctl, tag, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        rdb_finish(&r->db, r->pg_script, o->keep);
        return 1;
    }
    printf("postgres %s ready in %.1f s\n", r->db.server_version,
           (double)(cw_mono_ms() - t0) / 1000.0);
    return 0;
}

/* result.json before the first scenario: what runs where; the verdict,
 * totals and scenarios are filled in as scenarios finish. */
static void result_new(struct runner *r, const char *iso, const char *commit, const char *host)
{
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
    cJSON_AddStringToObject(r->result, "broker", runner_rabbit(r) ? "rabbitmq" : "fake");
    if (r->o->mutant != NULL)
        cJSON_AddStringToObject(r->result, "mutant", r->o->mutant);
    else
        cJSON_AddNullToObject(r->result, "mutant");
    cJSON_AddStringToObject(r->result, "verdict", "fail");
    cJSON_AddObjectToObject(r->result, "totals");
    r->scenarios = cJSON_AddArrayToObject(r->result, "scenarios");
}

/* A scenario the broker cannot take: said on the console and recorded in
 * result.json's "skipped" list with its reason (never counted as run). */
static void skip_scenario(struct runner *r, const struct scenario *sc, const char *why)
{
    printf("  skip %s: %s\n", sc->name, why);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(r->result, "skipped");
    if (list == NULL)
        list = cJSON_AddArrayToObject(r->result, "skipped");
    cJSON *one = cJSON_CreateObject();
    cJSON_AddStringToObject(one, "name", sc->name);
    cJSON_AddStringToObject(one, "reason", why);
    cJSON_AddItemToArray(list, one);
}

/* Why this run's broker cannot take sc, or NULL. */
static const char *broker_skip(const struct runner *r, const struct scenario *sc, char *why,
                               size_t whylen)
{
    return runner_rabbit(r) ? runner_rabbit_skip(sc, why, whylen)
                            : runner_fake_skip(sc, why, whylen);
}

/* Every scenario, the list repeated --repeat times, result.json rewritten
 * after each so an interrupted run still leaves one.  Returns 1 when every
 * scenario ran and passed. */
static int run_scenarios(struct runner *r, const struct run_list *l, int64_t t0)
{
    const struct run_opts *o = r->o;
    int runnable = 0;
    char why[256];
    for (int i = 0; i < l->nsc; i++) {
        if (broker_skip(r, l->scs[i], why, sizeof(why)) != NULL) {
            skip_scenario(r, l->scs[i], why);
            continue;
        }
        runnable++;
    }
    int total = runnable * (o->repeat > 0 ? o->repeat : 1);
    int index = 0;
    for (int rep = 1; rep <= (o->repeat > 0 ? o->repeat : 1) && !runner_interrupted(); rep++) {
        for (int i = 0; i < l->nsc && !runner_interrupted(); i++) {
            if (broker_skip(r, l->scs[i], why, sizeof(why)) != NULL)
                continue;
            cJSON *one = run_scenario(r, l->scs[i], rep, ++index, total);
            if (one != NULL)
                cJSON_AddItemToArray(r->scenarios, one);
            write_result(r, t0, r->t_passed == r->t_scen);
        }
    }
    return r->t_scen == total && r->t_passed == r->t_scen && !runner_interrupted();
}

/* The end of a run: result.json with its verdict, PostgreSQL stopped (or
 * kept), the summary lines and the HTML report.  Returns the exit code. */
static int finish_run(struct runner *r, int64_t t0, int pass)
{
    const struct run_opts *o = r->o;
    write_result(r, t0, pass);
    if (o->keep) {
        printf("--keep: sockets and fault FIFOs stay in %s (mode 0700: yours alone)\n", r->tmp);
        if (r->db.cluster_dir[0] != '\0')
            printf("--keep: the cluster stays up; stop it with: %s stop %s\n", r->pg_script,
                   r->db.cluster_dir);
    }
    rdb_finish(&r->db, r->pg_script, o->keep);
    runner_rabbit_stop(r);
    printf("crashwindow run: %s: %ld/%ld scenarios passed in %.1f s; %ld invariants checked, "
           "%ld faults fired, %ld kills, %ld pauses, %ld restarts, %ld events\n",
           pass ? "PASS" : "FAIL", r->t_passed, r->t_scen, (double)(cw_mono_ms() - t0) / 1000.0,
           r->t_inv, r->t_faults, r->t_kills, r->t_pauses, r->t_restarts, r->t_events);
    printf("result: %s/result.json\n", r->out);
    int rc = pass ? 0 : 1;
    if (o->report != NULL) {
        char rerr[512];
        if (report_write(r->out, o->report, rerr, sizeof(rerr)) < 0) {
            fprintf(stderr, "crashwindow run: could not write the report: %s\n", rerr);
            rc = 1;
        } else {
            printf("report: %s\n", o->report);
        }
    }
    if ((o->junit != NULL || o->bundles) &&
        rundir_outputs(r->out, o->junit, o->bundles, "crashwindow run") < 0)
        rc = 1;
    fflush(stdout);
    return rc;
}

int runner_run(const struct run_opts *o, cJSON **result_out)
{
    int rc = 2;
    struct run_list l;
    memset(&l, 0, sizeof(l));
    char **points = runner_load_points();
    struct runner *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 2;
    r->o = o;
    if (result_out != NULL)
        *result_out = NULL;
    /* The witness is not the system under test: its own database calls
     * (creating databases, checking invariants) get a minute, not the
     * programs' few seconds, so that a loaded machine does not fail a run. */
    pgx_set_deadline_ms(60000);

    if (load_scenarios(o, points, &l) < 0)
        goto out;
    if (o->dry_run) {
        for (int i = 0; i < l.nsc; i++) {
            scenario_print(l.scs[i], stdout);
            printf("\n");
        }
        rc = 0;
        goto out;
    }
    if (find_binaries(r, &l) < 0 || make_dirs(r) < 0)
        goto out;

    int64_t t0 = cw_mono_ms();
    char iso[40], commit[64], host[128] = "unknown";
    us_to_iso(cw_now_us(), iso, sizeof(iso));
    git_commit(commit, sizeof(commit));
    gethostname(host, sizeof(host) - 1);
    char share[64] = "";
    if (o->shard_count > 0)
        snprintf(share, sizeof(share), " (shard %d/%d)", o->shard_index, o->shard_count);
    printf("crashwindow run: %d scenario%s%s%s, output in %s\n", l.nsc, l.nsc == 1 ? "" : "s",
           o->repeat > 1 ? " (repeated)" : "", share, r->out);
    fflush(stdout);
    if (runner_net_isolate(o, l.scs, l.nsc) < 0) {
        rc = 1;
        goto out_tmp;
    }
    rc = start_postgres(r, t0);
    if (rc != 0)
        goto out_tmp;
    if (runner_rabbit(r) && runner_rabbit_start(r) < 0) {
        rdb_finish(&r->db, r->pg_script, o->keep);
        rc = 1;
        goto out_tmp;
    }
    result_new(r, iso, commit, host);
    if (l.shard != NULL) {
        cJSON_AddItemToObject(r->result, "shard", l.shard);
        l.shard = NULL;
    }
    int pass = run_scenarios(r, &l, t0);
    rc = finish_run(r, t0, pass);
    if (result_out != NULL) {
        *result_out = r->result;
        r->result = NULL;
    }
out_tmp:
    if (!o->keep)
        fstree_remove(r->tmp);
out:
    run_list_free(&l);
    runner_free_points(points);
    cJSON_Delete(r->result);
    free(r);
    return rc;
}

/* A cluster directory of scripts/pg-cluster with a running server. */
static int pg_dir_valid(const char *dir)
{
    char path[PATH_MAX + 32];
    fmt(path, sizeof(path), "%s/data/postmaster.pid", dir);
    return access(path, R_OK) == 0;
}

static void run_usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow run [SCENARIO.json...|--all] [--pg CONNINFO [--pg-dir DIR]]\n"
        "                       [--out DIR] [--keep] [--dry-run] [--repeat N] [--bin DIR]\n"
        "                       [--report FILE.html] [--shard K/N|env] [--junit FILE]\n"
        "                       [--shard-weights DIR] [--broker fake|rabbitmq]\n"
        "  --all        every scenario in scenarios/\n"
        "  --pg         use this PostgreSQL server instead of a throwaway cluster\n"
        "  --pg-dir     with --pg: the directory scripts/pg-cluster started it in; \"db\"\n"
        "               steps may then crash, restart and freeze it (without it they fail)\n"
        "  --out        run directory (default reports/run-<timestamp>)\n"
        "  --keep       leave the cluster, broker and processes running; print how to poke them\n"
        "  --dry-run    print what each scenario will do, do nothing\n"
        "  --repeat N   run the whole list N times\n"
        "  --bin DIR    where the binaries are (default: this build tree)\n"
        "  --brief      one line per scenario, no step lines\n"
        "  --report     write the self-contained HTML report of the run to FILE.html\n"
        "  --shard K/N  run share K of N of the scenarios (K from 1); 'env' takes K/N from\n"
        "               CW_SHARD, JOB_COMPLETION_INDEX + CW_SHARD_COUNT, or CI_NODE_INDEX +\n"
        "               CI_NODE_TOTAL; crashwindow merge joins the shards' directories\n"
        "  --jobs N     the N shards side by side on this machine, each with its own\n"
        "               cluster, merged into --out (refused with --pg, --keep, --shard)\n"
        "  --shard-weights DIR  split by the scenario durations of an earlier run directory\n"
        "               (longest first, each to the least loaded shard) instead of round\n"
        "               robin; every shard must be given the same DIR\n"
        "  --junit FILE write JUnit XML (one test case per scenario) to FILE\n"
        "  --broker B   fake (default: the embedded fake broker) or rabbitmq (a throwaway\n"
        "               node of scripts/rabbit-node; scenarios that need a fake-broker\n"
        "               switch are skipped, each with its reason)\n"
        "failing scenarios leave a bundle each in DIR/bundles/ (summary, replay, logs)\n"
        "exit status: 0 every invariant held, 1 one did not, 2 bad usage or scenario file\n");
}

int runner_main(int argc, char **argv)
{
    struct run_opts o;
    memset(&o, 0, sizeof(o));
    o.repeat = 1;
    o.bundles = 1;
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
        } else if (strcmp(a, "--pg-dir") == 0 && has_val) {
            o.pg_dir = argv[++i];
        } else if (strcmp(a, "--out") == 0 && has_val) {
            o.out = argv[++i];
        } else if (strcmp(a, "--bin") == 0 && has_val) {
            o.bin = argv[++i];
        } else if (strcmp(a, "--report") == 0 && has_val) {
            o.report = argv[++i];
        } else if (strcmp(a, "--junit") == 0 && has_val) {
            o.junit = argv[++i];
        } else if (strcmp(a, "--broker") == 0 && has_val) {
            o.broker = argv[++i];
            if (strcmp(o.broker, "fake") != 0 && strcmp(o.broker, "rabbitmq") != 0) {
                fprintf(stderr, "crashwindow run: --broker takes fake or rabbitmq, not '%s'\n",
                        o.broker);
                free(files);
                return 2;
            }
        } else if (strcmp(a, "--shard-weights") == 0 && has_val) {
            o.shard_weights = argv[++i];
        } else if (strcmp(a, "--shard") == 0 && has_val) {
            char err[512];
            struct shard sh;
            if (shard_arg(argv[++i], &sh, err, sizeof(err)) < 0) {
                fprintf(stderr, "crashwindow run: %s\n", err);
                free(files);
                return 2;
            }
            o.shard_index = sh.index;
            o.shard_count = sh.count;
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
    if (o.shard_weights != NULL && o.shard_count == 0) {
        fprintf(stderr, "crashwindow run: --shard-weights weighs a --shard K/N split; give both\n");
        free(files);
        return 2;
    }
    if (o.all == (o.nfiles > 0)) {
        fprintf(stderr, "crashwindow run: give scenario files or --all (not both)\n");
        run_usage(stderr);
        free(files);
        return 2;
    }
    if (o.pg_dir != NULL && (o.pg == NULL || !pg_dir_valid(o.pg_dir))) {
        fprintf(stderr, "crashwindow run: --pg-dir %s: %s\n", o.pg_dir,
                o.pg == NULL ? "only with --pg (without it the runner starts its own cluster)"
                             : "not a directory scripts/pg-cluster started a server in "
                               "(no data/postmaster.pid)");
        free(files);
        return 2;
    }
    o.files = files;
    runner_install_signals();
    int rc = runner_run(&o, NULL);
    free(files);
    return rc;
}
