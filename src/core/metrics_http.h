/* metrics_http.h -- a program's own /metrics endpoint (libmicrohttpd).
 *
 * Every program that takes --metrics-listen ADDRESS serves GET /metrics on
 * that address from one thread of its own: each scrape calls the program's
 * render function, which writes the page (promtext.h); process_start_time_
 * seconds is added here.  HEAD is answered like GET without the body; any
 * other path is 404, any other method 405 with Allow.
 *
 * ADDRESS is HOST:PORT, HOST an IPv4 literal, "localhost" (127.0.0.1) or an
 * IPv6 literal in brackets ([::1]:9100); port 0 binds a free port
 * (metrics_server_port tells which).  The socket is bound and listening when
 * metrics_server_start returns, so a program starts its server before it
 * does anything else: a bad address or a port in use then stops it at once
 * (exit 2 by the programs' convention), with nothing half-started.
 *
 * Threads: the server's thread is started with every signal blocked, so the
 * program's own signal handling is untouched; the render function runs on
 * that thread, one scrape at a time, and must only read what other threads
 * write through atomics. */
#ifndef CW_METRICS_HTTP_H
#define CW_METRICS_HTTP_H

#include "promtext.h"

#include <stddef.h>
#include <sys/socket.h>

typedef struct metrics_server metrics_server;

/* Writes one page into p (initialized, empty).  A mistake left in p (see
 * promtext_error) is answered with 500 and logged. */
typedef void (*metrics_render_fn)(void *arg, struct promtext *p);

/* Parses ADDRESS into addr (and its length).  0, or -1 with a message in err
 * saying what is wrong with it. */
int metrics_listen_parse(const char *address, struct sockaddr_storage *addr, socklen_t *len,
                         char *err, size_t errlen);

/* The check of a --metrics-listen flag at parse time: 0, or -1 with
 * "--metrics-listen: what is wrong" in err. */
int metrics_listen_check(const char *address, char *err, size_t errlen);

/* --pipeline-metrics on|off, an option-table callback: ctx is the int set to
 * 1 or 0.  The pipeline's figures are read from the database and are the
 * same whoever serves them, so one program exports them (by default the
 * relay): several exporting the same series would be counted several times
 * by a sum() over the scraped jobs. */
int metrics_take_pipeline(const char *v, void *ctx, char *err, size_t errlen);

/* Parses address, binds it, listens and starts serving.  Returns the server,
 * or NULL with a message in err (bad address, address in use, no
 * permission, ...): nothing is left running then. */
metrics_server *metrics_server_start(const char *address, metrics_render_fn render, void *arg,
                                     char *err, size_t errlen);

/* The port bound. */
int metrics_server_port(const metrics_server *s);

/* The address bound, as "HOST:PORT" (IPv6 in brackets). */
const char *metrics_server_address(const metrics_server *s);

/* Stops serving (a scrape in progress is finished first) and frees s.  NULL
 * is a no-op. */
void metrics_server_stop(metrics_server *s);

#endif
