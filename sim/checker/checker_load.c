/* checker_load.c -- the checker's evidence, loaded once: witnesses, the
 * outbox and the claim history as sorted arrays, the effect statements,
 * the broker log's helpers, and the fields the checker reads in each log.
 *
 * Statements are constant SQL with bind parameters; the outbox is loaded
 * once into a sorted array so the per-publish checks are lookups, not
 * queries per message.  A log line that lacks a field the checker reads is
 * refused here, before any invariant runs (checker_event_lacks). */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"
#include "pgx.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- witnesses ---------------------------------------------------------- */

/* Does witness carry one of the texts of explains (one per line: several
 * findings of one invariant in one scenario)? */
static int carries(const char *witness, const char *explains)
{
    while (*explains != '\0') {
        size_t n = strcspn(explains, "\n");
        if (n > 0 && memmem(witness, strlen(witness), explains, n) != NULL)
            return 1;
        explains += n + (explains[n] == '\n');
    }
    return 0;
}

__attribute__((format(printf, 3, 0)))
static void violation_v(struct chk_inv *inv, int explained, const char *fmt, va_list ap)
{
    inv->violations++;
    if (inv->witnesses == NULL)
        inv->witnesses = cJSON_CreateArray();
    char buf[768];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (explained) {
        inv->hazard_explained++;
        if (n >= 0 && (size_t)n < sizeof(buf))
            snprintf(buf + n, sizeof(buf) - (size_t)n, " [explained by the hazard]");
    }
    /* Every violation is weighed against a known finding, kept or not. */
    if (inv->explains != NULL && carries(buf, inv->explains))
        inv->explained++;
    if (cJSON_GetArraySize(inv->witnesses) >= CHK_MAX_WITNESSES)
        return;
    cJSON_AddItemToArray(inv->witnesses, cJSON_CreateString(buf));
}

__attribute__((format(printf, 2, 3)))
void chk_violation(struct chk_inv *inv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    violation_v(inv, 0, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 3, 4)))
void chk_violation_hazard(struct chk_inv *inv, int explained, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    violation_v(inv, explained, fmt, ap);
    va_end(ap);
}

void chk_fmt_time(int64_t us, char *out, size_t n)
{
    if (us == INT64_MAX) {
        snprintf(out, n, "never");
        return;
    }
    char iso[40];
    us_to_iso(us, iso, sizeof(iso));
    snprintf(out, n, "%s", iso + 11); /* the time of day is enough here */
}

/* ---- the outbox, loaded once -------------------------------------------- */

static int cmp_orow(const void *a, const void *b)
{
    return strcmp(((const struct orow *)a)->id, ((const struct orow *)b)->id);
}

/* src into dst (n bytes, truncated), lowercased: ids and tokens as the
 * loaders store them (lower(...)). */
void chk_copy_lower(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
    for (char *p = dst; *p; p++)
        *p = (char)tolower((unsigned char)*p);
}

struct orow *chk_find_row(struct chk_ctx *c, const char *id)
{
    struct orow key;
    if (id == NULL)
        return NULL;
    chk_copy_lower(key.id, sizeof(key.id), id);
    return bsearch(&key, c->rows, (size_t)c->nrows, sizeof(key), cmp_orow);
}

PGresult *chk_query(struct chk_ctx *c, const char *sql, int n, const char *const *params)
{
    char err[256], state[6];
    PGresult *r = pgx_exec(c->in->conn, sql, n, params, state, err, sizeof(err));
    if (r == NULL && !c->db_failed) {
        c->db_failed = 1;
        snprintf(c->res->error, sizeof(c->res->error), "checker query failed: %s (%s)", err,
                 state);
    }
    return r;
}

long chk_query_long(struct chk_ctx *c, const char *sql, int n, const char *const *params)
{
    PGresult *r = chk_query(c, sql, n, params);
    long v = 0;
    if (r != NULL && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        v = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Runs sql and allocates one zeroed element of size bytes per row into
 * *arr (one more than the rows, so that no rows still give an array), the
 * row count into *n.  The result, or NULL when the query or the allocation
 * failed (nothing to free then). */
static PGresult *q_rows(struct chk_ctx *c, const char *sql, size_t size, void **arr, int *n)
{
    PGresult *r = chk_query(c, sql, 0, NULL);
    if (r == NULL)
        return NULL;
    *n = PQntuples(r);
    *arr = calloc((size_t)*n + 1, size);
    if (*arr == NULL) {
        PQclear(r);
        return NULL;
    }
    return r;
}

/* Whether the database holds table name (the harness's own tables exist
 * only where the runner prepared it). */
static int has_table(struct chk_ctx *c, const char *name)
{
    const char *params[1] = { name };
    return chk_query_long(c, "SELECT count(*) FROM pg_class WHERE relname = $1", 1, params) > 0;
}

static int cmp_claim_rec(const void *a, const void *b)
{
    const struct claim_rec *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c != 0 ? c : strcmp(x->token, y->token);
}

static int cmp_claim_seq(const void *a, const void *b)
{
    const struct claim_rec *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_retry_seq(const void *a, const void *b)
{
    const struct retry_rec *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Loads crashwindow_claims (claim_history.h) when the database has it: the
 * committed claims, each with the moment a settle released it and whether
 * a mark did, and the retries with the next_attempt_at they persisted. */
int chk_load_claim_history(struct chk_ctx *c)
{
    if (!has_table(c, "crashwindow_claims"))
        return c->db_failed ? -1 : 0;
    void *arr;
    PGresult *r = q_rows(c,
        "SELECT lower(c.message_id::text), lower(c.lock_id::text),"
        "       (extract(epoch FROM c.locked_until) * 1000000)::bigint,"
        "       (extract(epoch FROM c.claimed_at) * 1000000)::bigint,"
        "       (SELECT (extract(epoch FROM min(r.claimed_at)) * 1000000)::bigint"
        "          FROM crashwindow_claims r"
        "         WHERE r.kind = 'release' AND r.message_id = c.message_id"
        "           AND r.lock_id = c.lock_id),"
        "       c.seq, c.attempts,"
        "       (extract(epoch FROM c.committed_at) * 1000000)::bigint,"
        "       EXISTS (SELECT 1 FROM crashwindow_claims m"
        "                WHERE m.kind = 'release' AND m.release_kind = 'mark'"
        "                  AND m.message_id = c.message_id AND m.lock_id = c.lock_id)"
        "  FROM crashwindow_claims c"
        " WHERE c.kind = 'claim' AND c.lock_id IS NOT NULL AND c.locked_until IS NOT NULL",
        sizeof(*c->claims), &arr, &c->nclaims);
    if (r == NULL)
        return -1;
    c->claims = arr;
    c->claims_seq = calloc((size_t)c->nclaims + 1, sizeof(*c->claims_seq));
    if (c->claims_seq == NULL) {
        PQclear(r);
        return -1;
    }
    for (int i = 0; i < c->nclaims; i++) {
        struct claim_rec *v = &c->claims[i];
        snprintf(v->id, sizeof(v->id), "%s", PQgetvalue(r, i, 0));
        snprintf(v->token, sizeof(v->token), "%s", PQgetvalue(r, i, 1));
        v->until_us = atoll(PQgetvalue(r, i, 2));
        v->claimed_us = atoll(PQgetvalue(r, i, 3));
        v->released_us = PQgetisnull(r, i, 4) ? LLONG_MAX : atoll(PQgetvalue(r, i, 4));
        v->seq = atoll(PQgetvalue(r, i, 5));
        v->attempts = atoi(PQgetvalue(r, i, 6));
        v->committed_us = PQgetisnull(r, i, 7) ? 0 : atoll(PQgetvalue(r, i, 7));
        v->marked = PQgetvalue(r, i, 8)[0] == 't';
    }
    PQclear(r);
    memcpy(c->claims_seq, c->claims, (size_t)c->nclaims * sizeof(*c->claims));
    qsort(c->claims, (size_t)c->nclaims, sizeof(*c->claims), cmp_claim_rec);
    qsort(c->claims_seq, (size_t)c->nclaims, sizeof(*c->claims_seq), cmp_claim_seq);
    r = q_rows(c,
        "SELECT lower(message_id::text), lower(coalesce(lock_id::text, '')), seq,"
        "       (extract(epoch FROM claimed_at) * 1000000)::bigint,"
        "       (extract(epoch FROM next_attempt_at) * 1000000)::bigint, attempts"
        "  FROM crashwindow_claims"
        " WHERE kind = 'release' AND release_kind = 'retry'",
        sizeof(*c->retries), &arr, &c->nretries);
    if (r == NULL)
        return -1;
    c->retries = arr;
    for (int i = 0; i < c->nretries; i++) {
        struct retry_rec *v = &c->retries[i];
        snprintf(v->id, sizeof(v->id), "%s", PQgetvalue(r, i, 0));
        snprintf(v->token, sizeof(v->token), "%s", PQgetvalue(r, i, 1));
        v->seq = atoll(PQgetvalue(r, i, 2));
        v->at_us = atoll(PQgetvalue(r, i, 3));
        v->next_us = PQgetisnull(r, i, 4) ? LLONG_MIN : atoll(PQgetvalue(r, i, 4));
        v->attempts = atoi(PQgetvalue(r, i, 5));
    }
    PQclear(r);
    qsort(c->retries, (size_t)c->nretries, sizeof(*c->retries), cmp_retry_seq);
    c->has_claim_history = 1;
    return 0;
}

int chk_cmp_consumer_rec(const void *a, const void *b)
{
    const struct consumer_rec *x = a, *y = b;
    int d = strcmp(x->group, y->group);
    return d != 0 ? d : strcmp(x->id, y->id);
}

/* Loads crashwindow_consumer_records (claim_history.h) when the database has
 * it: for each group and message, the first commit time of a record. */
int chk_load_consumer_records(struct chk_ctx *c)
{
    if (!has_table(c, "crashwindow_consumer_records"))
        return c->db_failed ? -1 : 0;
    void *arr;
    PGresult *r = q_rows(c,
        "SELECT consumer_name, lower(message_id),"
        "       (extract(epoch FROM min(committed_at)) * 1000000)::bigint"
        "  FROM crashwindow_consumer_records"
        " WHERE committed_at IS NOT NULL AND message_id IS NOT NULL"
        " GROUP BY 1, 2", sizeof(*c->crecs), &arr, &c->ncrecs);
    if (r == NULL)
        return -1;
    c->crecs = arr;
    for (int i = 0; i < c->ncrecs; i++) {
        struct consumer_rec *v = &c->crecs[i];
        snprintf(v->group, sizeof(v->group), "%s", PQgetvalue(r, i, 0));
        snprintf(v->id, sizeof(v->id), "%s", PQgetvalue(r, i, 1));
        v->committed_us = atoll(PQgetvalue(r, i, 2));
    }
    PQclear(r);
    qsort(c->crecs, (size_t)c->ncrecs, sizeof(*c->crecs), chk_cmp_consumer_rec);
    return 0;
}

/* The committed claim of row id whose fencing token is token, or NULL. */
const struct claim_rec *chk_find_claim(const struct chk_ctx *c, const char *id,
                                          const char *token)
{
    struct claim_rec key;
    if (id == NULL || token == NULL)
        return NULL;
    chk_copy_lower(key.id, sizeof(key.id), id);
    chk_copy_lower(key.token, sizeof(key.token), token);
    return bsearch(&key, c->claims, (size_t)c->nclaims, sizeof(key), cmp_claim_rec);
}

int chk_load_outbox(struct chk_ctx *c)
{
    void *arr;
    PGresult *r = q_rows(c,
        "SELECT id::text, event_type, aggregate_id::text, aggregate_version,"
        "       published_at IS NOT NULL, dead_lettered_at IS NOT NULL, attempts,"
        "       encode(sha256(convert_to(payload::text, 'UTF8')), 'hex')"
        "  FROM outbox_messages"
        " UNION ALL"
        " SELECT id::text, event_type, aggregate_id::text, aggregate_version, true, false,"
        "        attempts, payload_sha256"
        "  FROM outbox_removed", sizeof(*c->rows), &arr, &c->nrows);
    if (r == NULL)
        return -1;
    c->rows = arr;
    for (int i = 0; i < c->nrows; i++) {
        struct orow *o = &c->rows[i];
        snprintf(o->id, sizeof(o->id), "%s", PQgetvalue(r, i, 0));
        snprintf(o->event_type, sizeof(o->event_type), "%s", PQgetvalue(r, i, 1));
        snprintf(o->aggregate_id, sizeof(o->aggregate_id), "%s", PQgetvalue(r, i, 2));
        o->version = atoll(PQgetvalue(r, i, 3));
        o->published = PQgetvalue(r, i, 4)[0] == 't';
        o->dead = PQgetvalue(r, i, 5)[0] == 't';
        o->attempts = atoi(PQgetvalue(r, i, 6));
        snprintf(o->sha, sizeof(o->sha), "%s", PQgetvalue(r, i, 7));
    }
    PQclear(r);
    qsort(c->rows, (size_t)c->nrows, sizeof(*c->rows), cmp_orow);
    return 0;
}

int chk_load_requeues(struct chk_ctx *c)
{
    void *arr;
    PGresult *r = q_rows(c,
        "SELECT message_id::text, (extract(epoch FROM requeued_at) * 1000000)::bigint,"
        "       attempts_before"
        "  FROM outbox_requeues", sizeof(*c->requeues), &arr, &c->nrequeues);
    if (r == NULL)
        return -1;
    c->requeues = arr;
    for (int i = 0; i < c->nrequeues; i++) {
        snprintf(c->requeues[i].id, sizeof(c->requeues[i].id), "%s", PQgetvalue(r, i, 0));
        c->requeues[i].at_us = atoll(PQgetvalue(r, i, 1));
        c->requeues[i].attempts_before = atoi(PQgetvalue(r, i, 2));
    }
    PQclear(r);
    return 0;
}

/* Was id requeued by the operator between from and to (microseconds)? */
int chk_requeued_between(const struct chk_ctx *c, const char *id, int64_t from, int64_t to)
{
    for (int i = 0; i < c->nrequeues; i++)
        if (strcasecmp(c->requeues[i].id, id) == 0 && c->requeues[i].at_us > from &&
            c->requeues[i].at_us < to)
            return 1;
    return 0;
}

/* ---- the effects: one list ---------------------------------------------
 *
 * Every statement about "what a consumer applied" is built from this list:
 * the invariants, the chk_counts, and the runner's heal (which waits on
 * checker_unconsumed_sql), so an effect table added here is seen by all of
 * them.  It mirrors the effect table of src/consumer/consumer_effect.c, which the
 * harness does not link: the checker judges the consumer's work and does
 * not borrow its code.  A new effect there needs its row here.
 *
 * The statements are assembled once from these constant identifiers (an
 * identifier cannot be a bind parameter); every value still travels as a
 * parameter. */
static const struct {
    const char *table;
    const char *label;       /* in witnesses: "ledger row 17" */
    int money;               /* it records the event's amount and currency */
} EFFECT_TABLES[] = {
    { "ledger_entries", "ledger", 1 },
    { "notifications", "notification", 0 },
};
#define NEFFECT_TABLES (sizeof(EFFECT_TABLES) / sizeof(EFFECT_TABLES[0]))

static struct {
    pthread_once_t once;
    char effects[2048];          /* (... UNION ALL ...) of consumer $1's effects */
    char effects_total[1024];    /* one bigint: every effect row of every consumer */
    char effects_fields[2048];   /* the same effects with what each recorded of its event */
    char unconsumed[4096];
    char unconsumed_count[4200];
} sqlset = { PTHREAD_ONCE_INIT, "", "", "", "", "" };

static void sqlset_build(void)
{
    size_t n = 0, t = 0, f = 0;
    n += (size_t)snprintf(sqlset.effects + n, sizeof(sqlset.effects) - n, "(");
    f += (size_t)snprintf(sqlset.effects_fields + f, sizeof(sqlset.effects_fields) - f, "(");
    t += (size_t)snprintf(sqlset.effects_total + t, sizeof(sqlset.effects_total) - t,
                          "SELECT 0::bigint");
    for (size_t i = 0; i < NEFFECT_TABLES; i++) {
        n += (size_t)snprintf(sqlset.effects + n, sizeof(sqlset.effects) - n,
                              "%sSELECT id, message_id, payment_id, aggregate_version,"
                              " '%s'::text AS tbl FROM %s WHERE consumer_name = $1",
                              i ? " UNION ALL " : "", EFFECT_TABLES[i].label,
                              EFFECT_TABLES[i].table);
        t += (size_t)snprintf(sqlset.effects_total + t, sizeof(sqlset.effects_total) - t,
                              " + (SELECT count(*) FROM %s)", EFFECT_TABLES[i].table);
        f += (size_t)snprintf(sqlset.effects_fields + f, sizeof(sqlset.effects_fields) - f,
                              "%sSELECT id, message_id, payment_id, aggregate_version,"
                              " event_type, %s, '%s'::text AS tbl FROM %s"
                              " WHERE consumer_name = $1",
                              i ? " UNION ALL " : "",
                              EFFECT_TABLES[i].money
                                  ? "true AS money, amount, currency"
                                  : "false AS money, NULL::numeric AS amount, NULL::text AS currency",
                              EFFECT_TABLES[i].label, EFFECT_TABLES[i].table);
    }
    snprintf(sqlset.effects + n, sizeof(sqlset.effects) - n, ")");
    snprintf(sqlset.effects_fields + f, sizeof(sqlset.effects_fields) - f, ")");
    snprintf(sqlset.unconsumed, sizeof(sqlset.unconsumed),
             "SELECT o.id::text, o.event_type, o.aggregate_version, o.aggregate_id::text"
             "  FROM " OUTBOX_ALL " o"
             " WHERE o.published_at IS NOT NULL"
             "   AND NOT EXISTS (SELECT 1 FROM %s e WHERE e.message_id = o.id)"
             "   AND NOT " PARKED_BY_GROUP("o.id")
             " ORDER BY o.occurred_at, o.id", sqlset.effects);
    snprintf(sqlset.unconsumed_count, sizeof(sqlset.unconsumed_count),
             "SELECT count(*) FROM (%s) u", sqlset.unconsumed);
}

const char *chk_effects_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.effects;
}

const char *chk_effects_fields_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.effects_fields;
}

const char *chk_effects_total_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.effects_total;
}

const char *checker_unconsumed_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.unconsumed;
}

const char *checker_unconsumed_count_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.unconsumed_count;
}

/* chk_query() on a statement that names the effects union at each %s.  Formatting
 * splices in only that union, built above from constant identifiers. */
__attribute__((format(printf, 4, 5)))
PGresult *chk_query_effects(struct chk_ctx *c, int n, const char *const *params,
                            const char *fmt, ...)
{
    char sql[8192];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(sql)) {
        if (!c->db_failed) {
            c->db_failed = 1;
            snprintf(c->res->error, sizeof(c->res->error),
                     "checker statement longer than %zu bytes", sizeof(sql));
        }
        return NULL;
    }
    return chk_query(c, sql, n, params);
}

/* ---- broker log helpers ------------------------------------------------- */
int chk_is_publish(const cJSON *ev)
{
    return strcmp(ev_name(ev), "publish") == 0;
}

int chk_publish_stored(const cJSON *ev)
{
    const char *st = ev_str(ev, K_STATUS);
    return st != NULL && strcmp(st, "stored") == 0;
}

/* ---- the fields the checker reads ----------------------------------------
 *
 * Each under the one name its writer gives it: relay_loop.c for the relays,
 * fakebroker_server.c and rabbitbridge_main.c for the broker, cwlog.c for
 * the header every line has. */

static int has_string(const cJSON *ev, const char *k)
{
    return ev_str(ev, k) != NULL;
}

static int has_number(const cJSON *ev, const char *k)
{
    double v;
    return ev_num(ev, k, &v);
}

static int has_time(const cJSON *ev, const char *k)
{
    int64_t us;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(ev, k);
    return cJSON_IsString(it) && iso_to_us(it->valuestring, &us);
}

/* An array of n items of the given cJSON type test, n < 0: any length. */
static int has_array(const cJSON *ev, const char *k, cJSON_bool (*is)(const cJSON *), int n)
{
    const cJSON *a = ev_arr(ev, k), *it;
    if (a == NULL || (n >= 0 && cJSON_GetArraySize(a) != n))
        return 0;
    cJSON_ArrayForEach(it, a) {
        if (!is(it))
            return 0;
    }
    return 1;
}

const char *checker_event_lacks(enum chk_source src, const cJSON *ev)
{
    if (!has_number(ev, "ts_us"))
        return "ts_us";
    if (!has_number(ev, "pid"))
        return "pid";
    if (!has_string(ev, "event"))
        return "event";
    const char *name = ev_name(ev);
    if (src == CHK_SRC_RELAY) {
        if (strcmp(name, "claim") == 0) {
            if (!has_array(ev, "ids", cJSON_IsString, -1))
                return "ids";
            int n = cJSON_GetArraySize(ev_arr(ev, "ids"));
            if (!has_array(ev, "attempts", cJSON_IsNumber, n))
                return "attempts";
            if (!has_array(ev, "previous_lease", cJSON_IsString, n))
                return "previous_lease";
            if (!has_time(ev, "lease_until"))
                return "lease_until";
            if (!has_string(ev, "worker"))
                return "worker";
        } else if (strcmp(name, "mark") == 0) {
            if (!has_array(ev, "ids", cJSON_IsString, -1))
                return "ids";
            if (!has_number(ev, "n"))
                return "n";
            if (!has_string(ev, "token"))
                return "token";
        } else if (strcmp(name, "retry") == 0) {
            if (!has_string(ev, "id"))
                return "id";
            if (!has_time(ev, "next_attempt_at"))
                return "next_attempt_at";
        } else if (strcmp(name, "dead_letter") == 0 || strcmp(name, "lease_lost") == 0) {
            if (!has_string(ev, "id"))
                return "id";
        }
    } else if (src == CHK_SRC_BROKER) {
        if (strcmp(name, "publish") == 0) {
            if (!has_string(ev, K_MSGID))
                return K_MSGID;
            if (!has_string(ev, K_STATUS))
                return K_STATUS;
            if (!has_string(ev, K_SHA))
                return K_SHA;
        } else if (strcmp(name, "deliver") == 0) {
            if (!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(ev, "redelivered")))
                return "redelivered";
        }
    }
    return NULL;
}

/* The same test over the checker's whole input, for a caller that did not
 * read it through history_read: 0, or -1 with res->error naming the
 * process, the event's position in its log and the field. */
int chk_input_lacks(const struct chk_input *in, struct chk_result *res)
{
    for (int p = 0; p <= in->sc->nprocs; p++) {
        const cJSON *arr = p < in->sc->nprocs ? in->proc_events[p] : in->broker_events;
        enum chk_source src = p == in->sc->nprocs ? CHK_SRC_BROKER
                              : in->sc->procs[p].kind == SC_RELAY ? CHK_SRC_RELAY
                                                                  : CHK_SRC_OTHER;
        const cJSON *ev;
        int i = 0;
        cJSON_ArrayForEach(ev, arr) {
            i++;
            const char *f = checker_event_lacks(src, ev);
            if (f != NULL) {
                snprintf(res->error, sizeof(res->error),
                         "%s's event %d (%s) lacks field \"%s\", which the checker reads",
                         p < in->sc->nprocs ? in->sc->procs[p].name : "broker", i,
                         ev_name(ev)[0] ? ev_name(ev) : "unnamed", f);
                return -1;
            }
        }
    }
    return 0;
}
