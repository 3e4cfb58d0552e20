/* outboxctl_cleanup.c -- retention: `cleanup` deletes published outbox rows,
 * `cleanup-inbox` deletes inbox markers, both older than a cutoff.
 *
 * Both delete in keyset batches over the primary key, each batch one
 * statement and so one short transaction: no long lock, no long snapshot,
 * and the scan resumes after the last key deleted, so the whole run reads
 * the table about once.  The cutoff is fixed when the command starts, so a
 * long run does not chase a moving target.  Each batch also adds what it
 * deleted to pipeline_counters in the same statement, which keeps
 * outbox_published_total monotonic across cleanups, and records each
 * deleted row in outbox_removed (ids, version, payload digest), and each
 * deleted inbox marker in inbox_removed: the runbook's removals are part of
 * the history an audit reads.
 *
 * Inbox markers are the consumers' memory of what they processed; deleting
 * one whose message can still arrive again turns a harmless duplicate into a
 * second effect.  So cleanup-inbox
 *  - refuses a retention shorter than the redelivery horizon: the sum of all
 *    backoff ceilings up to the attempt limit plus a lease per attempt
 *    (relay_redelivery_horizon_ms, for the relay flags given, defaults as the
 *    relay's), or the window given with --horizon;
 *  - never deletes the marker of a message whose outbox row is still
 *    unpublished (pending or dead-lettered: it may be published again, after
 *    a requeue for instance), whatever its age -- judged under a lock on the
 *    row at the moment of the delete, so a replay running alongside is seen.
 * What it cannot know is a broker's own redelivery window or an operator
 * replaying old messages by hand: --horizon is the place to account for them. */
#include "outboxctl.h"
#include "cliutil.h"
#include "cwlog.h"
#include "mutant.h"
#include "pgx.h"
#include "relay_policy.h"

#include <stdlib.h>
#include <string.h>

#define ZERO_UUID "00000000-0000-0000-0000-000000000000"

static const char sql_cutoff[] =
    "SELECT now() - $1::bigint * interval '1 millisecond'";

/* A published row past the cutoff $1 (with $6, the by-age mutant, any row
 * that old).  Said twice in the batch below: where the batch selects its
 * rows and again in the DELETE, so that the condition is judged on the
 * row as it is when deleted, not as the statement's snapshot saw it. */
#define OUTBOX_EXPIRED(m)                                                      \
    "(" m "published_at IS NOT NULL AND " m "published_at < $1::timestamptz)"   \
    " OR ($6::boolean AND " m "occurred_at < $1::timestamptz)"

/* The batch locks its rows (FOR UPDATE SKIP LOCKED): a row a replay holds
 * is skipped, and a replay that comes later waits for this statement, so
 * no row is made pending between the choice and the delete.  Without the
 * lock, the DELETE would wait for the replay and then delete the row it
 * had just made pending -- joined to the batch by id alone, with no
 * record, as the RETURNING then shows it unpublished. */
static const char sql_outbox_batch[] =
    "WITH batch AS (\n"
    "    SELECT id FROM outbox_messages\n"
    "    WHERE ($3::boolean OR id > $4::uuid)\n"
    "      AND (" OUTBOX_EXPIRED("") ")\n"
    "    ORDER BY id LIMIT $2::int\n"
    "    FOR UPDATE SKIP LOCKED),\n"
    "del AS (\n"
    "    DELETE FROM outbox_messages AS m USING batch WHERE m.id = batch.id\n"
    "      AND (" OUTBOX_EXPIRED("m.") ")\n"
    "    RETURNING m.id, m.aggregate_id, m.aggregate_version, m.event_type, m.attempts,\n"
    "              m.occurred_at, m.published_at,\n"
    "              encode(sha256(convert_to(m.payload::text, 'UTF8')), 'hex') AS sha),\n"
    "recorded AS (\n"
    "    INSERT INTO outbox_removed (id, aggregate_id, aggregate_version, event_type,\n"
    "                                payload_sha256, attempts, occurred_at, published_at,\n"
    "                                removed_by)\n"
    "    SELECT id, aggregate_id, aggregate_version, event_type, sha, attempts, occurred_at,\n"
    "           published_at, 'cleanup' FROM del WHERE $5::boolean AND published_at IS NOT NULL),\n"
    "counted AS (\n"
    "    INSERT INTO pipeline_counters (counter, value)\n"
    "    SELECT 'published_rows_deleted', count(*) FROM del HAVING count(*) > 0\n"
    "    ON CONFLICT (counter) DO UPDATE SET value = pipeline_counters.value + EXCLUDED.value)\n"
    "SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM batch),\n"
    "       (SELECT max(id::text) FROM batch)";

/* The guard holds at the moment of the delete, not only in the statement's
 * snapshot: the outbox rows of the batch's markers are locked FOR SHARE
 * while still published (a replay's FOR UPDATE of the row waits for this
 * statement, and a replay that committed first is seen, READ COMMITTED
 * re-reading the locked row, so its row drops out of `published`).  A
 * marker is deleted only if its row is one of those, or is gone (cleanup
 * removed it: a removed row is never published again).  The rows are
 * locked in id order, as every batch takes them, so two cleanups cannot
 * deadlock; the batch itself is chosen by key and age alone, and a marker
 * the guard keeps is counted at the end of the run. */
static const char sql_inbox_batch[] =
    "WITH batch AS (\n"
    "    SELECT i.consumer_name, i.message_id FROM inbox_messages AS i\n"
    "    WHERE ($3::boolean OR (i.consumer_name, i.message_id) > ($4::text, $5::uuid))\n"
    "      AND i.processed_at < $1::timestamptz\n"
    "    ORDER BY i.consumer_name, i.message_id LIMIT $2::int),\n"
    "published AS (\n"
    "    SELECT o.id FROM outbox_messages AS o\n"
    "    WHERE o.id IN (SELECT message_id FROM batch) AND o.published_at IS NOT NULL\n"
    "    ORDER BY o.id FOR SHARE),\n"
    "del AS (\n"
    "    DELETE FROM inbox_messages AS d USING batch AS b\n"
    "    WHERE d.consumer_name = b.consumer_name AND d.message_id = b.message_id\n"
    "      AND (b.message_id IN (SELECT id FROM published)\n"
    "           OR NOT EXISTS (SELECT 1 FROM outbox_messages AS o WHERE o.id = b.message_id))\n"
    "    RETURNING d.consumer_name, d.message_id, d.processed_at),\n"
    "recorded AS (\n"
    "    INSERT INTO inbox_removed (consumer_name, message_id, processed_at, removed_by)\n"
    "    SELECT consumer_name, message_id, processed_at, 'cleanup-inbox' FROM del),\n"
    "counted AS (\n"
    "    INSERT INTO pipeline_counters (counter, value)\n"
    "    SELECT 'inbox_markers_deleted', count(*) FROM del HAVING count(*) > 0\n"
    "    ON CONFLICT (counter) DO UPDATE SET value = pipeline_counters.value + EXCLUDED.value),\n"
    "last AS (\n"
    "    SELECT consumer_name, message_id::text AS message_id FROM batch\n"
    "    ORDER BY consumer_name DESC, message_id DESC LIMIT 1)\n"
    "SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM batch),\n"
    "       (SELECT consumer_name FROM last), (SELECT message_id FROM last)";

static const char sql_inbox_kept[] =
    "SELECT count(*) FROM inbox_messages AS i\n"
    "WHERE i.processed_at < $1::timestamptz\n"
    "  AND EXISTS (SELECT 1 FROM outbox_messages AS o\n"
    "              WHERE o.id = i.message_id AND o.published_at IS NULL)";

/* The cutoff timestamp (now - ms) as the server's text, into out. */
static int cutoff(PGconn *conn, int64_t ms, char *out, size_t outlen)
{
    char err[512], ms_s[24];
    snprintf(ms_s, sizeof(ms_s), "%lld", (long long)ms);
    const char *p[1] = { ms_s };
    PGresult *r = pgx_exec(conn, sql_cutoff, 1, p, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: computing the cutoff failed: %s\n", err);
        return -1;
    }
    snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

struct cleanup_args {
    const char *cmd;
    const char *age_flag;
    int64_t age_ms;
    int have_age;
    long batch;
    int64_t horizon_ms;
    int have_horizon;
    long max_attempts, base_ms, cap_ms, lease_ms;
};

/* Fills *a (all of it: defaults, then the command's name and age flag) from the
 * "--flag VALUE" pairs of either cleanup (the relay flags and --horizon only for the
 * inbox).  CTL_OK, or CTL_USAGE after printing the problem. */
static int parse_cleanup(struct cleanup_args *a, int argc, char **argv, int inbox)
{
    char err[512];
    memset(a, 0, sizeof(*a));
    a->cmd = inbox ? "cleanup-inbox" : "cleanup";
    a->age_flag = inbox ? "--older-than" : "--published-older-than";
    a->batch = 1000;
    a->max_attempts = RELAY_DEFAULT_MAX_ATTEMPTS;
    a->base_ms = RELAY_DEFAULT_BACKOFF_BASE_MS;
    a->cap_ms = RELAY_DEFAULT_BACKOFF_CAP_MS;
    a->lease_ms = RELAY_DEFAULT_LEASE_MS;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (v == NULL) {
            fprintf(stderr, "outboxctl: %s: %s needs a value\n", a->cmd, f);
            return CTL_USAGE;
        }
        if (strcmp(f, a->age_flag) == 0) {
            rc = ctl_parse_duration(v, &a->age_ms, err, sizeof(err));
            a->have_age = 1;
        } else if (strcmp(f, "--batch") == 0) {
            rc = cw_parse_long(f, v, 1, 100000, &a->batch, err, sizeof(err));
        } else if (inbox && strcmp(f, "--horizon") == 0) {
            rc = ctl_parse_duration(v, &a->horizon_ms, err, sizeof(err));
            a->have_horizon = 1;
        } else if (inbox && strcmp(f, "--max-attempts") == 0) {
            rc = cw_parse_long(f, v, 1, 1000, &a->max_attempts, err, sizeof(err));
        } else if (inbox && strcmp(f, "--backoff-base-ms") == 0) {
            rc = cw_parse_long(f, v, 1, 86400000, &a->base_ms, err, sizeof(err));
        } else if (inbox && strcmp(f, "--backoff-cap-ms") == 0) {
            rc = cw_parse_long(f, v, 1, 86400000, &a->cap_ms, err, sizeof(err));
        } else if (inbox && strcmp(f, "--lease-ms") == 0) {
            rc = cw_parse_long(f, v, 100, 86400000, &a->lease_ms, err, sizeof(err));
        } else {
            fprintf(stderr, "outboxctl: %s: unknown argument '%s'\n", a->cmd, f);
            return CTL_USAGE;
        }
        if (rc < 0) {
            /* Integer errors name their flag already; duration errors do not. */
            if (strncmp(err, "--", 2) == 0)
                fprintf(stderr, "outboxctl: %s: %s\n", a->cmd, err);
            else
                fprintf(stderr, "outboxctl: %s: %s: %s\n", a->cmd, f, err);
            return CTL_USAGE;
        }
        i++;
    }
    if (!a->have_age) {
        fprintf(stderr, "outboxctl: %s: %s DURATION is required\n", a->cmd, a->age_flag);
        return CTL_USAGE;
    }
    return CTL_OK;
}

int ctl_cleanup(struct ctl *c, int argc, char **argv)
{
    struct cleanup_args a;
    int rc = parse_cleanup(&a, argc, argv, 0);
    if (rc != CTL_OK)
        return rc;
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    char cut[64], err[512], batch_s[16], last[40] = ZERO_UUID, age[32];
    if (cutoff(conn, a.age_ms, cut, sizeof(cut)) < 0)
        return CTL_FAILED;
    snprintf(batch_s, sizeof(batch_s), "%ld", a.batch);
    ctl_format_duration(a.age_ms, age, sizeof(age));

    long long total = 0, batches = 0;
    int64_t t0 = cw_mono_ms();
    for (int first = 1;; first = 0) {
        /* Mutant: a retention job that deletes without keeping a record
         * of what it removed. */
        const char *record = CW_MUTANT(cleanup_unrecorded) ? "false" : "true";
        /* Mutant: retention by age alone, "old rows are done rows": pending
         * rows (a broker outage's backlog) go too. */
        const char *by_age = CW_MUTANT(cleanup_deletes_pending) ? "true" : "false";
        const char *p[6] = { cut, batch_s, first ? "true" : "false", last, record, by_age };
        PGresult *r = pgx_exec(conn, sql_outbox_batch, 6, p, NULL, err, sizeof(err));
        if (r == NULL) {
            fprintf(stderr, "outboxctl: cleanup: batch %lld failed after %lld rows deleted: %s\n",
                    batches + 1, total, err);
            return CTL_FAILED;
        }
        long long deleted = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        long long selected = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        if (!PQgetisnull(r, 0, 2))
            snprintf(last, sizeof(last), "%s", PQgetvalue(r, 0, 2));
        PQclear(r);
        total += deleted;
        batches++;
        if (selected < a.batch)
            break;
    }
    int64_t ms = cw_mono_ms() - t0;
    printf("deleted %lld published outbox rows older than %s (published before %s) "
           "in %lld batches of at most %ld, %lld ms",
           total, age, cut, batches, a.batch, (long long)ms);
    if (ms > 0 && total > 0)
        printf(" (%.0f rows/s)", (double)total * 1000.0 / (double)ms);
    printf("\n");
    return CTL_OK;
}

int ctl_cleanup_inbox(struct ctl *c, int argc, char **argv)
{
    struct cleanup_args a;
    int rc = parse_cleanup(&a, argc, argv, 1);
    if (rc != CTL_OK)
        return rc;
    if (a.cap_ms < a.base_ms) {
        fprintf(stderr, "outboxctl: cleanup-inbox: --backoff-cap-ms is below --backoff-base-ms\n");
        return CTL_USAGE;
    }
    char age[32], hz[32];
    int64_t horizon = a.have_horizon
                          ? a.horizon_ms
                          : relay_redelivery_horizon_ms((int)a.max_attempts, a.base_ms,
                                                        a.cap_ms, a.lease_ms);
    ctl_format_duration(a.age_ms, age, sizeof(age));
    ctl_format_duration(horizon, hz, sizeof(hz));
    /* Mutant: "the operator knows what they are doing" -- no horizon check. */
    if (a.age_ms < horizon && !CW_MUTANT(cleanup_inbox_ignores_horizon)) {
        if (a.have_horizon)
            fprintf(stderr, "outboxctl: cleanup-inbox: refusing: a retention of %s is shorter "
                            "than the configured redelivery horizon of %s\n", age, hz);
        else
            fprintf(stderr,
                    "outboxctl: cleanup-inbox: refusing: a retention of %s is shorter than the "
                    "redelivery horizon of %s (%ld attempts, backoff %ld..%ld ms, lease %ld ms): "
                    "a message published again after its marker is gone would be processed "
                    "twice; keep at least %s (or give --horizon for the window your relays and "
                    "broker really use)\n",
                    age, hz, a.max_attempts, a.base_ms, a.cap_ms, a.lease_ms, hz);
        return CTL_FAILED;
    }

    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    char cut[64], err[512], batch_s[16], last_name[256] = "", last_id[40] = ZERO_UUID;
    if (cutoff(conn, a.age_ms, cut, sizeof(cut)) < 0)
        return CTL_FAILED;
    snprintf(batch_s, sizeof(batch_s), "%ld", a.batch);

    long long total = 0, batches = 0;
    int64_t t0 = cw_mono_ms();
    for (int first = 1;; first = 0) {
        const char *p[5] = { cut, batch_s, first ? "true" : "false", last_name, last_id };
        PGresult *r = pgx_exec(conn, sql_inbox_batch, 5, p, NULL, err, sizeof(err));
        if (r == NULL) {
            fprintf(stderr,
                    "outboxctl: cleanup-inbox: batch %lld failed after %lld markers deleted: %s\n",
                    batches + 1, total, err);
            return CTL_FAILED;
        }
        long long deleted = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        long long selected = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        if (!PQgetisnull(r, 0, 2)) {
            snprintf(last_name, sizeof(last_name), "%s", PQgetvalue(r, 0, 2));
            snprintf(last_id, sizeof(last_id), "%s", PQgetvalue(r, 0, 3));
        }
        PQclear(r);
        total += deleted;
        batches++;
        if (selected < a.batch)
            break;
    }
    int64_t ms = cw_mono_ms() - t0;
    const char *kp[1] = { cut };
    PGresult *k = pgx_exec(conn, sql_inbox_kept, 1, kp, NULL, err, sizeof(err));
    long long kept = k ? strtoll(PQgetvalue(k, 0, 0), NULL, 10) : -1;
    PQclear(k);
    printf("deleted %lld inbox markers processed before %s (retention %s >= redelivery "
           "horizon %s) in %lld batches of at most %ld, %lld ms\n",
           total, cut, age, hz, batches, a.batch, (long long)ms);
    if (kept > 0)
        printf("kept %lld older markers whose message is still unpublished (pending or "
               "dead-lettered: it may be published again)\n", kept);
    return CTL_OK;
}
