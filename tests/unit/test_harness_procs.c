/* test_harness_procs.c -- unit tests of the runner's process supervision:
 * spawn with the child's environment, stop detection, stop and kill with
 * reaping and FIFO cleanup, and bounded helper commands. */
#include "procs.h"
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The size of the file at path, or -1 when there is none. */
static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_procs(void)
{
    CHECK_EQ_INT(proc_state(getpid()), 'R');
    CHECK_EQ_INT(proc_state(999999999), 0);

    char out[256];
    char *echo[] = { (char *)"/bin/sh", (char *)"-c", (char *)"echo hi; exit 3", NULL };
    CHECK(proc_run_capture(echo, NULL, 5000, out, sizeof(out)) == 3);
    CHECK_EQ_STR(out, "hi\n");
    char *slow[] = { (char *)"/bin/sleep", (char *)"30", NULL };
    CHECK(proc_run_capture(slow, NULL, 200, out, sizeof(out)) == -1);
    CHECK(strstr(out, "timed out after 200 ms") != NULL);
    char *missing[] = { (char *)"/nonexistent/binary", NULL };
    CHECK(proc_run_capture(missing, NULL, 1000, out, sizeof(out)) != 0);

    char dir[] = "/tmp/cwtest_procXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct proc p;
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "sleeper");
    snprintf(p.log_path, sizeof(p.log_path), "%s/sleeper.log", dir);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s/fiu", dir);
    p.fifo_prefix = prefix;
    char err[256];
    /* The child must not see CW_FAULTS unless given: print it.  Extra
     * variables replace the runner's own of the same name. */
    setenv("CW_FAULTS", "leaked=crash", 1);
    setenv("CW_DB", "runner-own", 1);
    char *sh[] = { (char *)"/bin/sh", (char *)"-c",
                   (char *)"echo \"faults=[$CW_FAULTS] fifo=[$CW_FIU_FIFO] db=[$CW_DB]\"; "
                           "exec sleep 30", NULL };
    const char *env[] = { "CW_DB=host=/x dbname=y", NULL };
    CHECK_EQ_INT(proc_spawn(&p, sh, "x/y=park", env, err, sizeof(err)), 0);
    unsetenv("CW_FAULTS");
    CHECK(p.running && p.starts == 1 && proc_poll(&p) == 1);
    /* The child's line (it runs before exec sleep). */
    WAIT_FOR(file_size(p.log_path) > 0, 5000);
    /* Leftover FIFOs of this pid, as a SIGKILLed process leaves them. */
    char fin[128], fout[128];
    snprintf(fin, sizeof(fin), "%s-%d.in", prefix, (int)p.pid);
    snprintf(fout, sizeof(fout), "%s-%d.out", prefix, (int)p.pid);
    CHECK(mkfifo(fin, 0600) == 0 && mkfifo(fout, 0600) == 0);
    CHECK_EQ_INT(proc_signal(&p, SIGSTOP), 0);
    WAIT_FOR(proc_stopped(&p), 2000);
    /* proc_stop wakes a stopped process before SIGTERM. */
    CHECK_EQ_INT(proc_stop(&p, 5000), 0);
    CHECK(!p.running && proc_poll(&p) == 0);
    CHECK(access(fin, F_OK) != 0 && access(fout, F_OK) != 0);
    char how[64];
    proc_exit_text(&p, how, sizeof(how));
    CHECK(strstr(how, "TERM") != NULL);
    FILE *f = fopen(p.log_path, "r");
    char line[256] = "";
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
    }
    char want[160];
    snprintf(want, sizeof(want), "faults=[x/y=park] fifo=[%s] db=[host=/x dbname=y]", prefix);
    CHECK(strncmp(line, want, strlen(want)) == 0);
    if (strncmp(line, want, strlen(want)) != 0)
        fprintf(stderr, "  child saw: %s", line);
    /* A second incarnation without faults sees none. */
    off_t before = file_size(p.log_path);
    CHECK(proc_spawn(&p, sh, NULL, NULL, err, sizeof(err)) == 0 && p.starts == 2);
    WAIT_FOR(file_size(p.log_path) != before, 5000);
    CHECK(proc_kill(&p) == 0 && !p.running);
    proc_exit_text(&p, how, sizeof(how));
    CHECK(strstr(how, "KILL") != NULL);
    f = fopen(p.log_path, "r");
    int clean = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        clean = strncmp(line, "faults=[] ", 10) == 0 && strstr(line, "db=[runner-own]") != NULL;
    if (f != NULL)
        fclose(f);
    CHECK(clean);
    unsetenv("CW_DB");
    CHECK_EQ_INT(proc_signal(&p, SIGTERM), -1);
    unlink(p.log_path);
    rmdir(dir);
}

int main(void)
{
    test_procs();
    return check_report("test_harness_procs");
}
