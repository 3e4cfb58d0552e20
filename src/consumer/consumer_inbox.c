/* consumer_inbox.c -- the inbox statements of one delivery; see consumer_inbox.h.
 *
 * Every statement is parameterized and its result checked; each function
 * leaves the transaction for the caller to commit or roll back.  The known-
 * wrong variants (mutants) of the inbox live here, at the very lines they
 * get wrong, so the harness can prove it notices each mistake. */
#include "consumer_inbox.h"
#include "fault.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_LOCK_VERSION[] =
    "SELECT applied_version FROM aggregate_versions"
    " WHERE consumer_name = $1 AND aggregate_id = $2 FOR UPDATE";

static const char SQL_INSERT_MARKER[] =
    "INSERT INTO inbox_messages (consumer_name, message_id, processed_at)"
    " VALUES ($1, $2, now()) ON CONFLICT DO NOTHING";

#ifdef CW_MUTANT_select_then_insert_inbox
static const char SQL_MARKER_EXISTS[] =
    "SELECT 1 FROM inbox_messages WHERE consumer_name = $1 AND message_id = $2";
#endif

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
    "INSERT INTO consumer_dead_letters (consumer_name, message_id, reason, deliveries)"
    " VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (consumer_name, message_id) DO UPDATE"
    " SET reason = EXCLUDED.reason, deliveries = EXCLUDED.deliveries, parked_at = now()";

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

/* Locks the aggregate's row (when it exists) and reads its applied version. */
static int lock_version(PGconn *conn, const char *consumer_name, const char *aggregate_id,
                        long long *applied, char sqlstate[6], char *err, size_t errlen)
{
    const char *params[2] = { consumer_name, aggregate_id };
    PGresult *res = pgx_exec(conn, SQL_LOCK_VERSION, 2, params, sqlstate, err, errlen);
    if (res == NULL)
        return -1;
    *applied = PQntuples(res) > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : 0;
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
#ifdef CW_MUTANT_inbox_separate_tx
    /* Mistake: "record that we saw it first, then do the work" -- the marker
     * commits on its own, and a crash before the effect commits loses the
     * effect: the redelivery finds the marker and is dropped as a duplicate. */
    if (pgx_cmd(conn, "COMMIT", 0, NULL, sqlstate, err, errlen) < 0 ||
        pgx_cmd(conn, "BEGIN", 0, NULL, sqlstate, err, errlen) < 0)
        return -1;
#endif
    CW_FAULT("consumer/after_inbox_insert", );
    return 0;
}

#ifdef CW_MUTANT_select_then_insert_inbox
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
#endif

int inbox_process(PGconn *conn, const char *consumer_name,
                  const struct consumer_effect *eff, const struct consumer_event *ev,
                  struct inbox_result *out, char sqlstate[6], char *err, size_t errlen)
{
    char key[CW_UUID_LEN + 1];
    consumer_event_inbox_key(ev, key);
    memset(out, 0, sizeof(*out));

    if (lock_version(conn, consumer_name, ev->payment_id, &out->applied, sqlstate, err,
                     errlen) < 0)
        return INBOX_ERR_SQL;

#ifdef CW_MUTANT_blind_version_apply
    /* Mistake: "the broker keeps partitions in order, so every version is
     * the next one" -- a reordered or replayed version is applied as is. */
    int stale = 0;
#else
    if (ev->version > out->applied + 1) {
        out->verdict = INBOX_GAP;
        return 0;
    }
    int stale = ev->version <= out->applied;
#endif

    int inserted = 0;
#ifdef CW_MUTANT_select_then_insert_inbox
    /* Mistake: "look first, then act" -- two deliveries of one event racing
     * in two consumers both see no marker and both apply the effect; the
     * marker is written afterwards, and its conflict no longer stops anything. */
    int exists = 0;
    if (marker_exists(conn, consumer_name, key, &exists, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;
    inserted = !exists;
#else
    if (insert_marker(conn, consumer_name, key, &inserted, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;
#endif
    if (!inserted) {
        out->verdict = INBOX_DUPLICATE;
        if (record_anomaly(conn, consumer_name, ev->message_id, ev->payment_id, "duplicate",
                           0, ev->version, NULL, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
        return 0;
    }

    if (stale) {
        out->verdict = INBOX_STALE;
#ifdef CW_MUTANT_select_then_insert_inbox
        int ignored;
        if (insert_marker(conn, consumer_name, key, &ignored, sqlstate, err, errlen) < 0)
            return INBOX_ERR_SQL;
#endif
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
#ifdef CW_MUTANT_select_then_insert_inbox
    int ignored;
    if (insert_marker(conn, consumer_name, key, &ignored, sqlstate, err, errlen) < 0)
        return INBOX_ERR_SQL;
#endif
    out->verdict = INBOX_APPLIED;
    return 0;
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
    char id[129], deliveries[16];
    consumer_safe_text(p->message_id, id, sizeof(id));
    snprintf(deliveries, sizeof(deliveries), "%d", p->deliveries);
    const char *params[4] = { consumer_name, id, p->reason, deliveries };
    if (pgx_cmd(conn, SQL_DEAD_LETTER, 4, params, sqlstate, err, errlen) < 0)
        return -1;
    return record_anomaly(conn, consumer_name, p->anomaly_id, p->aggregate_id, p->kind,
                          p->expected, p->got, p->reason, sqlstate, err, errlen);
}
