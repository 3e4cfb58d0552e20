/* outboxctl_parked.c -- the consumers' parked events: list, show one
 * (amounts redacted unless asked), replay.
 *
 * A consumer parks a delivery it cannot apply: poison (it failed too many
 * times) or a version whose predecessor had not arrived (a gap; the
 * validated event is kept so that it is applied with its predecessor).
 * Parked events sit in consumer_dead_letters, per consumer group.
 *
 * Replay gives one back to its consumer group: in one statement it removes
 * the dead letter and that group's inbox marker, records the replay in
 * consumer_replays, and makes the outbox row pending again (published_at
 * cleared, due now, lease released, last_error cleared, attempts reset to
 * 0), so the relay publishes it again under its id.  Every other group
 * still holds its marker and absorbs the copy as a duplicate.  Only a
 * parked event whose outbox row exists and is published can be replayed; a
 * poison frame with no such row is reported and left alone.
 *
 * The attempts are reset as a requeue resets them, and recorded the same
 * way (outbox_requeues, same statement): a row published at its last
 * attempt, kept at that count, would be claimed at the limit plus one and
 * dead-lettered unpublished -- the replay would silently undo itself.  The
 * record is what lets an audit see attempts restart rather than go
 * backwards.  The statement locks the dead letter and the outbox row; a
 * cleanup that meets the row meanwhile skips it (outboxctl_cleanup.c). */
#include "outboxctl.h"
#include "ids.h"
#include "pgx.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static const char sql_list[] =
    "SELECT consumer_name, message_id, CASE WHEN aggregate_id IS NULL THEN 'poison'"
    "       ELSE 'gap' END, deliveries, " TS("parked_at") ", left(reason, 160),"
    "       coalesce(event_type, ''), coalesce(aggregate_version::text, '')\n"
    "FROM consumer_dead_letters WHERE ($1::text IS NULL OR consumer_name = $1)\n"
    "ORDER BY consumer_name, parked_at, message_id";

/* The amount and currency are business data: shown only when asked ($3). */
static const char sql_show[] =
    "SELECT d.consumer_name, d.message_id, CASE WHEN d.aggregate_id IS NULL THEN 'poison'"
    "       ELSE 'gap' END, d.deliveries, " TS("d.parked_at") ", d.reason,\n"
    "       coalesce(d.event_type, '-'), coalesce(d.aggregate_id::text, '-'),\n"
    "       coalesce(d.aggregate_version::text, '-'),\n"
    "       CASE WHEN $3::boolean THEN coalesce(d.amount, '-') ELSE '[redacted]' END,\n"
    "       CASE WHEN $3::boolean THEN coalesce(d.currency, '-') ELSE '[redacted]' END,\n"
    "       coalesce(d.trace_parent, '-'),\n"
    "       (SELECT CASE WHEN o.published_at IS NOT NULL THEN 'published'\n"
    "                    WHEN o.dead_lettered_at IS NOT NULL THEN 'dead-lettered'\n"
    "                    ELSE 'pending' END\n"
    "          FROM outbox_messages o WHERE o.id::text = d.message_id),\n"
    "       (SELECT v.applied_version::text FROM aggregate_versions v\n"
    "         WHERE v.consumer_name = d.consumer_name AND v.aggregate_id = d.aggregate_id)\n"
    "FROM consumer_dead_letters d WHERE d.consumer_name = $1 AND d.message_id = $2";

static const char sql_replay[] =
    "WITH target AS (\n"
    "    SELECT d.consumer_name, d.message_id, d.reason, d.deliveries, o.id, o.attempts,\n"
    "           o.last_error\n"
    "    FROM consumer_dead_letters d JOIN outbox_messages o ON o.id::text = d.message_id\n"
    "    WHERE d.consumer_name = $1 AND o.id = ANY($2::uuid[]) AND o.published_at IS NOT NULL\n"
    "    FOR UPDATE OF d, o),\n"
    "gone AS (\n"
    "    DELETE FROM consumer_dead_letters d USING target t\n"
    "    WHERE d.consumer_name = t.consumer_name AND d.message_id = t.message_id\n"
    "    RETURNING t.id),\n"
    "unmarked AS (\n"
    "    DELETE FROM inbox_messages i USING gone g\n"
    "    WHERE i.consumer_name = $1 AND i.message_id = g.id RETURNING 1),\n"
    "logged AS (\n"
    "    INSERT INTO consumer_replays (consumer_name, message_id, reason_before,\n"
    "                                  deliveries_before)\n"
    "    SELECT consumer_name, id, reason, deliveries FROM target),\n"
    "restarted AS (\n"
    "    INSERT INTO outbox_requeues (message_id, attempts_before, last_error_before)\n"
    "    SELECT t.id, t.attempts, t.last_error FROM target t JOIN gone g ON g.id = t.id)\n"
    "UPDATE outbox_messages AS m\n"
    "SET published_at = NULL, next_attempt_at = now(), lock_id = NULL, locked_until = NULL,\n"
    "    attempts = 0, last_error = NULL\n"
    "FROM target t JOIN gone g ON g.id = t.id WHERE m.id = t.id\n"
    "RETURNING m.id::text, (SELECT count(*) FROM unmarked), t.attempts";

static int parked_list(struct ctl *c, const char *consumer, int json)
{
    char err[512];
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    const char *params[1] = { consumer };
    PGresult *r = pgx_exec(conn, sql_list, 1, params, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: listing parked events failed: %s\n", err);
        return CTL_FAILED;
    }
    int n = PQntuples(r);
    if (json) {
        printf("[");
        for (int i = 0; i < n; i++) {
            printf("%s{\"consumer\":", i ? "," : "");
            ctl_json_string(stdout, PQgetvalue(r, i, 0));
            printf(",\"message_id\":");
            ctl_json_string(stdout, PQgetvalue(r, i, 1));
            printf(",\"kind\":\"%s\",\"deliveries\":%s,\"parked_at\":\"%s\",\"reason\":",
                   PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
            ctl_json_string(stdout, PQgetvalue(r, i, 5));
            printf(",\"event_type\":");
            ctl_json_string(stdout, PQgetvalue(r, i, 6));
            printf(",\"version\":%s}", PQgetvalue(r, i, 7)[0] ? PQgetvalue(r, i, 7) : "null");
        }
        printf("]\n");
    } else if (n == 0) {
        printf("no parked events\n");
    } else {
        printf("%-16s %-36s %-6s %5s  %-24s %s\n", "consumer", "message", "kind", "deliv",
               "parked at", "reason");
        for (int i = 0; i < n; i++)
            printf("%-16s %-36s %-6s %5s  %-24s %s\n", PQgetvalue(r, i, 0),
                   PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3),
                   PQgetvalue(r, i, 4), PQgetvalue(r, i, 5));
        printf("(show one: outboxctl parked show CONSUMER ID; give it back: "
               "outboxctl parked replay CONSUMER ID...)\n");
    }
    PQclear(r);
    return CTL_OK;
}

static int parked_show(struct ctl *c, const char *consumer, const char *id, int show_payload)
{
    char err[512];
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    const char *params[3] = { consumer, id, show_payload ? "true" : "false" };
    PGresult *r = pgx_exec(conn, sql_show, 3, params, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading the parked event failed: %s\n", err);
        return CTL_FAILED;
    }
    if (PQntuples(r) == 0) {
        fprintf(stderr, "outboxctl: %s has not parked %s\n", consumer, id);
        PQclear(r);
        return CTL_FAILED;
    }
    printf("consumer          %s\n", PQgetvalue(r, 0, 0));
    printf("message           %s\n", PQgetvalue(r, 0, 1));
    printf("kind              %s, parked at %s after %s deliveries\n", PQgetvalue(r, 0, 2),
           PQgetvalue(r, 0, 4), PQgetvalue(r, 0, 3));
    printf("reason            %s\n", PQgetvalue(r, 0, 5));
    printf("event             %s of %s, version %s\n", PQgetvalue(r, 0, 6),
           PQgetvalue(r, 0, 7), PQgetvalue(r, 0, 8));
    printf("amount            %s %s%s\n", PQgetvalue(r, 0, 9), PQgetvalue(r, 0, 10),
           show_payload ? "" : " (--show-payload to see them)");
    printf("traceparent       %s\n", PQgetvalue(r, 0, 11));
    printf("outbox row        %s\n", PQgetisnull(r, 0, 12) ? "none" : PQgetvalue(r, 0, 12));
    printf("applied version   %s\n", PQgetisnull(r, 0, 13) ? "none" : PQgetvalue(r, 0, 13));
    PQclear(r);
    return CTL_OK;
}

/* The distinct ids of argv (a UUID's case does not matter) as a uuid[]
 * literal (caller frees), their count in *n. */
static char *distinct_ids(char **argv, int argc, const char ***uniq, int *n)
{
    *uniq = malloc((size_t)argc * sizeof(**uniq));
    if (*uniq == NULL)
        abort();
    *n = 0;
    for (int i = 0; i < argc; i++) {
        int dup = 0;
        for (int k = 0; k < *n && !dup; k++)
            dup = strcasecmp((*uniq)[k], argv[i]) == 0;
        if (!dup)
            (*uniq)[(*n)++] = argv[i];
    }
    char *ids = pgx_uuid_array(*uniq, (size_t)*n);
    if (ids == NULL)
        abort(); /* every id was validated: only memory can run out */
    return ids;
}

static int parked_replay(struct ctl *c, const char *consumer, int argc, char **argv)
{
    const char **uniq = NULL;
    int nids = 0;
    char *ids = distinct_ids(argv, argc, &uniq, &nids);
    int rc = CTL_FAILED;
    char err[512];
    PGresult *r = NULL;
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        goto out;
    const char *params[2] = { consumer, ids };
    r = pgx_exec(conn, sql_replay, 2, params, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: replay failed (nothing changed): %s\n", err);
        goto out;
    }
    int done = PQntuples(r);
    for (int i = 0; i < done; i++)
        printf("replayed %s to %s (dead letter and %s inbox marker removed, pending again "
               "under its id, attempts %s -> 0; recorded in consumer_replays and "
               "outbox_requeues)\n", PQgetvalue(r, i, 0), consumer,
               PQgetvalue(r, i, 1)[0] == '0' ? "no" : "its", PQgetvalue(r, i, 2));
    for (int i = 0; i < nids; i++) {
        int replayed = 0;
        for (int k = 0; k < done && !replayed; k++)
            replayed = strcasecmp(PQgetvalue(r, k, 0), uniq[i]) == 0;
        if (!replayed)
            fprintf(stderr, "outboxctl: %s: not replayed (%s has not parked it, or its outbox "
                            "row is missing or not published)\n", uniq[i], consumer);
    }
    rc = done == nids ? CTL_OK : CTL_FAILED;
out:
    PQclear(r);
    free(ids);
    free(uniq);
    return rc;
}

/* A consumer name as the consumers accept it: 1-63 of [A-Za-z0-9_.-]. */
static int consumer_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

int ctl_parked(struct ctl *c, int argc, char **argv)
{
    static const char use[] = "outboxctl: parked needs 'list [--consumer NAME] [--json]', "
                              "'show CONSUMER ID [--show-payload]' or 'replay CONSUMER ID...'\n";
    if (argc < 1) {
        fputs(use, stderr);
        return CTL_USAGE;
    }
    if (strcmp(argv[0], "list") == 0) {
        const char *consumer = NULL;
        int json = 0;
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--json") == 0) {
                json = 1;
            } else if (strcmp(argv[i], "--consumer") == 0 && i + 1 < argc &&
                       consumer_valid(argv[i + 1])) {
                consumer = argv[++i];
            } else {
                fprintf(stderr, "outboxctl: parked list: unexpected argument '%s'\n", argv[i]);
                return CTL_USAGE;
            }
        }
        return parked_list(c, consumer, json);
    }
    int show = strcmp(argv[0], "show") == 0, replay = strcmp(argv[0], "replay") == 0;
    if (!show && !replay) {
        fprintf(stderr, "outboxctl: parked: unknown subcommand '%s' (list, show, replay)\n",
                argv[0]);
        return CTL_USAGE;
    }
    if (argc < 3 || !consumer_valid(argv[1])) {
        fputs(use, stderr);
        return CTL_USAGE;
    }
    int show_payload = 0, nids = 0;
    for (int i = 2; i < argc; i++) {
        if (show && strcmp(argv[i], "--show-payload") == 0) {
            show_payload = 1;
        } else if (cw_uuid_valid(argv[i]) && (replay || nids == 0)) {
            nids++;
        } else {
            fprintf(stderr, "outboxctl: parked %s: '%s' is not a message id (a UUID)\n",
                    argv[0], argv[i]);
            return CTL_USAGE;
        }
    }
    if (nids == 0) {
        fputs(use, stderr);
        return CTL_USAGE;
    }
    if (show) {
        const char *id = strcmp(argv[2], "--show-payload") == 0 ? argv[3] : argv[2];
        return parked_show(c, argv[1], id, show_payload);
    }
    return parked_replay(c, argv[1], argc - 2, argv + 2);
}
