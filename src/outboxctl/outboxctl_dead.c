/* outboxctl_dead.c -- dead letters: list (grouped by error fingerprint),
 * show one (payload redacted unless asked), requeue (by ids, fingerprint or all).
 *
 * Requeue keeps the row and its id: it clears dead_lettered_at, makes the row
 * due now (next_attempt_at = now()), releases any lease, clears last_error
 * and resets attempts to 0, so the row gets a full new set of --max-attempts
 * (at the old count it would be dead-lettered again by its first failure).
 * The old attempts and last_error go into outbox_requeues, written by the
 * same statement: a requeue is never done without its record, and a row is
 * requeued at most once per dead letter (the statement only takes rows that
 * are dead-lettered and unpublished, under FOR UPDATE). */
#include "outboxctl.h"
#include "ids.h"
#include "mutant.h"
#include "pgx.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEAD "dead_lettered_at IS NOT NULL AND published_at IS NULL"
#define TS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static const char sql_list[] =
    "SELECT " CTL_FINGERPRINT_SQL " AS fp, count(*),\n"
    "       " TS("min(dead_lettered_at)") ", " TS("max(dead_lettered_at)") ",\n"
    "       (array_agg(last_error ORDER BY dead_lettered_at DESC, id))[1],\n"
    "       array_to_string((array_agg(id::text ORDER BY dead_lettered_at DESC, id))[1:5], ' '),\n"
    "       max(attempts)\n"
    "FROM outbox_messages WHERE " DEAD "\n"
    "GROUP BY 1 ORDER BY 2 DESC, 1";

/* The payload is shown as its keys with every value replaced, unless the
 * operator asks for it ($2 true): payloads may hold personal data. */
static const char sql_show[] =
    "SELECT id, aggregate_type, aggregate_id, aggregate_version, event_type, schema_version,\n"
    "       " TS("occurred_at") ", attempts, " TS("dead_lettered_at") ",\n"
    "       published_at IS NOT NULL, last_error, " CTL_FINGERPRINT_SQL ", trace_parent,\n"
    "       octet_length(payload::text),\n"
    "       CASE WHEN $2::boolean THEN payload::text\n"
    "            WHEN jsonb_typeof(payload) = 'object' THEN\n"
    "                (SELECT coalesce(jsonb_object_agg(k, '[redacted]'::text), '{}'::jsonb)::text\n"
    "                 FROM jsonb_object_keys(payload) AS k)\n"
    "            ELSE '\"[redacted]\"' END\n"
    "FROM outbox_messages WHERE id = $1::uuid";

static const char sql_history[] =
    "SELECT attempts_before, coalesce(last_error_before, ''), " TS("requeued_at") "\n"
    "FROM outbox_requeues WHERE message_id = $1::uuid ORDER BY id";

#define REQUEUE_SQL(filter)                                                    \
    "WITH target AS (\n"                                                      \
    "    SELECT id, attempts, last_error FROM outbox_messages\n"              \
    "    WHERE " DEAD " AND " filter "\n"                                     \
    "    FOR UPDATE),\n"                                                      \
    "logged AS (\n"                                                           \
    "    INSERT INTO outbox_requeues (message_id, attempts_before, last_error_before)\n" \
    "    SELECT id, attempts, last_error FROM target WHERE $1::boolean)\n"    \
    "UPDATE outbox_messages AS m\n"                                           \
    "SET dead_lettered_at = NULL, next_attempt_at = now(), attempts = 0,\n"   \
    "    locked_until = NULL, last_error = NULL\n"                            \
    "FROM target WHERE m.id = target.id\n"                                    \
    "RETURNING m.id, target.attempts"

/* $1 says whether to record (false only in a mutant), $2 picks the rows. */
static const char sql_requeue_ids[] = REQUEUE_SQL("id = ANY($2::uuid[])");
static const char sql_requeue_fp[] = REQUEUE_SQL(CTL_FINGERPRINT_SQL " = $2");
static const char sql_requeue_all[] = REQUEUE_SQL("true");

static const char sql_state[] =
    "SELECT id, published_at IS NOT NULL, dead_lettered_at IS NOT NULL\n"
    "FROM outbox_messages WHERE id = ANY($1::uuid[])";

static int dl_list(struct ctl *c, int json)
{
    char err[512];
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    PGresult *r = pgx_exec(conn, sql_list, 0, NULL, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: listing dead letters failed: %s\n", err);
        return CTL_FAILED;
    }
    int n = PQntuples(r);
    if (json) {
        printf("[");
        for (int i = 0; i < n; i++) {
            printf("%s{\"fingerprint\":\"%s\",\"count\":%s,\"first\":\"%s\",\"last\":\"%s\","
                   "\"max_attempts\":%s,\"error\":",
                   i ? "," : "", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                   PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 6));
            ctl_json_string(stdout, PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
            printf(",\"sample_ids\":[");
            char *ids = strdup(PQgetvalue(r, i, 5));
            char *save = NULL;
            int k = 0;
            for (char *t = strtok_r(ids, " ", &save); t; t = strtok_r(NULL, " ", &save))
                printf("%s\"%s\"", k++ ? "," : "", t);
            free(ids);
            printf("]}");
        }
        printf("]\n");
    } else if (n == 0) {
        printf("no dead letters\n");
    } else {
        printf("%-12s %6s  %-24s %-24s %s\n", "fingerprint", "count", "first", "last", "error");
        for (int i = 0; i < n; i++) {
            printf("%-12s %6s  %-24s %-24s %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                   PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
            printf("%-12s ids: %s%s\n", "", PQgetvalue(r, i, 5),
                   atoi(PQgetvalue(r, i, 1)) > 5 ? " ..." : "");
        }
        printf("(show one: outboxctl dead-letters show ID; requeue a group: "
               "outboxctl requeue --fingerprint F)\n");
    }
    PQclear(r);
    return CTL_OK;
}

static int dl_show(struct ctl *c, const char *id, int show_payload)
{
    char err[512];
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        return CTL_FAILED;
    const char *params[2] = { id, show_payload ? "true" : "false" };
    PGresult *r = pgx_exec(conn, sql_show, 2, params, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading %s failed: %s\n", id, err);
        return CTL_FAILED;
    }
    if (PQntuples(r) == 0) {
        fprintf(stderr, "outboxctl: no outbox row with id %s\n", id);
        PQclear(r);
        return CTL_FAILED;
    }
    if (PQgetisnull(r, 0, 8)) {
        fprintf(stderr, "outboxctl: %s is not a dead letter (it is %s)\n", id,
                PQgetvalue(r, 0, 9)[0] == 't' ? "published" : "pending");
        PQclear(r);
        return CTL_FAILED;
    }
    printf("id                %s\n", PQgetvalue(r, 0, 0));
    printf("aggregate         %s %s version %s\n", PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
           PQgetvalue(r, 0, 3));
    printf("event             %s (schema %s)\n", PQgetvalue(r, 0, 4), PQgetvalue(r, 0, 5));
    printf("occurred at       %s\n", PQgetvalue(r, 0, 6));
    printf("dead-lettered at  %s after %s attempts\n", PQgetvalue(r, 0, 8), PQgetvalue(r, 0, 7));
    printf("last error        %s\n", PQgetisnull(r, 0, 10) ? "-" : PQgetvalue(r, 0, 10));
    printf("fingerprint       %s\n", PQgetvalue(r, 0, 11));
    printf("traceparent       %s\n", PQgetisnull(r, 0, 12) ? "-" : PQgetvalue(r, 0, 12));
    printf("payload           %s bytes%s\n", PQgetvalue(r, 0, 13),
           show_payload ? "" : ", values redacted (--show-payload to see them)");
    printf("  %s\n", PQgetvalue(r, 0, 14));
    PQclear(r);

    const char *hp[1] = { id };
    r = pgx_exec(conn, sql_history, 1, hp, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: reading the requeue history failed: %s\n", err);
        return CTL_FAILED;
    }
    if (PQntuples(r) > 0) {
        printf("requeued before\n");
        for (int i = 0; i < PQntuples(r); i++)
            printf("  %s  after %s attempts: %s\n", PQgetvalue(r, i, 2), PQgetvalue(r, i, 0),
                   PQgetvalue(r, i, 1));
    }
    PQclear(r);
    return CTL_OK;
}

int ctl_dead_letters(struct ctl *c, int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "outboxctl: dead-letters needs 'list [--json]' or 'show ID [--show-payload]'\n");
        return CTL_USAGE;
    }
    if (strcmp(argv[0], "list") == 0) {
        int json = 0;
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--json") != 0) {
                fprintf(stderr, "outboxctl: dead-letters list: unknown argument '%s'\n", argv[i]);
                return CTL_USAGE;
            }
            json = 1;
        }
        return dl_list(c, json);
    }
    if (strcmp(argv[0], "show") == 0) {
        const char *id = NULL;
        int show_payload = 0;
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--show-payload") == 0) {
                show_payload = 1;
            } else if (id == NULL && argv[i][0] != '-') {
                id = argv[i];
            } else {
                fprintf(stderr, "outboxctl: dead-letters show: unexpected argument '%s'\n",
                        argv[i]);
                return CTL_USAGE;
            }
        }
        if (id == NULL || !cw_uuid_valid(id)) {
            fprintf(stderr, "outboxctl: dead-letters show: '%s' is not a message id (a UUID)\n",
                    id ? id : "");
            return CTL_USAGE;
        }
        return dl_show(c, id, show_payload);
    }
    fprintf(stderr, "outboxctl: dead-letters: unknown subcommand '%s' (list, show)\n", argv[0]);
    return CTL_USAGE;
}

int ctl_requeue(struct ctl *c, int argc, char **argv)
{
    const char *fp = NULL;
    int nargs = 0, all = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0) {
            all = 1;
        } else if (strcmp(argv[i], "--fingerprint") == 0) {
            if (i + 1 >= argc || !ctl_fingerprint_valid(argv[i + 1])) {
                fprintf(stderr, "outboxctl: requeue: --fingerprint needs a 12-digit hex "
                                "fingerprint (from dead-letters list)\n");
                return CTL_USAGE;
            }
            fp = argv[++i];
        } else if (cw_uuid_valid(argv[i])) {
            nargs++;
        } else {
            fprintf(stderr, "outboxctl: requeue: '%s' is not a message id (a UUID)\n", argv[i]);
            return CTL_USAGE;
        }
    }
    if ((fp != NULL) + (nargs > 0) + all != 1) {
        fprintf(stderr, "outboxctl: requeue needs message ids, --fingerprint F or --all "
                        "(one of them)\n");
        return CTL_USAGE;
    }

    /* The distinct ids (a UUID's case does not matter): an id given twice is
     * one row to requeue, and success means every distinct id was requeued. */
    const char **uniq = NULL;
    int nids = 0;
    if (nargs > 0) {
        uniq = malloc((size_t)nargs * sizeof(*uniq));
        if (uniq == NULL)
            abort();
        for (int i = 0; i < argc; i++) { /* without --fingerprint: all ids */
            int dup = 0;
            for (int k = 0; k < nids && !dup; k++)
                dup = strcasecmp(uniq[k], argv[i]) == 0;
            if (!dup)
                uniq[nids++] = argv[i];
        }
    }
    char *ids = NULL;
    if (nids > 0) {
        ids = pgx_uuid_array(uniq, (size_t)nids);
        if (ids == NULL)
            abort(); /* every id was validated: only memory can run out */
    }

    int rc = CTL_FAILED;
    char err[512];
    PGresult *r = NULL, *st = NULL;
    PGconn *conn = ctl_conn(c);
    if (conn == NULL)
        goto out;
    /* Mutant: a requeue that keeps no record of what it reset. */
    const char *record = CW_MUTANT(requeue_without_record) ? "false" : "true";
    const char *params[2] = { record, fp ? fp : ids };
    r = pgx_exec(conn, all ? sql_requeue_all : fp ? sql_requeue_fp : sql_requeue_ids, all ? 1 : 2,
                 params, NULL, err, sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "outboxctl: requeue failed (nothing changed): %s\n", err);
        goto out;
    }
    int done = PQntuples(r);
    for (int i = 0; i < done; i++)
        printf("requeued %s (attempts %s -> 0, due now; recorded in outbox_requeues)\n",
               PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    if (all) {
        /* Nothing to requeue is no failure: an operator's "requeue
         * everything" on a clean outbox did what was asked. */
        printf("requeued %d dead letters\n", done);
        rc = CTL_OK;
        goto out;
    }
    if (fp != NULL) {
        if (done == 0)
            fprintf(stderr, "outboxctl: no dead letters with fingerprint %s\n", fp);
        rc = done > 0 ? CTL_OK : CTL_FAILED;
        goto out;
    }
    if (done == nids) {
        rc = CTL_OK;
        goto out;
    }
    /* Explain every id that was not requeued. */
    st = pgx_exec(conn, sql_state, 1, params + 1, NULL, err, sizeof(err));
    for (int i = 0; i < nids; i++) {
        int requeued = 0;
        for (int k = 0; k < done && !requeued; k++)
            requeued = strcasecmp(PQgetvalue(r, k, 0), uniq[i]) == 0;
        if (requeued)
            continue;
        const char *why = "no such outbox row";
        for (int k = 0; st != NULL && k < PQntuples(st); k++) {
            if (strcasecmp(PQgetvalue(st, k, 0), uniq[i]) == 0)
                why = PQgetvalue(st, k, 1)[0] == 't' ? "not a dead letter (published)"
                      : PQgetvalue(st, k, 2)[0] == 't' ? "not requeued"
                      : "not a dead letter (pending)";
        }
        fprintf(stderr, "outboxctl: %s: %s\n", uniq[i], why);
    }
out:
    PQclear(st);
    PQclear(r);
    free(ids);
    free(uniq);
    return rc;
}
