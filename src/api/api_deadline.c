/* api_deadline.c -- the connection deadline guard: each HTTP connection's
 * deadline and the thread that shuts down the connections past theirs
 * (what it guards against and the contracts: api_deadline.h).
 *
 * Connections are a doubly linked list under one mutex.  Deadlines are
 * atomics so that libmicrohttpd's threads can move them without the lock;
 * the checker reads them under the lock, which only serializes it with
 * opening and closing.  A deadline of INT64_MAX means "held". */
#include "api_deadline.h"
#include "cwlog.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_EVERY_MS 100
#define MAX_REPORTS 64   /* client addresses logged per check; the rest counted */

struct api_deadline_conn {
    struct api_deadline_conn *prev, *next;
    int fd;
    int shut;                       /* shut down by the guard already */
    int64_t opened_ms;
    _Atomic int64_t deadline_ms;
    _Atomic int answered;           /* a response was queued at least once */
    int timeout_ms;
    char client[INET6_ADDRSTRLEN];
};

struct api_deadline {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int stopping;
    int timeout_ms;
    struct api_deadline_conn *head;
    atomic_long timeouts;
};

/* The connections of one client address shut down in one check, by what
 * they were waiting for. */
struct report {
    char client[INET6_ADDRSTRLEN];
    int answered;
    int connections;
    int64_t oldest_ms;
};

static void addr_text(const struct sockaddr *a, char *out, size_t outlen)
{
    snprintf(out, outlen, "?");
    if (a == NULL)
        return;
    if (a->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, out, (socklen_t)outlen);
    else if (a->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, out,
                  (socklen_t)outlen);
}

/* Counts c into the report of its address and state (a new one if there
 * is room).  Returns 0, or -1 when it could not be described. */
static int report_add(struct report *rep, int *nrep, const struct api_deadline_conn *c,
                      int answered, int64_t age_ms)
{
    for (int i = 0; i < *nrep; i++) {
        if (rep[i].answered == answered && strcmp(rep[i].client, c->client) == 0) {
            rep[i].connections++;
            if (age_ms > rep[i].oldest_ms)
                rep[i].oldest_ms = age_ms;
            return 0;
        }
    }
    if (*nrep == MAX_REPORTS)
        return -1;
    struct report *r = &rep[(*nrep)++];
    memcpy(r->client, c->client, sizeof(r->client));
    r->answered = answered;
    r->connections = 1;
    r->oldest_ms = age_ms;
    return 0;
}

/* One pass: shuts down every connection past its deadline.  Returns how
 * many; rep describes them by client address, except *untold of them. */
static int check_once(api_deadline *g, struct report *rep, int *nrep, int *untold)
{
    int64_t now = cw_mono_ms();
    int n = 0;
    *nrep = 0;
    *untold = 0;
    pthread_mutex_lock(&g->lock);
    for (struct api_deadline_conn *c = g->head; c != NULL; c = c->next) {
        if (c->shut || atomic_load(&c->deadline_ms) > now)
            continue;
        /* Read before the shutdown: libmicrohttpd answers it at once, and
         * its completion callback rearms the connection as answered. */
        int answered = atomic_load(&c->answered);
        shutdown(c->fd, SHUT_RDWR);
        c->shut = 1;
        n++;
        if (report_add(rep, nrep, c, answered, now - c->opened_ms) < 0)
            (*untold)++;
    }
    pthread_mutex_unlock(&g->lock);
    return n;
}

static void *checker(void *arg)
{
    api_deadline *g = arg;
    struct report rep[MAX_REPORTS];
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += CHECK_EVERY_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &ts);
        if (g->stopping)
            break;
        pthread_mutex_unlock(&g->lock);
        int nrep, untold;
        int n = check_once(g, rep, &nrep, &untold);
        atomic_fetch_add(&g->timeouts, n);
        for (int i = 0; i < nrep; i++) {
            cJSON *ev = cwlog_begin("http_timeout");
            cJSON_AddStringToObject(ev, "client_addr", rep[i].client);
            cJSON_AddNumberToObject(ev, "connections", rep[i].connections);
            cJSON_AddStringToObject(ev, "waiting_for",
                                    rep[i].answered ? "the client to read or send again"
                                                    : "a complete request");
            cJSON_AddNumberToObject(ev, "oldest_connection_ms", (double)rep[i].oldest_ms);
            cJSON_AddNumberToObject(ev, "timeout_ms", g->timeout_ms);
            cwlog_emit(ev);
        }
        if (untold > 0) {
            cJSON *ev = cwlog_begin("http_timeout");
            cJSON_AddStringToObject(ev, "client_addr", "(other addresses)");
            cJSON_AddNumberToObject(ev, "connections", untold);
            cJSON_AddNumberToObject(ev, "timeout_ms", g->timeout_ms);
            cwlog_emit(ev);
        }
        pthread_mutex_lock(&g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

api_deadline *api_deadline_start(int timeout_ms, char *err, size_t errlen)
{
    api_deadline *g = calloc(1, sizeof(*g));
    if (g == NULL || timeout_ms < 1) {
        snprintf(err, errlen, timeout_ms < 1 ? "invalid request timeout" : "out of memory");
        free(g);
        return NULL;
    }
    g->timeout_ms = timeout_ms;
    atomic_init(&g->timeouts, 0);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    int e = pthread_create(&g->thread, NULL, checker, g);
    if (e != 0) {
        snprintf(err, errlen, "could not start the connection guard: %s", strerror(e));
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void api_deadline_stop(api_deadline *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head != NULL) {
        struct api_deadline_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

struct api_deadline_conn *api_deadline_open(api_deadline *g, int fd,
                                           const struct sockaddr *addr)
{
    struct api_deadline_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->fd = fd;
    c->timeout_ms = g->timeout_ms;
    c->opened_ms = cw_mono_ms();
    atomic_init(&c->deadline_ms, c->opened_ms + g->timeout_ms);
    atomic_init(&c->answered, 0);
    addr_text(addr, c->client, sizeof(c->client));
    pthread_mutex_lock(&g->lock);
    c->next = g->head;
    if (g->head != NULL)
        g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void api_deadline_hold(struct api_deadline_conn *c)
{
    if (c != NULL)
        atomic_store(&c->deadline_ms, INT64_MAX);
}

void api_deadline_rearm(struct api_deadline_conn *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->answered, 1);
    atomic_store(&c->deadline_ms, cw_mono_ms() + c->timeout_ms);
}

void api_deadline_close(api_deadline *g, struct api_deadline_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

long api_deadline_timeouts(api_deadline *g)
{
    return atomic_load(&g->timeouts);
}
