/* api_http.c -- libmicrohttpd glue for the payments API; see api_http.h.
 *
 * libmicrohttpd calls the access handler several times per request: once
 * with the headers (upload_data_size 0, *req_cls NULL), once per chunk of
 * body, and once more with upload_data_size 0 when the body is complete.
 * Everything that can be judged from the headers (route, method, declared
 * body size, content type) is judged on the first call, and a refusal is
 * queued at once so the body is never read.  Commands run on the last call.
 *
 * The per-request state (struct req) is freed in the completion callback,
 * which libmicrohttpd calls once for every request the handler has seen,
 * whether it ended with a response or a dropped connection; the same
 * callback maintains the in-flight count that a graceful shutdown waits on.
 *
 * The connection deadline guard (api_deadline.h) follows each connection
 * through libmicrohttpd's connection notifications: its deadline is held
 * while a complete request is handled and rearmed when a response is queued.
 *
 * A complete request is not run on the libmicrohttpd thread that read it:
 * that thread also serves every other connection it accepted, and one
 * request blocked on the database (a slow COMMIT, a silent link until its
 * timeout) would hold all of them, while other database connections sat
 * idle.  Which thread accepts a connection is a race, so with N threads and
 * N clients two clients often share one: measured, 4 keep-alive clients on 4
 * threads kept only 2-3 database connections busy.  So the connection is
 * suspended and the request queued for the request workers (as many as the
 * pool has connections); the worker that ran it resumes the connection, and
 * libmicrohttpd calls the handler once more to queue the answer. */
#include "api_http.h"
#include "api_deadline.h"
#include "api_validate.h"
#include "sanitize.h"
#include "cwlog.h"
#include "ids.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum route {
    ROUTE_NONE,
    ROUTE_CREATE,
    ROUTE_GET,
    ROUTE_AUTHORIZE,
    ROUTE_CAPTURE,
    ROUTE_HEALTH
};

struct api_http {
    struct MHD_Daemon *daemon;
    api_deadline *guard;
    api_store *store;
    atomic_int in_flight;
    atomic_int draining;
    /* The request workers and their queue (requests whose connection is
     * suspended).  stopping: run what is queued, then exit. */
    pthread_mutex_t lock;
    pthread_cond_t ready;
    struct req *head, *tail;
    int stopping;
    int nworkers;
    pthread_t workers[API_HTTP_MAX_THREADS];
};

struct req {
    int64_t start_us;
    enum route route;
    char payment_id[CW_UUID_LEN + 1];
    char client[API_CLIENT_MAX + 1];   /* "" until validated */
    char *body;
    size_t len;
    int answered;                       /* a response was queued */
    int too_large;                      /* the body crossed API_MAX_BODY */
    size_t discarded;                   /* body bytes dropped since then */
    /* Handed to a request worker (see the top of this file). */
    int queued;
    int done;                           /* under the lock: reply is final */
    struct req *next;                   /* in the queue */
    struct MHD_Connection *conn;
    /* Headers read on the connection's thread; the values live in
     * libmicrohttpd's memory for as long as the request does. */
    const char *idem_key;
    const char *traceparent;
    const char *content_type;
    struct api_reply reply;             /* the worker's answer */
};

/* How much of an oversized chunked body is read and dropped before the
 * connection is cut instead of answered. */
#define DISCARD_MAX ((size_t)8 * 1024 * 1024)

static int is_method(const char *m, const char *want)
{
    return strcmp(m, want) == 0;
}

/* The method as logs and answers may show it: libmicrohttpd passes any
 * token the client sent, and a request line like "password=hunter2 /x"
 * would put a secret (or bytes that are not UTF-8) into the events. */
static const char *shown_method(const char *method)
{
    size_t n = 0;
    while (method[n] >= 'A' && method[n] <= 'Z' && n <= 16)
        n++;
    return n >= 1 && n <= 16 && method[n] == '\0' ? method : "(not a method)";
}

/* Chooses the route; on a path/method mismatch fills r (404/405). */
static enum route route_of(const char *method, const char *url, char *payment_id,
                           struct api_reply *r)
{
    int get = is_method(method, "GET") || is_method(method, "HEAD");
    int post = is_method(method, "POST");
    const char *allow = NULL;
    enum route rt = ROUTE_NONE;

    if (strcmp(url, "/payments") == 0) {
        rt = ROUTE_CREATE;
        allow = post ? NULL : "POST";
    } else if (strcmp(url, "/healthz") == 0) {
        rt = ROUTE_HEALTH;
        allow = get ? NULL : "GET, HEAD";
    } else if (api_match_payment_path(url, "", payment_id)) {
        rt = ROUTE_GET;
        allow = get ? NULL : "GET, HEAD";
    } else if (api_match_payment_path(url, "/authorize", payment_id)) {
        rt = ROUTE_AUTHORIZE;
        allow = post ? NULL : "POST";
    } else if (api_match_payment_path(url, "/capture", payment_id)) {
        rt = ROUTE_CAPTURE;
        allow = post ? NULL : "POST";
    } else {
        /* The path is the client's own, but answers end up in logs too. */
        char safe[CW_ERROR_MAX + 1];
        cw_sanitize_error(url, safe, sizeof(safe));
        api_reply_problem(r, 404, "not-found", "Not found", "no such resource: %.200s", safe);
        return ROUTE_NONE;
    }
    if (allow != NULL) {
        api_reply_problem(r, 405, "method-not-allowed", "Method not allowed",
                          "%s is not allowed here; allowed: %s", shown_method(method), allow);
        r->allow = allow;
        return ROUTE_NONE;
    }
    return rt;
}

/* Counting the occurrences of one header: a request that repeats
 * Idempotency-Key has no single key. */
struct header_count {
    const char *name;
    int n;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    struct header_count *hc = cls;
    (void)kind;
    (void)value;
    if (strcasecmp(key, hc->name) == 0)
        hc->n++;
    return MHD_YES;
}

/* The header fields of a request: how many, and the bytes of their names
 * and values. */
struct header_size {
    int n;
    size_t bytes;
};

static enum MHD_Result add_header_size(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    struct header_size *hs = cls;
    (void)kind;
    hs->n++;
    hs->bytes += strlen(key) + (value ? strlen(value) : 0);
    return MHD_YES;
}

/* Judges the size of the request head: 0, or -1 with r filled (414, 431). */
static int check_head_size(struct MHD_Connection *c, const char *url, struct api_reply *r)
{
    if (strlen(url) > API_MAX_URL) {
        api_reply_problem(r, 414, "uri-too-long", "URI too long",
                          "the path is %zu bytes; at most %d are accepted", strlen(url),
                          API_MAX_URL);
        return -1;
    }
    struct header_size hs = { 0, 0 };
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header_size, &hs);
    if (hs.n > API_MAX_HEADERS || hs.bytes > API_MAX_HEADER_BYTES) {
        api_reply_problem(r, 431, "headers-too-large", "Request header fields too large",
                          "%d header fields of %zu bytes; at most %d fields and %d bytes "
                          "are accepted", hs.n, hs.bytes, API_MAX_HEADERS,
                          API_MAX_HEADER_BYTES);
        return -1;
    }
    return 0;
}

static int header_count(struct MHD_Connection *c, const char *name)
{
    struct header_count hc = { name, 0 };
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &hc);
    return hc.n;
}

/* The header's value when it occurs exactly once; NULL when absent; sets
 * *repeated when it occurs more than once. */
static const char *single_header(struct MHD_Connection *c, const char *name, int *repeated)
{
    int n = header_count(c, name);
    *repeated = n > 1;
    return n == 1 ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, name) : NULL;
}

static void log_request(const char *method, const char *url, const struct req *q,
                        const struct api_reply *r)
{
    char safe[CW_ERROR_MAX + 1];
    cw_sanitize_error(url, safe, sizeof(safe));
    cJSON *ev = cwlog_begin("request");
    cJSON_AddStringToObject(ev, "method", shown_method(method));
    cJSON_AddStringToObject(ev, "path", safe);
    cJSON_AddNumberToObject(ev, "status", r->status);
    cwlog_add_int64(ev, "duration_us", cw_mono_us() - q->start_us);
    if (q->client[0] != '\0')
        cJSON_AddStringToObject(ev, "client", q->client);
    else
        cJSON_AddNullToObject(ev, "client");
    cJSON_AddBoolToObject(ev, "replay", r->replayed);
    cwlog_emit(ev);
}

/* The guard's record of connection c (NULL when it has none). */
static struct api_deadline_conn *guard_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static enum MHD_Result send_reply(api_http *h, struct MHD_Connection *c, const char *method,
                                  const char *url, struct req *q, struct api_reply *r)
{
    const char *body = r->body ? r->body : "";
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                                MHD_RESPMEM_MUST_COPY);
    if (resp == NULL) {
        api_reply_clear(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->location[0] != '\0')
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (r->allow != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    if (r->replayed)
        MHD_add_response_header(resp, "Idempotent-Replayed", "true");
    if (atomic_load(&h->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned int)r->status, resp);
    MHD_destroy_response(resp);
    q->answered = 1;
    api_deadline_rearm(guard_of(c));
    if (ok != MHD_YES)
        r->status = 0;  /* logged as "no response": the connection is dropped */
    log_request(method, url, q, r);
    api_reply_clear(r);
    return ok;
}

/* Judges a POST's headers.  0 when the request may go on; -1 with r filled. */
static int check_post_headers(struct MHD_Connection *c, struct req *q, struct api_reply *r)
{
    int repeated;
    const char *client = single_header(c, "X-Client-Id", &repeated);
    if (repeated) {
        api_reply_problem(r, 400, "invalid-client-id", "Invalid X-Client-Id",
                          "X-Client-Id is given more than once");
        return -1;
    }
    if (api_check_client_id(client, q->client, r) < 0)
        return -1;
    const char *key = single_header(c, "Idempotency-Key", &repeated);
    if (repeated) {
        api_reply_problem(r, 400, "invalid-idempotency-key", "Invalid Idempotency-Key",
                          "Idempotency-Key is given more than once");
        return -1;
    }
    if (api_check_idempotency_key(key, r) < 0)
        return -1;
    const char *clen = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (clen != NULL) {
        char *end;
        unsigned long long n = strtoull(clen, &end, 10);
        if (*end == '\0' && n > API_MAX_BODY) {
            api_reply_problem(r, 413, "body-too-large", "Request body too large",
                              "the body is %llu bytes; at most %d are accepted", n,
                              API_MAX_BODY);
            return -1;
        }
    }
    if (q->route == ROUTE_CREATE) {
        const char *ctype = single_header(c, MHD_HTTP_HEADER_CONTENT_TYPE, &repeated);
        if (api_check_content_type(ctype, r) < 0)
            return -1;
    }
    return 0;
}

static void run_command(api_http *h, struct req *q, struct api_reply *r)
{
    struct api_create_body create;
    struct api_command cmd;
    memset(&cmd, 0, sizeof(cmd));
    const char *body = q->body ? q->body : "";
    char canonical_body[128];

    if (q->route == ROUTE_CREATE) {
        if (api_parse_create_body(body, q->len, &create, r) < 0)
            return;
        if (api_canonical_create_body(&create, canonical_body, sizeof(canonical_body)) < 0)
            goto internal;
        cmd.kind = API_CMD_CREATE;
        cmd.create = &create;
    } else {
        if (q->len > 0 && api_check_content_type(q->content_type, r) < 0)
            return;
        if (api_parse_empty_body(body, q->len, r) < 0)
            return;
        snprintf(canonical_body, sizeof(canonical_body), "{}");
        cmd.kind = q->route == ROUTE_AUTHORIZE ? API_CMD_AUTHORIZE : API_CMD_CAPTURE;
        cmd.payment_id = q->payment_id;
    }

    /* The canonical path carries the payment id in lowercase, whatever case
     * the client used. */
    char path[96];
    if (q->route == ROUTE_CREATE)
        snprintf(path, sizeof(path), "/payments");
    else
        snprintf(path, sizeof(path), "/payments/%s/%s", q->payment_id,
                 q->route == ROUTE_AUTHORIZE ? "authorize" : "capture");
    char canonical[512], hash[API_HASH_HEX + 1];
    if (api_canonical_request("POST", path, canonical_body, canonical, sizeof(canonical)) < 0 ||
        api_sha256_hex(canonical, strlen(canonical), hash) < 0)
        goto internal;

    char trace[CW_TRACEPARENT_LEN + 1];
    api_trace_for_request(q->traceparent, trace);
    cmd.client_id = q->client;
    cmd.idem_key = q->idem_key;
    cmd.request_hash = hash;
    cmd.traceparent = trace;
    api_store_execute(h->store, &cmd, r);
    return;
internal:
    api_reply_problem(r, 500, "internal-error", "Internal error",
                      "the request could not be prepared");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    api_http *h = cls;
    struct req *q = *req_cls;
    struct api_reply r;
    api_reply_init(&r);
    (void)version;

    if (q == NULL) {
        q = calloc(1, sizeof(*q));
        if (q == NULL)
            return MHD_NO;
        q->start_us = cw_mono_us();
        *req_cls = q;
        atomic_fetch_add(&h->in_flight, 1);

        if (check_head_size(c, url, &r) < 0)
            return send_reply(h, c, method, url, q, &r);
        q->route = route_of(method, url, q->payment_id, &r);
        if (q->route == ROUTE_NONE)
            return send_reply(h, c, method, url, q, &r);
        if (is_method(method, "POST") && check_post_headers(c, q, &r) < 0)
            return send_reply(h, c, method, url, q, &r);
        return MHD_YES;
    }

    if (q->answered) {
        /* A refusal was queued; whatever body still arrives is dropped. */
        *upload_data_size = 0;
        return MHD_YES;
    }

    if (*upload_data_size != 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (q->too_large || q->len + n > API_MAX_BODY) {
            /* libmicrohttpd cannot answer in the middle of a body, so the
             * rest is read and dropped, never stored, and 413 goes out at
             * the end; a client that keeps sending past DISCARD_MAX loses
             * its connection instead. */
            free(q->body);
            q->body = NULL;
            q->too_large = 1;
            q->discarded += n;
            return q->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
        }
        char *nb = realloc(q->body, q->len + n + 1);
        if (nb == NULL)
            return MHD_NO;
        memcpy(nb + q->len, upload_data, n);
        q->len += n;
        nb[q->len] = '\0';
        q->body = nb;
        return MHD_YES;
    }

    if (q->too_large) {
        api_reply_problem(&r, 413, "body-too-large", "Request body too large",
                          "the body exceeds %d bytes", API_MAX_BODY);
        return send_reply(h, c, method, url, q, &r);
    }

    if (q->queued) {
        /* A worker resumed the connection: its answer is ready. */
        pthread_mutex_lock(&h->lock);
        int done = q->done;
        pthread_mutex_unlock(&h->lock);
        return done ? send_reply(h, c, method, url, q, &q->reply) : MHD_YES;
    }

    /* The request is complete: from here the time is the server's. */
    api_deadline_hold(guard_of(c));
    int repeated;
    q->idem_key = single_header(c, "Idempotency-Key", &repeated);
    /* A repeated traceparent is invalid (W3C trace context): new trace. */
    q->traceparent = single_header(c, "traceparent", &repeated);
    q->content_type = single_header(c, MHD_HTTP_HEADER_CONTENT_TYPE, &repeated);
    q->conn = c;
    q->queued = 1;
    /* Suspended before it is queued, so no worker can resume it first. */
    MHD_suspend_connection(c);
    pthread_mutex_lock(&h->lock);
    if (h->tail != NULL)
        h->tail->next = q;
    else
        h->head = q;
    h->tail = q;
    pthread_cond_signal(&h->ready);
    pthread_mutex_unlock(&h->lock);
    return MHD_YES;
}

/* A request worker: runs queued requests until told to stop and nothing is
 * left. */
static void *request_worker(void *arg)
{
    api_http *h = arg;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->head == NULL && !h->stopping)
            pthread_cond_wait(&h->ready, &h->lock);
        struct req *q = h->head;
        if (q == NULL)
            break;
        h->head = q->next;
        if (h->head == NULL)
            h->tail = NULL;
        pthread_mutex_unlock(&h->lock);

        api_reply_init(&q->reply);
        switch (q->route) {
        case ROUTE_HEALTH:
            api_store_health(h->store, &q->reply);
            break;
        case ROUTE_GET:
            api_store_get_payment(h->store, q->payment_id, &q->reply);
            break;
        default:
            run_command(h, q, &q->reply);
            break;
        }
        struct MHD_Connection *c = q->conn;
        pthread_mutex_lock(&h->lock);
        q->done = 1;
        pthread_mutex_unlock(&h->lock);
        MHD_resume_connection(c); /* q may be freed from here on */
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* Tells the workers to finish what is queued and waits for them. */
static void stop_workers(api_http *h)
{
    pthread_mutex_lock(&h->lock);
    h->stopping = 1;
    pthread_cond_broadcast(&h->ready);
    pthread_mutex_unlock(&h->lock);
    for (int i = 0; i < h->nworkers; i++)
        pthread_join(h->workers[i], NULL);
    h->nworkers = 0;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    api_http *h = cls;
    struct req *q = *req_cls;
    (void)toe;
    /* Keep-alive: the next request is due within the timeout. */
    api_deadline_rearm(guard_of(c));
    if (q == NULL)
        return;
    api_reply_clear(&q->reply);
    free(q->body);
    free(q);
    *req_cls = NULL;
    atomic_fetch_sub(&h->in_flight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    api_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        *socket_context = fd == NULL ? NULL
                        : api_deadline_open(h->guard, fd->connect_fd,
                                            addr != NULL ? addr->client_addr : NULL);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        api_deadline_close(h->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's own messages, sanitized (a malformed request may be
 * quoted) and at most LOG_PER_SECOND a second: a client that opens
 * connections past the limits must not fill the disk with their refusals. */
#define LOG_PER_SECOND 10

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int64_t second;
    static int in_second, suppressed;
    char buf[512], safe[CW_ERROR_MAX + 1];
    (void)cls;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    int64_t now = cw_mono_ms() / 1000;
    pthread_mutex_lock(&lock);
    int dropped = 0;
    if (now != second) {
        dropped = suppressed;
        second = now;
        in_second = 0;
        suppressed = 0;
    }
    int show = ++in_second <= LOG_PER_SECOND;
    suppressed += !show;
    pthread_mutex_unlock(&lock);
    if (dropped > 0)
        cwlog_warn("http: %d messages not shown (more than %d a second)", dropped,
                   LOG_PER_SECOND);
    if (show) {
        cw_sanitize_error(buf, safe, sizeof(safe));
        cwlog_warn("http: %s", safe);
    }
}

api_http *api_http_start(const struct api_http_config *cfg, char *err, size_t errlen)
{
    if (cfg->threads < 1 || cfg->threads > API_HTTP_MAX_THREADS || cfg->store == NULL ||
        cfg->request_timeout_ms < 1 || cfg->max_connections < cfg->threads ||
        cfg->max_per_client < 1) {
        snprintf(err, errlen, "invalid http configuration");
        return NULL;
    }
    api_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->store = cfg->store;
    atomic_init(&h->in_flight, 0);
    atomic_init(&h->draining, 0);
    h->guard = api_deadline_start(cfg->request_timeout_ms, err, errlen);
    if (h->guard == NULL) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->ready, NULL);
    /* The workers first: the daemon may hand them a request as it starts. */
    for (; h->nworkers < cfg->threads; h->nworkers++)
        if (pthread_create(&h->workers[h->nworkers], NULL, request_worker, h) != 0)
            break;
    if (h->nworkers < cfg->threads) {
        snprintf(err, errlen, "cannot start the request workers");
        stop_workers(h);
        goto fail;
    }
    /* MHD_USE_ITC is what lets MHD_quiesce_daemon stop a thread pool's
     * listening without stopping its connections.  The idle timeout is a
     * backstop only: the guard's deadline is the one that holds. */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    unsigned int idle_s = (unsigned int)(cfg->request_timeout_ms + 999) / 1000;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                                 MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                                 MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&cfg->addr,
                                 MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->threads,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                                 MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                                 MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned int)cfg->max_connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                 (unsigned int)cfg->max_per_client,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                 MHD_OPTION_END);
    if (h->daemon == NULL) {
        snprintf(err, errlen, "could not start the HTTP server (address in use?)");
        stop_workers(h);
        goto fail;
    }
    return h;
fail:
    pthread_cond_destroy(&h->ready);
    pthread_mutex_destroy(&h->lock);
    api_deadline_stop(h->guard);
    free(h);
    return NULL;
}

int api_http_port(api_http *h)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? (int)info->port : -1;
}

int api_http_shutdown(api_http *h, int drain_ms)
{
    atomic_store(&h->draining, 1);
    MHD_socket lsock = MHD_quiesce_daemon(h->daemon);
    /* Quiescing only stops polling the socket; the kernel would still
     * complete handshakes into its backlog.  Shutting it down makes new
     * connections fail at once, so clients go elsewhere instead of waiting.
     * (It is closed only after MHD_stop_daemon, as libmicrohttpd asks.) */
    if (lsock != MHD_INVALID_SOCKET)
        shutdown(lsock, SHUT_RDWR);
    int64_t deadline = cw_mono_ms() + drain_ms;
    while (atomic_load(&h->in_flight) > 0 && cw_mono_ms() < deadline) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    int left = atomic_load(&h->in_flight);
    /* No connection may stay suspended when the daemon stops: the workers
     * answer what is queued and resume every connection first. */
    stop_workers(h);
    MHD_stop_daemon(h->daemon);
    api_deadline_stop(h->guard);
    if (lsock != MHD_INVALID_SOCKET)
        close(lsock);
    pthread_cond_destroy(&h->ready);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return left;
}
