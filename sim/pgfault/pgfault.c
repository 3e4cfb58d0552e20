/* pgfault.c -- PostgreSQL as a fault target; see pgfault.h.
 *
 * Process discovery reads /proc: the children of the postmaster are the
 * processes whose parent pid (field 4 of /proc/PID/stat, after the command
 * name in parentheses, which may itself hold spaces and parentheses) is the
 * postmaster's. */
#include "pgfault.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pid_t postmaster_pid(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/postmaster.pid", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "no server runs in %s (%s)", dir, strerror(errno));
        return -1;
    }
    long pid = 0;
    int ok = fscanf(f, "%ld", &pid) == 1 && pid > 1;
    fclose(f);
    if (!ok || kill((pid_t)pid, 0) != 0) {
        snprintf(err, errlen, "no server runs in %s (stale postmaster.pid)", dir);
        return -1;
    }
    return (pid_t)pid;
}

/* The parent pid of pid, or -1. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    char state;
    long ppid;
    if (close == NULL || sscanf(close + 1, " %c %ld", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

int pgf_server_pids(const char *dir, pid_t *pids, int max, char *err, size_t errlen)
{
    pid_t pm = postmaster_pid(dir, err, errlen);
    if (pm < 0 || max < 1)
        return -1;
    int n = 0;
    pids[n++] = pm;
    DIR *d = opendir("/proc");
    if (d == NULL) {
        snprintf(err, errlen, "cannot read /proc: %s", strerror(errno));
        return -1;
    }
    struct dirent *de;
    for (de = readdir(d); de != NULL && n < max; de = readdir(d)) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atol(de->d_name);
        if (pid != pm && parent_of(pid) == pm)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

int pgf_freeze(const char *dir, pid_t *pids, int max, char *err, size_t errlen)
{
    pid_t pm = postmaster_pid(dir, err, errlen);
    if (pm < 0)
        return -1;
    /* The postmaster first: once it is stopped it forks nobody new, so the
     * children listed next are all there are. */
    if (kill(pm, SIGSTOP) != 0) {
        snprintf(err, errlen, "cannot stop the postmaster %d: %s", (int)pm, strerror(errno));
        return -1;
    }
    int n = pgf_server_pids(dir, pids, max, err, errlen);
    if (n < 0) {
        kill(pm, SIGCONT);
        return -1;
    }
    for (int i = 1; i < n; i++)
        kill(pids[i], SIGSTOP); /* one that exited meanwhile is simply gone */
    return n;
}

void pgf_thaw(const pid_t *pids, int n)
{
    for (int i = n - 1; i >= 0; i--)
        kill(pids[i], SIGCONT);
}

/* 1 when pid's command line starts with prefix. */
static int cmdline_is(pid_t pid, const char *prefix)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strncmp(buf, prefix, strlen(prefix)) == 0;
}

int pgf_signal_walreceiver(const char *dir, int sig, char *err, size_t errlen)
{
    pid_t pids[PGF_MAX_PIDS];
    int n = pgf_server_pids(dir, pids, PGF_MAX_PIDS, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 1; i < n; i++) {
        if (cmdline_is(pids[i], "postgres: walreceiver")) {
            if (kill(pids[i], sig) != 0) {
                snprintf(err, errlen, "cannot signal the WAL receiver %d: %s", (int)pids[i],
                         strerror(errno));
                return -1;
            }
            return 0;
        }
    }
    return 1;
}

const char *pgf_terminate_sql(void)
{
    return "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))"
           "  FROM pg_stat_activity"
           " WHERE datname = $1 AND pid <> pg_backend_pid()"
           "   AND CASE WHEN $2 = '' THEN application_name = ANY($3::text[])"
           "            ELSE application_name = $2 END";
}
