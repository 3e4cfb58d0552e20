/* relay_store.c -- the relay's SQL: claim, fenced mark, retry, dead letter.
 *
 * The lifecycle and its invariants are drawn in relay_store.h.  Three choices
 * a reader may question:
 *
 * - The claim takes due rows from two places, each walked by an index in the
 *   order it wants and each stopping after LIMIT matches:
 *     retried rows (last_error set: a publish failed) through
 *       ix_outbox_retry_order (next_attempt_at), due ones first, so the scan
 *       stops at the first row still backing off;
 *     fresh rows (last_error NULL) through ix_outbox_claim_order
 *       (occurred_at, id), the source article's ORDER BY (README).
 *   The fresh scan holds no row in backoff at all (the retry statement moves a
 *   row from one index to the other by setting last_error), so while the
 *   broker refuses and thousands of rows back off at the head of the claim
 *   order, a claim still costs O(batch), not O(rows in backoff): every NOTIFY
 *   triggers a claim in every relay, exactly when the database can least
 *   afford a walk over the backlog.  A single index cannot do this: whether a
 *   row is due depends on now(), which no index predicate may use.  The two
 *   are joined by UNION ALL under one LIMIT: Append runs the retried branch
 *   first and stops pulling (and so locking) rows once the batch is full, so
 *   no row is locked in vain.  On a backlog the planner walks both indexes in
 *   order, no Sort; on a small table, believing few rows due, it may instead
 *   read the due rows through ix_outbox_ready and sort them: neither plan
 *   reads a row in backoff.  Due retried rows go first: they were claimed
 *   before and are in general the oldest rows waiting.  Rows whose
 *   lease expired unsettled have no last_error and keep their place in the
 *   fresh order; a requeued dead letter loses its last_error and goes back to
 *   its place too.
 *
 * - The decided next_attempt_at is returned by the retry statement as the
 *   expression it computed, not re-read from the row: the retry event then
 *   states what this relay decided, which is what the invariant checker
 *   holds it to.
 *
 * - The mark of one batch and the claim of the next may share a transaction
 *   (relay_mark_claim_send): the argument that this keeps the fence is given
 *   where it is done, below. */
#include "relay_store.h"
#include "cwlog.h"
#include "mutant.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TS_UTC(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* A row still leased by another claim is not due, whatever its schedule. */
#define CLAIM_LEASE_FILTER "          AND (o.locked_until IS NULL OR o.locked_until < now())\n"

/* In per-aggregate mode a row waits while any older version of its aggregate
 * is unpublished: pending, leased, backing off or dead-lettered.  A
 * dead-lettered predecessor therefore holds its successors back until an
 * operator requeues it (and it is published) or removes it: the consumer
 * never sees a version after a hole. */
#define CLAIM_ORDER_FILTER                                                      \
    "          AND NOT EXISTS (\n"                                              \
    "              SELECT 1 FROM outbox_messages AS older\n"                    \
    "              WHERE older.aggregate_id = o.aggregate_id\n"                 \
    "                AND older.aggregate_version < o.aggregate_version\n"       \
    "                AND older.published_at IS NULL)\n"

/* One branch of the claim: due rows of one kind (kind_filter), walked in
 * the order of that kind's index, locked as they are pulled. */
#define CLAIM_BRANCH(alias, kind_filter, order_by, order_filter, lease_filter)  \
    "    SELECT " alias ".id, " alias ".previous_lease FROM (\n"                \
    "        SELECT o.id, o.locked_until AS previous_lease\n"                   \
    "        FROM outbox_messages AS o\n"                                       \
    "        WHERE o.published_at IS NULL\n"                                    \
    "          AND o.dead_lettered_at IS NULL\n"                                \
    kind_filter                                                                 \
    "          AND o.next_attempt_at <= now()\n"                                \
    lease_filter                                                                \
    order_filter                                                                \
    "        ORDER BY " order_by "\n"                                           \
    "        LIMIT $2::int\n"                                                   \
    "        FOR UPDATE SKIP LOCKED) AS " alias "\n"

#define CLAIM_SQL(order_filter, lease_filter)                                   \
    "WITH candidates AS (\n"                                                    \
    CLAIM_BRANCH("retried", "          AND o.last_error IS NOT NULL\n",         \
                 "o.next_attempt_at", order_filter, lease_filter)               \
    "    UNION ALL\n"                                                           \
    CLAIM_BRANCH("fresh", "          AND o.last_error IS NULL\n",               \
                 "o.occurred_at, o.id", order_filter, lease_filter)             \
    "    LIMIT $2::int\n"                                                       \
    ")\n"                                                                       \
    "UPDATE outbox_messages AS m\n"                                             \
    "SET lock_id = $1::uuid,\n"                                                 \
    "    locked_by = $4::uuid,\n"                                               \
    "    locked_until = now() + $3::bigint * interval '1 millisecond',\n"       \
    "    attempts = m.attempts + 1\n"                                           \
    "FROM candidates AS c\n"                                                    \
    "WHERE m.id = c.id\n"                                                       \
    "RETURNING m.id, m.aggregate_id, m.aggregate_version, m.event_type,\n"      \
    "          m.schema_version, m.payload::text, m.trace_parent,\n"            \
    "          " TS_UTC("m.occurred_at") ",\n"                                  \
    "          m.attempts, " TS_UTC("m.locked_until") ",\n"                     \
    "          CASE WHEN c.previous_lease IS NULL THEN 'none'\n"                \
    "               WHEN c.previous_lease <= now() THEN 'expired'\n"            \
    "               ELSE 'live' END,\n"                                          \
    "          (extract(epoch FROM m.locked_until) * 1000000)::bigint"

static const char sql_claim_fifo[] = CLAIM_SQL("", CLAIM_LEASE_FILTER);
static const char sql_claim_per_aggregate[] = CLAIM_SQL(CLAIM_ORDER_FILTER, CLAIM_LEASE_FILTER);

/* Fenced by lock_id, the token of the claim that leased the row (a fresh one
 * per claim): a row claimed again since, by another worker or by this one, is
 * not this claim's to mark.  The lease time is deliberately not part of the
 * fence: if the lease ran out but nobody claimed the row since, the broker's
 * confirm is still a fact and recording it spares a needless republish.  A
 * row already published is never marked again (its published_at is the
 * first confirm's). */
static const char sql_mark[] =
    "UPDATE outbox_messages\n"
    "SET published_at = now(), locked_until = NULL\n"
    "WHERE id = ANY($1::uuid[]) AND lock_id = $2::uuid AND published_at IS NULL\n"
    "RETURNING id";

#define RETRY_SQL(set_schedule)                                                 \
    "UPDATE outbox_messages\n"                                                  \
    "SET " set_schedule "locked_until = NULL,\n"                                \
    "    last_error = $4\n"                                                     \
    "WHERE id = $1::uuid AND lock_id = $2::uuid\n"                              \
    "  AND published_at IS NULL AND dead_lettered_at IS NULL\n"                 \
    "RETURNING " TS_UTC("now() + $3::bigint * interval '1 millisecond'")

static const char sql_retry[] =
    RETRY_SQL("next_attempt_at = now() + $3::bigint * interval '1 millisecond',\n    ");

/* ---- the known-wrong statements (mutant builds only, see mutant.h) ----- */

/* claim_ignores_lease: takes rows whose lease is still live. */
static const char mutant_claim_fifo[] = CLAIM_SQL("", "");
static const char mutant_claim_per_aggregate[] = CLAIM_SQL(CLAIM_ORDER_FILTER, "");

/* mark_without_owner_check: marks whatever the batch named, fenced by
 * nothing; the owner is not part of the statement any more. */
static const char mutant_mark[] =
    "UPDATE outbox_messages\n"
    "SET published_at = now(), locked_until = NULL\n"
    "WHERE id = ANY($1::uuid[])\n"
    "RETURNING id";

/* retry_not_persisted: releases the row without its next attempt's time. */
static const char mutant_retry[] = RETRY_SQL("");

/* claim_past_high_water_mark: the outbox read as a log with a cursor, the
 * newest row published so far: a row that sorts before it is taken as
 * done.  Rows do not commit in the order they sort (occurred_at is the
 * API's clock before its transaction), so one that commits after a newer
 * one was published, and one that comes back for a retry, are never
 * claimed. */
#define CLAIM_CURSOR_FILTER                                                     \
    "          AND NOT EXISTS (\n"                                              \
    "              SELECT 1 FROM outbox_messages AS newer\n"                    \
    "              WHERE newer.published_at IS NOT NULL\n"                      \
    "                AND (newer.occurred_at, newer.id) > (o.occurred_at, o.id))\n"
static const char mutant_cursor_fifo[] = CLAIM_SQL(CLAIM_CURSOR_FILTER, CLAIM_LEASE_FILTER);
static const char mutant_cursor_per_aggregate[] =
    CLAIM_SQL(CLAIM_ORDER_FILTER CLAIM_CURSOR_FILTER, CLAIM_LEASE_FILTER);

#define SQL_CLAIM_FIFO                                                          \
    (CW_MUTANT(claim_ignores_lease)          ? mutant_claim_fifo                \
     : CW_MUTANT(claim_past_high_water_mark) ? mutant_cursor_fifo               \
                                             : sql_claim_fifo)
#define SQL_CLAIM_PER_AGGREGATE                                                 \
    (CW_MUTANT(claim_ignores_lease)          ? mutant_claim_per_aggregate       \
     : CW_MUTANT(claim_past_high_water_mark) ? mutant_cursor_per_aggregate      \
                                             : sql_claim_per_aggregate)
#define SQL_MARK (CW_MUTANT(mark_without_owner_check) ? mutant_mark : sql_mark)
#define MARK_NPARAMS (CW_MUTANT(mark_without_owner_check) ? 1 : 2)
#define SQL_RETRY (CW_MUTANT(retry_not_persisted) ? mutant_retry : sql_retry)

static const char sql_dead_letter[] =
    "UPDATE outbox_messages\n"
    "SET dead_lettered_at = now(), locked_until = NULL, last_error = $3\n"
    "WHERE id = $1::uuid AND lock_id = $2::uuid\n"
    "  AND published_at IS NULL AND dead_lettered_at IS NULL";

static const char sql_counter[] =
    "INSERT INTO pipeline_counters (counter, value) VALUES ($1, $2::bigint)\n"
    "ON CONFLICT (counter) DO UPDATE SET value = pipeline_counters.value + EXCLUDED.value";

const char *relay_sql(const char *which, enum relay_order order)
{
    if (which == NULL)
        return NULL;
    if (strcmp(which, "claim") == 0)
        return order == RELAY_ORDER_PER_AGGREGATE ? SQL_CLAIM_PER_AGGREGATE : SQL_CLAIM_FIFO;
    if (strcmp(which, "mark") == 0)
        return SQL_MARK;
    if (strcmp(which, "retry") == 0)
        return SQL_RETRY;
    if (strcmp(which, "dead_letter") == 0)
        return sql_dead_letter;
    if (strcmp(which, "counter") == 0)
        return sql_counter;
    return NULL;
}

static char *dup_or_null(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    char *s = strdup(PQgetvalue(res, row, col));
    if (s == NULL)
        abort();
    return s;
}

/* Fills out from a claim result (which it does not free). */
static void parse_claim(const PGresult *res, const char *token, int64_t sent_at, int lease_ms,
                        struct relay_batch *out)
{
    int n = PQntuples(res);
    memset(out, 0, sizeof(*out));
    snprintf(out->token, sizeof(out->token), "%s", token);
    out->lease_deadline_ms = sent_at + lease_ms;
    if (n == 0)
        return;
    out->msgs = calloc((size_t)n, sizeof(*out->msgs));
    if (out->msgs == NULL)
        abort();
    for (int r = 0; r < n; r++) {
        struct relay_msg *m = &out->msgs[r];
        snprintf(m->id, sizeof(m->id), "%s", PQgetvalue(res, r, 0));
        snprintf(m->aggregate_id, sizeof(m->aggregate_id), "%s", PQgetvalue(res, r, 1));
        m->aggregate_version = strtoll(PQgetvalue(res, r, 2), NULL, 10);
        m->event_type = dup_or_null(res, r, 3);
        m->schema_version = atoi(PQgetvalue(res, r, 4));
        m->payload = dup_or_null(res, r, 5);
        m->trace_parent = dup_or_null(res, r, 6);
        snprintf(m->occurred_at, sizeof(m->occurred_at), "%s", PQgetvalue(res, r, 7));
        m->attempts = atoi(PQgetvalue(res, r, 8));
        if (r == 0) {
            snprintf(out->lease_until, sizeof(out->lease_until), "%s", PQgetvalue(res, r, 9));
            out->lease_until_us = strtoll(PQgetvalue(res, r, 11), NULL, 10);
        }
        snprintf(m->previous_lease, sizeof(m->previous_lease), "%s", PQgetvalue(res, r, 10));
        m->recovered = strcmp(m->previous_lease, "none") != 0;
        m->state = RELAY_MSG_CLAIMED;
    }
    out->n = n;
}

/* The claim's parameters as text, in caller storage. */
struct claim_params {
    char batch[16];
    char lease[24];
    const char *values[4];
};

static void claim_params(struct claim_params *p, const char *worker, const char *token,
                         int batch, int lease_ms)
{
    snprintf(p->batch, sizeof(p->batch), "%d", batch);
    snprintf(p->lease, sizeof(p->lease), "%d", lease_ms);
    p->values[0] = token;
    p->values[1] = p->batch;
    p->values[2] = p->lease;
    p->values[3] = worker;
}

int relay_claim(PGconn *conn, const char *worker, const char *token, int batch, int lease_ms,
                enum relay_order order, struct relay_batch *out,
                char *sqlstate, char *err, size_t errlen)
{
    struct claim_params p;
    claim_params(&p, worker, token, batch, lease_ms);
    memset(out, 0, sizeof(*out));
    int64_t sent_at = cw_mono_ms();
    PGresult *res = pgx_exec(conn, relay_sql("claim", order), 4, p.values, sqlstate,
                             err, errlen);
    if (res == NULL)
        return -1;
    parse_claim(res, token, sent_at, lease_ms, out);
    PQclear(res);
    return 0;
}

int relay_claim_send(PGconn *conn, const char *worker, const char *token, int batch,
                     int lease_ms, enum relay_order order, int64_t *sent_at, char *err,
                     size_t errlen)
{
    struct claim_params p;
    claim_params(&p, worker, token, batch, lease_ms);
    *sent_at = cw_mono_ms();
    if (PQsendQueryParams(conn, relay_sql("claim", order), 4, NULL, p.values, NULL, NULL, 0)
        == 0) {
        snprintf(err, errlen, "%s", PQerrorMessage(conn));
        return -1;
    }
    return 0;
}

int relay_claim_finish(PGconn *conn, const char *token, int64_t sent_at, int lease_ms,
                       struct relay_batch *out, char *sqlstate, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    PGresult *res;
    if (CW_MUTANT(claim_believed_before_commit)) {
        /* Known-wrong: the claim's rows are taken as soon as they come back;
         * the COMMIT's answer after them (an error, when the server refused
         * it) is read and dropped unseen. */
        res = PQgetResult(conn);
        PGresult *rest;
        while ((rest = PQgetResult(conn)) != NULL)
            PQclear(rest);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            PQclear(res);
            res = NULL;
            snprintf(err, errlen, "%s", PQerrorMessage(conn));
            snprintf(sqlstate, 6, "%s", PQstatus(conn) == CONNECTION_OK ? "XX000" : "08006");
        }
    } else {
        res = pgx_get_result(conn, sqlstate, err, errlen);
    }
    if (res == NULL)
        return -1;
    parse_claim(res, token, sent_at, lease_ms, out);
    PQclear(res);
    return 0;
}

static int msg_cmp(const void *a, const void *b)
{
    const struct relay_msg *x = a, *y = b;
    /* The timestamps are fixed-width UTC text, so text order is time order. */
    int c = strcmp(x->occurred_at, y->occurred_at);
    return c != 0 ? c : strcmp(x->id, y->id);
}

void relay_batch_sort(struct relay_batch *b)
{
    if (b != NULL && b->n > 1)
        qsort(b->msgs, (size_t)b->n, sizeof(*b->msgs), msg_cmp);
}

void relay_batch_free(struct relay_batch *b)
{
    if (b == NULL)
        return;
    for (int i = 0; i < b->n; i++) {
        free(b->msgs[i].event_type);
        free(b->msgs[i].payload);
        free(b->msgs[i].trace_parent);
    }
    free(b->msgs);
    memset(b, 0, sizeof(*b));
}

char *relay_id_array(const struct relay_batch *b, enum relay_msg_state state, int *count)
{
    const char **ids = malloc(((size_t)b->n + 1) * sizeof(*ids));
    if (ids == NULL)
        return NULL;
    size_t k = 0;
    for (int i = 0; i < b->n; i++)
        if (b->msgs[i].state == state)
            ids[k++] = b->msgs[i].id;
    char *s = pgx_uuid_array(ids, k);
    free(ids);
    if (s != NULL && count != NULL)
        *count = (int)k;
    return s;
}

/* Marks MARKED the PUBLISHED messages of b whose id the mark returned, LOST
 * the others; returns the number marked. */
static int apply_mark(const PGresult *res, struct relay_batch *b)
{
    int marked = 0;
    for (int i = 0; i < b->n; i++) {
        struct relay_msg *m = &b->msgs[i];
        if (m->state != RELAY_MSG_PUBLISHED)
            continue;
        m->state = RELAY_MSG_LOST;
        for (int r = 0; r < PQntuples(res); r++) {
            if (strcmp(PQgetvalue(res, r, 0), m->id) == 0) {
                m->state = RELAY_MSG_MARKED;
                marked++;
                break;
            }
        }
    }
    return marked;
}

/* Notes the error of a pipeline result r, for the step it belongs to. */
static void step_error(PGconn *conn, const PGresult *r, enum relay_step step,
                       enum relay_step *failed, char *sqlstate, char *err, size_t errlen)
{
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char *m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    *failed = step;
    snprintf(sqlstate, 6, "%s", s ? s : "");
    snprintf(err, errlen, "%s", m ? m : PQerrorMessage(conn));
    size_t n = strlen(err);
    while (n > 0 && err[n - 1] == '\n')
        err[--n] = '\0';
}

/* Reads up to the pipeline's Sync (an error before it is the commit's) and
 * leaves pipeline mode, so the connection is ordinary again.  1 when the Sync
 * came back: only then did the implicit transaction commit. */
static int sync_result(PGconn *conn, enum relay_step *failed, char *sqlstate, char *err,
                       size_t errlen)
{
    PGresult *r;
    int synced = 0;
    while ((r = pgx_next_result(conn)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            synced = 1;
            break;
        }
        if (st != PGRES_PIPELINE_ABORTED && *failed == RELAY_STEP_NONE)
            step_error(conn, r, RELAY_STEP_COMMIT, failed, sqlstate, err, errlen);
        PQclear(r);
        if (PQstatus(conn) != CONNECTION_OK)
            break;
    }
    if (PQexitPipelineMode(conn) == 0 && *failed == RELAY_STEP_NONE) {
        *failed = RELAY_STEP_COMMIT;
        snprintf(err, errlen, "%s", PQerrorMessage(conn));
    }
    return synced;
}

int relay_mark(PGconn *conn, struct relay_batch *b, char *sqlstate, char *err, size_t errlen)
{
    int count = 0;
    char *ids = relay_id_array(b, RELAY_MSG_PUBLISHED, &count);
    if (ids == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (count == 0) {
        free(ids);
        return 0;
    }
    const char *params[2] = { ids, b->token };
    PGresult *res = pgx_exec(conn, SQL_MARK, MARK_NPARAMS, params, sqlstate, err, errlen);
    free(ids);
    if (res == NULL)
        return -1;
    int marked = apply_mark(res, b);
    PQclear(res);
    return marked;
}

int relay_mark_send(PGconn *conn, const struct relay_batch *b, char *err, size_t errlen)
{
    int count = 0;
    char *ids = relay_id_array(b, RELAY_MSG_PUBLISHED, &count);
    if (ids == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (count == 0) {
        free(ids);
        return 0;
    }
    const char *params[2] = { ids, b->token };
    /* libpq copies the parameters into its output buffer: ids may go now. */
    int ok = PQsendQueryParams(conn, SQL_MARK, MARK_NPARAMS, NULL, params, NULL, NULL, 0);
    free(ids);
    if (!ok) {
        snprintf(err, errlen, "%s", PQerrorMessage(conn));
        return -1;
    }
    return 1;
}

int relay_mark_finish(PGconn *conn, struct relay_batch *b, char *sqlstate, char *err,
                      size_t errlen)
{
    PGresult *res = pgx_get_result(conn, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    int marked = apply_mark(res, b);
    PQclear(res);
    return marked;
}

/* One commit per batch.  While a backlog drains, the relay marks batch N
 * (confirmed by the broker) and claims batch N+1 in one pipeline: mark, claim,
 * Sync, sent together and read together, so one round trip and, as nothing
 * opens an explicit transaction, one implicit transaction and one commit.
 * Why the fence is as strong as with two transactions:
 *
 *  1. The mark is the same statement, fenced by its claim's token and
 *     evaluated first: it marks exactly what it would mark on its own.
 *  2. The claim runs after it in the same transaction and sees its effect
 *     (a new snapshot per statement), so it cannot take a row this mark just
 *     published; in per-aggregate mode it sees the predecessors just marked,
 *     as a claim after a committed mark would.
 *  3. No new lock wait, so no new deadlock: the claim never waits (SKIP
 *     LOCKED), and the mark, the one statement that may wait on a row lock,
 *     runs before the claim has locked anything.
 *  4. Nothing is believed before the commit is: the mark's rows become
 *     MARKED only once the Sync came back clean.  If the claim or the commit
 *     fails, the mark was rolled back with it and the caller marks again on
 *     its own; if the connection is lost the outcome is unknown, as for any
 *     statement: unmarked rows are published again after their lease and
 *     the inbox absorbs the repeat, claimed rows wait out their lease.
 *  5. The lease stays conservative: the deadline is taken before the
 *     pipeline is sent, and the database's now() (the transaction's start,
 *     the same for both statements) is after that.
 *
 * What it buys: a batch costs one commit (one WAL flush) and one round trip
 * instead of two of each. */
int relay_mark_claim_send(PGconn *conn, const char *worker, const char *token,
                          const struct relay_batch *b, int batch, int lease_ms,
                          enum relay_order order, int64_t *sent_at, char *err, size_t errlen)
{
    int count = 0;
    char *ids = relay_id_array(b, RELAY_MSG_PUBLISHED, &count);
    if (ids == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct claim_params p;
    claim_params(&p, worker, token, batch, lease_ms);
    const char *mark_params[2] = { ids, b->token };
    *sent_at = cw_mono_ms();
    int ok = PQenterPipelineMode(conn) &&
             PQsendQueryParams(conn, SQL_MARK, MARK_NPARAMS, NULL, mark_params, NULL, NULL, 0) &&
             PQsendQueryParams(conn, relay_sql("claim", order), 4, NULL, p.values, NULL, NULL,
                               0) &&
             PQpipelineSync(conn);
    free(ids);
    if (!ok) {
        /* Only a broken connection (or no memory) gets here, and a pipeline
         * half queued cannot be taken back: the caller drops the connection. */
        snprintf(err, errlen, "%s", PQerrorMessage(conn));
        return -1;
    }
    return 0;
}

int relay_mark_claim_finish(PGconn *conn, struct relay_batch *b, const char *token,
                            int64_t sent_at, int lease_ms, struct relay_batch *next, enum relay_step *failed, char *sqlstate,
                            char *err, size_t errlen)
{
    PGresult *res[2] = { NULL, NULL };
    memset(next, 0, sizeof(*next));
    *failed = RELAY_STEP_NONE;
    sqlstate[0] = '\0';
    err[0] = '\0';
    /* Each statement's result, then NULL; after both, the Sync (or, when the
     * commit failed, its error first). */
    for (int step = 0; step < 2; step++) {
        PGresult *r;
        while ((r = pgx_next_result(conn)) != NULL) {
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_TUPLES_OK && res[step] == NULL) {
                res[step] = r;
                continue;
            }
            if (st != PGRES_PIPELINE_ABORTED && *failed == RELAY_STEP_NONE)
                step_error(conn, r, step == 0 ? RELAY_STEP_MARK : RELAY_STEP_CLAIM, failed,
                           sqlstate, err, errlen);
            PQclear(r);
        }
        if (PQstatus(conn) != CONNECTION_OK)
            break;
    }
    int synced = PQstatus(conn) == CONNECTION_OK && sync_result(conn, failed, sqlstate, err,
                                                                errlen);
    if (*failed == RELAY_STEP_NONE && (res[0] == NULL || res[1] == NULL)) {
        *failed = res[0] == NULL ? RELAY_STEP_MARK : RELAY_STEP_CLAIM;
        snprintf(err, errlen, "%s", PQerrorMessage(conn));
    }
    /* Both statements' rows came back before the commit, which happens at
     * the Sync: without the Sync nothing is known to be committed (a claim
     * believed here could be lost in a failover, and its rows published
     * under no lease). */
    if (*failed == RELAY_STEP_NONE && !synced) {
        *failed = RELAY_STEP_COMMIT;
        snprintf(err, errlen, "the connection broke before the commit was confirmed: %s",
                 PQerrorMessage(conn));
        if (sqlstate[0] == '\0')
            snprintf(sqlstate, 6, "08006");
    }
    int marked = -1;
    if (*failed == RELAY_STEP_NONE) {
        marked = apply_mark(res[0], b);
        parse_claim(res[1], token, sent_at, lease_ms, next);
    } else if (CW_MUTANT(unconfirmed_mark_believed) && res[0] != NULL) {
        /* Known-wrong: the mark's rows came back, so the mark is taken as
         * done, though its COMMIT was never confirmed. */
        marked = apply_mark(res[0], b);
    }
    PQclear(res[0]);
    PQclear(res[1]);
    return marked;
}

int relay_retry(PGconn *conn, const char *token, const char *id, int64_t delay_ms,
                const char *last_error, char next_at[RELAY_TS_LEN],
                char *sqlstate, char *err, size_t errlen)
{
    char delay_s[24];
    snprintf(delay_s, sizeof(delay_s), "%lld", (long long)delay_ms);
    const char *params[4] = { id, token, delay_s, last_error };
    next_at[0] = '\0';
    PGresult *res = pgx_exec(conn, SQL_RETRY, 4, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    int rows = PQntuples(res);
    if (rows > 0)
        snprintf(next_at, RELAY_TS_LEN, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return rows > 0 ? 1 : 0;
}

int relay_dead_letter(PGconn *conn, const char *token, const char *id,
                      const char *last_error, char *sqlstate, char *err, size_t errlen)
{
    const char *params[3] = { id, token, last_error };
    PGresult *res = pgx_exec(conn, sql_dead_letter, 3, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    int rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows > 0 ? 1 : 0;
}

int relay_counter_add(PGconn *conn, const char *name, long long amount,
                      char *sqlstate, char *err, size_t errlen)
{
    char amount_s[24];
    snprintf(amount_s, sizeof(amount_s), "%lld", amount);
    const char *params[2] = { name, amount_s };
    return pgx_cmd(conn, sql_counter, 2, params, sqlstate, err, errlen);
}
