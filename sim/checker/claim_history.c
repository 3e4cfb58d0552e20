/* claim_history.c -- the claim history trigger (claim_history.h). */
#include "claim_history.h"

#include <stdio.h>
#include <string.h>

const char claim_history_sql[] =
    "CREATE TABLE IF NOT EXISTS crashwindow_claims (\n"
    "    seq bigserial PRIMARY KEY,\n"
    "    kind text NOT NULL DEFAULT 'claim',\n"
    "    message_id uuid NOT NULL,\n"
    "    lock_id uuid,\n"
    "    locked_by uuid,\n"
    "    attempts integer NOT NULL,\n"
    "    locked_until timestamptz,\n"
    "    claimed_at timestamptz NOT NULL,\n"
    "    release_kind text,\n"
    "    next_attempt_at timestamptz,\n"
    "    last_error text,\n"
    "    proc text,\n"
    "    connected boolean,\n"
    "    committed_at timestamptz\n"
    ");\n"

    "CREATE INDEX IF NOT EXISTS ix_crashwindow_claims_token\n"
    "    ON crashwindow_claims (lock_id, message_id);\n"
    "CREATE OR REPLACE FUNCTION crashwindow_record_claim() RETURNS trigger\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "    IF NEW.attempts > OLD.attempts THEN\n"
    "        INSERT INTO crashwindow_claims\n"
    "            (kind, message_id, lock_id, locked_by, attempts, locked_until, claimed_at)\n"
    "        VALUES ('claim', NEW.id, NEW.lock_id, NEW.locked_by, NEW.attempts,\n"
    "                NEW.locked_until, now());\n"
    "    ELSIF OLD.locked_until IS NOT NULL AND NEW.locked_until IS NULL THEN\n"
    "        INSERT INTO crashwindow_claims\n"
    "            (kind, message_id, lock_id, locked_by, attempts, locked_until, claimed_at,\n"
    "             release_kind, next_attempt_at, last_error)\n"
    "        VALUES ('release', NEW.id, OLD.lock_id, OLD.locked_by, NEW.attempts,\n"
    "                OLD.locked_until, now(),\n"
    "                CASE WHEN NEW.published_at IS NOT NULL THEN 'mark'\n"
    "                     WHEN NEW.dead_lettered_at IS NOT NULL THEN 'dead_letter'\n"
    "                     ELSE 'retry' END,\n"
    "                CASE WHEN NEW.published_at IS NULL AND NEW.dead_lettered_at IS NULL\n"
    "                     THEN NEW.next_attempt_at END,\n"
    "                NEW.last_error);\n"
    "    ELSIF OLD.published_at IS NOT NULL AND NEW.published_at IS NOT NULL\n"
    "          AND NEW.published_at <> OLD.published_at THEN\n"
    "        INSERT INTO crashwindow_claims\n"
    "            (kind, message_id, lock_id, locked_by, attempts, locked_until, claimed_at)\n"
    "        VALUES ('remark', NEW.id, OLD.lock_id, OLD.locked_by, NEW.attempts,\n"
    "                OLD.locked_until, now());\n"
    "    END IF;\n"
    "    RETURN NULL;\n"
    "END\n"
    "$$;\n"
    "CREATE OR REPLACE TRIGGER crashwindow_claims AFTER UPDATE ON outbox_messages\n"
    "    FOR EACH ROW WHEN (NEW.attempts > OLD.attempts\n"
    "                       OR (OLD.locked_until IS NOT NULL AND NEW.locked_until IS NULL)\n"
    "                       OR (OLD.published_at IS NOT NULL AND NEW.published_at IS NOT NULL\n"
    "                           AND NEW.published_at <> OLD.published_at))\n"
    "    EXECUTE FUNCTION crashwindow_record_claim();\n"

    "CREATE TABLE IF NOT EXISTS crashwindow_consumer_records (\n"
    "    seq bigserial PRIMARY KEY,\n"
    "    consumer_name text NOT NULL,\n"
    "    message_id text,\n"
    "    source text NOT NULL,\n"
    "    committed_at timestamptz\n"
    ");\n"
    "CREATE OR REPLACE FUNCTION crashwindow_record_consumer() RETURNS trigger\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "    INSERT INTO crashwindow_consumer_records (consumer_name, message_id, source)\n"
    "    VALUES (NEW.consumer_name, NEW.message_id::text, TG_TABLE_NAME);\n"
    "    RETURN NULL;\n"
    "END\n"
    "$$;\n"
    "CREATE OR REPLACE TRIGGER crashwindow_inbox AFTER INSERT ON inbox_messages\n"
    "    FOR EACH ROW EXECUTE FUNCTION crashwindow_record_consumer();\n"
    "CREATE OR REPLACE TRIGGER crashwindow_parked AFTER INSERT ON consumer_dead_letters\n"
    "    FOR EACH ROW EXECUTE FUNCTION crashwindow_record_consumer();\n"
    "CREATE OR REPLACE TRIGGER crashwindow_anomaly AFTER INSERT ON consumer_anomalies\n"
    "    FOR EACH ROW WHEN (NEW.kind <> 'gap')\n"
    "    EXECUTE FUNCTION crashwindow_record_consumer();\n";

/* The commit timestamp is the transaction's own stop time, taken before
 * its commit record is flushed, so before any client can have heard of the
 * commit: a publish made under the claim cannot come earlier.  The UPDATE's
 * expression reads the recorded row's xmin, the claiming transaction. */
const char claim_history_stamp_sql[] =
    "UPDATE crashwindow_claims SET committed_at = pg_xact_commit_timestamp(xmin)\n"
    " WHERE committed_at IS NULL AND kind IN ('claim', 'release', 'remark')\n"
    "   AND current_setting('track_commit_timestamp') = 'on'";
const char consumer_records_stamp_sql[] =
    "UPDATE crashwindow_consumer_records SET committed_at = pg_xact_commit_timestamp(xmin)\n"
    " WHERE committed_at IS NULL AND current_setting('track_commit_timestamp') = 'on'";

int claim_history_install(PGconn *conn, char *err, size_t errlen)
{
    /* Constant DDL, several statements: PQexec, no value from outside. */
    PGresult *res = PQexec(conn, claim_history_sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) {
        snprintf(err, errlen, "installing the claim history: %s", PQerrorMessage(conn));
        size_t n = strlen(err);
        while (n > 0 && err[n - 1] == '\n')
            err[--n] = '\0';
    }
    PQclear(res);
    return ok ? 0 : -1;
}
