/* relay_loop.c -- the outbox relay's loop: claim, publish, settle.
 *
 * One iteration:
 *   1. claim up to --batch rows under a lease (relay_claim: one autocommit
 *      statement; the lease is committed before anything is published);
 *   2. re-sort them by (occurred_at, id);
 *   3. publish them outside any transaction, pipelined: every publish is
 *      sent, then the confirms are read in the same order.  Before each send
 *      is handed to the broker connection the lease must still have a margin
 *      left (lease_ms/5, 50..5000 ms); once it has not, the rest of the batch
 *      is left unpublished for its lease to expire and another worker to
 *      claim it.  That bounds when a publish is queued, not when its bytes
 *      reach the broker: a send can wait in socket buffers or on a slow link
 *      past the end of its lease, and each broker call's timeout (the
 *      margin) bounds one call, not the batch.  So every publish also
 *      carries its claim's token and lease end (the database's
 *      locked_until), and a broker that checks it refuses a publish that
 *      arrives late, when the row may be another worker's: the fence is
 *      held where the write lands.  (With a broker that cannot, a late
 *      publish goes out twice with the same id and the inbox absorbs it.)
 *      The refusal is an ordinary failed publish: a fenced retry.  A row
 *      claimed past --max-attempts is not published at all (relay_store.h,
 *      invariant 6);
 *   4. settle: one fenced statement marks every confirmed message; each
 *      failed one gets a fenced retry (persisted, jittered backoff) or, at
 *      the attempt limit, a fenced dead letter, as does a row claimed past
 *      it.  Zero rows updated means the lease was lost: logged (lease_lost),
 *      counted (pipeline_counters 'leases_lost'), and the row is not touched
 *      again.  A settle that fails is not retried: the lease expires and the
 *      row is claimed again.  (A mark that was rolled back only because the
 *      claim sharing its transaction failed is run again at once, alone.)
 *
 * Overlap: while a full batch is at the broker, the database is already
 * marking the batch before it and claiming the next one, in one pipeline and
 * one transaction (relay_mark_claim_send, where the argument that this keeps
 * the fence is made), sent before the publishes and read after the
 * confirms; so broker time and database time do not add up, and a backlog
 * costs one round trip and one commit per batch.  The batch claimed ahead has
 * its own lease and the same lease checks; a relay that stops or loses the
 * database with one in hand leaves it to its lease, like the unpublished rest
 * of any batch.  When the batch was not full there is no backlog: nothing is
 * claimed while it is at the broker; once confirmed it is marked, and what
 * came in meanwhile is claimed in the same transaction (under a steady
 * trickle, one commit per batch too).
 *
 * State: apart from that claimed-ahead batch, nothing is carried from one
 * iteration to the next except two connections.  The database connection is
 * reused (every statement is its own short transaction, so it never holds a
 * transaction or a lock between statements) and also carries LISTEN
 * outbox_ready: while idle the relay waits on its socket with ppoll(), so the
 * insert trigger's NOTIFY wakes it at once and --idle-ms is only the
 * fallback.  The broker connection is kept open too.  Either one, when lost,
 * is closed and opened again with capped, jittered backoff; no rows are
 * claimed while the broker is unreachable, so an absent broker does not burn
 * attempts (a broker that answers "refused" does, by design: that is the
 * outage the backoff is for).
 *
 * Signals: SIGTERM and SIGINT stay blocked and are taken only between
 * messages (sigpending) and while idle (ppoll with them unblocked), so a stop
 * never interrupts a publish or a statement half way. */
#include "relay.h"
#include "relay_metrics.h"
#include "relay_store.h"

#include "backoff.h"
#include "bus.h"
#include "cwlog.h"
#include "fault.h"
#include "ids.h"
#include "mutant.h"
#include "pgx.h"
#include "sanitize.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECONNECT_BASE_MS 100
#define RECONNECT_CAP_MS 5000

enum iter_result {
    ITER_WORKED = 1,     /* a claim or a batch went through (or may be retried at once) */
    ITER_DB_LOST = -1,   /* the database connection is gone */
    ITER_ERROR = -2      /* a statement failed; back off before the next claim */
};

struct relay {
    const struct relay_config *cfg;
    char worker[CW_UUID_LEN + 1];
    PGconn *db;
    bus_conn *bus;
    int margin_ms;
};

static volatile sig_atomic_t stop_signal;
static sigset_t stop_set;  /* SIGTERM, SIGINT */
static sigset_t wait_mask; /* the mask while waiting: stop_set unblocked */

static void on_stop(int sig)
{
    stop_signal = sig;
}

void relay_signals_init(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    sigprocmask(SIG_BLOCK, &stop_set, &wait_mask);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGINT);
}

int relay_stopping(void)
{
    if (stop_signal != 0)
        return 1;
    sigset_t pending;
    if (sigpending(&pending) == 0 &&
        (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT))) {
        struct timespec zero = { 0, 0 };
        int sig = sigtimedwait(&stop_set, NULL, &zero);
        stop_signal = sig > 0 ? sig : SIGTERM;
    }
    return stop_signal != 0;
}

/* Waits up to ms for fd (or for nothing when fd < 0) with the stop signals
 * unblocked.  1 when fd became readable, 0 on timeout or a stop signal. */
static int wait_ready(int fd, int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    int rc = ppoll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, &ts, &wait_mask);
    return rc > 0 ? 1 : 0;
}

/* The fencing token of a new claim: a fresh UUID each time, so that a settle
 * meant for one claim of a row can never match a later claim of it, even by
 * this same worker (relay_store.h, invariant 2). */
static void new_claim_token(char token[CW_UUID_LEN + 1])
{
    cw_uuid_new(token);
}

static void sanitized(const char *raw, char *out, size_t outlen)
{
    cw_sanitize_error(raw, out, outlen);
}

static void emit_reconnect(const char *target, int attempt, const char *raw, int64_t backoff_ms)
{
    char safe[CW_ERROR_MAX + 1];
    sanitized(raw, safe, sizeof(safe));
    relay_count(strcmp(target, "db") == 0 ? RELAY_RECONNECTS_DB : RELAY_RECONNECTS_BROKER, 1);
    cJSON *ev = cwlog_begin("reconnect");
    cJSON_AddStringToObject(ev, "target", target);
    cJSON_AddNumberToObject(ev, "attempt", attempt);
    cJSON_AddStringToObject(ev, "error", safe);
    cJSON_AddNumberToObject(ev, "backoff_ms", (double)backoff_ms);
    cwlog_emit(ev);
}

/* Connects to the database and LISTENs; 0 or -1 with a message in err. */
static int connect_db(struct relay *r, char *err, size_t errlen)
{
    r->db = pgx_connect(r->cfg->db, err, errlen);
    if (r->db == NULL)
        return -1;
    if (pgx_cmd(r->db, "LISTEN outbox_ready", 0, NULL, NULL, err, errlen) < 0) {
        PQfinish(r->db);
        r->db = NULL;
        return -1;
    }
    cJSON *ev = cwlog_begin("connect");
    cJSON_AddStringToObject(ev, "target", "db");
    cJSON_AddStringToObject(ev, "listen", "outbox_ready");
    cwlog_emit(ev);
    return 0;
}

static int connect_bus(struct relay *r, char *err, size_t errlen)
{
    r->bus = bus_connect(r->cfg->broker, r->cfg->name, r->margin_ms, err, errlen);
    if (r->bus == NULL)
        return -1;
    cJSON *ev = cwlog_begin("connect");
    cJSON_AddStringToObject(ev, "target", "broker");
    cwlog_emit(ev);
    return 0;
}

static void close_db(struct relay *r)
{
    if (r->db != NULL)
        PQfinish(r->db);
    r->db = NULL;
}

static void close_bus(struct relay *r)
{
    if (r->bus != NULL)
        bus_close(r->bus);
    r->bus = NULL;
}

/* A connection-level broker failure leaves the connection unusable. */
static int bus_broken(int rc)
{
    return rc == BUS_TIMEOUT || rc == BUS_DISCONNECTED || rc == BUS_PROTOCOL;
}

static void emit_claim(const struct relay *r, const struct relay_batch *b, int recovered)
{
    relay_count(RELAY_CLAIMS, 1);
    relay_count(RELAY_CLAIMED, b->n);
    relay_count(RELAY_EXPIRED_LEASES, recovered);
    cJSON *ev = cwlog_begin("claim");
    cJSON_AddStringToObject(ev, "worker", r->worker);
    cJSON_AddStringToObject(ev, "token", b->token);
    cJSON *ids = cJSON_AddArrayToObject(ev, "ids");
    cJSON *att = cJSON_AddArrayToObject(ev, "attempts");
    /* What the database held when the claim took each row: the checker's
     * evidence that an earlier lease was really released or expired. */
    cJSON *prev = cJSON_AddArrayToObject(ev, "previous_lease");
    for (int i = 0; i < b->n; i++) {
        cJSON_AddItemToArray(ids, cJSON_CreateString(b->msgs[i].id));
        cJSON_AddItemToArray(att, cJSON_CreateNumber(b->msgs[i].attempts));
        cJSON_AddItemToArray(prev, cJSON_CreateString(b->msgs[i].previous_lease));
    }
    cJSON_AddNumberToObject(ev, "n", b->n);
    cJSON_AddStringToObject(ev, "lease_until", b->lease_until);
    cJSON_AddNumberToObject(ev, "lease_ms", r->cfg->lease_ms);
    cJSON_AddNumberToObject(ev, "recovered", recovered);
    cwlog_emit(ev);
}

static void emit_publish(const struct relay_msg *m, const char *message_id)
{
    relay_count(m->state == RELAY_MSG_PUBLISHED ? RELAY_PUBLISHED : RELAY_PUBLISH_FAILED, 1);
    cJSON *ev = cwlog_begin("publish");
    cJSON_AddStringToObject(ev, "id", m->id);
    if (strcmp(message_id, m->id) != 0)
        cJSON_AddStringToObject(ev, "message_id", message_id);
    cJSON_AddNumberToObject(ev, "attempt", m->attempts);
    cJSON_AddBoolToObject(ev, "ok", m->state == RELAY_MSG_PUBLISHED);
    if (m->state != RELAY_MSG_PUBLISHED) {
        char safe[CW_ERROR_MAX + 1];
        sanitized(m->error, safe, sizeof(safe));
        cJSON_AddStringToObject(ev, "error", safe);
    }
    cwlog_emit(ev);
}

static void emit_ids(const char *event, const struct relay *r, const struct relay_batch *b,
                     enum relay_msg_state state, const char *extra_key, const char *extra)
{
    cJSON *ev = cwlog_begin(event);
    cJSON_AddStringToObject(ev, "worker", r->worker);
    cJSON *ids = cJSON_AddArrayToObject(ev, "ids");
    int n = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->msgs[i].state == state) {
            cJSON_AddItemToArray(ids, cJSON_CreateString(b->msgs[i].id));
            n++;
        }
    }
    cJSON_AddNumberToObject(ev, "n", n);
    if (extra_key != NULL)
        cJSON_AddStringToObject(ev, extra_key, extra);
    cwlog_emit(ev);
}

static void emit_lease_lost(const struct relay *r, const char *id, const char *op)
{
    relay_count(RELAY_LEASES_LOST, 1);
    cJSON *ev = cwlog_begin("lease_lost");
    cJSON_AddStringToObject(ev, "worker", r->worker);
    cJSON_AddStringToObject(ev, "id", id);
    cJSON_AddStringToObject(ev, "op", op);
    cwlog_emit(ev);
}

/* Known-wrong (new_id_per_attempt): the envelope is rebuilt for each
 * attempt, and the event's id in the payload (EventId) becomes the fresh
 * id as well, so that every attempt reaches the consumers as a new event.
 * A copy of payload with each occurrence of old_id replaced by new_id
 * (both canonical, 36 characters), or NULL when out of memory. */
static char *payload_with_id(const char *payload, const char *old_id, const char *new_id)
{
    char *out = strdup(payload);
    if (out == NULL)
        return NULL;
    size_t n = strlen(old_id);
    for (char *at = strstr(out, old_id); at != NULL; at = strstr(at + n, old_id))
        memcpy(at, new_id, n);
    return out;
}

static void fail_msg(struct relay_msg *m, const char *raw)
{
    m->state = RELAY_MSG_FAILED;
    snprintf(m->error, sizeof(m->error), "%s", raw);
}

/* What step 3 carries from the sends to the confirms. */
struct publish_state {
    char (*sent_ids)[CW_UUID_LEN + 1]; /* as sent: differ from the row ids only in a mutant */
    char broken[RELAY_RAW_ERROR_MAX];  /* set once the broker connection broke */
    int expiring, stopped;
};

/* Step 3a: sends every message whose lease still has its margin (nothing is
 * read back yet).  Every message ends SENT, FAILED or SKIPPED. */
static void send_batch(struct relay *r, struct relay_batch *b, struct publish_state *ps)
{
    char err[RELAY_RAW_ERROR_MAX];
    memset(ps, 0, sizeof(*ps));
    ps->sent_ids = calloc((size_t)b->n, sizeof(*ps->sent_ids));
    if (ps->sent_ids == NULL)
        abort();

    CW_FAULT("relay/lease_stall", (void)0);
    for (int i = 0; i < b->n; i++) {
        struct relay_msg *m = &b->msgs[i];
        int injected = 0;
        CW_FAULT("relay/before_publish", injected = 1);
        if (relay_stopping()) {
            /* Stop: messages already sent are finished; this one and the
             * rest are left to their lease. */
            m->state = RELAY_MSG_SKIPPED;
            ps->stopped++;
            continue;
        }
        if (m->attempts > r->cfg->max_attempts && !CW_MUTANT(no_dead_letter_limit)) {
            /* Invariant 6 (relay_store.h): the claim at the limit ended
             * without an outcome -- its publish took the relay down, or the
             * lease ran out.  Publishing again could do the same forever;
             * the row is dead-lettered unpublished instead. */
            m->state = RELAY_MSG_EXHAUSTED;
            snprintf(m->error, sizeof(m->error),
                     "attempt limit exceeded without a settled outcome: claim %d, limit %d; "
                     "not published again",
                     m->attempts, r->cfg->max_attempts);
            continue;
        }
        if (cw_mono_ms() + r->margin_ms > b->lease_deadline_ms) {
            m->state = RELAY_MSG_SKIPPED;
            ps->expiring++;
            continue;
        }
        if (injected) {
            fail_msg(m, "publish failed: injected fault relay/before_publish");
            continue;
        }
        if (ps->broken[0] != '\0' || r->bus == NULL) {
            fail_msg(m, ps->broken[0] != '\0' ? ps->broken : "broker connection lost");
            continue;
        }
        char *rebuilt = NULL;
        if (CW_MUTANT(new_id_per_attempt)) {
            cw_uuid_new(ps->sent_ids[i]);
            rebuilt = payload_with_id(m->payload, m->id, ps->sent_ids[i]);
        } else {
            snprintf(ps->sent_ids[i], sizeof(ps->sent_ids[i]), "%s", m->id);
        }
        struct bus_message msg = {
            .topic = "payments",
            .message_id = ps->sent_ids[i],
            .type = m->event_type,
            .partition_key = m->aggregate_id,
            .traceparent = m->trace_parent,
            .aggregate_version = m->aggregate_version,
            .schema_version = m->schema_version,
            .occurred_at = m->occurred_at,
            .payload = rebuilt != NULL ? rebuilt : m->payload,
            /* The broker's half of the fence: it refuses this publish if it
             * arrives after the lease, when the row may be another's. */
            .claim_token = b->token,
            .not_after_us = CW_MUTANT(publish_ignores_lease_end) ? 0 : b->lease_until_us,
        };
        err[0] = '\0';
        int rc = bus_publish_send(r->bus, &msg, err, sizeof(err));
        free(rebuilt); /* the frame is built: the bus keeps no pointer to it */
        if (rc != BUS_OK) {
            fail_msg(m, err);
            if (bus_broken(rc))
                snprintf(ps->broken, sizeof(ps->broken), "%s", err);
            continue;
        }
        m->state = RELAY_MSG_SENT;
    }
}

/* Step 3b: reads the confirms of the SENT messages in order; each becomes
 * PUBLISHED or FAILED.  Logs the outcome of every message and closes the
 * broker connection when it broke.  Frees the publish state. */
static void confirm_batch(struct relay *r, struct relay_batch *b, struct publish_state *ps)
{
    char err[RELAY_RAW_ERROR_MAX];
    for (int i = 0; i < b->n; i++) {
        struct relay_msg *m = &b->msgs[i];
        if (m->state != RELAY_MSG_SENT)
            continue;
        if (ps->broken[0] != '\0') {
            /* Known-wrong: a publisher without confirms, for which what it
             * wrote is sent even when its link broke. */
            if (CW_MUTANT(unconfirmed_publish_counted_sent)) {
                m->state = RELAY_MSG_PUBLISHED;
                emit_publish(m, ps->sent_ids[i]);
            } else {
                fail_msg(m, ps->broken);
            }
            continue;
        }
        err[0] = '\0';
        int rc = bus_publish_confirm(r->bus, err, sizeof(err));
        if (rc == BUS_OK || (bus_broken(rc) && CW_MUTANT(unconfirmed_publish_counted_sent))) {
            m->state = RELAY_MSG_PUBLISHED;
            emit_publish(m, ps->sent_ids[i]);
            CW_FAULT("relay/after_publish", (void)0);
        } else {
            fail_msg(m, err);
        }
        if (bus_broken(rc))
            snprintf(ps->broken, sizeof(ps->broken), "%s", err);
    }

    for (int i = 0; i < b->n; i++)
        if (b->msgs[i].state == RELAY_MSG_FAILED)
            emit_publish(&b->msgs[i], ps->sent_ids[i][0] ? ps->sent_ids[i] : b->msgs[i].id);
    if (ps->expiring > 0)
        emit_ids("lease_expiring", r, b, RELAY_MSG_SKIPPED, "lease_until", b->lease_until);
    else if (ps->stopped > 0)
        emit_ids("stop_skip", r, b, RELAY_MSG_SKIPPED, NULL, NULL);
    if (ps->broken[0] != '\0' && !CW_MUTANT(relay_keeps_dead_broker_connection))
        close_bus(r);
    free(ps->sent_ids);
    ps->sent_ids = NULL;
}

/* Schedules the retry or dead letter of one FAILED message, or the dead
 * letter of an EXHAUSTED one.  Returns 1 when the lease was lost, 0 when
 * settled, -1 on a database error, -2 when the database connection is gone. */
static int settle_failure(struct relay *r, const struct relay_batch *b, struct relay_msg *m)
{
    char safe[CW_ERROR_MAX + 1];
    char err[512], sqlstate[6];
    sanitized(m->error, safe, sizeof(safe));
    const char *stored = CW_MUTANT(unsanitized_last_error) ? m->error : safe;
    int dead = m->attempts >= r->cfg->max_attempts && !CW_MUTANT(no_dead_letter_limit);
    int rc;
    if (dead) {
        rc = relay_dead_letter(r->db, b->token, m->id, stored, sqlstate, err, sizeof(err));
        if (rc == 1) {
            relay_count(RELAY_DEAD_LETTERS, 1);
            cJSON *ev = cwlog_begin("dead_letter");
            cJSON_AddStringToObject(ev, "id", m->id);
            cJSON_AddNumberToObject(ev, "attempt", m->attempts);
            cJSON_AddNumberToObject(ev, "max_attempts", r->cfg->max_attempts);
            cJSON_AddStringToObject(ev, "reason", m->state == RELAY_MSG_EXHAUSTED
                                                      ? "attempt_limit_exceeded"
                                                      : "publish_failed");
            cJSON_AddStringToObject(ev, "error", safe);
            cwlog_emit(ev);
        }
    } else {
        char next_at[RELAY_TS_LEN];
        int64_t delay = cw_backoff_delay_ms(m->attempts, r->cfg->backoff_base_ms,
                                            r->cfg->backoff_cap_ms);
        rc = relay_retry(r->db, b->token, m->id, delay, stored, next_at, sqlstate, err,
                         sizeof(err));
        if (rc == 1) {
            relay_count(RELAY_RETRIES, 1);
            cJSON *ev = cwlog_begin("retry");
            cJSON_AddStringToObject(ev, "id", m->id);
            cJSON_AddNumberToObject(ev, "attempt", m->attempts);
            cJSON_AddNumberToObject(ev, "delay_ms", (double)delay);
            cJSON_AddStringToObject(ev, "next_attempt_at", next_at);
            cJSON_AddStringToObject(ev, "error", safe);
            cwlog_emit(ev);
        }
    }
    if (rc == 0) {
        m->state = RELAY_MSG_LOST;
        emit_lease_lost(r, m->id, dead ? "dead_letter" : "retry");
        return 1;
    }
    if (rc < 0) {
        /* No pretending: the lease simply expires and the row is claimed
         * again later. */
        char safe_db[CW_ERROR_MAX + 1];
        sanitized(err, safe_db, sizeof(safe_db));
        cJSON *ev = cwlog_begin(dead ? "dead_letter_failed" : "retry_failed");
        cJSON_AddStringToObject(ev, "id", m->id);
        cJSON_AddStringToObject(ev, "sqlstate", sqlstate);
        cJSON_AddStringToObject(ev, "error", safe_db);
        cwlog_emit(ev);
        return pgx_conn_lost(r->db, sqlstate) ? -2 : -1;
    }
    return 0;
}

/* A claim came back: log it, count recovered leases, re-sort (step 2).
 * Returns ITER_WORKED or ITER_DB_LOST. */
static int claimed(struct relay *r, struct relay_batch *b)
{
    char err[512], sqlstate[6] = "";
    int recovered = 0;
    for (int i = 0; i < b->n; i++)
        recovered += b->msgs[i].recovered;
    emit_claim(r, b, recovered);
    CW_FAULT("relay/after_claim", (void)0);
    relay_batch_sort(b);
    if (recovered > 0 &&
        relay_counter_add(r->db, "expired_leases_recovered", recovered, sqlstate, err,
                          sizeof(err)) < 0 &&
        pgx_conn_lost(r->db, sqlstate))
        return ITER_DB_LOST;
    return ITER_WORKED;
}

/* The result of a failed claim: ITER_DB_LOST, ITER_WORKED (worth an
 * immediate retry) or ITER_ERROR (back off). */
static int claim_failed(struct relay *r, const char *sqlstate, const char *err)
{
    if (pgx_conn_lost(r->db, sqlstate))
        return ITER_DB_LOST;
    char safe[CW_ERROR_MAX + 1];
    sanitized(err, safe, sizeof(safe));
    cJSON *ev = cwlog_begin("claim_failed");
    cJSON_AddStringToObject(ev, "sqlstate", sqlstate);
    cJSON_AddStringToObject(ev, "error", safe);
    cwlog_emit(ev);
    /* A deadlock or serialization failure is worth an immediate retry. */
    return pgx_is_retryable(sqlstate) ? ITER_WORKED : ITER_ERROR;
}

/* The worse of two iteration results. */
static int worst(int a, int b)
{
    if (a == ITER_DB_LOST || b == ITER_DB_LOST)
        return ITER_DB_LOST;
    return (a == ITER_ERROR || b == ITER_ERROR) ? ITER_ERROR : ITER_WORKED;
}

/* What one turn has in flight on the database, between round_start and
 * round_end: the mark of a confirmed batch, the claim of the next one, or
 * both in one pipeline (one transaction: relay_mark_claim_send). */
struct round {
    int mark_sent;     /* the mark statement alone */
    int claim_sent;    /* the claim statement alone */
    int claim_unsent;  /* ... could not be sent (claim_err says why) */
    int piped;         /* both, as one pipeline */
    int unusable;      /* the pipeline could not be sent: drop the connection */
    int failed;        /* the mark could not be sent, or relay/mark_fail fired */
    int injected;      /* ... by relay/mark_fail */
    int64_t sent_at;   /* when the claim went out (its lease deadline's start) */
    char token[CW_UUID_LEN + 1]; /* the claim's fencing token */
    char err[512];     /* why the mark or the pipeline failed */
    char claim_err[512];
};

/* Step 4a (and step 1 of the next batch when claim_ahead): sends the fenced
 * mark of b's confirmed messages and, when claim_ahead, the claim of the next
 * batch, without waiting; round_end reads them.  Both go as one pipeline when
 * there is something to mark; nothing is sent when there is nothing to do. */
static void round_start(struct relay *r, const struct relay_batch *b, int claim_ahead,
                        struct round *rd)
{
    memset(rd, 0, sizeof(*rd));
    int to_mark = 0;
    for (int i = 0; i < b->n; i++)
        to_mark += b->msgs[i].state == RELAY_MSG_PUBLISHED;
    if (to_mark > 0) {
        CW_FAULT("relay/before_mark", (void)0);
        CW_FAULT("relay/mark_fail", rd->injected = 1);
        if (rd->injected) {
            snprintf(rd->err, sizeof(rd->err), "mark failed: injected fault relay/mark_fail");
            rd->failed = 1;
        }
    }
    const struct relay_config *cfg = r->cfg;
    new_claim_token(rd->token);
    if (to_mark > 0 && !rd->failed && claim_ahead) {
        if (relay_mark_claim_send(r->db, r->worker, rd->token, b, cfg->batch, cfg->lease_ms,
                                  cfg->order, &rd->sent_at, rd->err, sizeof(rd->err)) < 0)
            rd->unusable = 1;
        else
            rd->piped = 1;
        return;
    }
    if (to_mark > 0 && !rd->failed) {
        int rc = relay_mark_send(r->db, b, rd->err, sizeof(rd->err));
        rd->failed = rc < 0;
        rd->mark_sent = rc > 0;
        return;
    }
    if (claim_ahead) {
        rd->claim_sent = relay_claim_send(r->db, r->worker, rd->token, cfg->batch,
                                          cfg->lease_ms, cfg->order, &rd->sent_at,
                                          rd->claim_err, sizeof(rd->claim_err)) == 0;
        rd->claim_unsent = !rd->claim_sent;
    }
}

static void emit_mark(const struct relay *r, const struct relay_batch *b, int with_claim)
{
    cJSON *ev = cwlog_begin("mark");
    cJSON_AddStringToObject(ev, "worker", r->worker);
    /* The claim the mark was made under: the checker finds its commit. */
    cJSON_AddStringToObject(ev, "token", b->token);
    cJSON *ids = cJSON_AddArrayToObject(ev, "ids");
    int n = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->msgs[i].state == RELAY_MSG_MARKED) {
            cJSON_AddItemToArray(ids, cJSON_CreateString(b->msgs[i].id));
            n++;
        }
    }
    cJSON_AddNumberToObject(ev, "n", n);
    relay_count(RELAY_MARKED, n);
    relay_count(with_claim ? RELAY_MARKS_WITH_CLAIM : RELAY_MARKS_ALONE, 1);
    /* Committed in one transaction with the claim of the next batch. */
    cJSON_AddBoolToObject(ev, "with_claim", with_claim);
    cwlog_emit(ev);
}

/* Step 4b, the mark's part: reads what round_start sent.  A pipeline whose
 * claim or commit failed rolled the mark back with it: the mark is then run
 * again on its own, at once.  next receives the batch claimed ahead (empty
 * when none).  Returns ITER_WORKED, ITER_ERROR or ITER_DB_LOST; *marked is
 * 1 when a mark was committed, 2 when it was committed with the claim. */
static int read_round(struct relay *r, struct relay_batch *b, struct round *rd,
                      struct relay_batch *next, int *marked)
{
    char err[512], sqlstate[6] = "";
    int rc = 0, result = ITER_WORKED;
    *marked = 0;
    if (rd->unusable)
        return ITER_DB_LOST;
    /* A claim sent alone: nothing to mark, or the mark failed before it
     * could be sent. */
    if (rd->claim_unsent)
        result = claim_failed(r, "", rd->claim_err);
    else if (rd->claim_sent && relay_claim_finish(r->db, rd->token, rd->sent_at,
                                                  r->cfg->lease_ms, next, sqlstate, err,
                                                  sizeof(err)) < 0)
        result = claim_failed(r, sqlstate, err);
    if (result == ITER_DB_LOST)
        return result;
    if (rd->piped) {
        enum relay_step failed;
        rc = relay_mark_claim_finish(r->db, b, rd->token, rd->sent_at, r->cfg->lease_ms, next,
                                     &failed, sqlstate, err, sizeof(err));
        if (rc >= 0)
            *marked = 2;
        if (rc < 0 && failed != RELAY_STEP_MARK && !pgx_conn_lost(r->db, sqlstate)) {
            result = claim_failed(r, sqlstate, err);
            rc = relay_mark(r->db, b, sqlstate, err, sizeof(err));
            *marked = rc >= 0;
        }
    } else if (rd->mark_sent) {
        rc = relay_mark_finish(r->db, b, sqlstate, err, sizeof(err));
        *marked = rc >= 0;
    } else if (rd->failed) {
        snprintf(err, sizeof(err), "%s", rd->err);
        rc = -1;
    }
    if (rc < 0) {
        char safe[CW_ERROR_MAX + 1];
        sanitized(err, safe, sizeof(safe));
        emit_ids("mark_failed", r, b, RELAY_MSG_PUBLISHED, "error", safe);
        if (!rd->injected && pgx_conn_lost(r->db, sqlstate))
            return ITER_DB_LOST;
        return worst(result, ITER_ERROR);
    }
    return result;
}

/* Step 4b: reads what round_start sent, then schedules the retry or dead
 * letter of each failed message of b.  next receives the batch claimed ahead
 * (logged and sorted; may be NULL when none was asked for).  Returns
 * ITER_WORKED, ITER_DB_LOST or ITER_ERROR (a statement failed: its rows are
 * left to their leases). */
static int round_end(struct relay *r, struct relay_batch *b, struct round *rd,
                     struct relay_batch *next)
{
    char err[512], sqlstate[6] = "";
    struct relay_batch none;
    int lost = 0, marked;
    if (next == NULL)
        next = &none;
    memset(next, 0, sizeof(*next));

    int result = read_round(r, b, rd, next, &marked);
    if (result == ITER_DB_LOST) {
        relay_batch_free(next);
        return ITER_DB_LOST;
    }
    if (marked) {
        emit_mark(r, b, marked == 2);
        for (int i = 0; i < b->n; i++) {
            if (b->msgs[i].state == RELAY_MSG_LOST) {
                emit_lease_lost(r, b->msgs[i].id, "mark");
                lost++;
            }
        }
    }
    if (next->n > 0)
        result = worst(result, claimed(r, next));

    for (int i = 0; i < b->n && result != ITER_DB_LOST; i++) {
        if (b->msgs[i].state != RELAY_MSG_FAILED && b->msgs[i].state != RELAY_MSG_EXHAUSTED)
            continue;
        int frc = settle_failure(r, b, &b->msgs[i]);
        if (frc == 1)
            lost++;
        if (frc == -2)
            result = ITER_DB_LOST;
        if (frc == -1)
            result = worst(result, ITER_ERROR);
    }

    if (result != ITER_DB_LOST && lost > 0 &&
        relay_counter_add(r->db, "leases_lost", lost, sqlstate, err, sizeof(err)) < 0 &&
        pgx_conn_lost(r->db, sqlstate))
        result = ITER_DB_LOST;
    if (result == ITER_DB_LOST)
        relay_batch_free(next);
    return result;
}

/* Step 4 in one go.  Returns as round_end. */
static int settle_batch(struct relay *r, struct relay_batch *b)
{
    struct round rd;
    round_start(r, b, 0, &rd);
    return round_end(r, b, &rd, NULL);
}

/* Step 1, synchronously: claims into b.  ITER_WORKED (b may be empty),
 * ITER_DB_LOST or ITER_ERROR. */
static int claim_now(struct relay *r, struct relay_batch *b)
{
    char err[512], sqlstate[6] = "";
    /* Mutant: the trap the source article (README) warns about -- the
     * claim's transaction (and its row locks) stays open across the network
     * calls; work_batch commits. */
    if (CW_MUTANT(publish_in_claim_tx) &&
        pgx_cmd(r->db, "BEGIN", 0, NULL, sqlstate, err, sizeof(err)) < 0)
        return pgx_conn_lost(r->db, sqlstate) ? ITER_DB_LOST : ITER_ERROR;
    char token[CW_UUID_LEN + 1];
    new_claim_token(token);
    if (relay_claim(r->db, r->worker, token, r->cfg->batch, r->cfg->lease_ms, r->cfg->order,
                    b, sqlstate, err, sizeof(err)) < 0) {
        if (CW_MUTANT(publish_in_claim_tx))
            pgx_rollback(r->db);
        return claim_failed(r, sqlstate, err);
    }
    if (b->n == 0) {
        if (CW_MUTANT(publish_in_claim_tx))
            pgx_cmd(r->db, "COMMIT", 0, NULL, NULL, NULL, 0);
        return ITER_WORKED;
    }
    return claimed(r, b);
}

/* One turn of the pipeline for the claimed batch cur (steps 3 and 4):
 *
 *   database:  mark prev + claim ahead (one transaction) .....
 *   broker:    send cur ............................ confirm cur
 *
 * prev is a batch confirmed in the previous turn whose mark was left to go
 * with this one.  When cur was a full batch (a backlog), the next batch is
 * claimed in the same transaction as prev's mark, while cur's confirms come
 * back; cur is then returned in prev (its mark goes with the next turn) and
 * the next batch in cur.  Otherwise cur is settled at once, the claim of the
 * next batch in the transaction of its mark, and that batch comes back in cur
 * (empty when nothing was due).  Returns ITER_WORKED, ITER_ERROR or ITER_DB_LOST (then both are
 * emptied: their leases expire). */
static int work_batch(struct relay *r, struct relay_batch *prev, struct relay_batch *cur)
{
    struct publish_state ps;
    struct round rd;
    struct relay_batch next;

    /* Decided before the sends, so that the database works while the
     * broker does: a stop that comes during them leaves the batch claimed
     * ahead to its lease, as a stop during the confirms always did. */
    /* (The mutant publish_in_claim_tx still has the claim's transaction open
     * on the connection.) */
    int claim_ahead = cur->n == r->cfg->batch && !relay_stopping() &&
                      !CW_MUTANT(publish_in_claim_tx);
    round_start(r, prev, claim_ahead, &rd);
    send_batch(r, cur, &ps);
    confirm_batch(r, cur, &ps);
    int result = round_end(r, prev, &rd, &next);
    relay_batch_free(prev);
    if (result == ITER_DB_LOST) {
        /* cur's confirmed messages cannot be marked: their leases expire
         * and they are published again (the inbox absorbs the repeat). */
        relay_batch_free(cur);
        return ITER_DB_LOST;
    }
    if (CW_MUTANT(publish_in_claim_tx)) {
        char err[512], sqlstate[6] = "";
        if (pgx_cmd(r->db, "COMMIT", 0, NULL, sqlstate, err, sizeof(err)) < 0) {
            relay_batch_free(cur);
            return pgx_conn_lost(r->db, sqlstate) ? ITER_DB_LOST : ITER_ERROR;
        }
    }
    if (next.n > 0) {
        *prev = *cur;
    } else {
        /* No backlog: cur is settled now, and the claim of what came in
         * meanwhile rides in the transaction of its mark. */
        struct round last;
        /* (The mutant's claim opens a transaction of its own: claim_now.) */
        int again = !relay_stopping() && !CW_MUTANT(publish_in_claim_tx);
        round_start(r, cur, again, &last);
        result = worst(result, round_end(r, cur, &last, &next));
        relay_batch_free(cur);
    }
    *cur = next;
    if (result == ITER_DB_LOST) {
        relay_batch_free(prev);
        relay_batch_free(cur);
    }
    return result;
}

/* Waits for work: returns at once when a notification already arrived,
 * otherwise after a NOTIFY, idle_ms, or a stop signal. */
static void idle_wait(struct relay *r)
{
    int notified = 0;
    PGnotify *n;
    if (PQconsumeInput(r->db) == 0)
        return; /* the next statement finds the connection broken */
    while ((n = PQnotifies(r->db)) != NULL) {
        notified = 1;
        PQfreemem(n);
    }
    if (notified)
        return;
    /* The broker's socket is watched too, for its end only (a close or a
     * reset, never data: a heartbeat waiting there is the bus's to read).
     * An idle relay whose broker connection died would otherwise hold it
     * until its next publish failed on it, a lost attempt for that batch;
     * it reconnects now instead, so every running relay holds a live link. */
    struct pollfd p[2] = { { PQsocket(r->db), POLLIN, 0 }, { -1, POLLRDHUP, 0 } };
    /* Known-wrong: the broker's socket is left unwatched while idle. */
    if (r->bus != NULL && !CW_MUTANT(relay_ignores_closed_broker_link))
        p[1].fd = bus_fd(r->bus);
    struct timespec ts = { r->cfg->idle_ms / 1000, (long)(r->cfg->idle_ms % 1000) * 1000000L };
    if (ppoll(p, 2, &ts, &wait_mask) <= 0)
        return;
    if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        emit_reconnect("broker", 1, "the broker closed the connection while the relay was idle",
                       0);
        close_bus(r);
    }
    if ((p[0].revents & POLLIN) && PQconsumeInput(r->db) != 0) {
        while ((n = PQnotifies(r->db)) != NULL)
            PQfreemem(n);
    }
}

static int64_t reconnect_delay(int failures)
{
    return cw_backoff_delay_ms(failures, RECONNECT_BASE_MS, RECONNECT_CAP_MS);
}

int relay_run(const struct relay_config *cfg)
{
    struct relay r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    cw_uuid_new(r.worker);
    relay_metrics_worker(r.worker);
    r.margin_ms = cfg->lease_ms / 5;
    if (r.margin_ms < 50)
        r.margin_ms = 50;
    if (r.margin_ms > 5000)
        r.margin_ms = 5000;

    cJSON *ev = cwlog_begin("start");
    cJSON_AddStringToObject(ev, "worker", r.worker);
    cJSON_AddNumberToObject(ev, "batch", cfg->batch);
    cJSON_AddNumberToObject(ev, "lease_ms", cfg->lease_ms);
    cJSON_AddNumberToObject(ev, "lease_margin_ms", r.margin_ms);
    cJSON_AddNumberToObject(ev, "backoff_base_ms", cfg->backoff_base_ms);
    cJSON_AddNumberToObject(ev, "backoff_cap_ms", cfg->backoff_cap_ms);
    cJSON_AddNumberToObject(ev, "max_attempts", cfg->max_attempts);
    cJSON_AddNumberToObject(ev, "idle_ms", cfg->idle_ms);
    cJSON_AddStringToObject(ev, "order",
                            cfg->order == RELAY_ORDER_PER_AGGREGATE ? "per-aggregate" : "fifo");
    if (fault_fifo_prefix() != NULL)
        cJSON_AddStringToObject(ev, "fault_fifo", fault_fifo_prefix());
    else
        cJSON_AddNullToObject(ev, "fault_fifo");
    cwlog_emit(ev);

    /* Batches that outlive an iteration, only while a backlog drains: cur,
     * claimed ahead; prev, confirmed, its mark to go with the next turn. */
    struct relay_batch prev, cur;
    memset(&prev, 0, sizeof(prev));
    memset(&cur, 0, sizeof(cur));
    int db_failures = 0, bus_failures = 0, errors = 0;
    char err[512];
    while (!relay_stopping()) {
        if (r.db == NULL) {
            /* Batches held on a lost connection are left to their leases. */
            relay_batch_free(&prev);
            relay_batch_free(&cur);
            if (connect_db(&r, err, sizeof(err)) < 0) {
                int64_t d = reconnect_delay(++db_failures);
                emit_reconnect("db", db_failures, err, d);
                wait_ready(-1, (int)d);
                continue;
            }
            db_failures = 0;
        }
        int rc = ITER_WORKED;
        if (prev.n > 0 && (cur.n == 0 || r.bus == NULL)) {
            /* Nothing to overlap its mark with: settle it now. */
            rc = settle_batch(&r, &prev);
            relay_batch_free(&prev);
        }
        if (rc == ITER_WORKED && r.bus == NULL) {
            if (connect_bus(&r, err, sizeof(err)) < 0) {
                int64_t d = reconnect_delay(++bus_failures);
                emit_reconnect("broker", bus_failures, err, d);
                wait_ready(-1, (int)d);
                continue;
            }
            bus_failures = 0;
        }
        if (rc == ITER_WORKED && cur.n == 0) {
            rc = claim_now(&r, &cur);
            if (rc == ITER_WORKED && cur.n == 0) {
                errors = 0;
                idle_wait(&r);
                continue;
            }
        }
        if (rc == ITER_WORKED)
            rc = work_batch(&r, &prev, &cur);
        if (rc == ITER_DB_LOST) {
            emit_reconnect("db", db_failures + 1,
                           r.db ? PQerrorMessage(r.db) : "connection lost", 0);
            if (CW_MUTANT(relay_keeps_dead_db_connection))
                wait_ready(-1, 100);
            else
                close_db(&r);
            continue;
        }
        if (rc == ITER_ERROR) {
            /* Mutant: a statement the database refused (a timeout, not a
             * lost connection) ends the relay's loop, as an unhandled
             * exception stops a .NET BackgroundService. */
            if (CW_MUTANT(relay_stops_on_refused_statement)) {
                cwlog_warn("a statement failed: the relay stops");
                exit(1);
            }
            if (prev.n > 0) {
                settle_batch(&r, &prev);
                relay_batch_free(&prev);
            }
            wait_ready(-1, (int)reconnect_delay(++errors));
            continue;
        }
        errors = 0;
    }
    /* A stop finishes what is in flight: the confirmed batch is marked; a
     * batch claimed ahead and never sent is left to its lease. */
    if (prev.n > 0 && r.db != NULL)
        settle_batch(&r, &prev);
    relay_batch_free(&prev);
    relay_batch_free(&cur);

    cJSON *stop = cwlog_begin("stop");
    cJSON_AddStringToObject(stop, "signal", stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    cwlog_emit(stop);
    close_bus(&r);
    close_db(&r);
    return 0;
}
