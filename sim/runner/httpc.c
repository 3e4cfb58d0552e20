/* httpc.c -- a small blocking HTTP/1.1 client; see httpc.h.
 *
 * Written for one job, talking to our own API on loopback, so it is plain:
 * a non-blocking connect bounded by poll, one send, read to EOF under the
 * same deadline, then parse.  No keep-alive, no redirects, no TLS. */
#include "httpc.h"
#include "cwlog.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#define HTTP_MAX_RESPONSE (1024 * 1024 + 16384)

void http_resp_free(struct http_resp *r)
{
    if (r == NULL)
        return;
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

static int set_body(struct http_resp *r, const char *data, size_t len)
{
    free(r->body);
    r->body = malloc(len + 1);
    if (r->body == NULL) {
        r->body_len = 0;
        return -1;
    }
    memcpy(r->body, data, len);
    r->body[len] = '\0';
    r->body_len = len;
    return 0;
}

/* Decodes a chunked body into r; -1 when malformed or incomplete. */
static int dechunk(const char *p, const char *end, struct http_resp *r)
{
    char *out = malloc((size_t)(end - p) + 1);
    size_t n = 0;
    if (out == NULL)
        return -1;
    for (;;) {
        char *e;
        unsigned long sz = strtoul(p, &e, 16);
        if (e == p)
            goto bad;
        const char *crlf = strstr(e, "\r\n");
        if (crlf == NULL || crlf >= end)
            goto bad;
        p = crlf + 2;
        if (sz == 0)
            break;
        /* The chunk and its CRLF must fit in what is left; written as two
         * comparisons because sz + 2 wraps for a size near ULONG_MAX. */
        if (sz > (size_t)(end - p) || (size_t)(end - p) - sz < 2)
            goto bad;
        memcpy(out + n, p, sz);
        n += sz;
        p += sz + 2;
    }
    out[n] = '\0';
    free(r->body);
    r->body = out;
    r->body_len = n;
    return 0;
bad:
    free(out);
    return -1;
}

int http_parse_response(const char *raw, size_t len, struct http_resp *r)
{
    const char *end = raw + len;
    const char *hdr_end = NULL;
    for (const char *p = raw; p + 3 < end; p++) {
        if (p[0] == '\r' && p[1] == '\n' && p[2] == '\r' && p[3] == '\n') {
            hdr_end = p;
            break;
        }
    }
    if (len < 12 || strncmp(raw, "HTTP/1.", 7) != 0 || hdr_end == NULL) {
        snprintf(r->error, sizeof(r->error), "connection closed before a complete response");
        return -1;
    }
    int status = atoi(raw + 9);
    if (status < 100 || status > 599) {
        snprintf(r->error, sizeof(r->error), "malformed status line");
        return -1;
    }
    long content_length = -1;
    int chunked = 0;
    r->retry_after_s = -1;
    const char *line = strstr(raw, "\r\n") + 2;
    while (line < hdr_end) {
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL || eol > hdr_end)
            eol = hdr_end;
        size_t ll = (size_t)(eol - line);
        if (ll > 15 && strncasecmp(line, "Content-Length:", 15) == 0)
            content_length = strtol(line + 15, NULL, 10);
        /* Only the delay-seconds form: the API never sends an HTTP date. */
        if (ll > 12 && strncasecmp(line, "Retry-After:", 12) == 0) {
            long secs = strtol(line + 12, NULL, 10);
            r->retry_after_s = secs < 0 ? 0 : secs > 3600 ? 3600 : (int)secs;
        }
        if (ll > 18 && strncasecmp(line, "Transfer-Encoding:", 18) == 0) {
            const char *v = line + 18;
            while (v < eol && isspace((unsigned char)*v))
                v++;
            chunked = (size_t)(eol - v) >= 7 && strncasecmp(v, "chunked", 7) == 0;
        }
        line = eol + 2;
    }
    const char *body = hdr_end + 4;
    size_t avail = (size_t)(end - body);
    if (chunked) {
        if (dechunk(body, end, r) < 0) {
            snprintf(r->error, sizeof(r->error), "malformed or truncated chunked body");
            return -1;
        }
    } else if (content_length >= 0) {
        if ((size_t)content_length > avail) {
            snprintf(r->error, sizeof(r->error), "connection closed after %zu of %ld body bytes",
                     avail, content_length);
            return -1;
        }
        if (set_body(r, body, (size_t)content_length) < 0)
            return -1;
    } else if (set_body(r, body, avail) < 0) {
        return -1;
    }
    r->status = status;
    r->error[0] = '\0';
    return 0;
}

/* http_request in its stages: connect, format, send, read.  A stage that
 * fails puts its reason in r->error and leaves the fd and buffers it was
 * given to http_request, which has the one cleanup path. */

/* A loopback connection to port, non-blocking so that the connect and every
 * later send and recv can be bounded.  Returns the fd or -1. */
static int http_connect(int port, int timeout_ms, struct http_resp *r)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(r->error, sizeof(r->error), "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        snprintf(r->error, sizeof(r->error), "connect: %s", strerror(errno));
        goto fail;
    }
    struct pollfd pfd = { fd, POLLOUT, 0 };
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr <= 0) {
        snprintf(r->error, sizeof(r->error), "connect timed out after %d ms", timeout_ms);
        goto fail;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr != 0) {
        snprintf(r->error, sizeof(r->error), "connect: %s", strerror(soerr));
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* The whole request, head and body, in one buffer (caller frees) so that
 * it goes out in as few sends as the socket allows; its length in *lenp. */
static char *http_format(int port, const char *method, const char *path,
                         const char *const *headers, const char *body, int *lenp,
                         struct http_resp *r)
{
    size_t blen = body ? strlen(body) : 0;
    size_t cap = 512 + blen + strlen(path);
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        cap += strlen(headers[i]) + 2;
    char *req = malloc(cap);
    if (req == NULL) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        return NULL;
    }
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n",
                     method, path, port);
    for (int i = 0; headers != NULL && headers[i] != NULL; i++)
        n += snprintf(req + n, cap - (size_t)n, "%s\r\n", headers[i]);
    if (body != NULL)
        n += snprintf(req + n, cap - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
    n += snprintf(req + n, cap - (size_t)n, "\r\n");
    if (body != NULL) {
        memcpy(req + n, body, blen);
        n += (int)blen;
    }
    *lenp = n;
    return req;
}

/* Sends len bytes before the deadline: 0 or -1. */
static int http_send(int fd, const char *req, size_t len, int64_t deadline, int timeout_ms,
                     struct http_resp *r)
{
    size_t sent = 0;
    while (sent < len) {
        int64_t left = deadline - cw_mono_ms();
        if (left <= 0) {
            snprintf(r->error, sizeof(r->error), "timed out after %d ms sending", timeout_ms);
            return -1;
        }
        ssize_t w = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd wp = { fd, POLLOUT, 0 };
            poll(&wp, 1, (int)left);
            continue;
        }
        if (w <= 0) {
            snprintf(r->error, sizeof(r->error), "send: %s", strerror(errno));
            return -1;
        }
        sent += (size_t)w;
    }
    return 0;
}

/* Reads to EOF before the deadline, up to HTTP_MAX_RESPONSE bytes.  Returns
 * the raw response, NUL-terminated (caller frees), with its length in
 * *lenp; NULL when nothing usable arrived. */
static char *http_recv(int fd, int64_t deadline, int timeout_ms, size_t *lenp,
                       struct http_resp *r)
{
    size_t rcap = 16384, rlen = 0;
    char *resp = malloc(rcap + 1);
    if (resp == NULL) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        return NULL;
    }
    for (;;) {
        int64_t left = deadline - cw_mono_ms();
        if (left <= 0) {
            snprintf(r->error, sizeof(r->error), "timed out after %d ms waiting for the response",
                     timeout_ms);
            goto fail;
        }
        struct pollfd rp = { fd, POLLIN, 0 };
        int p = poll(&rp, 1, (int)left);
        if (p < 0 && errno == EINTR)
            continue;
        if (p <= 0)
            continue; /* the deadline check above ends it */
        if (rlen == rcap) {
            if (rcap >= HTTP_MAX_RESPONSE) {
                snprintf(r->error, sizeof(r->error), "response larger than 1 MiB");
                goto fail;
            }
            rcap *= 2;
            char *nr = realloc(resp, rcap + 1);
            if (nr == NULL) {
                snprintf(r->error, sizeof(r->error), "out of memory");
                goto fail;
            }
            resp = nr;
        }
        ssize_t got = recv(fd, resp + rlen, rcap - rlen, 0);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (got < 0) {
            /* ECONNRESET after a partial response still lets us parse what came. */
            if (rlen == 0) {
                snprintf(r->error, sizeof(r->error), "connection reset before any response (%s)",
                         strerror(errno));
                goto fail;
            }
            break;
        }
        if (got == 0)
            break;
        rlen += (size_t)got;
    }
    resp[rlen] = '\0';
    if (rlen == 0) {
        snprintf(r->error, sizeof(r->error), "connection closed without a response");
        goto fail;
    }
    *lenp = rlen;
    return resp;
fail:
    free(resp);
    return NULL;
}

int http_request(int port, const char *method, const char *path,
                 const char *const *headers, const char *body, int timeout_ms,
                 struct http_resp *r)
{
    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    set_body(r, "", 0);
    int64_t deadline = cw_mono_ms() + timeout_ms;
    char *req = NULL, *resp = NULL;
    int n = 0;
    size_t rlen = 0;
    int fd = http_connect(port, timeout_ms, r);
    if (fd < 0)
        return -1;
    req = http_format(port, method, path, headers, body, &n, r);
    if (req == NULL || http_send(fd, req, (size_t)n, deadline, timeout_ms, r) < 0)
        goto fail;
    resp = http_recv(fd, deadline, timeout_ms, &rlen, r);
    if (resp == NULL || http_parse_response(resp, rlen, r) < 0)
        goto fail;
    free(req);
    free(resp);
    close(fd);
    return 0;
fail:
    r->status = 0;
    free(req);
    free(resp);
    close(fd);
    return -1;
}
