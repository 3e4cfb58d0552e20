/* api_pool.c -- the API's libpq connection pool; see api_pool.h.
 *
 * State: an array of slots, each either free (holding a live connection or
 * NULL) or taken.  One mutex guards the array, one condition variable wakes
 * waiters on release.  Connecting happens with the slot taken and the mutex
 * released. */
#include "api_pool.h"
#include "pgx.h"
#include "sanitize.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slot {
    PGconn *conn;  /* NULL: connect on next acquire */
    int taken;
};

struct api_pool {
    struct api_pool_config cfg;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int nslots;
    struct slot *slots;
};

/* Opens one connection with the pool's session settings. */
static PGconn *pool_connect(const struct api_pool_config *cfg, char *err, size_t errlen)
{
    char ctimeout[16];
    snprintf(ctimeout, sizeof(ctimeout), "%d", cfg->connect_timeout_s);
    /* Entries after the expanded conninfo would override it; ours come
     * first so that what the operator wrote wins.  The name is only a
     * fallback: application_name in the conninfo or PGAPPNAME (how a
     * supervisor names each instance) goes first. */
    const char *keys[] = { "connect_timeout", "fallback_application_name", NULL };
    const char *vals[] = { ctimeout, "payments-api", NULL };
    /* pgx adds the keepalive and server-side timeout defaults, bounds
     * every later call on the connection, and sanitizes libpq's message
     * (which may quote parts of the conninfo) before it reaches err. */
    char cerr[512];
    PGconn *conn = pgx_connect_params(keys, vals, cfg->conninfo, cerr, sizeof(cerr));
    if (conn == NULL) {
        snprintf(err, errlen, "%s", cerr);
        return NULL;
    }
    char lock_ms[32], stmt_ms[32];
    snprintf(lock_ms, sizeof(lock_ms), "%dms", cfg->lock_timeout_ms);
    snprintf(stmt_ms, sizeof(stmt_ms), "%dms", cfg->statement_timeout_ms);
    const char *params[2] = { lock_ms, stmt_ms };
    char perr[256];
    if (pgx_cmd(conn,
                "SELECT set_config('lock_timeout', $1, false),"
                " set_config('statement_timeout', $2, false)",
                2, params, NULL, perr, sizeof(perr)) < 0) {
        char safe[CW_ERROR_MAX + 1];
        cw_sanitize_error(perr, safe, sizeof(safe));
        snprintf(err, errlen, "could not configure database session: %s", safe);
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

api_pool *api_pool_new(const struct api_pool_config *cfg, char *err, size_t errlen)
{
    if (cfg->size < 1 || cfg->lock_timeout_ms < 1 || cfg->statement_timeout_ms < 1) {
        snprintf(err, errlen, "invalid pool configuration");
        return NULL;
    }
    api_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->slots = calloc((size_t)cfg->size, sizeof(struct slot));
    if (p->slots == NULL) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    p->nslots = cfg->size;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->slots[0].conn = pool_connect(&p->cfg, err, errlen);
    if (p->slots[0].conn == NULL) {
        api_pool_free(p);
        return NULL;
    }
    return p;
}

void api_pool_free(api_pool *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].conn != NULL)
            PQfinish(p->slots[i].conn);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->lock);
    free(p->slots);
    free(p);
}

PGconn *api_pool_acquire(api_pool *p, int timeout_ms, char *err, size_t errlen)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }

    pthread_mutex_lock(&p->lock);
    int found = -1;
    for (;;) {
        /* Prefer a slot with a live connection over one that must connect. */
        for (int i = 0; i < p->nslots; i++) {
            if (p->slots[i].taken)
                continue;
            if (p->slots[i].conn != NULL) {
                found = i;
                break;
            }
            if (found < 0)
                found = i;
        }
        if (found >= 0)
            break;
        int rc = pthread_cond_timedwait(&p->freed, &p->lock, &deadline);
        if (rc == ETIMEDOUT) {
            pthread_mutex_unlock(&p->lock);
            snprintf(err, errlen, "no database connection free within %d ms", timeout_ms);
            return NULL;
        }
    }
    struct slot *s = &p->slots[found];
    s->taken = 1;
    PGconn *conn = s->conn;
    /* Until it is handed back, the connection is the caller's alone, and
     * the slot keeps no pointer to it: a connection freed below while a
     * new one is opened could come back from malloc at the same address
     * for another thread's slot, and api_pool_release, which finds the
     * slot by that address, would then free the wrong slot and leave the
     * reconnected one to be handed out twice. */
    s->conn = NULL;
    pthread_mutex_unlock(&p->lock);

    if (conn != NULL && PQstatus(conn) != CONNECTION_OK) {
        PQfinish(conn);
        conn = NULL;
    }
    if (conn == NULL)
        conn = pool_connect(&p->cfg, err, errlen);

    pthread_mutex_lock(&p->lock);
    if (conn == NULL) {
        s->taken = 0;
        pthread_cond_signal(&p->freed);
    } else {
        s->conn = conn;
    }
    pthread_mutex_unlock(&p->lock);
    return conn;
}

void api_pool_release(api_pool *p, PGconn *conn, int discard)
{
    if (conn == NULL)
        return;
    /* A connection left inside a transaction would leak that transaction's
     * locks into the next request: never hand it out again. */
    if (!discard && (PQstatus(conn) != CONNECTION_OK ||
                     PQtransactionStatus(conn) != PQTRANS_IDLE))
        discard = 1;
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->nslots; i++) {
        if (p->slots[i].taken && p->slots[i].conn == conn) {
            if (discard)
                p->slots[i].conn = NULL;
            p->slots[i].taken = 0;
            break;
        }
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
    /* Closed outside the lock: PQfinish talks to the socket. */
    if (discard)
        PQfinish(conn);
}
