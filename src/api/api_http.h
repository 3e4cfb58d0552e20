/* api_http.h -- the payments API's HTTP side (libmicrohttpd).
 *
 * Routes:
 *   POST /payments                   create a payment            201 Location
 *   POST /payments/{id}/authorize    created -> authorized       200
 *   POST /payments/{id}/capture      authorized -> captured      200
 *   GET  /payments/{id}              read a payment              200 | 404
 *   GET  /healthz                    database round trip         200 | 503
 * Anything else is 404 (unknown path) or 405 with Allow (known path, other
 * method).  Every answer is JSON; errors are RFC 9457 problem documents.
 *
 * Threads: libmicrohttpd's internal thread pool (epoll) reads requests and
 * writes answers; a complete request is run by one of as many request
 * workers, each taking one pooled database connection at a time, so a
 * request blocked on the database never holds up another connection.
 * A body is read into memory only up to API_MAX_BODY: a larger
 * Content-Length is refused before anything is read, a larger chunked body
 * as soon as it crosses the limit (413).  Too many or too large header
 * fields get 431, a long URL 414, each with a problem body.
 *
 * Bounds against slow and greedy clients: every connection has a deadline
 * for its whole request (api_deadline.h: a client that trickles bytes cannot
 * stretch it); at most max_connections connections, at most
 * max_per_client from one address (more are closed as they arrive).
 * Threads are not held by slow clients: epoll serves every connection. */
#ifndef CW_API_HTTP_H
#define CW_API_HTTP_H

#include "api_store.h"

#include <netinet/in.h>
#include <stddef.h>

typedef struct api_http api_http;

#define API_HTTP_MAX_THREADS 64

struct api_http_config {
    struct sockaddr_in addr;  /* where to listen; port 0 picks a free port */
    int threads;              /* HTTP threads and request workers, 1..API_HTTP_MAX_THREADS */
    api_store *store;         /* borrowed */
    int request_timeout_ms;   /* whole-request deadline, >= 1 */
    int max_connections;      /* >= threads */
    int max_per_client;       /* connections from one address, >= 1 */
};

/* Starts serving.  Returns NULL with a message in err. */
api_http *api_http_start(const struct api_http_config *cfg, char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
int api_http_port(api_http *h);

/* Stops accepting connections, lets requests in flight finish (at most
 * drain_ms), then stops every thread and frees h.  Responses sent while
 * draining carry "Connection: close".  Returns the number of requests that
 * were still in flight when the wait ended (0 on a clean drain). */
int api_http_shutdown(api_http *h, int drain_ms);

#endif
