/* jobs.c -- `--jobs N`: shards of one command side by side, then a merge.
 * See jobs.h for what is run, where its files go and what is refused. */
#include "jobs.h"
#include "common_fs.h"
#include "fstree.h"
#include "merge.h"
#include "cwlog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JOBS_PROGRESS_MS 60000    /* a line on where each child stands */
#define JOBS_POLL_MS 200

struct job {
    pid_t pid;                    /* 0 once it ended */
    int status;                   /* its exit status; -1 when killed by a signal */
    char dir[PATH_MAX];           /* PARTS/K: its run directory */
    char log[PATH_MAX];           /* PARTS/K.log: its console */
};

struct jobs {
    const char *cmd;
    int n;                        /* slots: shares running at once */
    int m;                        /* shares: the K/M each child runs */
    const char *out;
    const char *junit;
    const char *report;           /* run's --report FILE */
    char out_buf[PATH_MAX];       /* the default out */
    char parts[PATH_MAX];         /* OUT.jobs */
    const char **pass;            /* the options every child gets */
    int npass;
    const int *order;             /* the shares' start order (indexes), or NULL: 1..M */
    struct job *job;              /* m of them */
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

int jobs_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--jobs") == 0)
            return 1;
    return 0;
}

static void jobs_usage(FILE *f, const char *cmd)
{
    fprintf(f,
        "usage: crashwindow %s --jobs N [--shares M] [--out DIR] [--junit FILE] [options]\n"
        "  runs --shard K/M for K = 1..M, N at a time on this machine (each with its own\n"
        "  cluster and broker, console in DIR.jobs/K.log), then merges them into DIR\n"
        "  (crashwindow merge); N from 1 to %d, M from 1 to %d (default: N; for\n"
        "  mutants, one share per mutant)\n", cmd, JOBS_MAX, JOBS_SHARES_MAX);
}

/* Sorts argv into j.  0, 1 after --help, -1 on bad usage (printed). */
static int parse(int argc, char **argv, const char *source_dir, int default_shares,
                 int max_shares, struct jobs *j)
{
    static const char *refused[] = {
        "--shard", "--pg", "--pg-dir", "--keep", "--dry-run", "--replay", "--shrink",
        "--shard-weights", "--fidelity",
    };
    j->cmd = argv[0];
    if (strcmp(j->cmd, "run") != 0 && strcmp(j->cmd, "mutants") != 0
        && strcmp(j->cmd, "sim") != 0) {
        fprintf(stderr, "crashwindow %s: --jobs is for run, mutants and sim\n", j->cmd);
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            jobs_usage(stdout, j->cmd);
            return 1;
        }
        for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
            if (strcmp(a, refused[k]) == 0) {
                fprintf(stderr, "crashwindow %s: %s cannot go with --jobs (%s)\n", j->cmd, a,
                        strcmp(a, "--pg") == 0 || strcmp(a, "--pg-dir") == 0
                            ? "each job starts a cluster of its own: a database fault in one "
                              "must not hit the other"
                            : strncmp(a, "--shard", 7) == 0 ? "--jobs chooses the shards"
                            : "it is not work that splits");
                return -1;
            }
        }
        if (strcmp(a, "--jobs") == 0 && has_val) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end != '\0' || argv[i][0] == '\0' || n < 1 || n > JOBS_MAX) {
                fprintf(stderr, "crashwindow %s: --jobs takes a number from 1 to %d, not '%s'\n",
                        j->cmd, JOBS_MAX, argv[i]);
                return -1;
            }
            j->n = (int)n;
        } else if (strcmp(a, "--shares") == 0 && has_val) {
            char *end;
            long m = strtol(argv[++i], &end, 10);
            if (*end != '\0' || argv[i][0] == '\0' || m < 1 || m > JOBS_SHARES_MAX) {
                fprintf(stderr, "crashwindow %s: --shares takes a number from 1 to %d, not "
                        "'%s'\n", j->cmd, JOBS_SHARES_MAX, argv[i]);
                return -1;
            }
            j->m = (int)m;
        } else if (strcmp(a, "--out") == 0 && has_val) {
            j->out = argv[++i];
        } else if (strcmp(a, "--junit") == 0 && has_val) {
            j->junit = argv[++i];
        } else if (strcmp(a, "--report") == 0 && has_val && strcmp(j->cmd, "run") == 0) {
            j->report = argv[++i];
        } else if (strcmp(a, "--jobs") == 0 || strcmp(a, "--shares") == 0) {
            fprintf(stderr, "crashwindow %s: %s needs a number\n", j->cmd, a);
            return -1;
        } else {
            /* Everything else is the command's own, checked by each child. */
            j->pass[j->npass++] = a;
        }
    }
    if (j->n == 0) {
        fprintf(stderr, "crashwindow %s: --shares goes with --jobs\n", j->cmd);
        return -1;
    }
    if (j->m == 0) {
        j->m = default_shares > j->n ? default_shares : j->n;
        /* Two scenarios on --jobs 4: two shares, not two with nothing to run. */
        if (max_shares > 0 && j->m > max_shares)
            j->m = max_shares;
    }
    if (j->n > j->m)
        j->n = j->m;
    j->job = calloc((size_t)j->m, sizeof(*j->job));
    if (j->job == NULL)
        return -1;
    if (j->out == NULL) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        if (cw_fmt(j->out_buf, sizeof(j->out_buf), "%s/reports/%s-%s", source_dir, j->cmd,
                       stamp) >= (int)sizeof(j->out_buf)) {
            fprintf(stderr, "crashwindow %s: the default --out is too long\n", j->cmd);
            return -1;
        }
        j->out = j->out_buf;
    }
    size_t len = strlen(j->out);
    while (len > 1 && j->out[len - 1] == '/')
        len--;
    if (cw_fmt(j->parts, sizeof(j->parts), "%.*s.jobs", (int)len, j->out)
        >= (int)sizeof(j->parts)) {
        fprintf(stderr, "crashwindow %s: --out %s: path too long\n", j->cmd, j->out);
        return -1;
    }
    struct stat st;
    const char *there = stat(j->out, &st) == 0 ? j->out : stat(j->parts, &st) == 0 ? j->parts
                                                                                : NULL;
    if (there != NULL) {
        fprintf(stderr, "crashwindow %s: %s exists: --jobs writes a new directory (and "
                "its children's %s)\n", j->cmd, there, j->parts);
        return -1;
    }
    for (int k = 0; k < j->m; k++) {
        struct job *jb = &j->job[k];
        if (cw_fmt(jb->dir, sizeof(jb->dir), "%s/%d", j->parts, k + 1) >= (int)sizeof(jb->dir)
            || cw_fmt(jb->log, sizeof(jb->log), "%s/%d.log", j->parts, k + 1)
                   >= (int)sizeof(jb->log)) {
            fprintf(stderr, "crashwindow %s: --out %s: path too long\n", j->cmd, j->out);
            return -1;
        }
    }
    return 0;
}

/* Starts child k: this binary, the command, the passed options, its shard
 * and its directory; its console into its log.  0 or -1 (printed). */
static int start_job(struct jobs *j, int k, const char *exe)
{
    struct job *jb = &j->job[k];
    char shard[32];
    snprintf(shard, sizeof(shard), "%d/%d", k + 1, j->m);
    const char **argv = calloc((size_t)j->npass + 8, sizeof(char *));
    if (argv == NULL)
        return -1;
    int n = 0;
    argv[n++] = exe;
    argv[n++] = j->cmd;
    for (int i = 0; i < j->npass; i++)
        argv[n++] = j->pass[i];
    argv[n++] = "--shard";
    argv[n++] = shard;
    argv[n++] = "--out";
    argv[n++] = jb->dir;
    argv[n] = NULL;
    int fd = open(jb->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "crashwindow %s: %s: %s\n", j->cmd, jb->log, strerror(errno));
        free(argv);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "crashwindow %s: fork: %s\n", j->cmd, strerror(errno));
        close(fd);
        free(argv);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(exe, (char *const *)argv);
        fprintf(stderr, "crashwindow: exec %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(fd);
    free(argv);
    jb->pid = pid;
    return 0;
}

/* The last non-empty line of a child's log (at most outlen-1 bytes) into out. */
static void last_line(const char *path, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char buf[1024];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0;
    size_t got = 0;
    if (size > 0 && fseek(f, from, SEEK_SET) == 0)
        got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
        buf[--got] = '\0';
    char *nl = strrchr(buf, '\n');
    snprintf(out, outlen, "%s", nl != NULL ? nl + 1 : buf);
}

/* The last lines of a child's log, to stderr: why it failed. */
static void print_tail(const struct job *jb, int lines)
{
    FILE *f = fopen(jb->log, "r");
    if (f == NULL)
        return;
    char ring[16][512];
    int n = 0;
    char line[512];
    if (lines > 16)
        lines = 16;
    while (fgets(line, sizeof(line), f) != NULL)
        snprintf(ring[n++ % lines], sizeof(ring[0]), "%s", line);
    fclose(f);
    for (int i = n > lines ? n - lines : 0; i < n; i++)
        fprintf(stderr, "    %s", ring[i % lines]);
}

/* 1 when share k ended in a way that cannot be merged. */
static int job_broken(const struct job *jb)
{
    return jb->status != 0 && jb->status != 1;
}

/* Runs every share, n at a time, with a progress line a minute; SIGINT and
 * SIGTERM are passed on and start nothing more, as does a share that ended
 * in a way that cannot be merged.  Bounded by the children: each bounds its
 * own run.  Returns how many shares were started. */
static int run_jobs(struct jobs *j, const char *exe, int64_t t0)
{
    int live = 0, next = 0, ended = 0, forwarded = 0, broken = 0;
    int64_t next_progress = t0 + JOBS_PROGRESS_MS;
    for (;;) {
        while (live < j->n && next < j->m && stop_signal == 0 && !broken) {
            if (start_job(j, j->order != NULL ? j->order[next] : next, exe) < 0) {
                broken = 1;
                break;
            }
            next++;
            live++;
        }
        if (live == 0)
            break;
        if ((stop_signal != 0 || broken) && !forwarded) {
            for (int k = 0; k < j->m; k++)
                if (j->job[k].pid > 0)
                    kill(j->job[k].pid, stop_signal != 0 ? (int)stop_signal : SIGTERM);
            forwarded = 1;
        }
        for (int k = 0; k < j->m; k++) {
            struct job *jb = &j->job[k];
            int st;
            if (jb->pid <= 0 || waitpid(jb->pid, &st, WNOHANG) != jb->pid)
                continue;
            jb->pid = 0;
            jb->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            double min = (double)(cw_mono_ms() - t0) / 60000.0;
            live--;
            ended++;
            broken |= job_broken(jb);
            if (jb->status >= 0)
                printf("crashwindow %s --jobs: shard %d/%d ended with exit status %d after "
                       "%.1f min (%d of %d ended; %s)\n", j->cmd, k + 1, j->m, jb->status,
                       min, ended, j->m, jb->log);
            else
                printf("crashwindow %s --jobs: shard %d/%d was killed by signal %d after "
                       "%.1f min (%s)\n", j->cmd, k + 1, j->m, WTERMSIG(st),
                       min, jb->log);
            fflush(stdout);
        }
        int64_t now = cw_mono_ms();
        if (live > 0 && now >= next_progress) {
            next_progress = now + JOBS_PROGRESS_MS;
            for (int k = 0; k < j->m; k++) {
                if (j->job[k].pid <= 0)
                    continue;
                char line[160];
                last_line(j->job[k].log, line, sizeof(line));
                printf("crashwindow %s --jobs: %.0f min, shard %d/%d: %s\n", j->cmd,
                       (double)(now - t0) / 60000.0, k + 1, j->m, line);
            }
            fflush(stdout);
        }
        if (live > 0) {
            struct timespec ts = { 0, JOBS_POLL_MS * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    return next;
}

/* The merge of every child's directory into out, then each child's log
 * beside its share.  The merge's status. */
static int merge_jobs(struct jobs *j)
{
    const char *argv[JOBS_SHARES_MAX + 6];
    int n = 0;
    argv[n++] = "merge";
    for (int k = 0; k < j->m; k++)
        argv[n++] = j->job[k].dir;
    argv[n++] = "--out";
    argv[n++] = j->out;
    if (j->junit != NULL) {
        argv[n++] = "--junit";
        argv[n++] = j->junit;
    }
    argv[n] = NULL;
    int rc = merge_main(n, (char **)argv);
    if (rc == 2)
        return 2;
    char err[512], dst[PATH_MAX];
    for (int k = 0; k < j->m; k++) {
        if (cw_fmt(dst, sizeof(dst), "%s/shards/%d/console.log", j->out, k + 1)
                < (int)sizeof(dst)
            && fstree_copy_file(j->job[k].log, dst, 1, err, sizeof(err)) < 0)
            fprintf(stderr, "crashwindow %s --jobs: %s\n", j->cmd, err);
    }
    if (j->report != NULL) {
        char src[PATH_MAX];
        cw_fmt(src, sizeof(src), "%s/report.html", j->out);
        if (fstree_copy_file(src, j->report, 0, err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow %s --jobs: --report: %s\n", j->cmd, err);
            return 2;
        }
        printf("report: %s\n", j->report);
    }
    fstree_remove(j->parts);
    return rc;
}

int jobs_main(int argc, char **argv, const char *source_dir, int default_shares,
              int max_shares, const int *order, int norder)
{
    struct jobs j;
    memset(&j, 0, sizeof(j));
    j.pass = calloc((size_t)argc + 1, sizeof(char *));
    if (j.pass == NULL)
        return 2;
    int rc = 2;
    int pr = parse(argc, argv, source_dir, default_shares, max_shares, &j);
    if (pr != 0) {
        rc = pr > 0 ? 0 : 2;
        goto out;
    }
    /* An order of another count of shares (--jobs above the mutants) is
     * no order of these. */
    j.order = norder == j.m ? order : NULL;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        fprintf(stderr, "crashwindow %s: cannot find this binary: %s\n", j.cmd, strerror(errno));
        goto out;
    }
    exe[len] = '\0';
    if (cw_mkdir_p(j.parts) < 0) {
        fprintf(stderr, "crashwindow %s: %s: %s\n", j.cmd, j.parts, strerror(errno));
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int64_t t0 = cw_mono_ms();
    printf("crashwindow %s --jobs %d: shards 1..%d, %d at a time, consoles in %s/K.log, "
           "merged into %s\n", j.cmd, j.n, j.m, j.n, j.parts, j.out);
    fflush(stdout);
    int started = run_jobs(&j, exe, t0);
    if (stop_signal != 0) {
        /* Children stopped half way end with 1; a merge would only refuse. */
        fprintf(stderr, "crashwindow %s --jobs: stopped by signal %d; nothing merged, %s "
                "stays\n", j.cmd, (int)stop_signal, j.parts);
        goto out;
    }
    for (int k = 0; k < j.m; k++) {
        if (job_broken(&j.job[k])) {
            fprintf(stderr, "crashwindow %s --jobs: shard %d/%d did not finish (%s); nothing "
                    "merged, %s stays.  The end of its console:\n", j.cmd, k + 1, j.m,
                    j.job[k].status < 0 ? "killed by a signal" : "exit status 2 or more",
                    j.parts);
            print_tail(&j.job[k], 12);
            goto out;
        }
    }
    if (started < j.m) {
        fprintf(stderr, "crashwindow %s --jobs: only %d of %d shards could start; nothing "
                "merged, %s stays\n", j.cmd, started, j.m, j.parts);
        goto out;
    }
    printf("crashwindow %s --jobs: every shard ended after %.1f min; merging\n", j.cmd,
           (double)(cw_mono_ms() - t0) / 60000.0);
    fflush(stdout);
    rc = merge_jobs(&j);
out:
    free(j.job);
    free(j.pass);
    return rc;
}
