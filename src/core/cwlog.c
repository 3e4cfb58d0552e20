/* cwlog.c -- structured JSON-lines events; see cwlog.h for the format. */
#include "cwlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static char log_proc[64] = "crashwindow";
/* Taken once at cwlog_open: getpid() is a system call on every line
 * otherwise (glibc stopped caching it), a few per cent of a relay's CPU in
 * a drain.  Every fork in these programs is followed by an exec. */
static pid_t log_pid;

int cwlog_open(const char *path, const char *proc)
{
    log_pid = getpid();
    if (proc != NULL)
        snprintf(log_proc, sizeof(log_proc), "%s", proc);
    if (path == NULL || strcmp(path, "-") == 0) {
        log_fd = 2;
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    log_fd = fd;
    return 0;
}

const char *cwlog_proc(void)
{
    return log_proc;
}

int64_t cw_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cw_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cw_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* As raw integer text: cJSON prints a double of 16 digits whose last digit
 * is 0 in exponent form (1.76445000012346e+15), and a reader that keeps
 * integers as integers would then see a float. */
void cwlog_add_int64(cJSON *obj, const char *key, int64_t v)
{
    char text[24];
    snprintf(text, sizeof(text), "%lld", (long long)v);
    if (cJSON_AddRawToObject(obj, key, text) == NULL)
        abort();
}

cJSON *cwlog_begin(const char *event)
{
    cJSON *ev = cJSON_CreateObject();
    if (ev == NULL)
        abort();
    cwlog_add_int64(ev, "ts_us", cw_now_us());
    cJSON_AddStringToObject(ev, "proc", log_proc);
    pid_t pid = log_pid != 0 ? log_pid : getpid();
    cJSON_AddNumberToObject(ev, "pid", (double)pid); /* < 2^22: exact */
    cJSON_AddStringToObject(ev, "event", event);
    return ev;
}

void cwlog_emit(cJSON *ev)
{
    char *text = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (text == NULL)
        return;
    size_t len = strlen(text);
    /* One write per line: the newline goes in the same buffer so that
     * concurrent writers (threads, or processes sharing a file) never
     * interleave inside a line. */
    char *line = malloc(len + 2);
    if (line != NULL) {
        memcpy(line, text, len);
        line[len] = '\n';
        ssize_t w;
        do {
            w = write(log_fd, line, len + 1);
        } while (w < 0 && errno == EINTR);
        free(line);
    }
    cJSON_free(text);
}

void cwlog_simple(const char *event, const char *key, const char *value)
{
    cJSON *ev = cwlog_begin(event);
    if (key != NULL)
        cJSON_AddStringToObject(ev, key, value ? value : "");
    cwlog_emit(ev);
}

void cwlog_warn(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", log_proc, buf);
}
