/* consumer_loop.c -- the consumer daemon; see consumer_loop.h for the design.
 *
 * The loop owns both connections and the ordering of COMMIT and ACK; the
 * statements inside a transaction are consumer_inbox.c's.  Every wait is
 * bounded: deliveries are awaited in short slices so a stop request is seen
 * promptly, reconnect pauses grow to 2 s and are cut short by a stop, and a
 * retried transaction pauses at most 200 ms (jittered, capped backoff) and
 * gives up after --tx-retries attempts. */
#include "consumer_loop.h"
#include "backoff.h"
#include "bus.h"
#include "consumer_inbox.h"
#include "mutant.h"
#include "consumer_metrics.h"
#include "cwlog.h"
#include "fault.h"
#include "pgx.h"
#include "sanitize.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WAIT_SLICE_MS 250
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 2000
/* The pause before a transaction is run again after 40001/40P01: jittered
 * below min(cap, base * 2^retries).  The round runs with the stop signals
 * blocked, so the cap also bounds how long a stop can wait on it. */
#define TX_RETRY_BASE_MS 5
#define TX_RETRY_CAP_MS 200

static volatile sig_atomic_t stop_requested;

void consumer_request_stop(void)
{
    stop_requested = 1;
}

struct consumer {
    const struct consumer_config *cfg;
    PGconn *db;
    bus_conn *bus;
    int bus_broken;          /* an ack/nack failed: reconnect after this round */
};

/* One delivery of the current round. */
struct item {
    struct bus_delivery *d;
    char id[CW_UUID_LEN + 1];      /* for events: the message id, sanitized */
    struct consumer_event ev;
    struct inbox_result res;
    int done;                      /* acked, nacked or handed back: no more work */
    int acked;
    int parked;                    /* a gap parked in this transaction */
    long long gap_age_ms;
    char sqlstate[6];              /* why its statement failed, "" if none did */
};

/* Outcome of one attempt at a shared transaction. */
enum tx_outcome {
    TX_COMMITTED,
    TX_ITEM_FAILED,   /* one delivery failed; rolled back; it is in *failed */
    TX_RETRY,         /* 40001/40P01: run the whole transaction again */
    TX_DB_LOST,       /* connection gone (outcome of a COMMIT unknown) */
    TX_FAILED         /* rolled back for a reason no single delivery owns */
};

static void pause_ms(int ms)
{
    while (ms > 0 && !stop_requested) {
        int slice = ms < 50 ? ms : 50;
        struct timespec ts = { 0, (long)slice * 1000000L };
        nanosleep(&ts, NULL);
        ms -= slice;
    }
}

/* ---- events ------------------------------------------------------------ */

static void ev_delivery(const struct item *it, cJSON *ev)
{
    cJSON_AddStringToObject(ev, "id", it->id);
    cJSON_AddNumberToObject(ev, "tag", (double)it->d->tag);
}

static void log_deliver(const struct item *it)
{
    consumer_count(CONSUMER_DELIVERIES, 1);
    cJSON *ev = cwlog_begin("deliver");
    ev_delivery(it, ev);
    cJSON_AddBoolToObject(ev, "redelivered", it->d->redelivered != 0);
    cJSON_AddNumberToObject(ev, "count", it->d->delivery_count);
    cwlog_emit(ev);
}

static void log_ack(const struct item *it)
{
    consumer_count(CONSUMER_ACKS, 1);
    cJSON *ev = cwlog_begin("ack");
    ev_delivery(it, ev);
    cwlog_emit(ev);
}

static void log_nack(const struct item *it, int delay_ms, const char *reason,
                     const char *detail)
{
    consumer_count(CONSUMER_NACKS, 1);
    cJSON *ev = cwlog_begin("nack");
    ev_delivery(it, ev);
    cJSON_AddNumberToObject(ev, "delay_ms", delay_ms);
    cJSON_AddStringToObject(ev, "reason", reason);
    if (detail != NULL && detail[0] != '\0')
        cJSON_AddStringToObject(ev, "detail", detail);
    cwlog_emit(ev);
}

/* The decision of a committed delivery: apply, inbox_dup, stale, gap, park. */
static void log_verdict(const struct consumer *c, const struct item *it)
{
    const struct consumer_event *e = &it->ev;
    cJSON *ev;
    switch (it->res.verdict) {
    case INBOX_APPLIED:
        consumer_count(CONSUMER_APPLIED, 1);
        ev = cwlog_begin("apply");
        cJSON_AddStringToObject(ev, "id", it->id);
        cJSON_AddStringToObject(ev, "aggregate_id", e->payment_id);
        cJSON_AddNumberToObject(ev, "version", (double)e->version);
        cJSON_AddStringToObject(ev, "type", e->type_name);
        cJSON_AddStringToObject(ev, "effect", c->cfg->effect->name);
        cJSON_AddStringToObject(ev, "trace_parent", e->trace);
        break;
    case INBOX_DUPLICATE:
        consumer_count(CONSUMER_DUPLICATES, 1);
        ev = cwlog_begin("inbox_dup");
        cJSON_AddStringToObject(ev, "id", it->id);
        cJSON_AddStringToObject(ev, "aggregate_id", e->payment_id);
        cJSON_AddNumberToObject(ev, "version", (double)e->version);
        break;
    case INBOX_STALE:
        consumer_count(CONSUMER_STALE, 1);
        ev = cwlog_begin("stale");
        cJSON_AddStringToObject(ev, "id", it->id);
        cJSON_AddStringToObject(ev, "aggregate_id", e->payment_id);
        cJSON_AddNumberToObject(ev, "applied", (double)it->res.applied);
        cJSON_AddNumberToObject(ev, "version", (double)e->version);
        break;
    case INBOX_GAP:
    default:
        consumer_count(it->parked ? CONSUMER_PARKED_GAP : CONSUMER_GAPS, 1);
        ev = cwlog_begin(it->parked ? "park" : "gap");
        cJSON_AddStringToObject(ev, "id", it->id);
        cJSON_AddStringToObject(ev, "aggregate_id", e->payment_id);
        cJSON_AddNumberToObject(ev, "expected", (double)(it->res.applied + 1));
        cJSON_AddNumberToObject(ev, "got", (double)e->version);
        cJSON_AddNumberToObject(ev, "gap_age_ms", (double)it->gap_age_ms);
        if (it->parked) {
            cJSON_AddStringToObject(ev, "kind", "gap_parked");
            cJSON_AddNumberToObject(ev, "deliveries", it->d->delivery_count);
        }
        break;
    }
    cwlog_emit(ev);
    /* Parked versions this application took along: applied in its
     * transaction, committed with it. */
    int shown = it->res.unparked < INBOX_MAX_CHAIN ? it->res.unparked : INBOX_MAX_CHAIN;
    for (int k = 0; it->res.verdict == INBOX_APPLIED && k < shown; k++) {
        cJSON *u = cwlog_begin("unpark");
        cJSON_AddStringToObject(u, "id", it->res.unparked_ids[k]);
        cJSON_AddStringToObject(u, "aggregate_id", e->payment_id);
        cJSON_AddStringToObject(u, "after", it->id);
        cwlog_emit(u);
    }
}

static void log_sql_error(const char *step, const char *sqlstate)
{
    /* Only the SQLSTATE: a server message may quote a value it rejected. */
    cJSON *ev = cwlog_begin("db_error");
    cJSON_AddStringToObject(ev, "step", step);
    cJSON_AddStringToObject(ev, "sqlstate", sqlstate);
    cwlog_emit(ev);
}

/* ---- connections --------------------------------------------------------- */

static void log_reconnect(const char *target, int attempt, int ok, const char *error)
{
    if (!ok)
        consumer_count(strcmp(target, "db") == 0 ? CONSUMER_RECONNECTS_DB
                                                 : CONSUMER_RECONNECTS_BROKER, 1);
    cJSON *ev = cwlog_begin("reconnect");
    cJSON_AddStringToObject(ev, "target", target);
    cJSON_AddNumberToObject(ev, "attempt", attempt);
    cJSON_AddBoolToObject(ev, "ok", ok != 0);
    if (error != NULL)
        cJSON_AddStringToObject(ev, "error", error);
    cwlog_emit(ev);
}

static int db_open_once(struct consumer *c, char *err, size_t errlen)
{
    PGconn *conn = pgx_connect(c->cfg->db, err, errlen);
    if (conn == NULL)
        return -1;
    if (c->cfg->lock_timeout_ms > 0) {
        /* A consumer parked or stalled inside its transaction holds row
         * locks; the others must give up waiting and retry later rather
         * than hang behind it. */
        char v[24];
        snprintf(v, sizeof(v), "%d", c->cfg->lock_timeout_ms);
        const char *params[1] = { v };
        if (pgx_cmd(conn, "SELECT set_config('lock_timeout', $1, false)", 1, params, NULL, err,
                    errlen) < 0) {
            PQfinish(conn);
            return -1;
        }
    }
    c->db = conn;
    return 0;
}

static int bus_open_once(struct consumer *c, char *err, size_t errlen)
{
    bus_conn *b = bus_connect_subscriber(c->cfg->broker, c->cfg->proc, c->cfg->bus_timeout_ms,
                                         err, errlen);
    if (b == NULL)
        return -1;
    if (bus_subscribe(b, c->cfg->topic, c->cfg->group, c->cfg->prefetch, err, errlen) != BUS_OK) {
        bus_close(b);
        return -1;
    }
    c->bus = b;
    c->bus_broken = 0;
    return 0;
}

/* Connects with growing pauses until it works, a stop is requested, or (when
 * deadline_ms > 0) the monotonic deadline passes.  first: this is the start,
 * not a reconnect (no event for a first attempt that works). */
static int connect_with_backoff(struct consumer *c, const char *target,
                                int (*open_once)(struct consumer *, char *, size_t),
                                int64_t deadline_ms, int first)
{
    for (int attempt = 1;; attempt++) {
        char err[512], safe[CW_ERROR_MAX + 1];
        if (open_once(c, err, sizeof(err)) == 0) {
            if (!first || attempt > 1)
                log_reconnect(target, attempt, 1, NULL);
            return 0;
        }
        /* libpq's and the broker's messages may quote the conninfo or a
         * path with credentials: only the sanitized text is logged. */
        cw_sanitize_error(err, safe, sizeof(safe));
        log_reconnect(target, attempt, 0, safe);
        cwlog_warn("%s: %s", target, safe);
        if (stop_requested || (deadline_ms > 0 && cw_mono_ms() >= deadline_ms))
            return -1;
        /* 100, 200, 400 ... 2000 ms: no jitter, there is one consumer
         * process per connection and nothing to spread apart. */
        pause_ms((int)cw_backoff_ceiling_ms(attempt - 1, RECONNECT_MIN_MS, RECONNECT_MAX_MS));
        if (stop_requested)
            return -1;
    }
}

static void drop_db(struct consumer *c)
{
    if (c->db != NULL)
        PQfinish(c->db);
    c->db = NULL;
}

/* The connection was lost: dropped, and made again at the next batch. */
static void db_lost(struct consumer *c)
{
    /* Mutant: the lost connection is kept, and every later transaction
     * fails on it. */
    if (CW_MUTANT(consumer_keeps_dead_db_connection))
        return;
    drop_db(c);
}

static void drop_bus(struct consumer *c)
{
    if (c->bus != NULL)
        bus_close(c->bus);
    c->bus = NULL;
    c->bus_broken = 0;
}

/* ---- acknowledgements ---------------------------------------------------- */

static void ack_item(struct consumer *c, struct item *it)
{
    char err[256];
    it->done = 1;
    if (it->acked)
        return;
    it->acked = 1;
    if (c->bus_broken || bus_ack(c->bus, it->d->tag, err, sizeof(err)) != BUS_OK) {
        /* The broker will redeliver it; the inbox absorbs the repeat. */
        if (!c->bus_broken)
            cwlog_warn("ack of tag %llu failed: %s", (unsigned long long)it->d->tag, err);
        c->bus_broken = 1;
        return;
    }
    log_ack(it);
    CW_FAULT("consumer/after_ack", );
}

static void nack_item(struct consumer *c, struct item *it, int delay_ms, const char *reason,
                      const char *detail)
{
    char err[256];
    it->done = 1;
    if (c->bus_broken || bus_nack(c->bus, it->d->tag, 1, delay_ms, err, sizeof(err)) != BUS_OK) {
        if (!c->bus_broken)
            cwlog_warn("nack of tag %llu failed: %s", (unsigned long long)it->d->tag, err);
        c->bus_broken = 1;
        return;
    }
    log_nack(it, delay_ms, reason, detail);
}

/* ---- poison ---------------------------------------------------------------- */

static void handle_poison(struct consumer *c, struct item *it, const char *reason)
{
    const struct consumer_config *cfg = c->cfg;
    int count = it->d->delivery_count > 0 ? it->d->delivery_count : 1;
    if (count < cfg->poison_max_deliveries) {
        nack_item(c, it, cfg->poison_delay_ms, "poison", reason);
        return;
    }

    char mid[CW_UUID_LEN + 1], aid[CW_UUID_LEN + 1], sqlstate[6] = "", err[256];
    consumer_event_ids(it->d, mid, aid);
    struct inbox_parking p = {
        .kind = "poison",
        .message_id = it->d->message_id,
        .anomaly_id = mid,
        .aggregate_id = aid,
        .reason = reason,
        .deliveries = count,
    };
    if (pgx_cmd(c->db, "BEGIN", 0, NULL, sqlstate, err, sizeof(err)) < 0 ||
        inbox_park(c->db, cfg->name, &p, sqlstate, err, sizeof(err)) < 0 ||
        pgx_cmd(c->db, "COMMIT", 0, NULL, sqlstate, err, sizeof(err)) < 0) {
        log_sql_error("park", sqlstate);
        if (pgx_conn_lost(c->db, sqlstate))
            db_lost(c);
        else
            pgx_rollback(c->db);
        /* Not parked: it comes back and is parked then.  Known-wrong: the
         * delivery is acknowledged as though parked, and the event is gone. */
        if (CW_MUTANT(park_failure_acked))
            ack_item(c, it);
        else
            nack_item(c, it, cfg->retry_delay_ms, "park_failed", NULL);
        return;
    }
    consumer_count(CONSUMER_PARKED_POISON, 1);
    cJSON *ev = cwlog_begin("park");
    cJSON_AddStringToObject(ev, "id", it->id);
    cJSON_AddStringToObject(ev, "kind", "poison");
    cJSON_AddStringToObject(ev, "reason", reason);
    cJSON_AddNumberToObject(ev, "deliveries", count);
    cwlog_emit(ev);
    ack_item(c, it);
}

/* ---- the shared transaction ----------------------------------------------- */

/* Classifies a failed statement: lost, retryable, or the delivery's own. */
static enum tx_outcome failed_statement(struct consumer *c, const char *step,
                                        const char *sqlstate)
{
    log_sql_error(step, sqlstate);
    if (pgx_conn_lost(c->db, sqlstate))
        return TX_DB_LOST;
    pgx_rollback(c->db);
    if (pgx_is_retryable(sqlstate))
        return TX_RETRY;
    return TX_ITEM_FAILED;
}

static enum tx_outcome try_tx(struct consumer *c, struct item *items, int n, int attempt,
                              int *failed, char *reason, size_t reasonlen)
{
    const struct consumer_config *cfg = c->cfg;
    char sqlstate[6] = "", err[512];
    *failed = -1;

    if (pgx_cmd(c->db, "BEGIN", 0, NULL, sqlstate, err, sizeof(err)) < 0) {
        log_sql_error("begin", sqlstate);
        return pgx_conn_lost(c->db, sqlstate) ? TX_DB_LOST : TX_FAILED;
    }
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (it->done)
            continue;
        /* Mutant: the transaction run again after a deadlock resumes where
         * it failed, as if a refused statement undid only itself: what the
         * rolled-back attempt applied is taken as done, committed with no
         * effect and acknowledged. */
        if (attempt > 0 && it->res.verdict == INBOX_APPLIED && CW_MUTANT(retry_keeps_applied))
            continue;
        it->parked = 0;
        it->gap_age_ms = 0;
        int rc = inbox_process(c->db, cfg->name, cfg->effect, &it->ev, &it->res, sqlstate, err,
                               sizeof(err));
        if (rc == INBOX_ERR_APPLY) {
            pgx_rollback(c->db);
            *failed = i;
            snprintf(reason, reasonlen, "apply_fail");
            return TX_ITEM_FAILED;
        }
        if (rc < 0) {
            enum tx_outcome o = failed_statement(c, "inbox", sqlstate);
            *failed = i;
            memcpy(it->sqlstate, sqlstate, sizeof(it->sqlstate));
            snprintf(reason, reasonlen, "sqlstate %s", sqlstate);
            return o;
        }
        if (it->res.verdict != INBOX_GAP)
            continue;
        if (inbox_record_gap(c->db, cfg->name, &it->ev, it->res.applied + 1, &it->gap_age_ms,
                             sqlstate, err, sizeof(err)) < 0) {
            enum tx_outcome o = failed_statement(c, "gap", sqlstate);
            *failed = i;
            memcpy(it->sqlstate, sqlstate, sizeof(it->sqlstate));
            snprintf(reason, reasonlen, "sqlstate %s", sqlstate);
            return o;
        }
        if (it->gap_age_ms >= cfg->gap_park_after_ms) {
            char why[160];
            snprintf(why, sizeof(why), "version gap never closed: expected %lld, got %lld",
                     it->res.applied + 1, it->ev.version);
            struct inbox_parking p = {
                .kind = "gap_parked",
                .message_id = it->ev.message_id,
                .anomaly_id = it->ev.message_id,
                .aggregate_id = it->ev.payment_id,
                .reason = why,
                .deliveries = it->d->delivery_count,
                .expected = it->res.applied + 1,
                .got = it->ev.version,
                .event = &it->ev,
            };
            if (inbox_park(c->db, cfg->name, &p, sqlstate, err, sizeof(err)) < 0) {
                enum tx_outcome o = failed_statement(c, "park", sqlstate);
                *failed = i;
                memcpy(it->sqlstate, sqlstate, sizeof(it->sqlstate));
                snprintf(reason, reasonlen, "sqlstate %s", sqlstate);
                return o;
            }
            it->parked = 1;
        }
    }

    /* Mutant: "acknowledge as soon as the work is done" -- the ACK goes out
     * before the COMMIT, so a crash or a failed COMMIT loses the event: the
     * broker has forgotten it and the database never kept it. */
    for (int i = 0; CW_MUTANT(ack_before_commit) && i < n; i++) {
        if (!items[i].done && (items[i].res.verdict != INBOX_GAP || items[i].parked)) {
            ack_item(c, &items[i]);
            items[i].done = 0; /* still part of this transaction */
        }
    }

    CW_FAULT("consumer/before_commit", {
        pgx_rollback(c->db);
        snprintf(reason, reasonlen, "before_commit_fail");
        return TX_FAILED;
    });

    if (pgx_cmd(c->db, "COMMIT", 0, NULL, sqlstate, err, sizeof(err)) < 0) {
        log_sql_error("commit", sqlstate);
        /* Known-wrong: a COMMIT whose connection was lost is taken for a
         * commit (the server got it, surely), and the batch is acknowledged. */
        if (pgx_conn_lost(c->db, sqlstate))
            return CW_MUTANT(lost_commit_taken_for_commit) ? TX_COMMITTED : TX_DB_LOST;
        /* Known-wrong: an error the server answered to the COMMIT is taken
         * for a commit, and the batch is acknowledged. */
        if (CW_MUTANT(commit_refusal_taken_for_commit))
            return TX_COMMITTED;
        snprintf(reason, reasonlen, "sqlstate %s", sqlstate);
        return pgx_is_retryable(sqlstate) ? TX_RETRY : TX_FAILED;
    }
    return TX_COMMITTED;
}

/* After COMMIT: the decisions, then ACKs (or the gap's delayed NACK). */
static void finish_committed(struct consumer *c, struct item *items, int n)
{
    for (int i = 0; i < n; i++)
        if (!items[i].done)
            log_verdict(c, &items[i]);

    CW_FAULT("consumer/after_commit", );

    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        if (it->done)
            continue;
        if (it->res.verdict == INBOX_GAP && !it->parked)
            nack_item(c, it, c->cfg->gap_delay_ms, "gap", NULL);
        else
            ack_item(c, it);
    }
}

static int pending(const struct item *items, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += !items[i].done;
    return k;
}

static void nack_pending(struct consumer *c, struct item *items, int n, const char *reason)
{
    for (int i = 0; i < n; i++)
        if (!items[i].done)
            nack_item(c, &items[i], c->cfg->retry_delay_ms, reason, NULL);
}

/* Runs the valid deliveries of a round in one transaction until each one is
 * committed or handed back to the broker. */
static void run_tx(struct consumer *c, struct item *items, int n)
{
    int retries = 0;
    while (pending(items, n) > 0) {
        if (c->db == NULL) {
            nack_pending(c, items, n, "db_lost");
            return;
        }
        int failed;
        char reason[64] = "";
        enum tx_outcome o = try_tx(c, items, n, retries, &failed, reason, sizeof(reason));
        switch (o) {
        case TX_COMMITTED:
            finish_committed(c, items, n);
            return;
        case TX_ITEM_FAILED:
            /* That delivery goes back to the broker; the others run again.
             * When the database refuses its data (class 22 data exception,
             * 23 integrity violation) retrying cannot help: it is poison,
             * parked after --poison-max-deliveries like any other. */
            if (strncmp(items[failed].sqlstate, "22", 2) == 0 ||
                strncmp(items[failed].sqlstate, "23", 2) == 0) {
                char why[64];
                snprintf(why, sizeof(why), "the database refused the event (sqlstate %s)",
                         items[failed].sqlstate);
                handle_poison(c, &items[failed], why);
            } else if (CW_MUTANT(refused_delivery_acked)) {
                /* Mutant: a catch-all handler that logs and acknowledges,
                 * so that one bad message never blocks the queue: a lock
                 * timeout or a statement timeout drops the event. */
                ack_item(c, &items[failed]);
            } else {
                nack_item(c, &items[failed], c->cfg->retry_delay_ms, reason, NULL);
            }
            break;
        case TX_RETRY:
            if (++retries >= c->cfg->tx_retries) {
                nack_pending(c, items, n, "retries_exhausted");
                return;
            }
            {
                consumer_count(CONSUMER_TX_RETRIES, 1);
                cJSON *ev = cwlog_begin("tx_retry");
                cJSON_AddNumberToObject(ev, "attempt", retries);
                cJSON_AddStringToObject(ev, "reason", reason);
                cwlog_emit(ev);
            }
            pause_ms((int)cw_backoff_delay_ms(retries, TX_RETRY_BASE_MS, TX_RETRY_CAP_MS));
            break;
        case TX_DB_LOST:
            db_lost(c);
            nack_pending(c, items, n, "db_lost");
            return;
        case TX_FAILED:
            nack_pending(c, items, n, reason);
            return;
        }
    }
}

/* One round: validate each delivery, park or nack the poison, run the rest. */
static void handle_round(struct consumer *c, struct item *items, int n)
{
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        char reason[160];
        consumer_safe_text(it->d->message_id, it->id, sizeof(it->id));
        log_deliver(it);
        if (consumer_event_parse(it->d, &it->ev, reason, sizeof(reason)) < 0)
            handle_poison(c, it, reason);
        if (c->db == NULL) {
            /* Lost while parking: hand the rest back and reconnect first. */
            for (int j = i + 1; j < n; j++) {
                consumer_safe_text(items[j].d->message_id, items[j].id, sizeof(items[j].id));
                log_deliver(&items[j]);
            }
            nack_pending(c, items, n, "db_lost");
            return;
        }
    }
    run_tx(c, items, n);
}

/* Receives up to cfg->batch deliveries: waits for the first, then takes what
 * has already arrived.  Returns how many, 0 for none; sets bus_broken. */
static int receive_round(struct consumer *c, struct item *items)
{
    char err[256];
    struct bus_delivery *d = NULL;
    int rc = bus_next_delivery(c->bus, WAIT_SLICE_MS, &d, err, sizeof(err));
    if (rc == BUS_NONE)
        return 0;
    if (rc != BUS_OK) {
        if (!stop_requested)
            cwlog_warn("broker: %s", err);
        c->bus_broken = 1;
        return 0;
    }
    int n = 0;
    memset(&items[n], 0, sizeof(items[n]));
    items[n++].d = d;
    while (n < c->cfg->batch) {
        d = NULL;
        rc = bus_next_delivery(c->bus, 0, &d, err, sizeof(err));
        if (rc != BUS_OK) {
            if (rc != BUS_NONE)
                c->bus_broken = 1;
            break;
        }
        memset(&items[n], 0, sizeof(items[n]));
        items[n++].d = d;
    }
    return n;
}

int consumer_run(const struct consumer_config *cfg)
{
    struct consumer c = { .cfg = cfg };
    static struct item items[CONSUMER_BATCH_MAX];
    int64_t deadline = cw_mono_ms() + cfg->connect_timeout_ms;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);

    if (connect_with_backoff(&c, "db", db_open_once, deadline, 1) < 0 ||
        connect_with_backoff(&c, "broker", bus_open_once, deadline, 1) < 0) {
        drop_db(&c);
        drop_bus(&c);
        if (stop_requested)
            return 0;
        cwlog_warn("could not start within %d ms", cfg->connect_timeout_ms);
        return 1;
    }

    cJSON *ev = cwlog_begin("start");
    cJSON_AddStringToObject(ev, "name", cfg->name);
    cJSON_AddStringToObject(ev, "group", cfg->group);
    cJSON_AddStringToObject(ev, "topic", cfg->topic);
    cJSON_AddStringToObject(ev, "effect", cfg->effect->name);
    cJSON_AddNumberToObject(ev, "prefetch", cfg->prefetch);
    cJSON_AddNumberToObject(ev, "batch", cfg->batch);
    if (fault_fifo_prefix() != NULL)
        cJSON_AddStringToObject(ev, "fault_fifo", fault_fifo_prefix());
    else
        cJSON_AddNullToObject(ev, "fault_fifo");
    cwlog_emit(ev);

    while (!stop_requested) {
        if (c.db == NULL && connect_with_backoff(&c, "db", db_open_once, 0, 0) < 0)
            break;
        if (c.bus == NULL && connect_with_backoff(&c, "broker", bus_open_once, 0, 0) < 0)
            break;

        int n = receive_round(&c, items);
        if (n > 0) {
            /* Whatever happens now is finished before a stop is honoured:
             * commit and ACK must not be cut in two by a signal. */
            sigset_t old;
            sigprocmask(SIG_BLOCK, &term, &old);
            handle_round(&c, items, n);
            for (int i = 0; i < n; i++)
                bus_delivery_free(items[i].d);
            sigprocmask(SIG_SETMASK, &old, NULL);
        }
        if (c.bus_broken)
            drop_bus(&c);
    }

    drop_db(&c);
    drop_bus(&c);
    cwlog_simple("stop", "reason", "signal");
    return 0;
}
