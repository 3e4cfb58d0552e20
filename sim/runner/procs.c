/* procs.c -- starting, signalling and reaping processes; see procs.h.
 *
 * Only the runner's main thread calls these functions; the helper threads
 * (HTTP workload, metrics) never start or reap processes.  posix_spawn is
 * used rather than fork so that the child runs nothing of ours between the
 * fork and the exec while other threads hold locks. */
#include "procs.h"
#include "cwlog.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Is entry ("NAME=value") a variable that one of list sets? */
static int env_named_in(const char *entry, const char *const *list)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq != NULL ? (size_t)(eq - entry) + 1 : strlen(entry);
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        if (strncmp(entry, list[i], n) == 0)
            return 1;
    return 0;
}

/* The runner's environment without fault variables and without what extra
 * sets (extra wins), plus extra. */
static char **child_env(const char *const *extra)
{
    size_t n = 0, k = 0;
    while (environ[n] != NULL)
        n++;
    size_t nextra = 0;
    while (extra != NULL && extra[nextra] != NULL)
        nextra++;
    char **env = calloc(n + nextra + 1, sizeof(char *));
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "CW_FAULTS=", 10) == 0 ||
            strncmp(environ[i], "CW_FIU_FIFO=", 12) == 0 ||
            strncmp(environ[i], "FIU_ENABLE=", 11) == 0 ||
            strncmp(environ[i], "FIU_CTRL_FIFO=", 14) == 0 ||
            strncmp(environ[i], "LD_PRELOAD=", 11) == 0 ||
            env_named_in(environ[i], extra))
            continue;
        env[k++] = environ[i];
    }
    for (size_t i = 0; i < nextra; i++)
        env[k++] = (char *)extra[i];
    env[k] = NULL;
    return env;
}

int proc_spawn(struct proc *p, char *const argv[], const char *faults,
               const char *const *extra_env, char *err, size_t errlen)
{
    char fifo_var[PATH_MAX + 16];
    char *faults_var = NULL;
    const char *extra[PROC_MAX_EXTRA_ENV + 3];
    int ne = 0;
    for (int i = 0; extra_env != NULL && extra_env[i] != NULL; i++) {
        if (i == PROC_MAX_EXTRA_ENV) {
            snprintf(err, errlen, "cannot start %s: more than %d extra variables", p->name,
                     PROC_MAX_EXTRA_ENV);
            return -1;
        }
        extra[ne++] = extra_env[i];
    }
    if (p->fifo_prefix != NULL) {
        snprintf(fifo_var, sizeof(fifo_var), "CW_FIU_FIFO=%s", p->fifo_prefix);
        extra[ne++] = fifo_var;
    }
    if (faults != NULL && faults[0] != '\0') {
        size_t len = strlen(faults) + 16;
        faults_var = malloc(len);
        if (faults_var == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        snprintf(faults_var, len, "CW_FAULTS=%s", faults);
        extra[ne++] = faults_var;
    }
    extra[ne] = NULL;
    char **env = child_env(extra);
    int logfd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int rc = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int fa_ok = 0, attr_ok = 0;
    if (env == NULL || logfd < 0) {
        snprintf(err, errlen, "cannot start %s: %s", p->name,
                 logfd < 0 ? "cannot open its log file" : "out of memory");
        goto out;
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        snprintf(err, errlen, "cannot start %s: spawn setup failed", p->name);
        goto out;
    }
    fa_ok = 1;
    if (posix_spawnattr_init(&attr) != 0) {
        snprintf(err, errlen, "cannot start %s: spawn setup failed", p->name);
        goto out;
    }
    attr_ok = 1;
    if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, logfd, 1) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, logfd, 2) != 0 ||
        (p->cwd[0] != '\0' && posix_spawn_file_actions_addchdir_np(&fa, p->cwd) != 0)) {
        snprintf(err, errlen, "cannot start %s: spawn setup failed", p->name);
        goto out;
    }
    /* Own process group; default signal dispositions and an empty mask, so
     * the child does not inherit anything the runner blocks or ignores. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, &attr, argv, env);
    if (e != 0) {
        snprintf(err, errlen, "cannot start %s (%s): %s", p->name, argv[0], strerror(e));
        goto out;
    }
    p->pid = pid;
    p->running = 1;
    p->starts++;
    p->status = 0;
    p->exit_reported = 0;
    rc = 0;
out:
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (attr_ok)
        posix_spawnattr_destroy(&attr);
    if (logfd >= 0)
        close(logfd);
    free(env);
    free(faults_var);
    return rc;
}

void proc_fifo_cleanup(const char *prefix, pid_t pid)
{
    if (prefix == NULL || pid <= 0)
        return;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s-%d.in", prefix, (int)pid);
    unlink(path);
    snprintf(path, sizeof(path), "%s-%d.out", prefix, (int)pid);
    unlink(path);
}

int proc_poll(struct proc *p)
{
    if (!p->running)
        return 0;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == 0)
        return 1;
    if (r == p->pid)
        p->status = st;
    /* r < 0: not our child any more (ECHILD); treat as gone. */
    p->running = 0;
    proc_fifo_cleanup(p->fifo_prefix, p->pid);
    return 0;
}

char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "PID (comm) S ...": comm may hold spaces and parentheses, so take the
     * last ')'. */
    char *rp = strrchr(buf, ')');
    if (rp == NULL || rp[1] != ' ' || rp[2] == '\0')
        return 0;
    return rp[2];
}

int proc_stopped(const struct proc *p)
{
    if (!p->running)
        return 0;
    char s = proc_state(p->pid);
    return s == 'T' || s == 't';
}

int proc_signal(struct proc *p, int sig)
{
    if (!proc_poll(p))
        return -1;
    return kill(p->pid, sig) == 0 ? 0 : -1;
}

int proc_wait_exit(struct proc *p, int timeout_ms)
{
    int64_t deadline = cw_mono_ms() + timeout_ms;
    for (;;) {
        if (!proc_poll(p))
            return 0;
        if (cw_mono_ms() >= deadline)
            return -1;
        nap_ms(5);
    }
}

int proc_kill(struct proc *p)
{
    if (!proc_poll(p))
        return 0;
    kill(p->pid, SIGKILL);
    return proc_wait_exit(p, 10000);
}

int proc_stop(struct proc *p, int timeout_ms)
{
    if (!proc_poll(p))
        return -1;
    /* A stopped process cannot act on SIGTERM: wake it first. */
    kill(p->pid, SIGCONT);
    kill(p->pid, SIGTERM);
    if (proc_wait_exit(p, timeout_ms) == 0)
        return 0;
    proc_kill(p);
    return 1;
}

void proc_exit_text(const struct proc *p, char *out, size_t outlen)
{
    if (p->running)
        snprintf(out, outlen, "running");
    else if (WIFEXITED(p->status))
        snprintf(out, outlen, "exit status %d", WEXITSTATUS(p->status));
    else if (WIFSIGNALED(p->status))
        snprintf(out, outlen, "killed by %s", sigabbrev_np(WTERMSIG(p->status))
                 ? sigabbrev_np(WTERMSIG(p->status)) : "a signal");
    else
        snprintf(out, outlen, "gone");
}

int proc_run_capture(char *const argv[], const char *const *extra_env, int timeout_ms,
                     char *out, size_t outlen)
{
    return proc_run_capture_in(NULL, argv, extra_env, timeout_ms, out, outlen);
}

int proc_run_capture_in(const char *cwd, char *const argv[], const char *const *extra_env,
                        int timeout_ms, char *out, size_t outlen)
{
    int pipefd[2];
    out[0] = '\0';
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        snprintf(out, outlen, "pipe: %s", strerror(errno));
        return -1;
    }
    char **env = child_env(extra_env);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    if (cwd != NULL)
        posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int e = env ? posix_spawn(&pid, argv[0], &fa, &attr, argv, env) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(env);
    close(pipefd[1]);
    if (e != 0) {
        close(pipefd[0]);
        snprintf(out, outlen, "cannot run %s: %s", argv[0], strerror(e));
        return -1;
    }
    size_t len = 0;
    int timed_out = 0;
    int64_t deadline = cw_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - cw_mono_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = { pipefd[0], POLLIN, 0 };
        int r = poll(&pfd, 1, (int)(left > 200 ? 200 : left));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(pipefd[0], buf, sizeof(buf));
        if (n <= 0)
            break; /* EOF: every writer closed the pipe */
        size_t room = outlen - 1 - len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(out + len, buf, take);
        len += take;
    }
    close(pipefd[0]);
    out[len] = '\0';
    int st = 0;
    if (timed_out) {
        /* The whole group: fiu-ctrl's shell may have children of its own. */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
    /* Bounded reap: after EOF the child is exiting or has exited. */
    int64_t reap_deadline = cw_mono_ms() + (timed_out ? 5000 : timeout_ms + 1000);
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0) {
            st = 0;
            break;
        }
        if (cw_mono_ms() >= reap_deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            timed_out = 1;
            reap_deadline = cw_mono_ms() + 5000;
        }
        nap_ms(5);
    }
    if (timed_out) {
        size_t n = strlen(out);
        snprintf(out + n, outlen - n, "%s(timed out after %d ms)", n ? " " : "", timeout_ms);
        return -1;
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}
