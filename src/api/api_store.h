/* api_store.h -- the payments API's transactions: payment, outbox row and
 * idempotency record written atomically, replays, and the settling of a
 * COMMIT whose outcome the API could not see.
 *
 * A command (create, authorize, capture) is one database transaction:
 *
 *   1. INSERT the idempotency record (client, key, request hash, the final
 *      status and response body) ON CONFLICT DO NOTHING.  The unique key
 *      (client_id, idempotency_key) is the arbiter between racing requests:
 *      a second request with the same key waits on the first one's
 *      uncommitted row, at most lock_timeout, and then gets 409 with
 *      Retry-After; once the first has committed, the second finds its
 *      record and replays it (same hash) or is refused with 422 (another
 *      hash).  The record is written with its final content at once: the
 *      response of a successful command is fully known before it runs (ids
 *      are chosen up front), so there is no "in flight" placeholder to
 *      update and no window where a committed record lacks its answer.
 *   2. Write the payment (INSERT, or UPDATE of the row locked FOR UPDATE for
 *      authorize/capture) and its outbox row (PaymentCreated v1,
 *      PaymentAuthorized v2, PaymentCaptured v3).
 *   3. Record pg_current_xact_id(); fault point api/before_commit; COMMIT;
 *      fault points api/commit_lost and api/after_commit; answer.
 *
 * For create, steps 1-2 are a single statement (data-modifying CTEs), so a
 * payment costs three round trips: BEGIN, the statement, COMMIT.
 *
 * Ids (payment id, event id) and the event's timestamp are chosen once per
 * logical request, before the first attempt: a retry after 40001/40P01, or
 * after the connection broke before COMMIT was sent, writes the very same
 * event.  Nothing is retried once COMMIT was sent: if the connection breaks
 * during COMMIT the outcome is settled with pg_xact_status(xid) on a new
 * connection, and the answer comes from the idempotency record (committed)
 * or is 503 (rolled back, or still unknown after a bounded wait; a retry with
 * the same key is then safe either way).  A "committed" status is believed
 * only with the request's own record or event row beside it: after a
 * failover the xid may name another transaction of the new primary. */
#ifndef CW_API_STORE_H
#define CW_API_STORE_H

#include "api_pool.h"
#include "api_reply.h"
#include "api_validate.h"

typedef struct api_store api_store;

struct api_store_config {
    api_pool *pool;           /* borrowed */
    int acquire_timeout_ms;   /* waiting for a pooled connection */
    int max_attempts;         /* transaction attempts on retryable errors */
    int resolve_timeout_ms;   /* settling an ambiguous COMMIT */
    const char *broker;       /* only used by the publishing mutants; may be NULL */
};

enum api_command_kind { API_CMD_CREATE, API_CMD_AUTHORIZE, API_CMD_CAPTURE };

/* A validated command.  Every string is borrowed for the call. */
struct api_command {
    enum api_command_kind kind;
    const char *client_id;
    const char *idem_key;
    const char *request_hash;              /* hex SHA-256 of the canonical request */
    const char *traceparent;               /* valid W3C traceparent for the outbox row */
    const char *payment_id;                /* authorize/capture: lowercase uuid */
    const struct api_create_body *create;  /* create: amount and currency */
};

/* Returns NULL with a message in err on failure. */
api_store *api_store_new(const struct api_store_config *cfg, char *err, size_t errlen);
void api_store_free(api_store *s);

/* Runs a command and fills r: 201/200 (new or replayed, r->replayed set on a
 * replay), 404 unknown payment, 409 key in flight / payment busy / illegal
 * transition, 422 key reused for another request, 503 database unavailable or
 * outcome unknown, 500 unexpected database error. */
void api_store_execute(api_store *s, const struct api_command *cmd, struct api_reply *r);

/* GET /payments/{id}: 200 with id, status, amount, currency, version; 404. */
void api_store_get_payment(api_store *s, const char *payment_id, struct api_reply *r);

/* GET /healthz: 200 when a database round trip works, else 503. */
void api_store_health(api_store *s, struct api_reply *r);

#endif
