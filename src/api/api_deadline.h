/* api_deadline.h -- the connection deadline guard of the payments API: it
 * bounds the time a client may take over each HTTP connection (to send a
 * whole request, to read the answer), whatever bytes it trickles meanwhile.
 *
 * libmicrohttpd's connection timeout is an idle timeout: any byte restarts
 * it, so a client that sends one byte every few seconds (slow loris) holds a
 * connection, and its slot under the connection limits, for as long as it
 * likes.  The guard bounds the time a client may take instead: from the
 * moment a connection is accepted, or its previous response was queued, the
 * client has timeout_ms to deliver a complete request (headers and body)
 * and, once answered, to read the answer and send the next one.  While the
 * API works on a complete request the clock is stopped: that time is the
 * server's, bounded by its own database deadlines.
 *
 * A thread checks every connection about ten times a second; one past its
 * deadline is shut down (shutdown(2), both directions), which libmicrohttpd
 * sees as the peer going away: it closes the connection and frees its slot.
 * The guard never closes a descriptor itself, and a connection leaves the
 * guard (api_deadline_close, from libmicrohttpd's "closed" notification) under
 * the same lock the checker holds, so a descriptor is never shut down after
 * libmicrohttpd has closed it and the number was given to another socket.
 * Each check logs what it shut down as "http_timeout" events, one per
 * client address: how many connections, waiting for what. */
#ifndef CW_API_DEADLINE_H
#define CW_API_DEADLINE_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct api_deadline api_deadline;
struct api_deadline_conn;

/* Starts the checker thread.  NULL with a message in err. */
api_deadline *api_deadline_start(int timeout_ms, char *err, size_t errlen);

/* Stops the thread and frees g; call after every connection has closed. */
void api_deadline_stop(api_deadline *g);

/* A new connection on fd from addr (may be NULL): its first request is due
 * within the timeout.  NULL on out of memory (the connection is unguarded). */
struct api_deadline_conn *api_deadline_open(api_deadline *g, int fd,
                                           const struct sockaddr *addr);

/* The request is complete and being handled: no deadline until rearmed. */
void api_deadline_hold(struct api_deadline_conn *c);

/* A response was queued: the client has the timeout again to take it and
 * to send its next request. */
void api_deadline_rearm(struct api_deadline_conn *c);

/* The connection is closed; c is freed.  c may be NULL. */
void api_deadline_close(api_deadline *g, struct api_deadline_conn *c);

/* How many connections were shut down for their deadline so far. */
long api_deadline_timeouts(api_deadline *g);

#endif
