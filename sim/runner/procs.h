/* procs.h -- supervising the real processes of a scenario.
 *
 * The runner starts each process with posix_spawn in its own process group
 * (so a Ctrl-C at the terminal reaches the runner, which then cleans up,
 * rather than killing the pipeline half-way through a step), its stdout and
 * stderr appended to a log file, and an environment built from scratch:
 * the runner's own minus every fault variable, plus CW_FIU_FIFO, the
 * caller's extra variables (the runner hands the database's connection
 * string over as CW_DB: an argv is world-readable in /proc and ps, an
 * environment is not) and, only when the step says so, CW_FAULTS.  That is what makes a restart "fresh":
 * a one-time fault never reaches the next incarnation by inheritance.
 *
 * Exits are noticed by polling waitpid(WNOHANG) -- every wait of the runner
 * is a bounded poll anyway -- and stops (a process parked at a fault point
 * raised SIGSTOP on itself) by reading the state letter of /proc/PID/stat.
 * A process killed with SIGKILL leaves its libfiu control FIFOs behind;
 * proc_poll, which every reap goes through, removes them. */
#ifndef CW_PROCS_H
#define CW_PROCS_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct proc {
    char name[32];
    pid_t pid;              /* the current or last incarnation; 0 before the first start */
    int running;            /* spawned and not yet reaped */
    int starts;             /* incarnations so far */
    int status;             /* waitpid status of the last exit */
    int exit_reported;      /* the last exit was logged by the runner */
    char events_path[PATH_MAX];
    char log_path[PATH_MAX];
    const char *fifo_prefix; /* CW_FIU_FIFO given to it (hyphen-free) */
    char cwd[PATH_MAX];     /* its working directory; "": the runner's */
};

#define PROC_MAX_EXTRA_ENV 40

/* Starts argv[0] (a path) with argv.  faults (may be NULL) becomes CW_FAULTS;
 * extra_env (NULL-terminated "NAME=value" list, at most PROC_MAX_EXTRA_ENV,
 * may be NULL) is added, replacing the runner's own variables of the same
 * names.  Returns 0, or -1 with a message in err (p unchanged). */
int proc_spawn(struct proc *p, char *const argv[], const char *faults,
               const char *const *extra_env, char *err, size_t errlen);

/* Reaps p if it has exited (non-blocking).  Returns 1 while it runs, 0 once
 * it has exited (p->status set, FIFOs removed). */
int proc_poll(struct proc *p);

/* The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0. */
char proc_state(pid_t pid);
/* True when p runs and is stopped (SIGSTOP: state 'T' or 't'). */
int proc_stopped(const struct proc *p);

/* Sends sig to p when it runs.  0, or -1 when it is not running. */
int proc_signal(struct proc *p, int sig);

/* Waits up to timeout_ms for p to exit.  0 when it has, -1 on timeout. */
int proc_wait_exit(struct proc *p, int timeout_ms);

/* SIGKILL and reap (bounded).  0, or -1 if it would not die. */
int proc_kill(struct proc *p);

/* SIGCONT + SIGTERM, wait up to timeout_ms, then SIGKILL.  Returns 0 when it
 * exited on SIGTERM, 1 when it had to be killed, -1 when it was not running. */
int proc_stop(struct proc *p, int timeout_ms);

/* "exit status 0", "killed by SIGKILL", ... for the last exit of p. */
void proc_exit_text(const struct proc *p, char *out, size_t outlen);

/* Removes the libfiu control FIFOs of pid under prefix (PREFIX-PID.in/out). */
void proc_fifo_cleanup(const char *prefix, pid_t pid);

/* Runs a helper command to completion: argv[0] is a path, extra_env as for
 * proc_spawn (may be NULL), stdin from /dev/null, stdout+stderr captured into
 * out (NUL-terminated, truncated to outlen).  Killed after timeout_ms.
 * Returns the exit status (0-255), 128+N when killed by signal N, or -1
 * (with a message in out) when it could not run or timed out. */
int proc_run_capture(char *const argv[], const char *const *extra_env, int timeout_ms,
                     char *out, size_t outlen);
/* The same in working directory cwd (NULL: the runner's). */
int proc_run_capture_in(const char *cwd, char *const argv[], const char *const *extra_env,
                        int timeout_ms, char *out, size_t outlen);

#endif
