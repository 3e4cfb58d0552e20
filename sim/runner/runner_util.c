/* runner_util.c -- the helpers every file of the runner calls
 * (runner_internal.h): interruption, the source and build trees, the
 * runner's events and progress lines, the first error, process
 * bookkeeping (starting a scenario's process or its broker and waiting
 * until it is ready, reporting exits), fault control through libfiu's
 * remote control, and the runner's own database connection.
 *
 * A helper that cannot do its job records the scenario's first error with
 * runner_fail and returns -1; the phase that called it decides what
 * happens next.
 *
 * Sockets and libfiu FIFOs live in a short per-run directory under /tmp,
 * made by mkdtemp (mode 0700: libfiu obeys whoever can write its FIFOs)
 * (Unix socket paths are limited to 108 bytes; FIFO prefixes must be
 * hyphen-free because fiu-ls splits on '-'). */
#include "runner_internal.h"
#include "brokerctl.h"
#include "cwlog.h"
#include "evlog.h"
#include "pgx.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    return runner_scenarios_in("scenarios", files);
}

int runner_scenarios_in(const char *folder, char ***files)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/%s", runner_source_dir(), folder);
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

void runner_rev_broker_control(struct sctx *s, const cJSON *control)
{
    char on[256], off[256];
    sc_broker_faults(control, on, sizeof(on), off, sizeof(off));
    cJSON *ev = runner_rev_begin(s, "broker_control");
    cJSON_AddItemToObject(ev, "control", sc_control_for_display(control));
    if (on[0] != '\0')
        cJSON_AddStringToObject(ev, "faults_on", on);
    if (off[0] != '\0')
        cJSON_AddStringToObject(ev, "faults_off", off);
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
    runner_add_expect_verdict(s, check, ok ? "pass" : "fail", detail);
}

void runner_add_expect_verdict(struct sctx *s, const char *check, const char *verdict,
                               const char *detail)
{
    int ok = strcmp(verdict, "fail") != 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "check", check);
    cJSON_AddStringToObject(o, "verdict", verdict);
    cJSON_AddStringToObject(o, "detail", detail);
    cJSON_AddItemToArray(s->expects, o);
    if (!ok)
        runner_progress(s, "  expectation failed: %s: %s", check, detail);
}

/* The first (first = 1) or the last non-empty line of p's log from offset
 * off on, into out ("" when none). */
static void log_line(const struct proc *p, long off, int first, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return;
    if (off > 0 && fseek(f, off, SEEK_SET) != 0) {
        fclose(f);
        return;
    }
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        snprintf(out, outlen, "%s", line);
        if (first)
            break;
    }
    fclose(f);
}

void runner_log_tail(const struct proc *p, char *out, size_t outlen)
{
    log_line(p, 0, 0, out, outlen);
}

void runner_log_first(const struct proc *p, long off, char *out, size_t outlen)
{
    log_line(p, off, 1, out, outlen);
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
            s->count.kills++;
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
    for (int i = 0; i < n && s->armed.n < MAX_ARMED; i++) {
        struct armed *a = &s->armed.list[s->armed.n++];
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

long runner_file_size(const char *path)
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
    if (r->target != NULL)
        return runner_target_start_proc(s, idx);
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
    long off = runner_file_size(p->log_path);
    char err[512];
    /* libpq takes application_name from PGAPPNAME: every session of the
     * process carries its scenario name, which "db terminate" aims at. */
    char appname[SC_NAME_MAX + 16];
    cw_fmt(appname, sizeof(appname), "PGAPPNAME=%s", p->name);
    const char *env[8] = { runner_db_env(s, idx), appname, NULL };
    char deadline_var[48];
    int nenv = 2;
    if (sp->db_deadline_ms > 0) {
        cw_fmt(deadline_var, sizeof(deadline_var), "CW_DB_DEADLINE_MS=%d", sp->db_deadline_ms);
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
        s->count.restarts++;
    s->port[idx] = 0;
    if (runner_net_proc_started(s, idx) < 0)
        return -1;
    if (faults != NULL)
        arm_env_faults(s, idx, p->pid, faults);
    cJSON *ev = runner_rev_begin(s, restart ? "restart" : "start");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "kind", sc_kind_name(sp->kind));
    if (faults != NULL)
        cJSON_AddStringToObject(ev, "faults", faults);
    if (sp->faketime[0] != '\0')
        cJSON_AddStringToObject(ev, "clock", sp->faketime);
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
            runner_log_first(p, off, tail, sizeof(tail));
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
        if (first && r->target != NULL && runner_rabbit_reset(s) < 0)
            return -1;
        if (start_broker_argv(s, rargv) < 0)
            return -1;
        /* A target declares its own queues: settled once its processes
         * run (runner_scenario.c), not here. */
        return first && r->target == NULL ? runner_rabbit_settle(s) : 0;
    }
    if (s->sc->broker_durable) {
        /* A file, not :memory:: what the broker confirmed survives its
         * crash (SQLite in WAL mode, the commit in the OS before the
         * confirm). */
        cw_fmt(store, sizeof(store), "%s/broker.sqlite", s->dir);
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
    long off = runner_file_size(b->log_path);
    if (proc_spawn(b, argv, NULL, NULL, err, sizeof(err)) < 0)
        return runner_fail(s, "%s", err);
    if (restart)
        s->count.restarts++;
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
            runner_log_first(b, off, tail, sizeof(tail));
            return runner_fail(s, "the broker exited while starting (%s): %s", how,
                               tail[0] ? tail : "(no output)");
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

/* (Re)opens the runner's connection to the scenario's database. */
int runner_connect(struct sctx *s, char *err, size_t errlen)
{
    PQfinish(s->db.conn);
    s->db.conn = pgx_connect(s->db.conninfo, err, errlen);
    if (s->db.conn == NULL)
        return -1;
    /* The server's notices ("terminating connection due to immediate
     * shutdown" when a "db" step crashes it) are the scenario's doing, not
     * news for the terminal. */
    PQsetNoticeProcessor(s->db.conn, rdb_quiet_notices, NULL);
    /* Named, so that a refuse step's trigger never refuses the runner's own
     * statements (a sql step's insert) when it names no process. */
    return pgx_cmd(s->db.conn, "SET application_name = 'crashwindow runner'", 0, NULL, NULL,
                   err, errlen);
}

/* The first column of the first row as a number; -1 with an error set. */
long long runner_sql_value(struct sctx *s, const char *sql, int n, const char *const *params,
                           char *err, size_t errlen)
{
    if ((s->db.conn == NULL || PQstatus(s->db.conn) != CONNECTION_OK) &&
        runner_connect(s, err, errlen) < 0)
        return -1;
    char sqlstate[6] = "";
    PGresult *r = pgx_exec(s->db.conn, sql, n, params, sqlstate, err, errlen);
    if (r == NULL) {
        /* A server that went away (a "db" step): drop the connection, so
         * that callers see it gone and the next call connects again. */
        if (sqlstate[0] == '\0' || pgx_conn_lost(s->db.conn, sqlstate)) {
            PQfinish(s->db.conn);
            s->db.conn = NULL;
        }
        return -1;
    }
    long long v = 0;
    if (PQntuples(r) > 0 && PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}
