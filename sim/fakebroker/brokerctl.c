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

cJSON *brokerctl_call(const char *socket_path, const cJSON *frame, const char *want_op,
                      int timeout_ms, char *err, size_t errlen)
{
    cJSON *reply = NULL;
    char *text = NULL, *buf = NULL;
    int64_t deadline = cw_mono_ms() + timeout_ms;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "broker: socket: %s", strerror(errno));
        return NULL;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "broker: socket path too long");
        goto out;
    }
    strcpy(sa.sun_path, socket_path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        snprintf(err, errlen, "could not connect to broker: %s", strerror(errno));
        goto out;
    }
    text = cJSON_PrintUnformatted(frame);
    if (text == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        goto out;
    }
    size_t tl = strlen(text);
    char *line = malloc(tl + 2);
    if (line == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        goto out;
    }
    memcpy(line, text, tl);
    line[tl] = '\n';
    size_t sent = 0;
    while (sent < tl + 1) {
        ssize_t w = send(fd, line + sent, tl + 1 - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "broker: send: %s", strerror(errno));
            free(line);
            goto out;
        }
        sent += (size_t)w;
    }
    free(line);

    size_t cap = 8192, len = 0;
    buf = malloc(cap + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        goto out;
    }
    for (;;) {
        /* Consume every complete line held. */
        for (;;) {
            char *nl = memchr(buf, '\n', len);
            if (nl == NULL)
                break;
            *nl = '\0';
            cJSON *f = cJSON_Parse(buf);
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, nl + 1, len - used);
            len -= used;
            if (f == NULL)
                continue;
            const cJSON *op = cJSON_GetObjectItemCaseSensitive(f, "op");
            if (cJSON_IsString(op) && strcmp(op->valuestring, want_op) == 0) {
                reply = f;
                goto out;
            }
            if (cJSON_IsString(op) && strcmp(op->valuestring, "error") == 0) {
                const cJSON *e = cJSON_GetObjectItemCaseSensitive(f, "error");
                snprintf(err, errlen, "broker refused: %s",
                         cJSON_IsString(e) ? e->valuestring : "(no message)");
                cJSON_Delete(f);
                goto out;
            }
            cJSON_Delete(f);
        }
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
    cJSON_free(text);
    free(buf);
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
