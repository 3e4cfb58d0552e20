/* consumer_inbox.c -- the inbox statements of one delivery; see consumer_inbox.h.
 *
 * Every statement is parameterized and its result checked; each function
 * leaves the transaction for the caller to commit or roll back.  The known-
 * wrong variants (mutants) of the inbox live here, at the very lines they
 * get wrong, so the harness can prove it notices each mistake. */
#include "consumer_inbox.h"
#include "fault.h"
#include "mutant.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_LOCK_VERSION[] =
    "SELECT applied_version FROM aggregate_versions"
    " WHERE consumer_name = $1 AND aggregate_id = $2 FOR UPDATE";

/* A gap on an aggregate with no applied version yet creates the row (at 0)
 * so that there is something to lock: see process_at. */
static const char SQL_VERSION_ROW[] =
    "INSERT INTO aggregate_versions (consumer_name, aggregate_id, applied_version)"
    " VALUES ($1, $2, 0) ON CONFLICT DO NOTHING";

static const char SQL_INSERT_MARKER[] =
    "INSERT INTO inbox_messages (consumer_name, message_id, processed_at)"
    " VALUES ($1, $2, now()) ON CONFLICT DO NOTHING";

/* The select_then_insert_inbox mutant's look before it leaps. */
static const char SQL_MARKER_EXISTS[] =
    "SELECT 1 FROM inbox_messages WHERE consumer_name = $1 AND message_id = $2";

static const char SQL_ADVANCE_VERSION[] =
    "INSERT INTO aggregate_versions (consumer_name, aggregate_id, applied_version, updated_at)"
    " VALUES ($1, $2, $3, now())"
    " ON CONFLICT (consumer_name, aggregate_id)"
    " DO UPDATE SET applied_version = EXCLUDED.applied_version, updated_at = now()";

static const char SQL_ANOMALY[] =
    "INSERT INTO consumer_anomalies"
    " (consumer_name, message_id, aggregate_id, kind, expected_version, got_version, detail)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7)";

static const char SQL_GAP_AGE[] =
    "SELECT (extract(epoch FROM now() - min(created_at)) * 1000)::bigint"
    " FROM consumer_anomalies"
    " WHERE consumer_name = $1 AND message_id = $2 AND kind = 'gap'";

static const char SQL_DEAD_LETTER[] =
    "INSERT INTO consumer_dead_letters (consumer_name, message_id, reason, deliveries,"
    "                                   aggregate_id, aggregate_version, event_type, amount,"
    "                                   currency, trace_parent)"
    " VALUES ($1, $2, $3, $4, $5::uuid, $6::bigint, $7, $8, $9, $10)"
    " ON CONFLICT (consumer_name, message_id) DO UPDATE"
    " SET reason = EXCLUDED.reason, deliveries = EXCLUDED.deliveries, parked_at = now()";

/* The parked gap that follows version $3 - 1 of aggregate $2, taken out of
 * the parking to be applied in the caller's transaction. */
static const char SQL_UNPARK_NEXT[] =
    "DELETE FROM consumer_dead_letters"
    " WHERE consumer_name = $1 AND aggregate_id = $2::uuid AND aggregate_version = $3::bigint"
    " RETURNING message_id, event_type, coalesce(amount, ''), coalesce(currency, ''),"
    "           coalesce(trace_parent, '')";

const char *inbox_verdict_name(enum inbox_verdict v)
{
    switch (v) {
    case INBOX_APPLIED: return "applied";
    case INBOX_DUPLICATE: return "duplicate";
    case INBOX_STALE: return "stale";
    case INBOX_GAP: return "gap";
    }
    return "unknown";
}

/* Formats v, or leaves buf NULL-able: returns NULL for 0 (= unknown). */
static const char *version_param(long long v, char buf[24])
{
    if (v <= 0)
        return NULL;
    snprintf(buf, 24, "%lld", v);
    return buf;
}

static int record_anomaly(PGconn *conn, const char *consumer_name, const char *message_id,
                          const char *aggregate_id, const char *kind, long long expected,
                          long long got, const char *detail, char sqlstate[6], char *err,
                          size_t errlen)
{
    char e[24], g[24];
    const char *params[7] = {
        consumer_name,
        (message_id != NULL && message_id[0] != '\0') ? message_id : NULL,
        (aggregate_id != NULL && aggregate_id[0] != '\0') ? aggregate_id : NULL,
        kind,
        version_param(expected, e),
        version_param(got, g),
        detail,
    };
    return pgx_cmd(conn, SQL_ANOMALY, 7, params, sqlstate, err, errlen);
}

/* Locks the aggregate's row (when it exists) and reads its applied version;
 * *exists says whether there was a row to lock. */
static int lock_version(PGconn *conn, const char *consumer_name, const char *aggregate_id,
                        long long *applied, int *exists, char sqlstate[6], char *err,
                        size_t errlen)
{
    const char *params[2] = { consumer_name, aggregate_id };
    PGresult *res = pgx_exec(conn, SQL_LOCK_VERSION, 2, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    *exists = PQntuples(res) > 0;
    *applied = *exists ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    PQclear(res);
    return 0;
}

/* INSERT ... ON CONFLICT DO NOTHING: *inserted is 1 when this transaction
 * now holds the marker, 0 when another (committed) one holds it. */
static int insert_marker(PGconn *conn, const char *consumer_name, const char *key,
                         int *inserted, char sqlstate[6], char *err, size_t errlen)
{
    const char *params[2] = { consumer_name, key };
    PGresult *res = pgx_exec(conn, SQL_INSERT_MARKER, 2, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    *inserted = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (!*inserted)
        return 0;
    /* Mutant: "record that we saw it first, then do the work" -- the marker
     * commits on its own, and a crash before the effect commits loses the
     * effect: the redelivery finds the marker and is dropped as a duplicate. */
    if (CW_MUTANT(inbox_separate_tx) &&
        (pgx_cmd(conn, "COMMIT", 0, NULL, sqlstate, err, errlen) < 0 ||
         pgx_cmd(conn, "BEGIN", 0, NULL, sqlstate, err, errlen) < 0))
        return -1;
    CW_FAULT("consumer/after_inbox_insert", );
    return 0;
}

static int marker_exists(PGconn *conn, const char *consumer_name, const char *key,
                         int *exists, char sqlstate[6], char *err, size_t errlen)
{
    const char *params[2] = { consumer_name, key };
    PGresult *res = pgx_exec(conn, SQL_MARKER_EXISTS, 2, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    *exists = PQntuples(res) > 0;
    PQclear(res);
    return 0;
}

static int process_at(PGconn *conn, const char *consumer_name,
                      const struct consumer_effect *eff, const struct consumer_event *ev,
                      struct inbox_result *out, int depth, char sqlstate[6], char *err,
                      size_t errlen);

/* The event a parked gap row holds (columns of SQL_UNPARK_NEXT), rebuilt
 * as the delivery's validation left it. */
static void parked_event(PGresult *res, const char *aggregate_id, long long version,
                         struct consumer_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    snprintf(ev->message_id, sizeof(ev->message_id), "%s", PQgetvalue(res, 0, 0));
    snprintf(ev->payment_id, sizeof(ev->payment_id), "%s", aggregate_id);
    ev->type_name = consumer_event_type_name(PQgetvalue(res, 0, 1), &ev->type);
    ev->version = version;
    snprintf(ev->amount, sizeof(ev->amount), "%s", PQgetvalue(res, 0, 2));
    ev->has_amount = ev->amount[0] != '\0';
    snprintf(ev->currency, sizeof(ev->currency), "%s", PQgetvalue(res, 0, 3));
    ev->has_currency = ev->currency[0] != '\0';
    const char *parent = PQgetvalue(res, 0, 4);
    ev->has_parent_trace = cw_traceparent_valid(parent);
    if (ev->has_parent_trace)
        snprintf(ev->parent_trace, sizeof(ev->parent_trace), "%s", parent);
    cw_traceparent_child(ev->has_parent_trace ? ev->parent_trace : NULL, ev->trace, NULL);
}

/* ev was just applied: the version after it may be parked, waiting for it
 * since a gap was parked.  It is applied now, in this transaction, and so on
 * up the chain; what was applied is counted in out->unparked.  Parking a gap
 * acknowledged its delivery, so no redelivery would ever bring it back: this
 * is the only way a parked version is applied. */
static int apply_parked_successor(PGconn *conn, const char *consumer_name,
                                  const struct consumer_effect *eff,
                                  const struct consumer_event *ev, struct inbox_result *out,
                                  int depth, char sqlstate[6], char *err, size_t errlen)
{
    /* Mutant: "a parked message is an operator's problem" -- the version
     * parked for a gap stays parked after the gap closed, and is lost. */
    if (CW_MUTANT(parked_gap_never_applied))
        return 0;
    if (depth >= INBOX_MAX_CHAIN)
        return 0; /* a bound no payment reaches (three versions) */
    char next[24];
    snprintf(next, sizeof(next), "%lld", ev->version + 1);
    const char *params[3] = { consumer_name, ev->payment_id, next };
    PGresult *res = pgx_exec(conn, SQL_UNPARK_NEXT, 3, params, sqlstate, err, errlen);
    if (res == NULL)
        return INBOX_ERR_SQL;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return 0;
    }
    struct consumer_event parked;
    parked_event(res, ev->payment_id, ev->version + 1, &parked);
    PQclear(res);
    if (parked.type_name == NULL) {
        snprintf(err, errlen, "parked event %s has an unknown type", parked.message_id);
        return INBOX_ERR_SQL;
    }
    struct inbox_result r;
    int rc = process_at(conn, consumer_name, eff, &parked, &r, depth + 1, sqlstate, err,
                        errlen);
    if (rc < 0)
        return rc;
    /* The depth bound keeps a chain within INBOX_MAX_CHAIN ids. */
    if (r.verdict == INBOX_APPLIED && out->unparked < INBOX_MAX_CHAIN) {
        memcpy(out->unparked_ids[out->unparked++], parked.message_id, sizeof(parked.message_id));
        for (int i = 0; i < r.unparked && out->unparked < INBOX_MAX_CHAIN; i++)
            memcpy(out->unparked_ids[out->unparked++], r.unparked_ids[i],
                   sizeof(r.unparked_ids[0]));
    }
    return 0;
}

int inbox_process(PGconn *conn, const char *consumer_name,
                  const struct consumer_effect *eff, const struct consumer_event *ev,
                  struct inbox_result *out, char sqlstate[6], char *err, size_t errlen)
{
    return process_at(conn, consumer_name, eff, ev, out, 0, sqlstate, err, errlen);
}

static int process_at(PGconn *conn, const char *consumer_name,
                      const struct consumer_effect *eff, const struct consumer_event *ev,
                      struct inbox_result *out, int depth, char sqlstate[6], char *err,
                      size_t errlen)
{
    char key[CW_UUID_LEN + 1];
    consumer_event_inbox_key(ev, key);
    memset(out, 0, sizeof(*out));

    int row_exists = 0;
    if (lock_version(conn, consumer_name, ev->payment_id, &out->applied, &row_exists, sqlstate,
                     err, errlen) < 0)
        return INBOX_ERR_SQL;
    if (!row_exists && ev->version > 1) {
        /* A gap with nothing applied yet: without a row, a consumer
         * applying version 1 right now would not wait for this
         * transaction, and might look for a parked successor before this
         * one parks it.  With the row created (or waited for, when that
         * consumer created it first) and locked, the two serialize: either
         * it sees this park, or this sees its version and applies. */
        const char *params[2] = { consumer_name, ev->payment_id };
        if (pgx_cmd(conn, SQL_VERSION_ROW, 2, params, sqlstate, err, errlen) < 0 ||
            lock_version(conn, consumer_name, ev->payment_id, &out->applied, &row_exists,
                         sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
    }

    /* Mutant: "the broker keeps partitions in order, so every version is
     * the next one" -- a reordered or replayed version is applied as is. */
    if (ev->version > out->applied + 1 && !CW_MUTANT(blind_version_apply)) {
        out->verdict = INBOX_GAP;
        return 0;
    }
    int stale = ev->version <= out->applied && !CW_MUTANT(blind_version_apply);

    int inserted = 0;
    /* Mutant: "look first, then act" -- two deliveries of one event racing
     * in two consumers both see no marker and both apply the effect; the
     * marker is written afterwards, and its conflict no longer stops anything. */
    const int look_first = CW_MUTANT(select_then_insert_inbox);
    if (look_first) {
        int exists = 0;
        if (marker_exists(conn, consumer_name, key, &exists, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
        inserted = !exists;
    } else if (insert_marker(conn, consumer_name, key, &inserted, sqlstate, err, errlen) < 0) {
        return INBOX_ERR_SQL;
    }
    /* Mutant: INSERT ... ON CONFLICT DO NOTHING, and the row count never
     * looked at: a duplicate is applied again. */
    if (!inserted && !CW_MUTANT(marker_conflict_ignored)) {
        out->verdict = INBOX_DUPLICATE;
        if (record_anomaly(conn, consumer_name, ev->message_id, ev->payment_id, "duplicate",
                           0, ev->version, NULL, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
        return 0;
    }

    if (stale) {
        out->verdict = INBOX_STALE;
        int ignored;
        if (look_first &&
            insert_marker(conn, consumer_name, key, &ignored, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
        if (record_anomaly(conn, consumer_name, ev->message_id, ev->payment_id, "stale",
                           out->applied + 1, ev->version, NULL, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
        return 0;
    }

    CW_FAULT("consumer/apply_fail", return INBOX_ERR_APPLY);
    if (consumer_effect_apply(conn, eff, consumer_name, ev, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;

    char v[24];
    snprintf(v, sizeof(v), "%lld", ev->version);
    const char *params[3] = { consumer_name, ev->payment_id, v };
    if (pgx_cmd(conn, SQL_ADVANCE_VERSION, 3, params, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;
    int ignored;
    if (look_first && insert_marker(conn, consumer_name, key, &ignored, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;
    out->verdict = INBOX_APPLIED;
    return apply_parked_successor(conn, consumer_name, eff, ev, out, depth, sqlstate, err,
                                  errlen);
}

int inbox_record_gap(PGconn *conn, const char *consumer_name,
                     const struct consumer_event *ev, long long expected,
                     long long *age_ms, char sqlstate[6], char *err, size_t errlen)
{
    const char *params[2] = { consumer_name, ev->message_id };
    PGresult *res = pgx_exec(conn, SQL_GAP_AGE, 2, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    int first = PQntuples(res) == 0 || PQgetisnull(res, 0, 0);
    *age_ms = first ? 0 : strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (!first)
        return 0;
    return record_anomaly(conn, consumer_name, ev->message_id, ev->payment_id, "gap", expected,
                          ev->version, NULL, sqlstate, err, errlen);
}

int inbox_park(PGconn *conn, const char *consumer_name, const struct inbox_parking *p,
               char sqlstate[6], char *err, size_t errlen)
{
    char id[129], deliveries[16], version[24];
    consumer_safe_text(p->message_id, id, sizeof(id));
    snprintf(deliveries, sizeof(deliveries), "%d", p->deliveries);
    const struct consumer_event *e = p->event;
    if (e != NULL)
        snprintf(version, sizeof(version), "%lld", e->version);
    const char *params[10] = {
        consumer_name, id, p->reason, deliveries,
        e ? e->payment_id : NULL, e ? version : NULL, e ? e->type_name : NULL,
        e && e->has_amount ? e->amount : NULL, e && e->has_currency ? e->currency : NULL,
        e && e->has_parent_trace ? e->parent_trace : NULL,
    };
    if (pgx_cmd(conn, SQL_DEAD_LETTER, 10, params, sqlstate, err, errlen) < 0)
        return -1;
    return record_anomaly(conn, consumer_name, p->anomaly_id, p->aggregate_id, p->kind,
                          p->expected, p->got, p->reason, sqlstate, err, errlen);
}
