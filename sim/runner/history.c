/* history.c -- storing a scenario's history and checking it, live or
 * offline; see history.h.
 *
 * Tables are saved generically (every table of the public schema, as
 * row_to_json) and loaded back with json_populate_recordset into a
 * database migrated by the same outboxctl, so nothing here lists columns
 * that a migration could make stale.  Table names come from the catalogue
 * and are quoted with PQescapeIdentifier; every value travels as a
 * parameter. */
#include "history.h"
#include "claim_history.h"
#include "cliutil.h"
#include "common_fs.h"
#include "cwlog.h"
#include "evlog.h"
#include "pgx.h"
#include "runner_db.h"
#include "redact.h"
#include "httpc.h"
#include "runner.h"
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- HTTP records ------------------------------------------------------- */

void history_http_digest(struct http_rec *h)
{
    const char *body = h->body ? h->body : "";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    static const char hex[] = "0123456789abcdef";
    h->body_sha256[0] = '\0';
    if (EVP_Digest(body, strlen(body), md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32) {
        for (unsigned i = 0; i < 32; i++) {
            h->body_sha256[2 * i] = hex[md[i] >> 4];
            h->body_sha256[2 * i + 1] = hex[md[i] & 15];
        }
        h->body_sha256[64] = '\0';
    }
    /* Bodies are shown as redact.h shows payloads: ids and statuses, never
     * amounts or what a problem quoted. */
    cw_redact_json(body, h->body_shown, sizeof(h->body_shown));
    h->problem[0] = '\0';
    cJSON *j = cJSON_Parse(body);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (cJSON_IsString(t)) {
        /* "urn:crashwindow:problem:NAME" or ".../problems/NAME" */
        const char *cut = strrchr(t->valuestring, ':');
        const char *slash = strrchr(t->valuestring, '/');
        if (slash != NULL && (cut == NULL || slash > cut))
            cut = slash;
        snprintf(h->problem, sizeof(h->problem), "%s", cut ? cut + 1 : t->valuestring);
    }
    cJSON_Delete(j);
}

static cJSON *http_json(const struct http_rec *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", h->step);
    cJSON_AddStringToObject(o, "name", h->name);
    cJSON_AddStringToObject(o, "method", h->method);
    cJSON_AddStringToObject(o, "path", h->path);
    cJSON_AddStringToObject(o, "client", h->client);
    cJSON_AddStringToObject(o, "key", h->key);
    cJSON_AddBoolToObject(o, "creation", h->creation);
    cJSON_AddNumberToObject(o, "status", h->status);
    cJSON_AddStringToObject(o, "error", h->error);
    cJSON_AddStringToObject(o, "payment_id", h->payment_id);
    cJSON_AddStringToObject(o, "body_sha256", h->body_sha256);
    cJSON_AddStringToObject(o, "body_shown", h->body_shown);
    cJSON_AddStringToObject(o, "problem", h->problem);
    cwlog_add_int64(o, "t0_us", h->t0_us);
    cwlog_add_int64(o, "t1_us", h->t1_us);
    return o;
}

/* One field of a stored HTTP record: every one must be there, with its
 * type, or the record is not what the checker would read. */
static int http_field(const cJSON *o, const char *key, char *out, size_t outlen)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(it))
        return -1;
    snprintf(out, outlen, "%s", it->valuestring);
    return 0;
}

static int http_from_json(const cJSON *o, struct http_rec *h)
{
    memset(h, 0, sizeof(*h));
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
    const cJSON *creation = cJSON_GetObjectItemCaseSensitive(o, "creation");
    const cJSON *t0 = cJSON_GetObjectItemCaseSensitive(o, "t0_us");
    const cJSON *t1 = cJSON_GetObjectItemCaseSensitive(o, "t1_us");
    if (!cJSON_IsNumber(step) || !cJSON_IsNumber(status) || !cJSON_IsBool(creation) ||
        !cJSON_IsNumber(t0) || !cJSON_IsNumber(t1))
        return -1;
    h->step = (int)step->valuedouble;
    h->status = (int)status->valuedouble;
    h->creation = cJSON_IsTrue(creation);
    h->t0_us = (int64_t)t0->valuedouble;
    h->t1_us = (int64_t)t1->valuedouble;
    if (http_field(o, "name", h->name, sizeof(h->name)) < 0 ||
        http_field(o, "method", h->method, sizeof(h->method)) < 0 ||
        http_field(o, "path", h->path, sizeof(h->path)) < 0 ||
        http_field(o, "client", h->client, sizeof(h->client)) < 0 ||
        http_field(o, "key", h->key, sizeof(h->key)) < 0 ||
        http_field(o, "error", h->error, sizeof(h->error)) < 0 ||
        http_field(o, "payment_id", h->payment_id, sizeof(h->payment_id)) < 0 ||
        http_field(o, "body_sha256", h->body_sha256, sizeof(h->body_sha256)) < 0 ||
        http_field(o, "body_shown", h->body_shown, sizeof(h->body_shown)) < 0 ||
        http_field(o, "problem", h->problem, sizeof(h->problem)) < 0)
        return -1;
    return 0;
}

/* ---- saving ------------------------------------------------------------- */

static int write_lines(const char *path, PGresult *r, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < PQntuples(r); i++)
        fprintf(f, "%s\n", PQgetvalue(r, i, 0));
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The tables of the public schema, sorted (a fixed order to load them in). */
static PGresult *list_tables(PGconn *conn, char *err, size_t errlen)
{
    return pgx_exec(conn, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                          " ORDER BY tablename", 0, NULL, NULL, err, errlen);
}

static int save_table(PGconn *conn, const char *hdir, const char *table, char *err,
                      size_t errlen)
{
    char *ident = PQescapeIdentifier(conn, table, strlen(table));
    if (ident == NULL) {
        snprintf(err, errlen, "table %s: %s", table, PQerrorMessage(conn));
        return -1;
    }
    char sql[256];
    /* ctid order: the order the rows are stored in, so a reload keeps the
     * order the checker's unordered reads see. */
    snprintf(sql, sizeof(sql), "SELECT row_to_json(t)::text FROM %s t ORDER BY t.ctid", ident);
    PQfreemem(ident);
    char qerr[256];
    PGresult *r = pgx_exec(conn, sql, 0, NULL, NULL, qerr, sizeof(qerr));
    if (r == NULL) {
        snprintf(err, errlen, "table %s: %s", table, qerr);
        return -1;
    }
    char path[PATH_MAX];
    cw_fmt(path, sizeof(path), "%s/%s.jsonl", hdir, table);
    int rc = write_lines(path, r, err, errlen);
    PQclear(r);
    return rc;
}

/* Gives each claim history and consumer record its commit time
 * (claim_history.h), when the database keeps one. */
static int stamp_claim_history(PGconn *conn, char *err, size_t errlen)
{
    char qerr[256], state[6];
    PGresult *r = pgx_exec(conn, "SELECT to_regclass('crashwindow_claims') IS NOT NULL", 0,
                           NULL, state, qerr, sizeof(qerr));
    int has = r != NULL && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    const char *const stamps[] = { claim_history_stamp_sql, consumer_records_stamp_sql };
    for (size_t i = 0; r != NULL && has && i < sizeof(stamps) / sizeof(stamps[0]); i++) {
        PQclear(r);
        r = pgx_exec(conn, stamps[i], 0, NULL, state, qerr, sizeof(qerr));
    }
    if (r == NULL) {
        snprintf(err, errlen, "stamping the claim history's commit times: %s", qerr);
        return -1;
    }
    PQclear(r);
    return 0;
}

int history_save(PGconn *conn, const char *dir, const struct http_rec *http, int nhttp,
                 char *err, size_t errlen)
{
    char hdir[PATH_MAX];
    cw_fmt(hdir, sizeof(hdir), "%s/history", dir);
    if (cw_mkdir_p(hdir) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", hdir, strerror(errno));
        return -1;
    }
    if (stamp_claim_history(conn, err, errlen) < 0)
        return -1;
    char qerr[256];
    PGresult *tables = list_tables(conn, qerr, sizeof(qerr));
    if (tables == NULL) {
        snprintf(err, errlen, "tables: %s", qerr);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < PQntuples(tables) && rc == 0; i++)
        rc = save_table(conn, hdir, PQgetvalue(tables, i, 0), err, errlen);
    PQclear(tables);
    if (rc < 0)
        return -1;
    char path[PATH_MAX];
    cw_fmt(path, sizeof(path), "%s/http.jsonl", hdir);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < nhttp; i++) {
        cJSON *o = http_json(&http[i]);
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text != NULL)
            fprintf(f, "%s\n", text);
        free(text);
    }
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- loading ------------------------------------------------------------ */

/* The file's lines as one JSON array text (caller frees), or NULL. */
static char *lines_as_array(const char *path, char *err, size_t errlen)
{
    int bad = 0;
    cJSON *arr = evlog_read(path, &bad);
    if (arr == NULL || bad > 0) {
        snprintf(err, errlen, "%s: %d line%s that %s not a JSON object", path, bad,
                 bad == 1 ? "" : "s", bad == 1 ? "is" : "are");
        cJSON_Delete(arr);
        return NULL;
    }
    char *text = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    if (text == NULL)
        snprintf(err, errlen, "%s: out of memory", path);
    return text;
}

static int load_table(PGconn *conn, const char *hdir, const char *table, char *err,
                      size_t errlen)
{
    char path[PATH_MAX];
    cw_fmt(path, sizeof(path), "%s/%s.jsonl", hdir, table);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "%s: missing from the stored history", path);
        return -1;
    }
    char *rows = lines_as_array(path, err, errlen);
    if (rows == NULL)
        return -1;
    char *ident = PQescapeIdentifier(conn, table, strlen(table));
    if (ident == NULL) {
        free(rows);
        snprintf(err, errlen, "table %s: %s", table, PQerrorMessage(conn));
        return -1;
    }
    /* Whatever the migration put there (its own bookkeeping, seeded
     * counters) gives way to what the run left. */
    char sql[512];
    snprintf(sql, sizeof(sql), "DELETE FROM %s", ident);
    char qerr[256];
    PGresult *r = pgx_exec(conn, sql, 0, NULL, NULL, qerr, sizeof(qerr));
    PQclear(r);
    snprintf(sql, sizeof(sql), "INSERT INTO %s OVERRIDING SYSTEM VALUE"
             " SELECT * FROM json_populate_recordset(NULL::%s, $1::json)", ident, ident);
    PQfreemem(ident);
    const char *p[1] = { rows };
    r = pgx_exec(conn, sql, 1, p, NULL, qerr, sizeof(qerr));
    free(rows);
    if (r == NULL) {
        snprintf(err, errlen, "loading %s: %s", table, qerr);
        return -1;
    }
    PQclear(r);
    return 0;
}

int history_load_tables(PGconn *conn, const char *dir, char *err, size_t errlen)
{
    char hdir[PATH_MAX];
    cw_fmt(hdir, sizeof(hdir), "%s/history", dir);
    struct stat st;
    if (stat(hdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: no stored history (a run from before histories were kept)",
                 dir);
        return -1;
    }
    char qerr[256], state[6];
    /* The rows are the history as it was: the harness's triggers (the
     * consumer records of claim_history.h) must not add to it. */
    PGresult *r = pgx_exec(conn, "SET session_replication_role = replica", 0, NULL, state, qerr,
                           sizeof(qerr));
    if (r == NULL) {
        snprintf(err, errlen, "turning the triggers off: %s", qerr);
        return -1;
    }
    PQclear(r);
    PGresult *tables = list_tables(conn, qerr, sizeof(qerr));
    if (tables == NULL) {
        snprintf(err, errlen, "tables: %s", qerr);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < PQntuples(tables) && rc == 0; i++)
        rc = load_table(conn, hdir, PQgetvalue(tables, i, 0), err, errlen);
    PQclear(tables);
    r = pgx_exec(conn, "RESET session_replication_role", 0, NULL, state, qerr, sizeof(qerr));
    PQclear(r);
    return rc;
}

/* ---- reading and checking ---------------------------------------------- */

void history_free(struct history *h)
{
    for (int i = 0; i < SC_MAX_PROCS; i++)
        cJSON_Delete(h->proc_events[i]);
    cJSON_Delete(h->broker_events);
    cJSON_Delete(h->samples);
    cJSON_Delete(h->runner_events);
    free(h->http);
    memset(h, 0, sizeof(*h));
}

static const char *lacks_relay(const cJSON *ev, void *arg)
{
    (void)arg;
    return checker_event_lacks(CHK_SRC_RELAY, ev);
}

static const char *lacks_broker(const cJSON *ev, void *arg)
{
    (void)arg;
    return checker_event_lacks(CHK_SRC_BROKER, ev);
}

static const char *lacks_other(const cJSON *ev, void *arg)
{
    (void)arg;
    return checker_event_lacks(CHK_SRC_OTHER, ev);
}

/* A sample of the runner's sampler: its time, and each session it saw idle
 * inside a transaction with the three fields idle_transactions_bounded reads. */
static const char *lacks_sample(const cJSON *ev, void *arg)
{
    (void)arg;
    double v;
    if (!ev_num(ev, "ts_us", &v))
        return "ts_us";
    const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(ev, "idle_in_transaction"), *se;
    if (!cJSON_IsArray(sessions))
        return "idle_in_transaction";
    cJSON_ArrayForEach(se, sessions) {
        if (ev_str(se, "app") == NULL)
            return "idle_in_transaction[].app";
        if (!ev_num(se, "pid", &v))
            return "idle_in_transaction[].pid";
        if (!ev_num(se, "idle_ms", &v))
            return "idle_in_transaction[].idle_ms";
    }
    return NULL;
}

/* A process's or the broker's events, each line checked for the fields the
 * checker reads: the first that is not a JSON object or lacks one is an
 * error naming the file and the line. */
static cJSON *read_events(const char *path, evlog_check_fn check, char *err, size_t errlen)
{
    return evlog_read_strict(path, check, NULL, err, errlen);
}

int history_read(const struct scenario *sc, const char *dir, struct history *h,
                 char *err, size_t errlen)
{
    memset(h, 0, sizeof(*h));
    char path[PATH_MAX];
    for (int i = 0; i < sc->nprocs; i++) {
        cw_fmt(path, sizeof(path), "%s/%s.events.jsonl", dir, sc->procs[i].name);
        evlog_check_fn check = sc->procs[i].kind == SC_RELAY ? lacks_relay : lacks_other;
        if ((h->proc_events[i] = read_events(path, check, err, errlen)) == NULL)
            goto fail;
    }
    cw_fmt(path, sizeof(path), "%s/broker.events.jsonl", dir);
    if ((h->broker_events = read_events(path, lacks_broker, err, errlen)) == NULL)
        goto fail;
    cw_fmt(path, sizeof(path), "%s/history/http.jsonl", dir);
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "%s: missing from the stored history", path);
        goto fail;
    }
    cJSON *recs = read_events(path, NULL, err, errlen);
    if (recs == NULL)
        goto fail;
    int n = cJSON_GetArraySize(recs);
    h->http = calloc((size_t)n + 1, sizeof(*h->http));
    if (h->http == NULL) {
        cJSON_Delete(recs);
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, recs) {
        if (http_from_json(it, &h->http[h->nhttp]) < 0) {
            snprintf(err, errlen, "%s: record %d lacks a field the checker reads", path,
                     h->nhttp + 1);
            cJSON_Delete(recs);
            goto fail;
        }
        h->nhttp++;
    }
    cJSON_Delete(recs);
    /* The sampler's file: a run from before it sampled sessions, or one
     * whose database never came up, has none, and the invariant that reads
     * it is then vacuous. */
    cw_fmt(path, sizeof(path), "%s/metrics.jsonl", dir);
    if (access(path, R_OK) == 0 && (h->samples = read_events(path, lacks_sample, err, errlen)) == NULL)
        goto fail;
    /* The runner's own log: when it stalled replication or killed the
     * broker, which a hazard's explanations are timed against. */
    cw_fmt(path, sizeof(path), "%s/runner.events.jsonl", dir);
    if (access(path, R_OK) == 0 && (h->runner_events = read_events(path, NULL, err, errlen)) == NULL)
        goto fail;
    return 0;
fail:
    history_free(h);
    return -1;
}

int history_check(const struct scenario *sc, const struct history *h, PGconn *conn,
                  struct chk_result *res, cJSON *expects)
{
    struct chk_input in;
    memset(&in, 0, sizeof(in));
    in.sc = sc;
    in.conn = conn;
    for (int i = 0; i < sc->nprocs; i++)
        in.proc_events[i] = h->proc_events[i];
    in.broker_events = h->broker_events;
    in.http = h->http;
    in.nhttp = h->nhttp;
    in.samples = h->samples;
    in.runner_events = h->runner_events;
    int rc = checker_run(&in, res);
    for (int i = 0; i < sc->nexpect; i++) {
        char detail[600];
        int ok = checker_expect(&in, res, &sc->expect[i], detail, sizeof(detail));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "check", sc->expect[i].check);
        cJSON_AddStringToObject(o, "verdict", ok ? "pass" : "fail");
        cJSON_AddStringToObject(o, "detail", detail);
        cJSON_AddItemToArray(expects, o);
    }
    return rc;
}

/* ---- crashwindow check RUNDIR ------------------------------------------- */

static void check_usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow check RUNDIR [--pg CONNINFO]\n"
        "Re-checks every scenario of a stored run from its files alone: the tables\n"
        "saved in each scenario's history/ are loaded into a scratch database (of a\n"
        "throwaway cluster, or of --pg's server), the event logs and the HTTP log are\n"
        "read, and every invariant and expectation is computed again and compared\n"
        "with the verdicts of RUNDIR/result.json.\n"
        "exit: 0 every verdict the same, 1 a difference or a scenario that could not\n"
        "be checked, 2 usage\n");
}

/* The verdict of name in a result.json array of {name|check, verdict}. */
static const char *live_verdict(const cJSON *arr, const char *key, const char *name, int nth)
{
    const cJSON *it;
    int seen = 0;
    cJSON_ArrayForEach(it, arr) {
        if (strcmp(rd_str(it, key) ? rd_str(it, key) : "", name) == 0 && seen++ == nth)
            return rd_str(it, "verdict");
    }
    return NULL;
}

/* Compares the recomputed verdicts with the live ones; prints each
 * difference.  Returns the number of differences. */
static int compare_verdicts(const char *label, const cJSON *live, const cJSON *invs,
                            const cJSON *expects)
{
    int diffs = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, invs) {
        const char *name = rd_str(it, "name"), *now = rd_str(it, "verdict");
        const char *was = live_verdict(rd_get(live, "invariants"), "name", name, 0);
        if (was == NULL || strcmp(was, now) != 0) {
            printf("    %s: invariant %s was %s, is %s\n", label, name, was ? was : "absent",
                   now);
            /* Why it fails now, in the checker's own words: the first
             * witness no hazard explains, when there is one. */
            const cJSON *w = cJSON_GetArrayItem(rd_get(it, "witnesses"), 0), *x;
            cJSON_ArrayForEach(x, rd_get(it, "witnesses")) {
                if (cJSON_IsString(x) && strstr(x->valuestring, "[explained by the hazard]") == NULL) {
                    w = x;
                    break;
                }
            }
            if (strcmp(now, "fail") == 0 && cJSON_IsString(w))
                printf("      e.g. %s\n", w->valuestring);
            diffs++;
        }
    }
    /* Expectations: the k-th of a check name against the k-th live one
     * (the steps' own checks, "steps[N]...", are the runner's observations
     * during the run and not recomputed). */
    int k = 0;
    cJSON_ArrayForEach(it, expects) {
        const char *check = rd_str(it, "check"), *now = rd_str(it, "verdict");
        int nth = 0;
        for (int j = 0; j < k; j++)
            nth += strcmp(rd_str(cJSON_GetArrayItem(expects, j), "check"), check) == 0;
        const char *was = live_verdict(rd_get(live, "expect"), "check", check, nth);
        if (was == NULL || strcmp(was, now) != 0) {
            printf("    %s: expectation %s was %s, is %s (%s)\n", label, check,
                   was ? was : "absent", now, rd_str(it, "detail"));
            diffs++;
        }
        k++;
    }
    return diffs;
}

/* Checks one scenario entry of result.json again.  0 same verdicts, 1
 * different, -1 could not check (the reason printed). */
static int check_one(struct rdb *db, const char *rundir, const cJSON *live)
{
    const char *label = rd_str(live, "dir");
    char err[1024], dir[PATH_MAX], path[PATH_MAX];
    if (label == NULL || !rundir_safe_rel(label)) {
        printf("    %s: no usable \"dir\" in result.json\n", rd_str(live, "name"));
        return -1;
    }
    if (cJSON_GetArraySize(rd_get(live, "invariants")) == 0) {
        printf("    %s: the run never checked it (%s): nothing to compare\n", label,
               rd_str(live, "error") ? rd_str(live, "error") : "no verdicts");
        return -1;
    }
    int64_t t0 = cw_mono_ms();
    cw_fmt(dir, sizeof(dir), "%s/%s", rundir, label);
    cw_fmt(path, sizeof(path), "%s/scenario.json", dir);
    struct scenario *sc = scenario_load(path, NULL, err, sizeof(err));
    if (sc == NULL) {
        printf("    %s: %s\n", label, err);
        return -1;
    }
    int rc = -1;
    char dbname[64];
    PGconn *conn = NULL;
    struct history h;
    memset(&h, 0, sizeof(h));
    struct chk_result res;
    memset(&res, 0, sizeof(res));
    cJSON *expects = cJSON_CreateArray(), *invs = NULL;
    char *conninfo = rdb_create_db(db, label, dbname, err, sizeof(err));
    if (conninfo == NULL || (conn = pgx_connect(conninfo, err, sizeof(err))) == NULL ||
        history_load_tables(conn, dir, err, sizeof(err)) < 0 ||
        history_read(sc, dir, &h, err, sizeof(err)) < 0) {
        printf("    %s: %s\n", label, err);
        goto out;
    }
    if (history_check(sc, &h, conn, &res, expects) < 0) {
        printf("    %s: %s\n", label, res.error);
        goto out;
    }
    invs = checker_invariants_json(&res, sc);
    int diffs = compare_verdicts(label, live, invs, expects);
    printf("    %s: %s in %.2f s (%d invariants, %d expectations)\n", label,
           diffs ? "DIFFERENT verdicts" : "same verdicts",
           (double)(cw_mono_ms() - t0) / 1000.0, cJSON_GetArraySize(invs),
           cJSON_GetArraySize(expects));
    rc = diffs ? 1 : 0;
out:
    cJSON_Delete(invs);
    cJSON_Delete(expects);
    checker_free(&res);
    history_free(&h);
    if (conn != NULL)
        PQfinish(conn);
    if (conninfo != NULL) {
        rdb_drop_db(db, dbname, err, sizeof(err));
        free(conninfo);
    }
    scenario_free(sc);
    return rc;
}

/* The run directory: the first argument that is not an option, and only it. */
static int take_rundir(const char *value, void *ctx, char *err, size_t errlen)
{
    const char **rundir = ctx;
    if (*rundir != NULL) {
        snprintf(err, errlen, "unexpected argument '%s'", value);
        return -1;
    }
    *rundir = value;
    return 0;
}

int history_check_main(int argc, char **argv)
{
    const char *rundir = NULL, *pg = NULL;
    const struct cw_opt opts[] = {
        CW_OPT_STRING("--pg", &pg),
    };
    const struct cw_opts_style style = {
        .prefix = "-",
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unexpected argument '%s'",
        .missing = "unexpected argument '%s'",
        .positional = take_rundir,
        .positional_ctx = &rundir,
    };
    char uerr[8192]; /* the offending argument in full, as it always was */
    int prc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, uerr, sizeof(uerr));
    if (prc == CW_OPTS_HELP) {
        check_usage(stdout);
        return 0;
    }
    if (prc != CW_OPTS_OK) {
        fprintf(stderr, "crashwindow check: %s\n", uerr);
        check_usage(stderr);
        return 2;
    }
    if (rundir == NULL) {
        check_usage(stderr);
        return 2;
    }
    char err[1024];
    cJSON *result = rundir_load(rundir, err, sizeof(err));
    if (result == NULL) {
        fprintf(stderr, "crashwindow check: %s\n", err);
        return 2;
    }
    char bin[PATH_MAX], outboxctl[PATH_MAX], script[PATH_MAX];
    if (runner_build_dir(bin, sizeof(bin)) < 0)
        snprintf(bin, sizeof(bin), ".");
    cw_fmt(outboxctl, sizeof(outboxctl), "%s/src/outboxctl", bin);
    cw_fmt(script, sizeof(script), "%s/scripts/pg-cluster", runner_source_dir());
    struct rdb db;
    memset(&db, 0, sizeof(db));
    int rc = 1;
    if ((pg != NULL ? rdb_use(&db, pg, err, sizeof(err))
                    : rdb_start_cluster(&db, script, err, sizeof(err))) < 0) {
        fprintf(stderr, "crashwindow check: %s\n", err);
        cJSON_Delete(result);
        return pg != NULL ? 2 : 1;
    }
    char tag[32];
    snprintf(tag, sizeof(tag), "chk%d", (int)getpid());
    if (rdb_make_template(&db, outboxctl, tag, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow check: %s\n", err);
        goto out;
    }
    printf("crashwindow check: %s\n", rundir);
    int same = 0, differ = 0, unchecked = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, rd_get(result, "scenarios")) {
        int r = check_one(&db, rundir, sc);
        same += r == 0;
        differ += r == 1;
        unchecked += r < 0;
    }
    printf("crashwindow check: %d scenario%s with the same verdicts, %d different, %d not "
           "checked\n", same, same == 1 ? "" : "s", differ, unchecked);
    rc = differ == 0 && unchecked == 0 ? 0 : 1;
out:
    rdb_finish(&db, script, 0);
    cJSON_Delete(result);
    return rc;
}
