/* bench_load.c -- an open-loop load generator for payments-api.
 *
 *   bench_load HOST PORT RATE SECONDS [CONNECTIONS [PREFIX]]
 *
 * POSTs /payments RATE times a second for SECONDS.  Open loop: request i is
 * due at start + i/RATE whether or not the earlier ones were answered, so a
 * slow pipeline cannot slow the load down (a closed loop, wrk's, would wait
 * for answers and offer less exactly when the system struggles).  Each
 * request goes out on an idle keep-alive connection; when none is idle a new
 * one is opened, up to CONNECTIONS (default 512); past that, requests wait
 * for a connection and the wait is reported as lateness.  Every request has
 * its own Idempotency-Key (PREFIX-i).
 *
 * Prints one line when every answer is in (or 30 s after the last send):
 *   sent=N ok=N failed=N unanswered=N seconds=S rate=R connections=C
 *   late_p99_ms=X late_max_ms=Y http_p50_ms=A http_p99_ms=B
 * (late: how long after its due time a request went out; http: from send to
 * the whole answer).  Exit 0, or 1 when a connection cannot be made at all,
 * 2 on bad usage.  Built by scripts/bench-latency. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY "{\"amount\":\"12.50\",\"currency\":\"EUR\"}"
#define INBUF 8192

enum conn_state { C_FREE = 0, C_CONNECTING, C_IDLE, C_BUSY };

struct conn {
    int fd;
    enum conn_state state;
    char out[512];
    size_t out_len, out_off;
    char in[INBUF];
    size_t in_len;
    long req;            /* the request in flight, -1 when none */
};

struct load {
    struct sockaddr_in addr;
    int ep;
    struct conn *conns;
    int nconns, maxconns, opened;
    long total, next;        /* requests planned, next one to send */
    long ok, failed, answered;
    int64_t start_us, step_ns;
    int64_t *late_us, *http_us; /* per request */
    int64_t *sent_at;
    char prefix[64];
    long *queue;             /* due requests waiting for a connection (FIFO) */
    long qhead, qtail;
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long arg_long(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_load: '%s' is not a number in %ld..%ld\n", s, lo, hi);
        exit(2);
    }
    return v;
}

static void close_conn(struct load *L, struct conn *c)
{
    epoll_ctl(L->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->req >= 0) {
        L->failed++;
        L->answered++;
    }
    memset(c, 0, sizeof(*c));
    c->state = C_FREE;
    c->req = -1;
    L->opened--;
}

static void watch(struct load *L, struct conn *c, uint32_t events, int op)
{
    struct epoll_event ev = { .events = events, .data.ptr = c };
    epoll_ctl(L->ep, op, c->fd, &ev);
}

/* Writes what is left of c's request; 0, or -1 when the connection broke. */
static int flush_out(struct load *L, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0 && errno == EAGAIN) {
            watch(L, c, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
            return 0;
        }
        if (n <= 0)
            return -1;
        c->out_off += (size_t)n;
    }
    watch(L, c, EPOLLIN, EPOLL_CTL_MOD);
    return 0;
}

static void start_request(struct load *L, struct conn *c, long req)
{
    int64_t due = L->start_us + (int64_t)((double)req * (double)L->step_ns / 1000.0);
    int64_t t = now_us();
    c->req = req;
    c->state = C_BUSY;
    c->in_len = 0;
    c->out_off = 0;
    int n = snprintf(c->out, sizeof(c->out),
                     "POST /payments HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
                     "X-Client-Id: bench\r\n"
                     "Idempotency-Key: %s-%ld\r\nContent-Length: %zu\r\n\r\n%s",
                     L->prefix, req, strlen(BODY), BODY);
    c->out_len = (size_t)n;
    L->late_us[req] = t > due ? t - due : 0;
    L->sent_at[req] = t;
    if (flush_out(L, c) < 0)
        close_conn(L, c);
}

/* A new connection for request req; -1 when none could be opened. */
static int open_conn(struct load *L, long req)
{
    struct conn *c = NULL;
    for (int i = 0; i < L->maxconns && c == NULL; i++)
        if (L->conns[i].state == C_FREE)
            c = &L->conns[i];
    if (c == NULL)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&L->addr, sizeof(L->addr)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->state = C_CONNECTING;
    c->req = req;
    L->opened++;
    if (L->opened > L->nconns)
        L->nconns = L->opened;
    watch(L, c, EPOLLOUT, EPOLL_CTL_ADD);
    return 0;
}

/* Sends request req now: on an idle connection, a new one, or queued. */
static void dispatch(struct load *L, long req)
{
    for (int i = 0; i < L->maxconns; i++) {
        if (L->conns[i].state == C_IDLE) {
            start_request(L, &L->conns[i], req);
            return;
        }
    }
    if (L->opened < L->maxconns && open_conn(L, req) == 0)
        return;
    L->queue[L->qtail++] = req;
}

/* 1 when c->in holds a whole answer; its status in *status. */
static int answer_complete(struct conn *c, int *status)
{
    c->in[c->in_len < INBUF ? c->in_len : INBUF - 1] = '\0';
    char *end = strstr(c->in, "\r\n\r\n");
    if (end == NULL)
        return 0;
    size_t head = (size_t)(end - c->in) + 4;
    long length = 0;
    for (char *h = strstr(c->in, "\r\n"); h != NULL && h < end; h = strstr(h + 2, "\r\n"))
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
            length = strtol(h + 17, NULL, 10);
    if (c->in_len < head + (size_t)length)
        return 0;
    *status = atoi(c->in + 9);
    return 1;
}

static void on_readable(struct load *L, struct conn *c)
{
    for (;;) {
        if (c->in_len >= INBUF - 1) {
            close_conn(L, c);
            return;
        }
        ssize_t n = read(c->fd, c->in + c->in_len, INBUF - 1 - c->in_len);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            close_conn(L, c);
            return;
        }
        c->in_len += (size_t)n;
    }
    int status;
    if (c->req < 0 || !answer_complete(c, &status))
        return;
    L->http_us[c->req] = now_us() - L->sent_at[c->req];
    L->answered++;
    if (status == 201)
        L->ok++;
    else
        L->failed++;
    c->req = -1;
    c->state = C_IDLE;
    if (L->qhead < L->qtail)
        start_request(L, c, L->queue[L->qhead++]);
}

static void on_event(struct load *L, struct conn *c, uint32_t events)
{
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            close_conn(L, c);
            return;
        }
        start_request(L, c, c->req);
        return;
    }
    if ((events & EPOLLOUT) && flush_out(L, c) < 0) {
        close_conn(L, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        on_readable(L, c);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(int64_t *v, long n, double p)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp64);
    long i = (long)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: bench_load HOST PORT RATE SECONDS [CONNECTIONS [PREFIX]]\n");
        return 2;
    }
    struct load L;
    memset(&L, 0, sizeof(L));
    L.addr.sin_family = AF_INET;
    L.addr.sin_port = htons((uint16_t)arg_long(argv[2], 1, 65535));
    if (inet_pton(AF_INET, argv[1], &L.addr.sin_addr) != 1) {
        fprintf(stderr, "bench_load: '%s' is not an IPv4 address\n", argv[1]);
        return 2;
    }
    long rate = arg_long(argv[3], 1, 100000), seconds = arg_long(argv[4], 1, 3600);
    L.maxconns = argc > 5 ? (int)arg_long(argv[5], 1, 4096) : 512;
    snprintf(L.prefix, sizeof(L.prefix), "%s", argc > 6 ? argv[6] : "load");
    L.total = rate * seconds;
    L.step_ns = 1000000000L / rate;
    L.conns = calloc((size_t)L.maxconns, sizeof(*L.conns));
    L.late_us = calloc((size_t)L.total, sizeof(int64_t));
    L.http_us = calloc((size_t)L.total, sizeof(int64_t));
    L.sent_at = calloc((size_t)L.total, sizeof(int64_t));
    L.queue = calloc((size_t)L.total, sizeof(long));
    L.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!L.conns || !L.late_us || !L.http_us || !L.sent_at || !L.queue || L.ep < 0) {
        fprintf(stderr, "bench_load: out of memory\n");
        return 1;
    }
    for (int i = 0; i < L.maxconns; i++)
        L.conns[i].req = -1;

    L.start_us = now_us();
    int64_t give_up = 0;
    struct epoll_event evs[256];
    while (L.answered < L.total) {
        int64_t t = now_us();
        while (L.next < L.total &&
               L.start_us + (int64_t)((double)L.next * (double)L.step_ns / 1000.0) <= t)
            dispatch(&L, L.next++);
        if (L.next == L.total && give_up == 0)
            give_up = t + 30 * 1000000LL;
        if (give_up != 0 && t > give_up)
            break;
        if (L.opened == 0 && L.qhead < L.qtail && open_conn(&L, L.queue[L.qhead]) == 0)
            L.qhead++;
        int wait_ms = 50;
        if (L.next < L.total) {
            int64_t due = L.start_us + (int64_t)((double)L.next * (double)L.step_ns / 1000.0);
            wait_ms = due > t ? (int)((due - t) / 1000) : 0;
        }
        int n = epoll_wait(L.ep, evs, 256, wait_ms);
        for (int i = 0; i < n; i++)
            on_event(&L, evs[i].data.ptr, evs[i].events);
    }
    double secs = (double)(now_us() - L.start_us) / 1e6;
    long sent = L.next - (L.qtail - L.qhead);
    double late99 = pct_ms(L.late_us, sent, 0.99), late_max = pct_ms(L.late_us, sent, 1.0);
    double h50 = pct_ms(L.http_us, sent, 0.50), h99 = pct_ms(L.http_us, sent, 0.99);
    printf("sent=%ld ok=%ld failed=%ld unanswered=%ld seconds=%.3f rate=%.1f connections=%d "
           "late_p99_ms=%.3f late_max_ms=%.3f http_p50_ms=%.3f http_p99_ms=%.3f\n",
           sent, L.ok, L.failed, L.total - L.answered, secs, (double)sent / (double)seconds,
           L.nconns, late99, late_max, h50, h99);
    for (int i = 0; i < L.maxconns; i++)
        if (L.conns[i].state != C_FREE)
            close(L.conns[i].fd);
    close(L.ep);
    return L.ok > 0 || L.total == 0 ? 0 : 1;
}
