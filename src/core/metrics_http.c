/* metrics_http.c -- the /metrics endpoint; see metrics_http.h.
 *
 * The socket is made and bound here, not by libmicrohttpd, for the error:
 * bind(2)'s errno says "address already in use" or "permission denied",
 * where a failed MHD_start_daemon says nothing.  libmicrohttpd then serves
 * it from its own internal thread (MHD_OPTION_LISTEN_SOCKET).  Scrapes are
 * few and small: one thread, a handful of connections, a short timeout. */
#include "metrics_http.h"
#include "cliutil.h"
#include "cwlog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECTION_LIMIT 16
#define CONNECTION_TIMEOUT_S 10

struct metrics_server {
    struct MHD_Daemon *daemon;
    int fd;
    int port;
    char address[INET6_ADDRSTRLEN + 16];
    metrics_render_fn render;
    void *arg;
    double start_time_s;
};

int metrics_listen_parse(const char *address, struct sockaddr_storage *addr, socklen_t *len,
                         char *err, size_t errlen)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = address ? strrchr(address, ':') : NULL;
    if (colon == NULL || colon == address) {
        snprintf(err, errlen, "'%s' is not HOST:PORT (e.g. 127.0.0.1:9100)",
                 address ? address : "");
        return -1;
    }
    size_t hlen = (size_t)(colon - address);
    if (hlen >= sizeof(host)) {
        snprintf(err, errlen, "'%s': the host is too long", address);
        return -1;
    }
    memcpy(host, address, hlen);
    host[hlen] = '\0';
    int port;
    char perr[160];
    if (cw_parse_int("port", colon + 1, 0, 65535, &port, perr, sizeof(perr)) < 0 ||
        colon[1] < '0' || colon[1] > '9') {
        snprintf(err, errlen, "'%s': the port must be a number in 0..65535", address);
        return -1;
    }
    memset(addr, 0, sizeof(*addr));
    if (host[0] == '[') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
        if (hlen < 3 || host[hlen - 1] != ']') {
            snprintf(err, errlen, "'%s': an IPv6 host goes in brackets, e.g. [::1]:9100", address);
            return -1;
        }
        host[hlen - 1] = '\0';
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1) {
            snprintf(err, errlen, "'%s': '%s' is not an IPv6 address", address, host + 1);
            return -1;
        }
        *len = sizeof(*a6);
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (inet_pton(AF_INET, host, &a4->sin_addr) != 1) {
        snprintf(err, errlen, "'%s': '%s' is not an IPv4 address, [IPv6] or localhost",
                 address, host);
        return -1;
    }
    *len = sizeof(*a4);
    return 0;
}

/* A socket bound to addr and listening; -1 with a message. */
static int bind_listen(const struct sockaddr_storage *addr, socklen_t len, const char *address,
                       char *err, size_t errlen)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot make a socket: %s", address, strerror(errno));
        return -1;
    }
    int one = 1;
    /* A restarted program must not wait for its old connections' TIME_WAIT;
     * on Linux this still refuses a port another socket listens on. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (addr->ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)addr, len) < 0 || listen(fd, CONNECTION_LIMIT) < 0) {
        snprintf(err, errlen, "%s: cannot listen: %s", address, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Fills s->port and s->address from the bound socket. */
static void note_address(metrics_server *s)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof(a);
    char host[INET6_ADDRSTRLEN] = "?";
    if (getsockname(s->fd, (struct sockaddr *)&a, &len) < 0)
        return;
    if (a.ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
        inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host));
        s->port = ntohs(a6->sin6_port);
        snprintf(s->address, sizeof(s->address), "[%s]:%d", host, s->port);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
        inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host));
        s->port = ntohs(a4->sin_port);
        snprintf(s->address, sizeof(s->address), "%s:%d", host, s->port);
    }
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned int status,
                              const char *content_type, const char *body, size_t len,
                              const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result scrape(metrics_server *s, struct MHD_Connection *c)
{
    struct promtext p;
    promtext_init(&p);
    s->render(s->arg, &p);
    promtext_family(&p, "process_start_time_seconds", "gauge",
                    "When the process started serving, in seconds since the epoch.");
    promtext_sample(&p, "process_start_time_seconds", NULL, s->start_time_s);
    enum MHD_Result ok;
    if (promtext_text(&p) == NULL) {
        cwlog_warn("metrics: the page is not valid: %s", promtext_error(&p));
        const char *msg = "metrics page not valid (see the process's log)\n";
        ok = answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", msg, strlen(msg), NULL);
    } else {
        ok = answer(c, MHD_HTTP_OK, PROMTEXT_CONTENT_TYPE, promtext_text(&p), promtext_len(&p),
                    NULL);
    }
    promtext_free(&p);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    static int started;
    (void)version;
    (void)upload_data;
    if (*req_cls == NULL) {
        *req_cls = &started;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* a body is read and ignored */
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0) {
        const char *msg = "not found: the metrics are at /metrics\n";
        return answer(c, MHD_HTTP_NOT_FOUND, "text/plain", msg, strlen(msg), NULL);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        const char *msg = "method not allowed: GET or HEAD\n";
        return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", msg, strlen(msg),
                      "GET, HEAD");
    }
    return scrape(cls, c);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    (void)cls;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    cwlog_warn("metrics http: %s", buf);
}

metrics_server *metrics_server_start(const char *address, metrics_render_fn render, void *arg,
                                     char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    socklen_t len;
    if (metrics_listen_parse(address, &addr, &len, err, errlen) < 0)
        return NULL;
    metrics_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->render = render;
    s->arg = arg;
    s->start_time_s = (double)cw_now_us() / 1e6;
    s->fd = bind_listen(&addr, len, address, err, errlen);
    if (s->fd < 0) {
        free(s);
        return NULL;
    }
    note_address(s);

    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* Every signal blocked while the thread is made: it inherits the mask,
     * so no signal meant for the program lands on the server's thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                                 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONNECTION_LIMIT,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONNECTION_TIMEOUT_S,
                                 MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (s->daemon == NULL) {
        snprintf(err, errlen, "%s: could not start the metrics server", address);
        close(s->fd);
        free(s);
        return NULL;
    }
    return s;
}

int metrics_server_port(const metrics_server *s)
{
    return s->port;
}

const char *metrics_server_address(const metrics_server *s)
{
    return s->address;
}

void metrics_server_stop(metrics_server *s)
{
    if (s == NULL)
        return;
    /* The daemon closes the listening socket it was given. */
    MHD_stop_daemon(s->daemon);
    free(s);
}

int metrics_take_pipeline(const char *v, void *ctx, char *err, size_t errlen)
{
    int *on = ctx;
    if (strcmp(v, "on") == 0) {
        *on = 1;
    } else if (strcmp(v, "off") == 0) {
        *on = 0;
    } else {
        snprintf(err, errlen, "--pipeline-metrics: '%s' is not on or off", v);
        return -1;
    }
    return 0;
}

int metrics_listen_check(const char *address, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    socklen_t len;
    char why[256];
    if (metrics_listen_parse(address, &addr, &len, why, sizeof(why)) == 0)
        return 0;
    snprintf(err, errlen, "--metrics-listen: %s", why);
    return -1;
}
