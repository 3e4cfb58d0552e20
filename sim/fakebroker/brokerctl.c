/* brokerctl.c -- control frames to the fake broker; see brokerctl.h. */
#include "brokerctl.h"
#include "cwlog.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define REPLY_MAX (1024 * 1024)

/* brokerctl_call in its stages: connect, send the frame as one line, read
 * reply lines until the wanted one.  Each stage puts its reason in err. */

/* A connection to the broker's control socket: the fd, or -1. */
static int broker_connect(const char *socket_path, char *err, size_t errlen)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "broker: socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "broker: socket path too long");
        goto fail;
    }
    strcpy(sa.sun_path, socket_path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        snprintf(err, errlen, "could not connect to broker: %s", strerror(errno));
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* Sends frame as one newline-terminated line: 0 or -1. */
static int broker_send(int fd, const cJSON *frame, char *err, size_t errlen)
{
    char *text = cJSON_PrintUnformatted(frame);
    if (text == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        return -1;
    }
    size_t tl = strlen(text);
    char *line = malloc(tl + 2);
    if (line == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        cJSON_free(text);
        return -1;
    }
    memcpy(line, text, tl);
    line[tl] = '\n';
    int rc = 0;
    size_t sent = 0;
    while (sent < tl + 1) {
        ssize_t w = send(fd, line + sent, tl + 1 - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "broker: send: %s", strerror(errno));
            rc = -1;
            break;
        }
        sent += (size_t)w;
    }
    free(line);
    cJSON_free(text);
    return rc;
}

/* Consumes every complete line held in buf[0..*len).  Returns 1 with the
 * want_op frame in *reply, -1 after an "error" frame (its text in err), 0
 * when more must be read.  Other frames and unparsable lines are dropped. */
static int take_lines(char *buf, size_t *len, const char *want_op, cJSON **reply,
                      char *err, size_t errlen)
{
    for (;;) {
        char *nl = memchr(buf, '\n', *len);
        if (nl == NULL)
            return 0;
        *nl = '\0';
        cJSON *f = cJSON_Parse(buf);
        size_t used = (size_t)(nl - buf) + 1;
        memmove(buf, nl + 1, *len - used);
        *len -= used;
        if (f == NULL)
            continue;
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(f, "op");
        if (cJSON_IsString(op) && strcmp(op->valuestring, want_op) == 0) {
            *reply = f;
            return 1;
        }
        if (cJSON_IsString(op) && strcmp(op->valuestring, "error") == 0) {
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(f, "error");
            snprintf(err, errlen, "broker refused: %s",
                     cJSON_IsString(e) ? e->valuestring : "(no message)");
            cJSON_Delete(f);
            return -1;
        }
        cJSON_Delete(f);
    }
}

/* Reads until the want_op reply, an error frame, the deadline or EOF; the
 * buffer is capped at REPLY_MAX.  Returns the reply (caller frees) or NULL. */
static cJSON *broker_recv(int fd, const char *want_op, int64_t deadline, int timeout_ms,
                          char *err, size_t errlen)
{
    cJSON *reply = NULL;
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        return NULL;
    }
    for (;;) {
        if (take_lines(buf, &len, want_op, &reply, err, errlen) != 0)
            goto out;
        int64_t left = deadline - cw_mono_ms();
        if (left <= 0) {
            snprintf(err, errlen, "broker: no %s reply within %d ms", want_op, timeout_ms);
            goto out;
        }
        struct pollfd pfd = { fd, POLLIN, 0 };
        int p = poll(&pfd, 1, (int)left);
        if (p < 0 && errno == EINTR)
            continue;
        if (p <= 0)
            continue;
        if (len == cap) {
            if (cap >= REPLY_MAX) {
                snprintf(err, errlen, "broker: reply too large");
                goto out;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL) {
                snprintf(err, errlen, "broker: out of memory");
                goto out;
            }
            buf = nb;
        }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "broker closed the connection before answering");
            goto out;
        }
        len += (size_t)r;
    }
out:
    free(buf);
    return reply;
}

cJSON *brokerctl_call(const char *socket_path, const cJSON *frame, const char *want_op,
                      int timeout_ms, char *err, size_t errlen)
{
    cJSON *reply = NULL;
    int64_t deadline = cw_mono_ms() + timeout_ms;
    int fd = broker_connect(socket_path, err, errlen);
    if (fd < 0)
        return NULL;
    if (broker_send(fd, frame, err, errlen) == 0)
        reply = broker_recv(fd, want_op, deadline, timeout_ms, err, errlen);
    close(fd);
    return reply;
}

int brokerctl_control(const char *socket_path, const cJSON *switches, int timeout_ms,
                      char *err, size_t errlen)
{
    cJSON *frame = cJSON_CreateObject();
    if (frame == NULL)
        return -1;
    cJSON_AddStringToObject(frame, "op", "control");
    const cJSON *it;
    cJSON_ArrayForEach(it, switches) {
        cJSON_AddItemToObject(frame, it->string, cJSON_Duplicate(it, 1));
    }
    cJSON *reply = brokerctl_call(socket_path, frame, "control_ok", timeout_ms, err, errlen);
    cJSON_Delete(frame);
    if (reply == NULL)
        return -1;
    cJSON_Delete(reply);
    return 0;
}

int brokerctl_reset(const char *socket_path, int timeout_ms, char *err, size_t errlen)
{
    cJSON *sw = cJSON_CreateObject();
    if (sw == NULL)
        return -1;
    cJSON_AddBoolToObject(sw, "reset", 1);
    int rc = brokerctl_control(socket_path, sw, timeout_ms, err, errlen);
    cJSON_Delete(sw);
    return rc;
}

cJSON *brokerctl_stats(const char *socket_path, int timeout_ms, char *err, size_t errlen)
{
    cJSON *frame = cJSON_CreateObject();
    if (frame == NULL)
        return NULL;
    cJSON_AddStringToObject(frame, "op", "stats");
    cJSON *reply = brokerctl_call(socket_path, frame, "stats", timeout_ms, err, errlen);
    cJSON_Delete(frame);
    return reply;
}
