/* runner_internal.h -- what the files of `crashwindow run` share: the run
 * and scenario contexts, and the helpers more than one of them calls.
 * Private to the runner: only the .c files of sim/runner include it; every
 * other component uses runner.h.
 *
 * The runner is these files, along the phases runner.h lists:
 *   runner.c                the run: scenarios loaded, binaries, PostgreSQL,
 *                           result.json; and the command line;
 *   runner_scenario.c       one scenario through its phases: context,
 *                           directory, database, processes, steps, heal,
 *                           check;
 *   runner_output.c         a scenario's end: teardown, faults fired, verdict,
 *                           timeline.jsonl, result.json entry, summary, totals;
 *   runner_util.c           the helpers every file calls: events, progress and
 *                           errors, processes, libfiu's remote control, the
 *                           runner's database connection, the source tree;
 *   runner_steps.c          the step verbs of the workload and the processes;
 *   runner_heal.c           the heal phase and the "pipeline is quiet" test
 *                           that both it and the "quiet" wait use;
 *   runner_net.c            the fault proxy, the "net" step, a process's clock;
 *   runner_dbfault.c        the scenario's own primary and standby, the "db"
 *                           step, recovery times;
 *   runner_broker_crash.c   the "broker_crash" step;
 *   runner_rabbitmq_node.c  the run against a real RabbitMQ node;
 *   runner_target.c         what a run against a target (--target) may do.
 * The modules with a header of their own (procs.h, httpc.h, runner_db.h,
 * runner_metrics.h, history.h) do not include this one.
 *
 * Errors follow one rule everywhere: a helper that cannot do its job
 * records the first error with runner_fail (later ones are dropped) and
 * returns -1; the caller skips the remaining steps but still heals and
 * checks, so a failed scenario still leaves its witnesses. */
#ifndef CW_RUNNER_INTERNAL_H
#define CW_RUNNER_INTERNAL_H

#include "runner.h"
#include "checker.h"
#include "common_fs.h"
#include "httpc.h"
#include "procs.h"
#include "runner_db.h"
#include "runner_metrics.h"
#include "scenario.h"

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define POLL_MS 20
#define MAX_ARMED 64
#define STOP_TIMEOUT_MS 3000

/* ---- the run and the scenario contexts ---------------------------------- */

struct runner {
    const struct run_opts *o;
    const struct target *target;  /* --target's profile, or NULL: our pipeline */
    char target_skip[512];      /* what this machine lacks to run it, or "" */
    char bin[PATH_MAX];
    char out[PATH_MAX];
    char tmp[PATH_MAX];         /* sockets and FIFOs */
    char fifo_prefix[PATH_MAX];
    char pg_script[PATH_MAX];
    char exe_api[PATH_MAX], exe_relay[PATH_MAX], exe_consumer[PATH_MAX];
    char exe_outboxctl[PATH_MAX], exe_broker[PATH_MAX], exe_netproxy[PATH_MAX];
    char exe_bridge[PATH_MAX];  /* rabbit-bridge, with --broker rabbitmq */
    char rabbit_script[PATH_MAX];
    char rabbit_dir[PATH_MAX];  /* the run's RabbitMQ node, or "" */
    char rabbit_url[512];
    int rabbit_shared;          /* the node is run_opts.rabbit_dir's: never stopped here */
    struct rdb db;
    cJSON *result;
    cJSON *scenarios;
    long t_scen, t_passed, t_inv, t_faults, t_kills, t_pauses, t_restarts, t_events;
    int nsc;                    /* scenarios run so far (for socket names) */
};

/* A fault point armed in one incarnation (pid) of scenario process proc. */
struct armed {
    int proc;
    int pid;
    char point[96];
    char action[24];
    int runtime;                /* enabled through fiu-ctrl */
    int disabled;
};

/* The scenario's database and the runner's own connection to it: made by
 * runner_scenario.c (or runner_dbfault.c with a standby), used by every
 * file that asks the database. */
struct sctx_db {
    char name[64];
    char *conninfo;
    char *env;                  /* "CW_DB=<conninfo>": children read it, argv never holds it */
    PGconn *conn;
};

/* The fault points armed in each incarnation (CW_FAULTS at a start, or a
 * fault step), for faults_not_hit and the heal. */
struct sctx_armed {
    struct armed list[MAX_ARMED];
    int n;
};

/* What the runner did to the processes, for result.json and the summary. */
struct sctx_count {
    int kills, pauses, restarts;
};

/* runner_steps.c's HTTP log (under the scenario's lock: payment threads
 * append to it), which runner_scenario.c stores for the checker, and the
 * background payments step still running, if any. */
struct sctx_http {
    struct http_rec *recs;
    int n, cap;
    struct pay_run *background;
};

/* runner_net.c's: the fault proxy and each process's links; no other file
 * touches them. */
struct sctx_net {
    struct proc proxy;
    char proxy_sock[PATH_MAX];
    char link_broker[SC_MAX_PROCS][PATH_MAX];   /* "" when the process goes direct */
    char *link_db_env[SC_MAX_PROCS];            /* CW_DB through its link, or NULL */
    int windows_set[SC_MAX_PROCS];              /* a window was set on its links: the
                                                 * proxy learns each new pid */
    cJSON *windows_fired;                       /* faults_fired entries of the windows */
    int steps_through;                          /* the steps before it ran, net steps
                                                 * among them (s->step is -1 after) */
};

/* runner_dbfault.c's: the clusters a "db" step acts on.  runner_scenario.c
 * sets dir when the scenario uses the run's cluster. */
struct sctx_pg {
    struct rdb own;             /* the scenario's own primary (with a standby), else unused */
    char dir[PATH_MAX];         /* the cluster the database lives on now; "" with --pg */
    char standby_dir[PATH_MAX]; /* "" without a standby */
    int repl_stalled;           /* the standby's WAL receiver is stopped */
    int failed_over;
    PGconn *lock_conn;          /* a "lock" or "deadlock" step's session while it runs */
    int lock_deadlock;          /* that session is a deadlock's, not a lock's */
    int64_t lock_started_us;    /* wall clock: when its lock was granted */
    int64_t lock_ends_ms;       /* monotonic: when the server ends the hold */
    int lock_ms;                /* how long it holds it */
    char lock_detail[160];      /* what it holds, for the db_fault event */
    struct refusal {            /* a "refuse" step's trigger, until the heal */
        int step;               /* its index: names its trigger and its counter */
        char table[300];        /* quoted */
        int skip, times;
        int must_fire;          /* refusing nothing fails the scenario */
        const char *action;     /* "refuse" or "sever" (the session ends, no SQLSTATE) */
        int64_t started_us;     /* wall clock: when the trigger was in place */
        char detail[200];
    } refusals[8];
    int nrefusals;
};

/* runner_rabbitmq_node.c's: the scenario's exchange and each consumer's
 * group ("topic:group") for rabbit-bridge. */
struct sctx_rabbitmq {
    char exchange[64];
    char groups[SC_MAX_PROCS][140];
};

/* One scenario being run: the core every file reads, then the groups
 * (each type above says which files use it). */
struct sctx {
    /* the core: what the scenario is, where its files go, its processes,
     * its broker, its events and its first error */
    struct runner *run;
    const struct scenario *sc;
    int rep;
    char label[96];             /* the directory name */
    char dir[PATH_MAX];
    struct proc procs[SC_MAX_PROCS];
    int port[SC_MAX_PROCS];     /* an API's bound port, 0 until known */
    struct proc broker;
    char broker_sock[PATH_MAX];
    char broker_addr[PATH_MAX + 600]; /* what --broker gets: the socket, or the amqp:// URL */
    pthread_mutex_t lock;       /* http log and runner events (payment threads) */
    FILE *ev;
    char run_events_path[PATH_MAX + 32];  /* runner.events.jsonl */
    char error[1024];
    char decided[400];          /* runner_verdict_decided's answer once it said yes */
    cJSON *expects;
    int step;
    int64_t t0;                 /* mono ms: when the scenario began */
    int64_t started_us;         /* wall clock, for started_at */
    int64_t deadline;           /* mono ms: the whole scenario */
    int tearing_down;           /* exits now are the end of the run, not events */
    metrics *metrics;
    int64_t fault_started_us;   /* wall clock: when the current db/broker outage began
                                 * (runner_dbfault.c, runner_broker_crash.c) */

    struct sctx_db db;
    struct sctx_armed armed;
    struct sctx_count count;
    struct sctx_http http;
    struct sctx_net net;
    struct sctx_pg pg;
    struct sctx_rabbitmq rabbitmq;
};

/* ---- small helpers ------------------------------------------------------ */

/* The pause between two polls of a bounded wait; never a wait by itself. */
static inline void nap(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- runner_util.c: runner events, progress and errors ------------------ */

/* A runner event (runner.events.jsonl) with ts_us, proc, pid, event and the
 * current step; the caller adds fields and hands it to runner_rev_emit,
 * which writes and frees it. */
cJSON *runner_rev_begin(struct sctx *s, const char *event);
void runner_rev_emit(struct sctx *s, cJSON *ev);

/* An event about a process: target, target_pid (when > 0) and key=value
 * (when key is not NULL). */
void runner_rev_proc(struct sctx *s, const char *event, const char *proc, int pid,
                     const char *key, const char *value);

/* The broker's switches set (broker_control): the switches as shown, and
 * "faults_on"/"faults_off" as sc_broker_faults words them, which the fault
 * count and the report's timeline read. */
void runner_rev_broker_control(struct sctx *s, const cJSON *control);

/* A progress line on stdout, indented under the scenario; none with --brief. */
__attribute__((format(printf, 2, 3)))
void runner_progress(struct sctx *s, const char *format, ...);

/* Records the scenario's error (the first one only, prefixed with the
 * step) and logs it as an "error" event.  Always returns -1. */
__attribute__((format(printf, 2, 3)))
int runner_fail(struct sctx *s, const char *format, ...);

/* An expectation result ("expect" array of result.json). */
void runner_add_expect(struct sctx *s, const char *check, int ok, const char *detail);
/* An expectation with its verdict: "pass", "fail" or, on a target,
 * "finding reproduced" (what failed is exactly what a known finding
 * explains); only "fail" fails the scenario. */
void runner_add_expect_verdict(struct sctx *s, const char *check, const char *verdict,
                               const char *detail);

/* ---- runner_util.c: processes, fault control, database, files ----------- */

/* Reports every exit not reported yet: one "exit" event each, and counts
 * the SIGKILL deaths outside the final teardown. */
void runner_reap_all(struct sctx *s);

/* The last non-empty line of a process's log into out, for error messages. */
void runner_log_tail(const struct proc *p, char *out, size_t outlen);
/* The first non-empty line a process wrote to its log from byte off on (its
 * log's size when it started) into out, "" when none: the error of a
 * process that exits at start comes first, its usage text after it. */
void runner_log_first(const struct proc *p, long off, char *out, size_t outlen);
/* The size of the file at path, 0 when there is none. */
long runner_file_size(const char *path);

/* Starts scenario process idx (a restart when it ran before) with faults
 * (a CW_FAULTS value, or NULL) and waits until it is ready.  0 or -1. */
int runner_start_proc(struct sctx *s, int idx, const char *faults);

/* Starts the scenario's broker (the fake broker, or rabbit-bridge in front
 * of the run's RabbitMQ node) and waits until it answers.  0 or -1. */
int runner_start_broker(struct sctx *s);

/* Runs fiu-ctrl -c command against p within timeout_ms.  0, or -1 with
 * the reason in err.  p must not be stopped: fiu-ctrl would block. */
int runner_fiu_ctrl(struct proc *p, const char *command, int timeout_ms, char *err,
                    size_t errlen);

/* (Re)opens the runner's connection to the scenario's database, with the
 * server's notices silenced.  0, or -1 with err (s->conn is then NULL). */
int runner_connect(struct sctx *s, char *err, size_t errlen);

/* The first column of the first row of sql as a number, reconnecting
 * first when the scenario's connection is gone; -1 with err set, and
 * s->conn NULL when the connection was lost (the next call reconnects). */
long long runner_sql_value(struct sctx *s, const char *sql, int n, const char *const *params,
                           char *err, size_t errlen);

/* ---- runner_scenario.c: one scenario ------------------------------------ */

/* Runs repetition rep of sc (the index-th of total) through the phases
 * runner.h lists and returns its entry in result.json (NULL when out of
 * memory).  A phase that fails records the error; the steps stop there,
 * but whatever can still run does, so a failed scenario is still healed,
 * checked and reported. */
cJSON *runner_run_scenario(struct runner *r, const struct scenario *sc, int rep, int index,
                           int total);

/* ---- runner_output.c: a scenario's end and what it leaves --------------- */

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
    int interrupted;                    /* SIGINT/SIGTERM before the check: nothing
                                         * judged, verdict "interrupted" */
};

/* Stops the metrics sampler and every process, or with --keep leaves them
 * running and prints how to reach them. */
void runner_stop_scenario(struct sctx *s);

/* faults_fired and faults_not_hit into oc (fired, not_hit); an armed fault
 * that never fired fails the scenario unless it says faults_optional. */
void runner_collect_faults(struct sctx *s, struct outcome *oc);

/* "pass", "fail", or "interrupted" (oc->interrupted: nothing was judged). */
const char *runner_verdict_name(const struct outcome *oc);

/* The verdict into oc (pass, ninv_checked, hazard_caught), logged as
 * scenario_end. */
void runner_decide_verdict(struct sctx *s, struct outcome *oc);

/* Merges every events file of the scenario into timeline.jsonl.  Returns
 * the number of events. */
long runner_write_timeline(struct sctx *s);

/* The scenario's entry in result.json; it takes over oc's fired, not_hit
 * and recovery, and the scenario's expectations. */
cJSON *runner_scenario_json(struct sctx *s, struct outcome *oc);

/* The terminal summary of the scenario whose result.json entry is o. */
void runner_print_summary(const struct sctx *s, const struct outcome *oc, const cJSON *o);

/* Adds the scenario's figures to the run's totals. */
void runner_add_totals(struct runner *r, const struct sctx *s, const struct outcome *oc);

/* ---- runner_steps.c ----------------------------------------------------- */

/* Executes one step (s->step is its index).  0, or -1 with the error
 * recorded. */
int runner_run_step(struct sctx *s, const struct sc_step *st);

/* Waits for a background payments step, if one runs. */
void runner_payments_join(struct sctx *s);

/* ---- runner_net.c ------------------------------------------------------- */

/* Starts the fault proxy with a broker link per process and, unless the
 * scenario has a standby, a PostgreSQL link per process (a loopback TCP
 * port for the process, the server's Unix socket or address upstream).  0 or -1
 * (recorded). */
int runner_start_netproxy(struct sctx *s);

/* Stops the proxy (after the processes) and removes the socket files of
 * its broker links. */
void runner_stop_netproxy(struct sctx *s);

/* The proxy's pid while it runs, else 0. */
int runner_netproxy_pid(struct sctx *s);

/* Frees what the links hold; the scenario's last call into this file. */
void runner_net_free(struct sctx *s);

/* Where process idx reaches the broker, and its CW_DB=... variable: its
 * links, or the direct ones when it has none. */
const char *runner_broker_addr(const struct sctx *s, int idx);
const char *runner_db_env(const struct sctx *s, int idx);

/* The variables that give process idx its scenario clock (libfaketime)
 * into env (at most max, texts in buf[]).  Returns how many (0: real
 * time), or -1 when libfaketime is not installed. */
int runner_clock_env(const struct sctx *s, int idx, char (*buf)[160], const char **env,
                     int max);

/* Connections process idx holds open to the broker now, as its link's
 * proxy counts them; -1 when it has no broker link or the proxy did not
 * answer. */
int runner_net_link_open(struct sctx *s, int idx);

/* Executes a net step: sets or clears a fault on a link (a window gets
 * the pid of the link's process, which must run).  0 or -1. */
int runner_net_step(struct sctx *s, const struct sc_step *st);

/* Process idx has just been (re)started: a window set on one of its links
 * signals the new pid from now on.  0 or -1 (recorded). */
int runner_net_proc_started(struct sctx *s, int idx);

/* The windows' firings as faults_fired entries (point "LINK/FRAME"), added
 * to fired. */
void runner_net_windows_fired(struct sctx *s, cJSON *fired);

/* The heal's part: every fault the scenario set on a link is cleared now,
 * partitions included, instead of running out its duration; each link is
 * logged (net_clear, why "heal", or the error of a proxy that did not
 * answer). */
void runner_net_clear_all(struct sctx *s);

/* Logs each link's counters (net_stats events), each window's firing as
 * the kill, pause or drop it was (at the time it fired, aimed at the link's
 * process), and fails the scenario when a cut or a window it set never
 * fired.  0 or -1 (recorded). */
int runner_net_check(struct sctx *s);

/* When a scenario of the run has a partition fault: the run moves into a
 * network namespace of its own (before PostgreSQL and every process
 * start), with loopback up; --pg's server must then be named by its Unix
 * socket.  Nothing to do when the process left the host's namespace
 * already (runner_net_unshare).  0, or -1 with the reason printed. */
int runner_net_isolate(const struct run_opts *o, struct scenario *const *scs, int n);

/* --keep: how to set a fault on a live link by hand. */
void runner_net_print_keep(const struct sctx *s);

/* ---- runner_dbfault.c --------------------------------------------------- */

/* The scenario's own primary and streaming standby, its database, the
 * multi-host conninfo and the runner's connection.  0 or -1 (recorded). */
int runner_open_standby_db(struct sctx *s);

/* Stops the scenario's own clusters (unless --keep), resuming a stalled
 * WAL receiver first. */
void runner_close_own_cluster(struct sctx *s);

/* The "db" step.  0 or -1 (recorded). */
int runner_step_db(struct sctx *s, const struct sc_step *st);

/* Waits for a "lock" step's hold, or a "deadlock" step's session, to end
 * (the server ends both), closes its session and logs its db_fault event;
 * nothing when none is held.  The heal calls it, and the end of a scenario
 * when the heal did not run (log 0: no event, the run was cut off).  -1
 * (recorded) when a deadlock's session found no process to deadlock with:
 * the scenario tested nothing of what it meant to. */
int runner_db_lock_release(struct sctx *s, int log);

/* Ends every "refuse" step's trigger: reads how many statements it refused,
 * drops it and logs its db_fault event (log 1, the heal), or only drops it
 * (log 0, a run cut off).  -1 (recorded) when one refused nothing: no
 * process met the failure the scenario was written for. */
int runner_db_refusals_end(struct sctx *s, int log);

/* With run_opts.stop_when_decided (a mutant's run): checks the history so
 * far, and returns 1 with the invariant and its first witness in why when
 * one the scenario lists, and no later event can undo, has already failed
 * (a second effect, a version out of order, a publish after its lease...).
 * The mutant's verdict is then fail whatever the heal brings, so a failed
 * step skips the heal and a heal that has not converged stops waiting.  0
 * otherwise, also for a hazard scenario, a target, or a history that cannot
 * be read yet. */
int runner_verdict_decided(struct sctx *s, char *why, size_t whylen);

/* How long a wait step or the heal goes on before a mutant's run asks
 * runner_verdict_decided, and again after each such interval: most waits
 * are over sooner, and a history is not read more often than that. */
#define RUNNER_DECIDE_AFTER_MS 3000

/* A "db_fault" runner event for an outage of target ("postgres" or
 * "broker"), logged when it is over: its action, detail (may be NULL) and
 * when it began (s->fault_started_us), for runner_recovery_json. */
void runner_outage_event(struct sctx *s, const char *target, const char *action,
                         const char *detail);

/* Waits ms (a fault's duration, chosen by the scenario), waking for an
 * interruption. */
void runner_hold(int ms);

/* One object per database or broker fault of the scenario: target, action
 * and recovery_ms, the time from the fault's end to the first event a
 * consumer applied after it (null when none was).  Caller frees. */
cJSON *runner_recovery_json(struct sctx *s, const cJSON *const *proc_events);

/* ---- runner_broker_crash.c ---------------------------------------------- */

/* The "broker_crash" step.  0 or -1 (recorded). */
int runner_step_broker_crash(struct sctx *s, const struct sc_step *st);

/* ---- runner_rabbitmq_node.c --------------------------------------------- */

/* 1 when the run is against RabbitMQ (--broker rabbitmq). */
int runner_rabbit(const struct runner *r);

/* The run's node: started (URL in r->rabbit_url), 0 or -1 with a message
 * on stderr; stopped and removed (unless --keep). */
int runner_rabbit_start(struct runner *r);
void runner_rabbit_stop(struct runner *r);

/* The scenario's exchange and the --broker URL its processes get. */
void runner_rabbit_address(struct sctx *s);

/* rabbit-bridge's command line in argv (at most max entries with the NULL);
 * returns the count. */
int runner_rabbit_bridge_argv(struct sctx *s, char **argv, int max);

/* Before a target's scenario: the node's vhost emptied and made again, so
 * nothing a scenario declared or left reaches the next.  0 or -1 (recorded). */
int runner_rabbit_reset(struct sctx *s);

/* Before a scenario with a broker_crash, once the bridge declared the
 * topology: the node's queue registry flushed to disk.  0 or -1 (recorded). */
int runner_rabbit_settle(struct sctx *s);

/* broker_crash against RabbitMQ: kill -9 of the node, down_ms, restart on
 * its data.  0 or -1 (recorded). */
int runner_rabbit_crash(struct sctx *s, int down_ms);

/* 1 when a broker step's control is the one action RabbitMQ can take too:
 * {"close_connections": true}. */
int runner_rabbit_can_control(const cJSON *control);

/* close_connections against RabbitMQ: rabbitmqctl close_all_connections.
 * 0 or -1 (recorded). */
int runner_rabbit_close_connections(struct sctx *s);

/* ---- runner_target.c ---------------------------------------------------- */

struct target;

/* 0 when sc can run against target t from outside, else -1 with
 * "FILE: FIELD: cannot run against target T: why" in err (a bad file for
 * this run: exit status 2). */
int runner_target_refuses(const struct target *t, const struct scenario *sc, char *err,
                          size_t errlen);

/* 0 when every "requires" command of r's target runs and exits 0; 1 with
 * why (the profile's reason and what happened): the run's scenarios are
 * then skipped with it, never counted as passed.  After find_binaries: a
 * command may name ${bin:PROGRAM}. */
int runner_target_requirement(const struct runner *r, char *why, size_t whylen);

/* argv0 as an executable path (itself, or found on PATH).  0 or -1. */
int runner_target_resolve(const char *argv0, char *out, size_t outlen);

/* The scenario's database for a target: empty (template0), the profile's
 * set-up run on it, and each mapping query made the view cw_target_<table>
 * with the canonical columns (a query that fails or lacks one is named).
 * 0 or -1 (recorded). */
int runner_target_open_db(struct sctx *s);

/* Starts scenario process idx from its role's entry in the profile (a
 * restart when it ran before; refused when the profile forbids it) and
 * waits until the profile's readiness holds.  0 or -1 (recorded, with the
 * process's last log line). */
int runner_target_start_proc(struct sctx *s, int idx);

/* What a wait on a target counts through the mapping: messages published
 * (U_PUBLISHED) or distinct messages consumer group applied (U_CONSUMED).
 * -1 with err. */
long long runner_target_count(struct sctx *s, enum sc_until until, const char *group,
                              char *err, size_t errlen);

/* The target's checks (checker_run_target) and the scenario's
 * expectations, over its mapping views, the broker log and the runner's
 * HTTP log, into oc. */
void runner_target_check(struct sctx *s, struct outcome *oc);

/* 1 when no outbox message of the target is pending, else 0 with why. */
int runner_target_drained(struct sctx *s, char *why, size_t whylen);

/* Whether a target still makes progress: what its mapping shows, sampled
 * at most every half second.  Start with mark = -2. */
struct progress_watch {
    long long mark;
    int64_t since, next_ms;
};

/* 1 when the mapping has shown no change for the profile's
 * progress_timeout_ms (never without one, nor while it cannot be read). */
int runner_target_stalled(struct sctx *s, struct progress_watch *w);

/* Published messages of the target group has no effect of; -1 with err. */
long long runner_target_unconsumed(struct sctx *s, const char *group, char *err,
                                   size_t errlen);

/* ---- runner_heal.c ------------------------------------------------------ */

/* 1 when the pipeline has drained (nothing pending, nothing unconsumed,
 * nothing in flight at the broker), else 0 with why saying what is left. */
int runner_pipeline_quiet(struct sctx *s, char *why, size_t whylen);

/* The heal phase: faults off, broker reset, every process running, then
 * waits until the pipeline is quiet.  0 or -1 (error recorded). */
int runner_heal(struct sctx *s);

#endif
