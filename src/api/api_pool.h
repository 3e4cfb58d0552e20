/* api_pool.h -- a small, fixed-size pool of libpq connections.
 *
 * The API runs requests on a fixed number of request workers and each
 * request holds at most one connection at a time, so the pool is sized to the
 * worker count and an acquire normally never waits.  Slots are filled lazily:
 * a slot whose connection was discarded (broken, or thrown away on purpose
 * after an ambiguous COMMIT) is reconnected by the next acquire, outside the
 * lock, so one slow connect never blocks the other threads.
 *
 * Every new connection gets its session settings before it is handed out:
 *   lock_timeout        how long a statement may wait for a row or key lock
 *                       (a request racing on an Idempotency-Key waits at most
 *                       this long, then gets 409);
 *   statement_timeout   bounds every statement, so no request hangs forever;
 *   application_name    "payments-api". */
#ifndef CW_API_POOL_H
#define CW_API_POOL_H

#include <libpq-fe.h>
#include <stddef.h>

typedef struct api_pool api_pool;

struct api_pool_config {
    const char *conninfo;     /* borrowed; must outlive the pool */
    int size;                 /* connections, >= 1 */
    int lock_timeout_ms;      /* >= 1 */
    int statement_timeout_ms; /* >= 1 */
    int connect_timeout_s;    /* used when conninfo does not set one */
};

/* Creates the pool and opens one connection to prove the database is
 * reachable.  Returns NULL with a message in err (never the conninfo; libpq's
 * own text is passed through cw_sanitize_error, so err is safe to log). */
api_pool *api_pool_new(const struct api_pool_config *cfg, char *err, size_t errlen);

/* Frees every connection.  No connection may be checked out.  NULL is a no-op. */
void api_pool_free(api_pool *p);

/* Takes a connection, connecting a slot if needed; waits at most timeout_ms
 * for a free slot.  Returns NULL with a message in err (sanitized, as for
 * api_pool_new) when no slot freed up in time or the connection could not be
 * made. */
PGconn *api_pool_acquire(api_pool *p, int timeout_ms, char *err, size_t errlen);

/* Gives conn back.  With discard (or when conn is no longer CONNECTION_OK,
 * or is still inside a transaction) the connection is closed and its slot
 * will reconnect on its next use. */
void api_pool_release(api_pool *p, PGconn *conn, int discard);

#endif
