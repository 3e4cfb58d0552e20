/* relay_store.h -- the outbox row lifecycle, as the relay drives it.
 *
 * Every transition is one parameterized statement in a short transaction
 * of its own (autocommit), except that while a backlog drains the mark of one
 * batch and the claim of the next share one (relay_mark_claim_send).  Nothing
 * here publishes; the relay publishes between claim and settle, holding no
 * transaction and no row lock.
 *
 *                 claim (lease: lock_id = a fresh token,      publish ok,
 *                        locked_until, attempts + 1)          mark (fenced)
 *   PENDING ------------------------------------> LEASED -----------------> PUBLISHED
 *   (published_at, dead_lettered_at NULL,          |  |  \
 *    next_attempt_at <= now, no live lease)        |  |   \ publish failed, attempts < max:
 *      ^   ^                                       |  |    \ retry (fenced): next_attempt_at =
 *      |   +---------------------------------------+  |     now + backoff, lease released,
 *      |     lease expires (relay died, stalled,      |     sanitized last_error  -> PENDING
 *      |     or stopped before settling)              |
 *      |                                              +-- publish failed, attempts >= max:
 *      |                                              |   dead letter (fenced) -> DEAD
 *      |                                              +-- claimed with attempts > max (no
 *      |                                                  earlier claim settled): not published,
 *      |                                                  dead letter (fenced) -> DEAD
 *      +-- outboxctl requeue (attempts reset to 0) ------------------------------ DEAD
 *
 * Invariants:
 *  1. A row has at most one live lease: the claim only takes rows whose
 *     locked_until is NULL or past, under FOR UPDATE SKIP LOCKED.
 *  2. Only the current lease settles a row: mark, retry and dead letter all
 *     require lock_id = the token of the claim they settle, a fresh UUID
 *     per claim.  A row claimed again since -- by another worker, or by the
 *     same worker whose earlier lease expired -- updates zero rows (lease
 *     lost), and the relay stops there.  (A token per worker could not tell
 *     a worker's old claim of a row from its new one: the old claim's retry
 *     would clear the new claim's lease.)  The mark also requires
 *     published_at IS NULL: a row is published once.
 *  3. Settling releases the lease (locked_until = NULL) and keeps lock_id,
 *     and locked_by (the worker that claimed), as the record of the last
 *     claim that held the row.
 *  4. attempts counts claims, not broker failures: a crash or an expired
 *     lease consumes an attempt too (as in the source article, README).
 *  5. A claim that finds a row whose previous lease was never settled
 *     (locked_until still set, now past) counts an expired lease recovered.
 *  6. No publish starts past the attempt limit: a row whose every attempt
 *     ended without a settle (its publish crashed the relay, or the lease ran
 *     out each time) is dead-lettered by the claim that takes it past the
 *     limit, instead of being claimed and published forever.  Its attempts
 *     then read max + 1.
 *  7. A pending row is fresh (last_error NULL: no publish of it has failed,
 *     or an operator requeued it) or retried (last_error set by a retry).
 *     The claim takes due retried rows first, in next_attempt_at order, then
 *     fresh rows in (occurred_at, id) order; a row backing off is never
 *     walked by a claim (relay_store.c). */
#ifndef CW_RELAY_STORE_H
#define CW_RELAY_STORE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

enum relay_order {
    RELAY_ORDER_FIFO = 0,          /* (occurred_at, id) order, any aggregate */
    RELAY_ORDER_PER_AGGREGATE = 1  /* one unpublished version per aggregate at a time */
};

enum relay_msg_state {
    RELAY_MSG_CLAIMED = 0, /* leased, not yet sent */
    RELAY_MSG_SENT,        /* publish sent, confirm not yet read */
    RELAY_MSG_PUBLISHED,   /* broker confirmed; not yet marked */
    RELAY_MSG_FAILED,      /* publish failed; retry or dead letter pending */
    RELAY_MSG_EXHAUSTED,   /* claimed past the attempt limit: not published, dead
                              letter pending (invariant 6) */
    RELAY_MSG_SKIPPED,     /* not published: lease too close to expiry, or stopping */
    RELAY_MSG_MARKED,      /* marked published */
    RELAY_MSG_LOST         /* settle updated zero rows: the lease was lost */
};

#define RELAY_TS_LEN 40
#define RELAY_RAW_ERROR_MAX 1024

/* One claimed row.  Strings marked owned are freed by relay_batch_free. */
struct relay_msg {
    char id[37];
    char aggregate_id[37];
    long long aggregate_version;
    int schema_version;
    int attempts;                    /* after this claim's increment */
    int recovered;                   /* its previous lease had expired unsettled */
    char previous_lease[8];          /* the row's lease as the claim found it:
                                      * "none" (never leased, or released),
                                      * "expired", or "live" (only a claim that
                                      * ignores leases can find one) */
    char occurred_at[RELAY_TS_LEN];  /* UTC, "YYYY-MM-DDTHH:MM:SS.ffffffZ" */
    char *event_type;                /* owned */
    char *payload;                   /* owned: jsonb::text exactly as returned */
    char *trace_parent;              /* owned; NULL when the row has none */
    enum relay_msg_state state;
    char error[RELAY_RAW_ERROR_MAX]; /* raw error of a failed publish (never stored
                                        or logged as is: see cw_sanitize_error) */
};

struct relay_batch {
    struct relay_msg *msgs;
    int n;
    int64_t lease_deadline_ms;       /* CLOCK_MONOTONIC ms; conservative (see relay_claim) */
    char lease_until[RELAY_TS_LEN];  /* the database's locked_until, UTC */
    char token[37];                  /* the claim's fencing token (lock_id) */
    long long lease_until_us;        /* locked_until, us since the epoch */
};

/* The text of one statement: "claim" (for the given order), "mark", "retry",
 * "dead_letter", "counter".  NULL for an unknown name.  Parameters:
 *   claim        $1 claim token uuid, $2 batch size, $3 lease ms, $4 worker uuid
 *   mark         $1 uuid[] literal of ids, $2 claim token
 *   retry        $1 id, $2 claim token, $3 delay ms, $4 last_error
 *   dead_letter  $1 id, $2 claim token, $3 last_error
 *   counter      $1 counter name, $2 amount to add */
const char *relay_sql(const char *which, enum relay_order order);

/* Claims up to batch rows for worker with a lease of lease_ms, fenced by
 * token (a fresh UUID for every claim), in one autocommit
 * statement, and fills out (zeroed first; out->n may be 0).  The
 * lease deadline is taken on the monotonic clock BEFORE the statement is sent,
 * so it never falls after the database's own locked_until.  Returns 0, or -1
 * with the SQLSTATE and a message (out is then empty). */
int relay_claim(PGconn *conn, const char *worker, const char *token, int batch, int lease_ms,
                enum relay_order order, struct relay_batch *out,
                char *sqlstate, char *err, size_t errlen);

/* relay_claim in two halves, so that the database works on the next claim
 * while the relay waits for the broker: relay_claim_send sends the statement
 * (PQsendQueryParams) and notes the send time in *sent_at; the connection
 * must not be used for anything else until relay_claim_finish has read the
 * result.  Same results as relay_claim. */
int relay_claim_send(PGconn *conn, const char *worker, const char *token, int batch,
                     int lease_ms, enum relay_order order, int64_t *sent_at, char *err,
                     size_t errlen);
int relay_claim_finish(PGconn *conn, const char *token, int64_t sent_at, int lease_ms,
                       struct relay_batch *out, char *sqlstate, char *err, size_t errlen);

/* Sorts the batch by (occurred_at, id): UPDATE ... RETURNING does not keep
 * the CTE's order. */
void relay_batch_sort(struct relay_batch *b);

/* Frees what the batch owns and empties it; NULL and empty batches are fine. */
void relay_batch_free(struct relay_batch *b);

/* A PostgreSQL array literal "{id,id,...}" of the ids of the messages in
 * state (pgx_uuid_array); malloc'd (caller frees), NULL on out of memory or
 * when an id is not a UUID.  *count receives the number of ids. */
char *relay_id_array(const struct relay_batch *b, enum relay_msg_state state, int *count);

/* Marks every PUBLISHED message of the batch published, in one statement
 * fenced by lock_id = the batch's claim token.  Each becomes MARKED, or LOST
 * when the row was claimed again since (or is already published).  Returns the number marked (0 when there was
 * nothing to mark), or -1 on a database error (states then unchanged). */
int relay_mark(PGconn *conn, struct relay_batch *b, char *sqlstate, char *err, size_t errlen);

/* relay_mark in two halves, as relay_claim_send/relay_claim_finish.
 * relay_mark_send returns 1 when the mark was sent, 0 when the batch has
 * nothing to mark (nothing sent), -1 with a message when it could not be
 * sent.  relay_mark_finish returns what relay_mark returns. */
int relay_mark_send(PGconn *conn, const struct relay_batch *b, char *err, size_t errlen);
int relay_mark_finish(PGconn *conn, struct relay_batch *b, char *sqlstate, char *err,
                      size_t errlen);

/* Which statement of a mark + claim pipeline failed. */
enum relay_step {
    RELAY_STEP_NONE = 0,
    RELAY_STEP_MARK,   /* the mark failed: the claim was not run */
    RELAY_STEP_CLAIM,  /* the claim failed: the mark was rolled back with it */
    RELAY_STEP_COMMIT  /* the commit failed: both were rolled back */
};

/* The fenced mark of b's PUBLISHED messages (there must be one) and the claim
 * of the next batch, sent as one pipeline: one round trip, one transaction
 * (the argument that the fence holds is in relay_store.c).  The lease
 * deadline is taken before the send, into *sent_at.  Returns 0, or -1 with a
 * message when it could not be sent: then the connection is unusable (a
 * pipeline half queued cannot be taken back) and must be closed. */
int relay_mark_claim_send(PGconn *conn, const char *worker, const char *token,
                          const struct relay_batch *b, int batch, int lease_ms,
                          enum relay_order order, int64_t *sent_at, char *err, size_t errlen);

/* Reads what relay_mark_claim_send sent and leaves the connection ready for
 * the next statement.  Once the commit came back clean, b's PUBLISHED
 * messages become MARKED or LOST, next holds the claimed batch (possibly
 * empty) and the number marked is returned.  Otherwise -1, *failed names the
 * statement, with the SQLSTATE and a message; nothing was committed (or, on a
 * lost connection, nothing is known): b's states are unchanged and next is
 * empty. */
int relay_mark_claim_finish(PGconn *conn, struct relay_batch *b, const char *token,
                            int64_t sent_at, int lease_ms, struct relay_batch *next, enum relay_step *failed, char *sqlstate,
                            char *err, size_t errlen);

/* Schedules a retry of id after delay_ms, releasing the lease and storing
 * last_error (already sanitized by the caller).  next_at receives the
 * next_attempt_at decided (UTC text).  Returns 1, 0 when the lease was lost
 * (zero rows), -1 on a database error. */
int relay_retry(PGconn *conn, const char *token, const char *id, int64_t delay_ms,
                const char *last_error, char next_at[RELAY_TS_LEN],
                char *sqlstate, char *err, size_t errlen);

/* Dead-letters id with last_error, releasing the lease.  1, 0 (lease lost)
 * or -1, as relay_retry. */
int relay_dead_letter(PGconn *conn, const char *token, const char *id,
                      const char *last_error, char *sqlstate, char *err, size_t errlen);

/* Adds amount to the pipeline counter name (created at 0).  0 or -1. */
int relay_counter_add(PGconn *conn, const char *name, long long amount,
                      char *sqlstate, char *err, size_t errlen);

#endif
