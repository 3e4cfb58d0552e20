/* api_store.c -- the payments API's transactions; see api_store.h for the
 * protocol (idempotency record first, then payment and outbox row, COMMIT,
 * ambiguous commits settled from the transaction id).
 *
 * Every statement goes through pgx_exec (PQexecParams); every decision to
 * retry is taken from the SQLSTATE or the connection state, never from a
 * message text.  Each attempt ends in one of four outcomes (enum tx_outcome)
 * and api_store_execute is the only place that loops. */
#include "api_store.h"
#include "api_metrics.h"
#include "backoff.h"
#include "bus.h"
#include "cwlog.h"
#include "fault.h"
#include "ids.h"
#include "mutant.h"
#include "pgx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The mutants that publish straight to the broker, outside the outbox. */
#define API_MUTANT_PUBLISHES (CW_MUTANT(dual_write) || CW_MUTANT(publish_before_commit))

#define SQLSTATE_LOCK_NOT_AVAILABLE "55P03"
#define SQLSTATE_QUERY_CANCELED "57014"

/* The pause between attempts of one request: base * 2^attempt, capped. */
#define RETRY_BASE_MS 5
#define RETRY_CAP_MS 320

struct api_store {
    struct api_store_config cfg;
    pthread_mutex_t bus_lock; /* the mutants' direct publishing only */
    bus_conn *bus;
};

/* Everything fixed once per logical request, before the first attempt. */
struct plan {
    char payment_id[CW_UUID_LEN + 1];
    char event_id[CW_UUID_LEN + 1];
    char occurred_at[64];       /* ISO 8601 UTC, microseconds */
    const char *event_type;
    const char *from_status;    /* NULL for create */
    const char *to_status;
    int ok_status;              /* 201 create, 200 authorize/capture */
    char ok_status_text[8];
    char *body;                 /* the success response, stored in the record */
};

enum tx_outcome {
    TX_DONE,      /* r holds the answer */
    TX_RETRY,     /* rolled back on a retryable error: run the attempt again */
    TX_LOST,      /* connection lost before COMMIT was sent: nothing committed */
    TX_AMBIGUOUS  /* COMMIT sent, outcome not seen: settle from the xid */
};

/* ---- helpers ---------------------------------------------------------- */

static void iso_utc_now(char *out, size_t outlen)
{
    int64_t us = cw_now_us();
    time_t sec = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (unsigned)(us % 1000000));
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static const char *kind_name(enum api_command_kind k)
{
    switch (k) {
    case API_CMD_CREATE: return "create";
    case API_CMD_AUTHORIZE: return "authorize";
    default: return "capture";
    }
}

static void log_db_error(const char *stage, const char *sqlstate)
{
    /* The server's message can quote values; the SQLSTATE and the stage say
     * what went wrong without echoing request data. */
    cJSON *ev = cwlog_begin("db_error");
    cJSON_AddStringToObject(ev, "stage", stage);
    cJSON_AddStringToObject(ev, "sqlstate", sqlstate);
    cwlog_emit(ev);
}

static void log_conflict(const struct api_command *cmd, const char *reason)
{
    cJSON *ev = cwlog_begin("conflict");
    cJSON_AddStringToObject(ev, "command", kind_name(cmd->kind));
    cJSON_AddStringToObject(ev, "client", cmd->client_id);
    cJSON_AddStringToObject(ev, "reason", reason);
    if (cmd->payment_id != NULL)
        cJSON_AddStringToObject(ev, "payment_id", cmd->payment_id);
    cwlog_emit(ev);
}

/* Classifies a failed statement inside the transaction.  Rolls back when the
 * connection is still usable.  For errors that end the request, fills r. */
static enum tx_outcome statement_failed(PGconn *conn, const char *stage, const char *sqlstate,
                                        struct api_reply *r)
{
    if (pgx_conn_lost(conn, sqlstate))
        return TX_LOST;
    pgx_rollback(conn);
    if (pgx_is_retryable(sqlstate))
        return TX_RETRY;
    log_db_error(stage, sqlstate);
    if (strcmp(sqlstate, SQLSTATE_QUERY_CANCELED) == 0) {
        api_reply_problem(r, 503, "database-timeout", "Database timeout",
                          "the database did not answer in time; nothing was stored, "
                          "retry with the same Idempotency-Key");
        r->retry_after = 1;
        return TX_DONE;
    }
    api_reply_problem(r, 500, "database-error", "Database error",
                      "the database refused the request (SQLSTATE %s); nothing was stored",
                      sqlstate[0] ? sqlstate : "none");
    return TX_DONE;
}

static void reply_key_in_flight(const struct api_command *cmd, struct api_reply *r)
{
    log_conflict(cmd, "in_flight");
    api_reply_problem(r, 409, "key-in-flight", "Request in progress",
                      "another request with this Idempotency-Key is still being processed; "
                      "retry later to get its result");
    r->retry_after = 1;
}

/* Fills r from a stored idempotency record. */
static void reply_stored(int status, const char *body, const char *payment_id,
                         struct api_reply *r)
{
    api_reply_text(r, status, "application/json", body);
    if (status == 201 && payment_id != NULL && payment_id[0] != '\0')
        snprintf(r->location, sizeof(r->location), "/payments/%s", payment_id);
}

/* Columns of lookup_record's result. */
enum { REC_HASH, REC_STATUS, REC_BODY, REC_PAYMENT_ID };

/* Reads the idempotency record of cmd's (client, key) on conn.  Returns the
 * result, zero or one row of the REC_* columns (caller clears it), or NULL
 * with the SQLSTATE (sqlstate may be NULL). */
static PGresult *lookup_record(PGconn *conn, const struct api_command *cmd, char *sqlstate)
{
    const char *params[2] = { cmd->client_id, cmd->idem_key };
    return pgx_exec(conn,
                    "SELECT request_hash, status_code, response_body,"
                    " coalesce(payment_id::text, '')"
                    " FROM idempotency_records"
                    " WHERE client_id = $1 AND idempotency_key = $2",
                    2, params, sqlstate, NULL, 0);
}

/* The key is taken by a committed record: look it up (new statement, new
 * snapshot: the record is visible), then roll back and answer from it. */
static enum tx_outcome key_taken(PGconn *conn, const struct api_command *cmd,
                                 struct api_reply *r)
{
    char sqlstate[6];
    PGresult *res = lookup_record(conn, cmd, sqlstate);
    if (res == NULL)
        return statement_failed(conn, "idempotency_lookup", sqlstate, r);
    if (PQntuples(res) == 0) {
        /* The record vanished between the conflict and the lookup (an
         * operator cleanup): the key is free again, but only a retry can
         * take it cleanly. */
        PQclear(res);
        pgx_rollback(conn);
        reply_key_in_flight(cmd, r);
        return TX_DONE;
    }
    const char *hash = PQgetvalue(res, 0, REC_HASH);
    int status = atoi(PQgetvalue(res, 0, REC_STATUS));
    const char *body = PQgetvalue(res, 0, REC_BODY);
    const char *payment_id = PQgetvalue(res, 0, REC_PAYMENT_ID);
    if (strcmp(hash, cmd->request_hash) != 0 && !CW_MUTANT(idempotency_without_hash)) {
        log_conflict(cmd, "hash_mismatch");
        api_reply_problem(r, 422, "key-reused", "Idempotency-Key reused",
                          "this Idempotency-Key was already used for a different request "
                          "(another method, path, amount or currency); use a new key");
        PQclear(res);
        pgx_rollback(conn);
        return TX_DONE;
    }
    if (status < 200 || status > 299) {
        /* Only successes are ever stored; anything else is not ours to
         * replay. */
        PQclear(res);
        pgx_rollback(conn);
        reply_key_in_flight(cmd, r);
        return TX_DONE;
    }
    reply_stored(status, body, payment_id, r);
    r->replayed = 1;
    cJSON *ev = cwlog_begin("replay");
    cJSON_AddStringToObject(ev, "command", kind_name(cmd->kind));
    cJSON_AddStringToObject(ev, "client", cmd->client_id);
    cJSON_AddStringToObject(ev, "payment_id", payment_id);
    cJSON_AddNumberToObject(ev, "status", status);
    cwlog_emit(ev);
    PQclear(res);
    pgx_rollback(conn);
    return TX_DONE;
}

/* ---- the mutants' direct publishing (known-wrong builds only) --------- */

/* Publishes the event straight to the broker, outside the outbox: the very
 * dual write the outbox exists to prevent.  Errors are logged and ignored,
 * as such code typically does. */
static void mutant_publish(api_store *s, const struct api_command *cmd, const struct plan *plan,
                           long long version, const char *payload)
{
    char err[256] = "";
    int rc = BUS_DISCONNECTED;
    pthread_mutex_lock(&s->bus_lock);
    for (int tries = 0; tries < 2 && rc != BUS_OK; tries++) {
        if (s->bus == NULL && s->cfg.broker != NULL)
            s->bus = bus_connect(s->cfg.broker, cwlog_proc(), 2000, err, sizeof(err));
        if (s->bus == NULL)
            break;
        struct bus_message m = {
            .topic = "payments",
            .message_id = plan->event_id,
            .type = plan->event_type,
            .partition_key = plan->payment_id,
            .traceparent = cmd->traceparent,
            .aggregate_version = version,
            .schema_version = 1,
            .occurred_at = plan->occurred_at,
            .payload = payload,
        };
        rc = bus_publish(s->bus, &m, err, sizeof(err));
        if (rc != BUS_OK && rc != BUS_REFUSED) {
            bus_close(s->bus);
            s->bus = NULL;
        }
    }
    pthread_mutex_unlock(&s->bus_lock);
    cJSON *ev = cwlog_begin("direct_publish");
    cJSON_AddStringToObject(ev, "id", plan->event_id);
    cJSON_AddStringToObject(ev, "result", rc == BUS_OK ? "ok" : "error");
    cwlog_emit(ev);
}

/* ---- COMMIT and what follows it ---------------------------------------- */

static void log_commit(const struct api_command *cmd, const struct plan *plan,
                       long long version, const char *xid)
{
    cJSON *ev = cwlog_begin("commit");
    cJSON_AddStringToObject(ev, "command", kind_name(cmd->kind));
    cJSON_AddStringToObject(ev, "payment_id", plan->payment_id);
    cJSON_AddStringToObject(ev, "event_id", plan->event_id);
    cJSON_AddStringToObject(ev, "event_type", plan->event_type);
    cJSON_AddNumberToObject(ev, "version", (double)version);
    cJSON_AddStringToObject(ev, "xid", xid);
    cJSON_AddStringToObject(ev, "client", cmd->client_id);
    cwlog_emit(ev);
}

/* The end of every writing transaction: fault points around COMMIT, the
 * commit event, the success answer. */
static enum tx_outcome finish(api_store *s, PGconn *conn, const struct api_command *cmd,
                              const struct plan *plan, long long version,
                              const char *payload, const char *xid,
                              int *discard, struct api_reply *r)
{
    char sqlstate[6];
    /* Known-wrong: the event leaves before the transaction is durable. */
    if (CW_MUTANT(publish_before_commit))
        mutant_publish(s, cmd, plan, version, payload);
    int fail_before = 0;
    CW_FAULT("api/before_commit", fail_before = 1);
    if (fail_before) {
        pgx_rollback(conn);
        api_reply_problem(r, 503, "fault-injected", "Service unavailable",
                          "the request was rolled back before commit; nothing was stored, "
                          "retry with the same Idempotency-Key");
        r->retry_after = 1;
        return TX_DONE;
    }

    PGresult *res = pgx_exec(conn, "COMMIT", 0, NULL, sqlstate, NULL, 0);
    /* Known-wrong: only a lost connection counts as a failed COMMIT; an
     * error the server answered (a serialization failure found at commit,
     * a full disk) is taken for success. */
    const int refusal_ignored = res == NULL && CW_MUTANT(commit_refusal_taken_for_commit) &&
                                !pgx_conn_lost(conn, sqlstate);
    if (res == NULL && !refusal_ignored) {
        if (pgx_conn_lost(conn, sqlstate)) {
            *discard = 1;
            return TX_AMBIGUOUS;
        }
        /* The server answered the COMMIT with an error: it rolled back.
         * 55P03 here would be the commit-time notification lock timing out
         * (the outbox trigger lifts lock_timeout before COMMIT, schema.sql,
         * so it should not come): as safe to retry as a serialization
         * failure. */
        if (pgx_is_retryable(sqlstate) || strcmp(sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0)
            return TX_RETRY;
        log_db_error("commit", sqlstate);
        api_reply_problem(r, 500, "database-error", "Database error",
                          "the database refused to commit (SQLSTATE %s); nothing was stored",
                          sqlstate[0] ? sqlstate : "none");
        return TX_DONE;
    }
    PQclear(res);

    int lost = 0;
    /* COMMIT reached the server and succeeded, but from here on the API acts
     * as if the connection had dropped while it waited for the answer. */
    CW_FAULT("api/commit_lost", lost = 1);
    if (lost) {
        *discard = 1;
        return TX_AMBIGUOUS;
    }
    log_commit(cmd, plan, version, xid);
    CW_FAULT("api/after_commit", (void)0);
    /* Known-wrong: the event is published only if the process survives the
     * commit, and the database has no record of it. */
    if (CW_MUTANT(dual_write))
        mutant_publish(s, cmd, plan, version, payload);
    api_reply_text(r, plan->ok_status, "application/json", plan->body);
    if (plan->ok_status == 201)
        snprintf(r->location, sizeof(r->location), "/payments/%s", plan->payment_id);
    return TX_DONE;
}

/* ---- the two transactions ---------------------------------------------- */

static char *event_payload(const struct plan *plan, const char *amount, const char *currency,
                           long long version)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        abort();
    cJSON_AddStringToObject(o, "EventId", plan->event_id);
    cJSON_AddStringToObject(o, "PaymentId", plan->payment_id);
    if (amount != NULL)
        cJSON_AddStringToObject(o, "Amount", amount);  /* exact decimal text */
    cJSON_AddStringToObject(o, "Currency", currency);
    cJSON_AddNumberToObject(o, "AggregateVersion", (double)version);
    cJSON_AddStringToObject(o, "OccurredAtUtc", plan->occurred_at);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        abort();
    return text;
}

/* The idempotency record and the payment, as CTEs idem and pay: the start of the
 * create statement, written once so that the known-wrong variant below differs from
 * the real one only in the missing outbox row. */
#define CREATE_IDEM_PAY_SQL \
    "WITH idem AS (" \
    "  INSERT INTO idempotency_records" \
    "    (client_id, idempotency_key, request_hash, payment_id, status_code, response_body)" \
    "  VALUES ($1, $2, $3, $4::uuid, 201, $5)" \
    "  ON CONFLICT (client_id, idempotency_key) DO NOTHING" \
    "  RETURNING payment_id" \
    "), pay AS (" \
    "  INSERT INTO payments (id, client_id, amount, currency, status, version)" \
    "  SELECT payment_id, $1, $6::numeric, $7, 'created', 1 FROM idem" \
    "  RETURNING id"

/* Idempotency record, payment and PaymentCreated outbox row in one
 * statement: the later inserts select from the earlier ones' RETURNING, so
 * when the key is taken nothing at all is written. */
static const char create_sql[] =
    CREATE_IDEM_PAY_SQL
    "), evt AS ("
    "  INSERT INTO outbox_messages"
    "    (id, aggregate_type, aggregate_id, aggregate_version, event_type,"
    "     schema_version, payload, trace_parent, occurred_at)"
    "  SELECT $8::uuid, 'payment', id, 1, 'PaymentCreated', 1, $9::jsonb, $10,"
    "         $11::timestamptz FROM pay"
    "  RETURNING id"
    ")"
    " SELECT (SELECT count(*) FROM evt)::int, pg_current_xact_id()::text";

/* Known-wrong (dual_write): payment and idempotency record, but no outbox
 * row; the event goes to the broker directly after COMMIT. */
static const char mutant_create_sql[] =
    CREATE_IDEM_PAY_SQL
    ")"
    " SELECT (SELECT count(*) FROM pay)::int, pg_current_xact_id()::text";

#define CREATE_SQL (CW_MUTANT(dual_write) ? mutant_create_sql : create_sql)
#define CREATE_NPARAMS (CW_MUTANT(dual_write) ? 7 : 11)

/* After a lock timeout on the create statement: was the lock its key's?
 * The statement waits on an uncommitted record of the same (client, key)
 * -- another request in flight -- but also on any table it writes that
 * another session holds (a migration's ALTER TABLE).  The probe inserts
 * the key alone and rolls back: it waits on that same uncommitted record
 * if there is one, and on nothing else but idempotency_records itself.
 * 1: in flight; 0: not (the lock was elsewhere); -1: the connection is
 * lost. */
static int key_in_flight(PGconn *conn, const struct api_command *cmd)
{
    char sqlstate[6] = "";
    const char *params[3] = { cmd->client_id, cmd->idem_key, cmd->request_hash };
    PGresult *res = pgx_begin_exec(conn,
                                   "INSERT INTO idempotency_records"
                                   " (client_id, idempotency_key, request_hash, status_code,"
                                   "  response_body)"
                                   " VALUES ($1, $2, $3, 0, '')"
                                   " ON CONFLICT (client_id, idempotency_key) DO NOTHING",
                                   3, params, sqlstate, NULL, 0);
    PQclear(res);
    if (pgx_conn_lost(conn, sqlstate))
        return -1;
    pgx_rollback(conn);
    return res == NULL && strcmp(sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0;
}

static enum tx_outcome create_tx(api_store *s, PGconn *conn, const struct api_command *cmd,
                                 const struct plan *plan, const char *payload,
                                 char *xid, size_t xidlen, int *discard, struct api_reply *r)
{
    char sqlstate[6];
    const char *params[11] = {
        cmd->client_id, cmd->idem_key, cmd->request_hash, plan->payment_id, plan->body,
        cmd->create->amount, cmd->create->currency,
        plan->event_id, payload, cmd->traceparent, plan->occurred_at,
    };
    /* BEGIN rides with the statement: one round trip fewer per request. */
    PGresult *res = pgx_begin_exec(conn, CREATE_SQL, CREATE_NPARAMS, params, sqlstate, NULL, 0);
    if (res == NULL) {
        if (strcmp(sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0) {
            pgx_rollback(conn);
            /* Mutant: every lock timeout is taken for the key's, and the
             * client told that a request of its key is in flight when a
             * table was locked. */
            int held = CW_MUTANT(lock_timeout_taken_for_key_in_flight) ? 1
                                                                         : key_in_flight(conn, cmd);
            if (held < 0)
                return TX_LOST;
            if (held == 0) {
                /* Another session's lock on the tables: retried like a
                 * serialization failure, then 503 database-busy. */
                log_db_error("create", sqlstate);
                return TX_RETRY;
            }
            reply_key_in_flight(cmd, r);
            return TX_DONE;
        }
        return statement_failed(conn, "create", sqlstate, r);
    }
    int written = atoi(PQgetvalue(res, 0, 0));
    snprintf(xid, xidlen, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if (written == 0)
        return key_taken(conn, cmd, r);
    return finish(s, conn, cmd, plan, 1, payload, xid, discard, r);
}

/* The event of a transition, in the transaction that changed the payment. */
static int insert_outbox_row(PGconn *conn, const struct api_command *cmd, const struct plan *plan,
                             long long version, const char *payload, char *sqlstate)
{
    char vtext[24];
    snprintf(vtext, sizeof(vtext), "%lld", version);
    const char *params[7] = { plan->event_id, plan->payment_id, vtext, plan->event_type,
                              payload, cmd->traceparent, plan->occurred_at };
    return pgx_cmd(conn,
                   "INSERT INTO outbox_messages"
                   " (id, aggregate_type, aggregate_id, aggregate_version, event_type,"
                   "  schema_version, payload, trace_parent, occurred_at)"
                   " VALUES ($1::uuid, 'payment', $2::uuid, $3::bigint, $4, 1, $5::jsonb, $6,"
                   "         $7::timestamptz)",
                   7, params, sqlstate, NULL, 0);
}

static enum tx_outcome transition_tx(api_store *s, PGconn *conn, const struct api_command *cmd,
                                     const struct plan *plan, char *xid, size_t xidlen,
                                     int *discard, struct api_reply *r)
{
    char sqlstate[6];
    const char *iparams[6] = { cmd->client_id, cmd->idem_key, cmd->request_hash,
                               plan->payment_id, plan->ok_status_text, plan->body };
    PGresult *res = pgx_begin_exec(conn,
                             "INSERT INTO idempotency_records"
                             " (client_id, idempotency_key, request_hash, payment_id,"
                             "  status_code, response_body)"
                             " VALUES ($1, $2, $3, $4::uuid, $5::int, $6)"
                             " ON CONFLICT (client_id, idempotency_key) DO NOTHING"
                             " RETURNING 1",
                             6, iparams, sqlstate, NULL, 0);
    if (res == NULL) {
        if (strcmp(sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0) {
            pgx_rollback(conn);
            reply_key_in_flight(cmd, r);
            return TX_DONE;
        }
        return statement_failed(conn, "idempotency_insert", sqlstate, r);
    }
    int claimed = PQntuples(res) == 1;
    PQclear(res);
    if (!claimed)
        return key_taken(conn, cmd, r);

    const char *pparams[1] = { plan->payment_id };
    res = pgx_exec(conn, "SELECT status, currency FROM payments WHERE id = $1::uuid FOR UPDATE",
                   1, pparams, sqlstate, NULL, 0);
    if (res == NULL) {
        if (strcmp(sqlstate, SQLSTATE_LOCK_NOT_AVAILABLE) == 0) {
            pgx_rollback(conn);
            log_conflict(cmd, "payment_busy");
            api_reply_problem(r, 409, "payment-busy", "Payment busy",
                              "another request is changing this payment; retry later");
            r->retry_after = 1;
            return TX_DONE;
        }
        return statement_failed(conn, "lock_payment", sqlstate, r);
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        pgx_rollback(conn);
        api_reply_problem(r, 404, "payment-not-found", "Payment not found",
                          "no payment with id %s", plan->payment_id);
        return TX_DONE;
    }
    char status[16], currency[4];
    snprintf(status, sizeof(status), "%s", PQgetvalue(res, 0, 0));
    snprintf(currency, sizeof(currency), "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if (strcmp(status, plan->from_status) != 0) {
        pgx_rollback(conn);
        log_conflict(cmd, "illegal_transition");
        api_reply_problem(r, 409, "illegal-transition", "Illegal transition",
                          "payment %s is %s; %s needs a payment that is %s",
                          plan->payment_id, status, kind_name(cmd->kind), plan->from_status);
        return TX_DONE;
    }

    const char *uparams[2] = { plan->payment_id, plan->to_status };
    res = pgx_exec(conn,
                   "UPDATE payments SET status = $2, version = version + 1, updated_at = now()"
                   " WHERE id = $1::uuid"
                   " RETURNING version, pg_current_xact_id()::text",
                   2, uparams, sqlstate, NULL, 0);
    if (res == NULL)
        return statement_failed(conn, "update_payment", sqlstate, r);
    long long version = atoll(PQgetvalue(res, 0, 0));
    snprintf(xid, xidlen, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);

    char *payload = event_payload(plan, NULL, currency, version);
    enum tx_outcome out;
    /* Known-wrong (dual_write): no outbox row; finish() publishes instead.
     * Known-wrong (capture_without_outbox_row): a capture commits the
     * payment's change and answers 200, but writes no event. */
    int no_row = CW_MUTANT(dual_write) ||
                 (CW_MUTANT(capture_without_outbox_row) && cmd->kind == API_CMD_CAPTURE);
    /* Mutant: "an event must never fail a payment" -- the outbox insert
     * runs under a savepoint, and a refusal is rolled back to it: the
     * payment's change commits and is answered 2xx without its event. */
    const int tolerant = CW_MUTANT(outbox_failure_tolerated);
    if (tolerant && !no_row && pgx_cmd(conn, "SAVEPOINT outbox_row", 0, NULL, sqlstate, NULL, 0) < 0)
        return statement_failed(conn, "savepoint", sqlstate, r);
    if (!no_row && insert_outbox_row(conn, cmd, plan, version, payload, sqlstate) < 0) {
        if (tolerant && !pgx_conn_lost(conn, sqlstate) &&
            pgx_cmd(conn, "ROLLBACK TO SAVEPOINT outbox_row", 0, NULL, sqlstate, NULL, 0) == 0) {
            out = finish(s, conn, cmd, plan, version, payload, xid, discard, r);
            cJSON_free(payload);
            return out;
        }
        out = statement_failed(conn, "outbox_insert", sqlstate, r);
        cJSON_free(payload);
        return out;
    }
    out = finish(s, conn, cmd, plan, version, payload, xid, discard, r);
    cJSON_free(payload);
    return out;
}

/* ---- settling an ambiguous COMMIT ---------------------------------------- */

/* Looks the idempotency record up on conn.  Returns 1 and fills r when it
 * exists with this request's hash, 0 when it does not, -1 on error. */
static int answer_from_record(PGconn *conn, const struct api_command *cmd, struct api_reply *r)
{
    PGresult *res = lookup_record(conn, cmd, NULL);
    if (res == NULL)
        return -1;
    int found = PQntuples(res) == 1 &&
                strcmp(PQgetvalue(res, 0, REC_HASH), cmd->request_hash) == 0;
    if (found)
        reply_stored(atoi(PQgetvalue(res, 0, REC_STATUS)), PQgetvalue(res, 0, REC_BODY),
                     PQgetvalue(res, 0, REC_PAYMENT_ID), r);
    PQclear(res);
    return found;
}

/* 1 when the outbox row of this request's event exists on conn, 0 when it
 * does not, -1 on error.  The event id was generated once for the request,
 * so the row is this transaction's own. */
static int event_row_exists(PGconn *conn, const struct plan *plan)
{
    const char *params[1] = { plan->event_id };
    PGresult *res = pgx_exec(conn, "SELECT 1 FROM outbox_messages WHERE id = $1::uuid", 1,
                             params, NULL, NULL, 0);
    if (res == NULL)
        return -1;
    int n = PQntuples(res);
    PQclear(res);
    return n > 0;
}

/* The connection broke while COMMIT was in flight (or api/commit_lost said
 * so).  Never guesses and never writes again: asks the server what became
 * of transaction xid, waiting a bounded time while it is still in progress. */
static void resolve_ambiguous(api_store *s, const struct api_command *cmd,
                              const struct plan *plan, const char *xid, struct api_reply *r)
{
    int64_t deadline = cw_mono_ms() + s->cfg.resolve_timeout_ms;
    const char *resolution = "unknown";
    char xstatus[32] = "";
    int checks = 0;
    /* Mutant: "a connection that broke during COMMIT rolled it back" -- the
     * client is told nothing was stored, whatever the server did. */
    if (CW_MUTANT(commit_outcome_guessed)) {
        resolution = "aborted";
        deadline = 0;
    }
    /* Mutant: the opposite guess, "COMMIT was sent, so it committed" -- the
     * client is told its request succeeded, whatever the server did. */
    if (CW_MUTANT(lost_commit_taken_for_commit)) {
        resolution = "committed";
        deadline = 0;
        api_reply_text(r, plan->ok_status, "application/json", plan->body);
        if (plan->ok_status == 201)
            snprintf(r->location, sizeof(r->location), "/payments/%s", plan->payment_id);
    }

    while (cw_mono_ms() < deadline) {
        char err[256];
        int remaining = (int)(deadline - cw_mono_ms());
        PGconn *conn = api_pool_acquire(s->cfg.pool, remaining > 0 ? remaining : 1,
                                        err, sizeof(err));
        if (conn == NULL) {
            sleep_ms(50);
            continue;
        }
        checks++;
        const char *params[1] = { xid };
        PGresult *res = pgx_exec(conn, "SELECT pg_xact_status($1::xid8)", 1, params,
                                 NULL, NULL, 0);
        if (res == NULL) {
            api_pool_release(s->cfg.pool, conn, 1);
            sleep_ms(50);
            continue;
        }
        int is_null = PQgetisnull(res, 0, 0);
        snprintf(xstatus, sizeof(xstatus), "%s", is_null ? "" : PQgetvalue(res, 0, 0));
        PQclear(res);
        if (strcmp(xstatus, "in progress") == 0) {
            /* The old backend has not finished its COMMIT yet. */
            api_pool_release(s->cfg.pool, conn, 0);
            sleep_ms(20);
            continue;
        }
        if (strcmp(xstatus, "committed") == 0 || is_null) {
            /* Committed: the record holds the answer.  Status NULL (the xid
             * is too old to know): the record alone decides. */
            int found = answer_from_record(conn, cmd, r);
            if (found < 0) {
                api_pool_release(s->cfg.pool, conn, 1);
                sleep_ms(50);
                continue;
            }
            if (found == 1) {
                api_pool_release(s->cfg.pool, conn, 0);
                resolution = "committed";
            } else if (!is_null) {
                /* "Committed", yet our record is not there.  An xid names a
                 * transaction only within one history: after a failover
                 * the promoted standby hands the numbers of commits it
                 * never received to new transactions, so the status may be
                 * another transaction's.  Only our own event row proves
                 * the commit; without it nothing of ours is stored here. */
                /* Still on the connection it acquired: released only
                 * once done with it (another request may take it then). */
                int ours = event_row_exists(conn, plan);
                api_pool_release(s->cfg.pool, conn, ours < 0);
                if (ours < 0) {
                    sleep_ms(50);
                    continue;
                }
                resolution = ours ? "committed" : "aborted";
                if (ours) {
                    api_reply_text(r, plan->ok_status, "application/json", plan->body);
                    if (plan->ok_status == 201)
                        snprintf(r->location, sizeof(r->location), "/payments/%s",
                                 plan->payment_id);
                }
            } else {
                /* No status and no record: there is nothing left to ask. */
                api_pool_release(s->cfg.pool, conn, 0);
                resolution = "unknown";
            }
            break;
        }
        api_pool_release(s->cfg.pool, conn, 0);
        resolution = "aborted";
        break;
    }

    if (strcmp(resolution, "aborted") == 0) {
        api_reply_problem(r, 503, "commit-failed", "Commit failed",
                          "the connection to the database broke during commit and the "
                          "transaction was rolled back; nothing was stored, retry with the "
                          "same Idempotency-Key");
        r->retry_after = 1;
    } else if (strcmp(resolution, "unknown") == 0) {
        api_reply_problem(r, 503, "commit-outcome-unknown", "Commit outcome unknown",
                          "the connection to the database broke during commit and its "
                          "outcome could not be settled yet; retry with the same "
                          "Idempotency-Key (a committed request is then replayed)");
        r->retry_after = 1;
    }
    cJSON *ev = cwlog_begin("ambiguous_commit");
    cJSON_AddStringToObject(ev, "command", kind_name(cmd->kind));
    cJSON_AddStringToObject(ev, "xid", xid);
    cJSON_AddStringToObject(ev, "xact_status", xstatus[0] ? xstatus : "null");
    cJSON_AddStringToObject(ev, "resolution", resolution);
    cJSON_AddStringToObject(ev, "payment_id", plan->payment_id);
    cJSON_AddStringToObject(ev, "event_id", plan->event_id);
    cJSON_AddStringToObject(ev, "client", cmd->client_id);
    cJSON_AddNumberToObject(ev, "checks", checks);
    cwlog_emit(ev);
}

/* ---- public ----------------------------------------------------------------- */

api_store *api_store_new(const struct api_store_config *cfg, char *err, size_t errlen)
{
    if (cfg->pool == NULL || cfg->max_attempts < 1 || cfg->acquire_timeout_ms < 1 ||
        cfg->resolve_timeout_ms < 1) {
        snprintf(err, errlen, "invalid store configuration");
        return NULL;
    }
    api_store *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    pthread_mutex_init(&s->bus_lock, NULL);
    if (API_MUTANT_PUBLISHES && cfg->broker == NULL)
        cwlog_warn("this build publishes directly but has no --broker: every publish fails");
    return s;
}

void api_store_free(api_store *s)
{
    if (s == NULL)
        return;
    if (s->bus != NULL)
        bus_close(s->bus);
    pthread_mutex_destroy(&s->bus_lock);
    free(s);
}

static void make_plan(const struct api_command *cmd, struct plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    cw_uuid_new(plan->event_id);
    iso_utc_now(plan->occurred_at, sizeof(plan->occurred_at));
    switch (cmd->kind) {
    case API_CMD_CREATE:
        cw_uuid_new(plan->payment_id);
        plan->event_type = "PaymentCreated";
        plan->to_status = "created";
        plan->ok_status = 201;
        break;
    case API_CMD_AUTHORIZE:
        snprintf(plan->payment_id, sizeof(plan->payment_id), "%s", cmd->payment_id);
        plan->event_type = "PaymentAuthorized";
        plan->from_status = "created";
        plan->to_status = "authorized";
        plan->ok_status = 200;
        break;
    case API_CMD_CAPTURE:
        snprintf(plan->payment_id, sizeof(plan->payment_id), "%s", cmd->payment_id);
        plan->event_type = "PaymentCaptured";
        plan->from_status = "authorized";
        plan->to_status = "captured";
        plan->ok_status = 200;
        break;
    }
    snprintf(plan->ok_status_text, sizeof(plan->ok_status_text), "%d", plan->ok_status);
    plan->body = api_payment_body(plan->payment_id, plan->to_status);
}

void api_store_execute(api_store *s, const struct api_command *cmd, struct api_reply *r)
{
    struct plan plan;
    make_plan(cmd, &plan);
    char *create_payload = NULL;
    if (cmd->kind == API_CMD_CREATE)
        create_payload = event_payload(&plan, cmd->create->amount, cmd->create->currency, 1);

    for (int attempt = 1;; attempt++) {
        char err[256];
        PGconn *conn = api_pool_acquire(s->cfg.pool, s->cfg.acquire_timeout_ms,
                                        err, sizeof(err));
        if (conn == NULL) {
            cwlog_simple("db_unavailable", "error", err);
            api_reply_problem(r, 503, "database-unavailable", "Database unavailable",
                              "the database cannot be reached; nothing was stored, "
                              "retry with the same Idempotency-Key");
            r->retry_after = 1;
            break;
        }
        char xid[32] = "";
        int discard = 0;
        enum tx_outcome out;
        if (cmd->kind == API_CMD_CREATE)
            out = create_tx(s, conn, cmd, &plan, create_payload, xid, sizeof(xid),
                            &discard, r);
        else
            out = transition_tx(s, conn, cmd, &plan, xid, sizeof(xid), &discard, r);
        api_pool_release(s->cfg.pool, conn, discard || out == TX_LOST);

        if (out == TX_DONE)
            break;
        if (out == TX_AMBIGUOUS) {
            api_metrics_ambiguous();
            resolve_ambiguous(s, cmd, &plan, xid, r);
            break;
        }
        if (attempt >= s->cfg.max_attempts) {
            api_reply_problem(r, 503, "database-busy", "Database busy",
                              "the transaction could not complete after %d attempts; "
                              "nothing was stored, retry with the same Idempotency-Key",
                              attempt);
            r->retry_after = 1;
            break;
        }
        api_metrics_retry();
        cJSON *ev = cwlog_begin("retry");
        cJSON_AddStringToObject(ev, "command", kind_name(cmd->kind));
        cJSON_AddNumberToObject(ev, "attempt", attempt);
        cJSON_AddStringToObject(ev, "reason", out == TX_LOST ? "connection_lost"
                                                              : "retryable");
        cJSON_AddStringToObject(ev, "event_id", plan.event_id);
        cwlog_emit(ev);
        /* Short, growing pause (10, 20, ... 320 ms): a deadlock partner or a
         * restarting server gets room; the request stays bounded
         * (max_attempts). */
        sleep_ms((int)cw_backoff_ceiling_ms(attempt, RETRY_BASE_MS, RETRY_CAP_MS));
    }
    api_metrics_command(cmd->kind, r->status, r->replayed);
    if (create_payload != NULL)
        cJSON_free(create_payload);
    free(plan.body);
}

void api_store_get_payment(api_store *s, const char *payment_id, struct api_reply *r)
{
    char err[256], sqlstate[6];
    PGconn *conn = api_pool_acquire(s->cfg.pool, s->cfg.acquire_timeout_ms, err, sizeof(err));
    if (conn == NULL) {
        cwlog_simple("db_unavailable", "error", err);
        api_reply_problem(r, 503, "database-unavailable", "Database unavailable",
                          "the database cannot be reached");
        r->retry_after = 1;
        return;
    }
    const char *params[1] = { payment_id };
    PGresult *res = pgx_exec(conn,
                             "SELECT status, amount::text, currency, version"
                             " FROM payments WHERE id = $1::uuid",
                             1, params, sqlstate, NULL, 0);
    if (res == NULL) {
        int lost = pgx_conn_lost(conn, sqlstate);
        api_pool_release(s->cfg.pool, conn, lost);
        log_db_error("get_payment", sqlstate);
        api_reply_problem(r, 503, "database-unavailable", "Database unavailable",
                          "the payment could not be read (SQLSTATE %s)",
                          sqlstate[0] ? sqlstate : "none");
        r->retry_after = 1;
        return;
    }
    if (PQntuples(res) == 0) {
        api_reply_problem(r, 404, "payment-not-found", "Payment not found",
                          "no payment with id %s", payment_id);
    } else {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL)
            abort();
        cJSON_AddStringToObject(o, "id", payment_id);
        cJSON_AddStringToObject(o, "status", PQgetvalue(res, 0, 0));
        cJSON_AddStringToObject(o, "amount", PQgetvalue(res, 0, 1));
        cJSON_AddStringToObject(o, "currency", PQgetvalue(res, 0, 2));
        cJSON_AddNumberToObject(o, "version", atof(PQgetvalue(res, 0, 3)));
        api_reply_json(r, 200, o);
    }
    PQclear(res);
    api_pool_release(s->cfg.pool, conn, 0);
}

void api_store_health(api_store *s, struct api_reply *r)
{
    char err[256], sqlstate[6];
    PGconn *conn = api_pool_acquire(s->cfg.pool, s->cfg.acquire_timeout_ms, err, sizeof(err));
    int ok = 0;
    if (conn != NULL) {
        ok = pgx_cmd(conn, "SELECT 1", 0, NULL, sqlstate, NULL, 0) == 0;
        api_pool_release(s->cfg.pool, conn, !ok && pgx_conn_lost(conn, sqlstate));
    }
    if (ok) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL)
            abort();
        cJSON_AddStringToObject(o, "status", "ok");
        cJSON_AddStringToObject(o, "database", "ok");
        api_reply_json(r, 200, o);
    } else {
        api_reply_problem(r, 503, "database-unavailable", "Database unavailable",
                          "the database does not answer");
        r->retry_after = 1;
    }
}
