/* checker.c -- the invariants; see checker.h for what each one means.
 *
 * Evidence comes only from outside the system under test:
 *   - the database: what the pipeline committed (outbox rows, inbox markers,
 *     ledger and notification rows, idempotency records, the runbook's
 *     records of what it removed or requeued);
 *   - the broker's log: what really crossed the wire (every publish with the
 *     SHA-256 of its payload, every delivery), written by a process the
 *     system under test cannot influence;
 *   - the claim history (claim_history.h): every claim, release and second
 *     mark of an outbox row, recorded by a trigger the runner installs, in
 *     the database's own times -- the lease, backoff and dead-letter
 *     invariants read it;
 *   - the runner's own observations: the HTTP answers it received, its
 *     samples of pg_stat_activity.
 * What a process logs about itself is context for witnesses and for the
 * counts of "expect", never what an invariant is decided on.
 * Statements are constant SQL with bind parameters; the outbox is loaded
 * once into a sorted array so the per-publish checks are lookups, not
 * queries per message. */
#include "checker.h"
#include "evlog.h"
#include "pgx.h"
#include "redact.h"
#include "sanitize.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- witnesses ---------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void violation(struct chk_inv *inv, const char *fmt, ...)
{
    inv->violations++;
    if (inv->witnesses == NULL)
        inv->witnesses = cJSON_CreateArray();
    if (cJSON_GetArraySize(inv->witnesses) >= CHK_MAX_WITNESSES)
        return;
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    cJSON_AddItemToArray(inv->witnesses, cJSON_CreateString(buf));
}

/* ---- the outbox, loaded once -------------------------------------------- */

struct orow {
    char id[40];
    char event_type[40];
    char aggregate_id[40];
    long long version;
    int published, dead;
    int attempts;
    char sha[65];
};

struct requeue {
    char id[40];
    int64_t at_us;
    int attempts_before;
};

/* One committed claim of a row, from the claim history. */
struct claim_rec {
    char id[40];
    char token[40];
    long long until_us;   /* its lease end */
    long long claimed_us; /* the claiming transaction's now() */
    long long committed_us; /* its commit timestamp, or 0 when not kept */
    long long released_us;/* when a settle of this claim released the lease
                           * (its transaction's now()), or LLONG_MAX */
    long long seq;        /* the history's order of recording */
    int attempts;         /* the row's attempts the claim committed */
};

/* The first row a consumer group committed about a message (its inbox
 * marker, a park, an anomaly: claim_history.h), and when. */
struct consumer_rec {
    char group[64];
    char id[64];
    long long committed_us;
};

/* One release of a lease by a retry, from the claim history: the row stayed
 * unpublished and next_attempt_at is what the row held after it. */
struct retry_rec {
    char id[40];
    char token[40];       /* the lease the retry ended */
    long long seq;
    long long at_us;      /* the retrying transaction's now() */
    long long next_us;    /* the persisted next_attempt_at, or LLONG_MIN when NULL */
    int attempts;         /* the attempt the retried claim had counted */
};

struct ctx {
    const struct chk_input *in;
    struct chk_result *res;
    struct orow *rows;
    int nrows;
    struct requeue *requeues;   /* operator requeues: attempts restart at 0 */
    int nrequeues;
    const char *consumers[SC_MAX_PROCS];
    int nconsumers;
    struct claim_rec *claims;   /* the claim history, by (row, token) */
    int nclaims;
    struct claim_rec *claims_seq; /* the same claims, by (row, seq) */
    struct retry_rec *retries;  /* its retry releases, by (row, seq) */
    int nretries;
    int has_claim_history;      /* the database holds one (claim_history.h) */
    struct consumer_rec *crecs; /* each group's first committed record of a message */
    int ncrecs;
    int db_failed;
};

static int cmp_orow(const void *a, const void *b)
{
    return strcmp(((const struct orow *)a)->id, ((const struct orow *)b)->id);
}

/* src into dst (n bytes, truncated), lowercased: ids and tokens as the
 * loaders store them (lower(...)). */
static void copy_lower(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
    for (char *p = dst; *p; p++)
        *p = (char)tolower((unsigned char)*p);
}

static struct orow *find_row(struct ctx *c, const char *id)
{
    struct orow key;
    if (id == NULL)
        return NULL;
    copy_lower(key.id, sizeof(key.id), id);
    return bsearch(&key, c->rows, (size_t)c->nrows, sizeof(key), cmp_orow);
}

static PGresult *q(struct ctx *c, const char *sql, int n, const char *const *params)
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

static long q_long(struct ctx *c, const char *sql, int n, const char *const *params)
{
    PGresult *r = q(c, sql, n, params);
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
static PGresult *q_rows(struct ctx *c, const char *sql, size_t size, void **arr, int *n)
{
    PGresult *r = q(c, sql, 0, NULL);
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
static int has_table(struct ctx *c, const char *name)
{
    const char *params[1] = { name };
    return q_long(c, "SELECT count(*) FROM pg_class WHERE relname = $1", 1, params) > 0;
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
 * committed claims, each with the moment a settle released it, and the
 * retries with the next_attempt_at they persisted. */
static int load_claim_history(struct ctx *c)
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
        "       (extract(epoch FROM c.committed_at) * 1000000)::bigint"
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

static int cmp_consumer_rec(const void *a, const void *b)
{
    const struct consumer_rec *x = a, *y = b;
    int d = strcmp(x->group, y->group);
    return d != 0 ? d : strcmp(x->id, y->id);
}

/* Loads crashwindow_consumer_records (claim_history.h) when the database has
 * it: for each group and message, the first commit time of a record. */
static int load_consumer_records(struct ctx *c)
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
    qsort(c->crecs, (size_t)c->ncrecs, sizeof(*c->crecs), cmp_consumer_rec);
    return 0;
}

/* The committed claim of row id whose fencing token is token, or NULL. */
static const struct claim_rec *find_claim(const struct ctx *c, const char *id,
                                          const char *token)
{
    struct claim_rec key;
    if (id == NULL || token == NULL)
        return NULL;
    copy_lower(key.id, sizeof(key.id), id);
    copy_lower(key.token, sizeof(key.token), token);
    return bsearch(&key, c->claims, (size_t)c->nclaims, sizeof(key), cmp_claim_rec);
}

static int load_outbox(struct ctx *c)
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

static int load_requeues(struct ctx *c)
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
static int requeued_between(const struct ctx *c, const char *id, int64_t from, int64_t to)
{
    for (int i = 0; i < c->nrequeues; i++)
        if (strcasecmp(c->requeues[i].id, id) == 0 && c->requeues[i].at_us > from &&
            c->requeues[i].at_us < to)
            return 1;
    return 0;
}

/* Every event the outbox ever held: its rows, and the rows the runbook
 * removed (outboxctl cleanup records each in outbox_removed).  A removal
 * is legitimate history, never a loss or a ghost, so every statement about
 * "the events" reads this, not the table alone. */
#define OUTBOX_ALL                                                                   \
    "(SELECT id, event_type, aggregate_id, aggregate_version, occurred_at,"         \
    "        published_at, dead_lettered_at FROM outbox_messages"                   \
    " UNION ALL"                                                                    \
    " SELECT id, event_type, aggregate_id, aggregate_version, occurred_at,"         \
    "        published_at, NULL::timestamptz FROM outbox_removed)"

/* ---- the effects: one list ---------------------------------------------
 *
 * Every statement about "what a consumer applied" is built from this list:
 * the invariants, the counts, and the runner's heal (which waits on
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
} EFFECT_TABLES[] = {
    { "ledger_entries", "ledger" },
    { "notifications", "notification" },
};
#define NEFFECT_TABLES (sizeof(EFFECT_TABLES) / sizeof(EFFECT_TABLES[0]))

/* Consumer group $1 parked event ID (an expression of type uuid): a
 * consumer dead letter, or a poison or gap_parked anomaly.  A parked event
 * is handled -- nothing is left to wait for -- but it was not applied. */
#define PARKED_BY_GROUP(ID)                                                         \
    "(EXISTS (SELECT 1 FROM consumer_dead_letters d"                                \
    "          WHERE d.consumer_name = $1 AND d.message_id = (" ID ")::text)"       \
    " OR EXISTS (SELECT 1 FROM consumer_anomalies a"                                \
    "             WHERE a.consumer_name = $1 AND a.message_id = " ID                \
    "               AND a.kind IN ('poison', 'gap_parked')))"

static struct {
    pthread_once_t once;
    char effects[2048];          /* (... UNION ALL ...) of consumer $1's effects */
    char effects_total[1024];    /* one bigint: every effect row of every consumer */
    char unconsumed[4096];
    char unconsumed_count[4200];
} sqlset = { PTHREAD_ONCE_INIT, "", "", "", "" };

static void sqlset_build(void)
{
    size_t n = 0, t = 0;
    n += (size_t)snprintf(sqlset.effects + n, sizeof(sqlset.effects) - n, "(");
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
    }
    snprintf(sqlset.effects + n, sizeof(sqlset.effects) - n, ")");
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

static const char *effects_sql(void)
{
    pthread_once(&sqlset.once, sqlset_build);
    return sqlset.effects;
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

/* q() on a statement that names the effects union at each %s.  Formatting
 * splices in only that union, built above from constant identifiers. */
__attribute__((format(printf, 4, 5)))
static PGresult *qf(struct ctx *c, int n, const char *const *params, const char *fmt, ...)
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
    return q(c, sql, n, params);
}

/* ---- broker log helpers ------------------------------------------------- */

/* The broker log's field names, as the fake broker (fakebroker_server.c)
 * and the RabbitMQ bridge write them: one name each. */
#define K_MSGID "message_id"
#define K_STATUS "status"
#define K_SHA "payload_sha256"
#define K_TOKEN "claim_token"  /* optional: a publish may carry none */

static int is_publish(const cJSON *ev)
{
    return strcmp(ev_name(ev), "publish") == 0;
}

static int publish_stored(const cJSON *ev)
{
    const char *st = ev_str(ev, K_STATUS);
    return st != NULL && strcmp(st, "stored") == 0;
}

/* ---- 1. payment_one_creation_event -------------------------------------- */

static void inv_payment_one_creation_event(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_PAYMENT_ONE_CREATION_EVENT];
    PGresult *r = q(c,
        "SELECT p.id::text, count(o.id)"
        "  FROM payments p"
        "  LEFT JOIN " OUTBOX_ALL " o"
        "    ON o.aggregate_id = p.id AND o.event_type = 'PaymentCreated'"
        " GROUP BY p.id", 0, NULL);
    if (r == NULL)
        return;
    inv->ran = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        long n = atol(PQgetvalue(r, i, 1));
        if (n != 1)
            violation(inv, "payment %s has %ld PaymentCreated events in the outbox (want 1)",
                      PQgetvalue(r, i, 0), n);
    }
    PQclear(r);
    r = q(c,
        "SELECT o.id::text, o.aggregate_id::text"
        "  FROM " OUTBOX_ALL " o"
        " WHERE o.event_type = 'PaymentCreated'"
        "   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.id = o.aggregate_id)", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        violation(inv, "outbox event %s announces payment %s, which does not exist "
                  "(the command rolled back but its event survived)",
                  PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    }
    PQclear(r);
}

/* ---- 2. nothing_lost ---------------------------------------------------- */

/* Does the scenario plant event id as poison input ("poison_events")? */
static int scenario_names_poison(const struct scenario *sc, const char *id)
{
    for (int i = 0; i < sc->npoison; i++)
        if (strcasecmp(sc->poison[i], id) == 0)
            return 1;
    return 0;
}

/* Whether an older version of o's aggregate was dead-lettered by a relay. */
static int behind_dead_letter(const struct ctx *c, const struct orow *o)
{
    for (int i = 0; i < c->nrows; i++) {
        const struct orow *d = &c->rows[i];
        if (d->dead && d->version < o->version &&
            strcmp(d->aggregate_id, o->aggregate_id) == 0)
            return 1;
    }
    return 0;
}

static void inv_nothing_lost(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_NOTHING_LOST];
    PGresult *r = q(c,
        "SELECT id::text, event_type, attempts, coalesce(left(last_error, 120), ''),"
        "       lock_id IS NOT NULL AND locked_until > now(), next_attempt_at > now()"
        "  FROM outbox_messages"
        " WHERE published_at IS NULL AND dead_lettered_at IS NULL", 0, NULL);
    if (r == NULL)
        return;
    inv->ran = 1;
    /* The items: every outbox event (pending, or applied or handled by every
     * consumer group), and every creation the client was told succeeded. */
    inv->checked += c->nrows;
    int held = scenario_relays_hold_order(c->in->sc);
    for (int i = 0; i < PQntuples(r); i++) {
        /* Held back behind its aggregate's dead letter, by the relays'
         * order: part of that dead letter, which an operator sees and
         * whose requeue releases it. */
        const struct orow *row = held ? find_row(c, PQgetvalue(r, i, 0)) : NULL;
        if (row != NULL && behind_dead_letter(c, row))
            continue;
        const char *why = PQgetvalue(r, i, 4)[0] == 't' ? "under a live lease"
                          : PQgetvalue(r, i, 5)[0] == 't' ? "waiting on its backoff"
                                                          : "ready but never published";
        violation(inv, "event %s (%s) is still pending after heal, %s (attempts %s%s%s)",
                  PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), why, PQgetvalue(r, i, 2),
                  PQgetvalue(r, i, 3)[0] ? ", last error: " : "", PQgetvalue(r, i, 3));
    }
    PQclear(r);

    /* Parking is no excuse: a parked event that nothing will apply is
     * parked-and-unresolved, a failure, unless the scenario plants it as
     * poison and names it ("poison_events"), or it waits behind a version
     * the relay dead-lettered (it is then part of that dead letter, which
     * an operator sees).  No expectation switches this off. */
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        r = q(c, checker_unconsumed_sql(), 1, p);
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++)
            violation(inv, "event %s (%s v%s of %s) was published but never applied by %s "
                      "and is not parked",
                      PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                      PQgetvalue(r, i, 3), c->consumers[k]);
        PQclear(r);

        r = qf(c, 1, p,
            "SELECT o.id::text, o.event_type, o.aggregate_version,"
            "       coalesce((SELECT a.kind || coalesce(': ' || left(a.detail, 120), '')"
            "                   FROM consumer_anomalies a"
            "                  WHERE a.consumer_name = $1 AND a.message_id = o.id"
            "                    AND a.kind IN ('poison', 'gap_parked')"
            "                  ORDER BY a.id LIMIT 1),"
            "                'dead letter: ' || (SELECT left(d.reason, 120)"
            "                   FROM consumer_dead_letters d"
            "                  WHERE d.consumer_name = $1 AND d.message_id = o.id::text), ''),"
            "       EXISTS (SELECT 1 FROM consumer_anomalies a"
            "                WHERE a.consumer_name = $1 AND a.message_id = o.id"
            "                  AND a.kind = 'gap_parked')"
            "       AND EXISTS (SELECT 1 FROM %s e2"
            "                     JOIN " OUTBOX_ALL " o2 ON o2.id = e2.message_id"
            "                    WHERE o2.aggregate_id = o.aggregate_id"
            "                      AND o2.aggregate_version = o.aggregate_version - 1),"
            "       (SELECT o3.id::text FROM outbox_messages o3"
            "         WHERE o3.aggregate_id = o.aggregate_id"
            "           AND o3.aggregate_version < o.aggregate_version"
            "           AND o3.dead_lettered_at IS NOT NULL"
            "         ORDER BY o3.aggregate_version LIMIT 1)"
            "  FROM " OUTBOX_ALL " o"
            " WHERE NOT EXISTS (SELECT 1 FROM %s e WHERE e.message_id = o.id)"
            "   AND " PARKED_BY_GROUP("o.id")
            " ORDER BY o.occurred_at, o.id", effects_sql(), effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++) {
            /* A version parked for a gap whose predecessor was then applied
             * is lost, whatever the scenario expects: nothing closes the gap
             * any more.  No expectation excuses it. */
            if (PQgetvalue(r, i, 4)[0] == 't') {
                violation(inv, "event %s (%s v%s) was parked by %s for a version gap, and "
                          "its predecessor was applied later, yet it never was: lost",
                          PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                          c->consumers[k]);
                continue;
            }
            if (scenario_names_poison(c->in->sc, PQgetvalue(r, i, 0)) ||
                !PQgetisnull(r, i, 5))
                continue;
            violation(inv, "event %s (%s v%s) was parked by %s instead of applied (%s), "
                      "and nothing resolves it: parked-and-unresolved",
                      PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                      c->consumers[k], PQgetvalue(r, i, 3));
        }
        PQclear(r);
    }

    /* What the client was told exists must exist. */
    for (int i = 0; i < c->in->nhttp; i++) {
        const struct http_rec *h = &c->in->http[i];
        if (!h->creation || h->status < 200 || h->status > 299 || h->payment_id[0] == '\0')
            continue;
        const char *p[1] = { h->payment_id };
        inv->checked++;
        if (q_long(c, "SELECT count(*) FROM payments WHERE id::text = $1", 1, p) != 1)
            violation(inv, "payment %s was confirmed to the client (HTTP %d for key %s) "
                      "but is not in the database", h->payment_id, h->status, h->key);
    }
}

/* ---- 3. effect_once ----------------------------------------------------- */

static void inv_effect_once(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_EFFECT_ONCE];
    inv->ran = 1;
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        /* A marker the runbook removed (inbox_removed) excuses no second
         * effect: the witness says so, since that is how one came about. */
        PGresult *r = qf(c, 1, p,
            "SELECT e.message_id::text, count(*), string_agg(e.tbl || ' row ' || e.id, ', ' ORDER BY e.id),"
            "       coalesce((SELECT ' (its inbox marker was removed by ' || x.removed_by || ' at '"
            "                        || x.removed_at::text || ')'"
            "                   FROM inbox_removed x"
            "                  WHERE x.consumer_name = $1 AND x.message_id = e.message_id"
            "                  ORDER BY x.id LIMIT 1), '')"
            "  FROM %s e GROUP BY e.message_id ORDER BY min(e.id)", effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++) {
            inv->checked++;
            long n = atol(PQgetvalue(r, i, 1));
            if (n > 1)
                violation(inv, "event %s was applied %ld times by %s: %s%s", PQgetvalue(r, i, 0),
                          n, c->consumers[k], PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
            if (find_row(c, PQgetvalue(r, i, 0)) == NULL)
                violation(inv, "%s applied event %s (%s), which is not in the outbox "
                          "(an effect without a committed event)",
                          c->consumers[k], PQgetvalue(r, i, 0), PQgetvalue(r, i, 2));
        }
        PQclear(r);
        /* An effect whose marker the runbook removed (outboxctl
         * cleanup-inbox records each in inbox_removed) is history, not a
         * marker that never committed. */
        r = qf(c, 1, p,
            "SELECT e.message_id::text, e.tbl || ' row ' || e.id"
            "  FROM %s e"
            " WHERE NOT EXISTS (SELECT 1 FROM inbox_messages i"
            "                    WHERE i.consumer_name = $1 AND i.message_id = e.message_id)"
            "   AND NOT EXISTS (SELECT 1 FROM inbox_removed x"
            "                    WHERE x.consumer_name = $1 AND x.message_id = e.message_id)"
            " ORDER BY e.id", effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++)
            violation(inv, "%s has an effect for event %s (%s) but no inbox marker for it",
                      c->consumers[k], PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        PQclear(r);
        /* A marker without an effect is excused only where the consumer
         * committed it knowingly without one: a stale version, or a parked
         * event.  Not a duplicate: a redelivery finds the marker of the
         * first delivery, whose effect must be there -- the marker that
         * committed apart from its effect (then lost in a crash) is exactly
         * what a redelivery reports as a duplicate. */
        r = qf(c, 1, p,
            "SELECT i.message_id::text FROM inbox_messages i"
            " WHERE i.consumer_name = $1"
            "   AND NOT EXISTS (SELECT 1 FROM %s e WHERE e.message_id = i.message_id)"
            "   AND NOT EXISTS (SELECT 1 FROM consumer_anomalies a"
            "                    WHERE a.consumer_name = $1 AND a.message_id = i.message_id"
            "                      AND a.kind = 'stale')"
            "   AND NOT " PARKED_BY_GROUP("i.message_id")
            " ORDER BY i.processed_at", effects_sql());
        if (r == NULL)
            return;
        inv->checked += q_long(c, "SELECT count(*) FROM inbox_messages WHERE consumer_name = $1",
                               1, p);
        for (int i = 0; i < PQntuples(r); i++) {
            violation(inv, "%s holds an inbox marker for event %s without its effect "
                      "(the marker committed apart from the effect)",
                      c->consumers[k], PQgetvalue(r, i, 0));
        }
        PQclear(r);
    }
}

/* ---- 4. broker_log_matches_outbox --------------------------------------- */

static void inv_broker_log_matches_outbox(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_BROKER_LOG_MATCHES_OUTBOX];
    inv->ran = 1;
    const cJSON *ev;
    /* Marks on the rows: a stored publish seen. */
    char *seen = calloc((size_t)c->nrows + 1, 1);
    if (seen == NULL)
        return;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!is_publish(ev) || !publish_stored(ev))
            continue;
        const char *id = ev_str(ev, K_MSGID);
        inv->checked++;
        struct orow *o = find_row(c, id);
        if (o == NULL) {
            const char *client = ev_str(ev, "client");
            violation(inv, "the broker stored message %s (from %s), which is not an outbox row "
                      "(a ghost, or a fresh id per attempt)", id ? id : "(no id)",
                      client ? client : "an unnamed client");
            continue;
        }
        seen[o - c->rows] = 1;
    }
    for (int i = 0; i < c->nrows; i++) {
        if (!c->rows[i].published)
            continue;
        inv->checked++;
        if (!seen[i])
            violation(inv, "event %s (%s) is marked published but the broker never stored it",
                      c->rows[i].id, c->rows[i].event_type);
    }
    free(seen);
}

/* ---- 5. republish_same_payload ------------------------------------------ */

static void inv_republish_same_payload(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_REPUBLISH_SAME_PAYLOAD];
    inv->ran = 1;
    /* First hash seen per row, then every later publish must match it and
     * the row's own payload hash. */
    char (*first)[65] = calloc((size_t)c->nrows + 1, 65);
    int *count = calloc((size_t)c->nrows + 1, sizeof(int));
    if (first == NULL || count == NULL) {
        free(first);
        free(count);
        return;
    }
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!is_publish(ev))
            continue;
        const char *status = ev_str(ev, K_STATUS);
        if (status != NULL && strcmp(status, "stored") != 0 && strcmp(status, "refused") != 0)
            continue;
        struct orow *o = find_row(c, ev_str(ev, K_MSGID));
        const char *sha = ev_str(ev, K_SHA);
        if (o == NULL || sha == NULL)
            continue;
        size_t i = (size_t)(o - c->rows);
        count[i]++;
        inv->checked++;
        if (count[i] == 1) {
            snprintf(first[i], 65, "%s", sha);
            if (strcasecmp(sha, o->sha) != 0)
                violation(inv, "message %s was published with payload sha256 %.12s..., but its "
                          "outbox payload hashes to %.12s...", o->id, sha, o->sha);
        } else if (strcasecmp(sha, first[i]) != 0) {
            violation(inv, "message %s was published again with a different payload "
                      "(sha256 %.12s... after %.12s...)", o->id, sha, first[i]);
        }
    }
    for (int i = 0; i < c->nrows; i++)
        if (count[i] > 1)
            c->res->republished_same_id++;
    free(first);
    free(count);
}

static void fmt_time(int64_t us, char *out, size_t n)
{
    if (us == INT64_MAX) {
        snprintf(out, n, "never");
        return;
    }
    char iso[40];
    us_to_iso(us, iso, sizeof(iso));
    snprintf(out, n, "%s", iso + 11); /* the time of day is enough here */
}

/* ---- 6. no_two_live_leases ---------------------------------------------- */

/* The claims of one row in the order the database took them. */
static int cmp_claim_time(const void *a, const void *b)
{
    const struct claim_rec *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    if (c != 0)
        return c;
    return (x->claimed_us > y->claimed_us) - (x->claimed_us < y->claimed_us);
}

/* The shortest lease any relay of the scenario is configured with (the
 * runner's own knowledge: the scenario file), or 0 with no relay. */
static long long shortest_lease_us(const struct scenario *sc)
{
    long long least = 0;
    for (int p = 0; p < sc->nprocs; p++)
        if (sc->procs[p].kind == SC_RELAY && sc->procs[p].lease_ms > 0 &&
            (least == 0 || sc->procs[p].lease_ms * 1000LL < least))
            least = sc->procs[p].lease_ms * 1000LL;
    return least;
}

/* From the claim history alone: every claim of a row began after each
 * earlier claim of it had ended, by lease expiry or by a settle that
 * released it.  Times are the database's own (each transaction's now()),
 * and nothing a relay logged enters: a claim that took a row under a live
 * lease is caught whatever the relay says it found there.  The recorded
 * lease is itself held to time: a claim must lease the row for at least the
 * configured duration from its own transaction's clock, or a lease written
 * already short (a unit mistake, a clock read elsewhere) would make the
 * overlap above look like a clean hand-over. */
static void leases_from_history(struct ctx *c, struct chk_inv *inv)
{
    struct claim_rec *v = malloc(((size_t)c->nclaims + 1) * sizeof(*v));
    if (v == NULL)
        return;
    memcpy(v, c->claims, (size_t)c->nclaims * sizeof(*v));
    qsort(v, (size_t)c->nclaims, sizeof(*v), cmp_claim_time);
    const long long least = shortest_lease_us(c->in->sc);
    for (int i = 0; i < c->nclaims; i++) {
        const struct claim_rec *b = &v[i];
        inv->checked++;
        /* now() + lease_ms, both from one transaction: exact, save rounding. */
        if (least > 0 && b->until_us - b->claimed_us < least - 1000) {
            char t1[32];
            fmt_time(b->claimed_us, t1, sizeof(t1));
            violation(inv, "message %s was claimed at %s (claim %s) with a lease of %.3f ms, "
                      "shorter than the %lld ms the scenario's relays are configured with: "
                      "another relay may take the row while this one still publishes it "
                      "(claim history)", b->id, t1, b->token,
                      (b->until_us - b->claimed_us) / 1000.0, least / 1000);
            continue;
        }
        for (int j = i - 1; j >= 0 && strcmp(v[j].id, b->id) == 0; j--) {
            const struct claim_rec *a = &v[j];
            long long end = a->until_us < a->released_us ? a->until_us : a->released_us;
            if (b->claimed_us >= end)
                continue;
            char t1[32], t2[32], t3[32];
            fmt_time(b->claimed_us, t1, sizeof(t1));
            fmt_time(a->claimed_us, t2, sizeof(t2));
            fmt_time(a->until_us, t3, sizeof(t3));
            violation(inv, "message %s was claimed at %s (claim %s) while the lease of its claim "
                      "%s, taken at %s, was live until %s and never released (claim history)",
                      b->id, t1, b->token, a->token, t2, t3);
            break;
        }
    }
    free(v);
}

/* A settle by a claim that no longer held the row: the fenced mark needs
 * published_at IS NULL, so a row marked published a second time (the
 * history's 'remark') was marked by a worker whose lease another had taken,
 * or whose row another had already settled. */
static void remarks_from_history(struct ctx *c, struct chk_inv *inv)
{
    PGresult *r = q(c,
        "SELECT lower(message_id::text), coalesce(lower(lock_id::text), 'none'),"
        "       (extract(epoch FROM claimed_at) * 1000000)::bigint"
        "  FROM crashwindow_claims WHERE kind = 'remark' ORDER BY seq", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        char t[32];
        fmt_time(atoll(PQgetvalue(r, i, 2)), t, sizeof(t));
        violation(inv, "message %s, already published, was marked published again at %s "
                  "(the row's lease then was claim %s): a stale worker marked a row that was "
                  "no longer its own (claim history)", PQgetvalue(r, i, 0), t,
                  PQgetvalue(r, i, 1));
    }
    PQclear(r);
}

/* Only the claim history is evidence (claim_history.h): a run directory
 * older than it has nothing to hold the relays to, and the invariant then
 * checks nothing rather than take their word. */
static void inv_no_two_live_leases(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_NO_TWO_LIVE_LEASES];
    inv->ran = 1;
    if (!c->has_claim_history)
        return;
    leases_from_history(c, inv);
    remarks_from_history(c, inv);
}

/* ---- 7. retry_respects_backoff ------------------------------------------
 *
 * From the claim history and the broker's log alone; nothing a relay logged
 * enters.  The items examined, each counted once:
 *   - every retry the database recorded: it persisted a next_attempt_at
 *     after its own moment (a backoff is never empty: cw_backoff_delay_ms
 *     is at least a millisecond), and no claim of the row recorded after it
 *     was taken before that next_attempt_at;
 *   - every publish at the broker whose token names a committed claim: that
 *     claim was not taken inside the backoff of an earlier retry of the row
 *     (a publish under a claim taken before the retry is an earlier attempt
 *     delayed on the wire, not a new one: the broker's fence judges it);
 *   - every claim after the first of a row: its attempts exceed the previous
 *     claim's, and every last claim: the row holds at least its attempts;
 *   - every row that reached the broker: no more often than its claims.
 * An operator requeue (outbox_requeues) legitimately restarts a row: it
 * ends a backoff and resets attempts to 0.  A run without a claim history
 * has nothing to be judged by here: the invariant then checks nothing. */

/* Index of the first element of a (row, seq)-sorted array whose id is id. */
#define FIRST_OF(arr, n, idv, out)                                               \
    do {                                                                         \
        int lo_ = 0, hi_ = (n);                                                  \
        while (lo_ < hi_) {                                                      \
            int mid_ = (lo_ + hi_) / 2;                                          \
            if (strcmp((arr)[mid_].id, (idv)) < 0)                               \
                lo_ = mid_ + 1;                                                  \
            else                                                                 \
                hi_ = mid_;                                                      \
        }                                                                        \
        (out) = lo_;                                                             \
    } while (0)

/* The retry of row c_->id whose backoff claim c_ was taken inside, or NULL. */
static const struct retry_rec *claimed_in_backoff(const struct ctx *c,
                                                  const struct claim_rec *cl)
{
    int i;
    FIRST_OF(c->retries, c->nretries, cl->id, i);
    for (; i < c->nretries && strcmp(c->retries[i].id, cl->id) == 0; i++) {
        const struct retry_rec *r = &c->retries[i];
        if (r->seq < cl->seq && cl->claimed_us < r->next_us &&
            !requeued_between(c, cl->id, r->at_us, cl->claimed_us))
            return r;
    }
    return NULL;
}

static void inv_retry_respects_backoff(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_RETRY_RESPECTS_BACKOFF];
    inv->ran = 1;
    if (!c->has_claim_history)
        return;
    char t1[32], t2[32], t3[32];
    for (int i = 0; i < c->nretries; i++) {
        const struct retry_rec *r = &c->retries[i];
        inv->checked++;
        fmt_time(r->at_us, t1, sizeof(t1));
        if (r->next_us <= r->at_us) {
            if (r->next_us == LLONG_MIN)
                snprintf(t2, sizeof(t2), "none");
            else
                fmt_time(r->next_us, t2, sizeof(t2));
            violation(inv, "message %s was retried at %s (ending claim %s) without a backoff: "
                      "the row holds next_attempt_at %s, not a moment after the retry "
                      "(claim history)", r->id, t1, r->token, t2);
            continue;
        }
        int k;
        FIRST_OF(c->claims_seq, c->nclaims, r->id, k);
        for (; k < c->nclaims && strcmp(c->claims_seq[k].id, r->id) == 0; k++) {
            const struct claim_rec *cl = &c->claims_seq[k];
            if (cl->seq < r->seq || cl->claimed_us >= r->next_us ||
                requeued_between(c, r->id, r->at_us, cl->claimed_us))
                continue;
            fmt_time(cl->claimed_us, t2, sizeof(t2));
            fmt_time(r->next_us, t3, sizeof(t3));
            violation(inv, "message %s was claimed at %s (claim %s), before the next_attempt_at "
                      "%s that its retry at %s persisted (claim history)", r->id, t2,
                      cl->token, t3, t1);
            break;
        }
    }
    const cJSON *b;
    cJSON_ArrayForEach(b, c->in->broker_events) {
        if (!is_publish(b))
            continue;
        const struct claim_rec *made = find_claim(c, ev_str(b, K_MSGID), ev_str(b, K_TOKEN));
        if (made == NULL)
            continue; /* under no committed claim: publish_within_lease's business */
        inv->checked++;
        const struct retry_rec *r = claimed_in_backoff(c, made);
        if (r == NULL)
            continue;
        fmt_time(ev_ts(b), t1, sizeof(t1));
        fmt_time(made->claimed_us, t2, sizeof(t2));
        fmt_time(r->next_us, t3, sizeof(t3));
        violation(inv, "message %s reached the broker at %s under claim %s, taken at %s inside "
                  "the backoff its earlier retry persisted (next_attempt_at %s)", made->id, t1,
                  made->token, t2, t3);
    }
    /* Attempts never go backwards: successive claims of a row, in the
     * order the history recorded them, carry growing attempts, and the row
     * holds at least the last one. */
    for (int i = 0; i < c->nclaims; i++) {
        const struct claim_rec *bcl = &c->claims_seq[i];
        int first = i == 0 || strcmp(c->claims_seq[i - 1].id, bcl->id) != 0;
        int last = i + 1 == c->nclaims || strcmp(c->claims_seq[i + 1].id, bcl->id) != 0;
        if (!first) {
            const struct claim_rec *a = &c->claims_seq[i - 1];
            inv->checked++;
            if (bcl->attempts <= a->attempts &&
                !requeued_between(c, bcl->id, a->claimed_us, bcl->claimed_us))
                violation(inv, "message %s was claimed with attempts %d (claim %s) after "
                          "attempts %d (claim %s): attempts went backwards", bcl->id,
                          bcl->attempts, bcl->token, a->attempts, a->token);
        }
        const struct orow *o = last ? find_row(c, bcl->id) : NULL;
        if (o == NULL)
            continue;
        inv->checked++;
        if (o->attempts < bcl->attempts &&
            !requeued_between(c, o->id, bcl->claimed_us, INT64_MAX))
            violation(inv, "message %s holds attempts = %d although its last claim (%s) "
                      "committed attempts %d", o->id, o->attempts, bcl->token, bcl->attempts);
    }
    /* Every publish follows a committed claim, and every claim counts an
     * attempt: a row that reached the broker more often than its attempts
     * (plus those an operator requeue reset) was published without a
     * committed lease -- inside the claim's transaction, or retried behind
     * the outbox's back. */
    int *pubs = calloc((size_t)c->nrows + 1, sizeof(int));
    if (pubs == NULL)
        return;
    cJSON_ArrayForEach(b, c->in->broker_events) {
        struct orow *o = is_publish(b) ? find_row(c, ev_str(b, K_MSGID)) : NULL;
        if (o != NULL)
            pubs[o - c->rows]++;
    }
    for (int i = 0; i < c->nrows; i++) {
        if (pubs[i] == 0)
            continue;
        inv->checked++;
        long allowed = c->rows[i].attempts;
        for (int k = 0; k < c->nrequeues; k++)
            if (strcasecmp(c->requeues[k].id, c->rows[i].id) == 0)
                allowed += c->requeues[k].attempts_before;
        if (pubs[i] > allowed)
            violation(inv, "message %s reached the broker %d times but only %ld claims "
                      "were committed (attempts = %d): a publish without a committed lease",
                      c->rows[i].id, pubs[i], allowed, c->rows[i].attempts);
    }
    free(pubs);
}

/* ---- 8. dead_letter_at_limit -------------------------------------------- */

int checker_error_sanitized(const char *err, const char *payload, char *why, size_t whylen)
{
    if (err == NULL)
        return 1;
    if (strlen(err) > CW_ERROR_MAX) {
        snprintf(why, whylen, "it is %zu bytes long, more than the sanitizer writes (%d)",
                 strlen(err), CW_ERROR_MAX);
        return 0;
    }
    size_t pl = payload ? strlen(payload) : 0;
    const size_t win = 16;
    for (size_t i = 0; pl >= win && i + win <= pl; i++) {
        if (memmem(err, strlen(err), payload + i, win) != NULL) {
            /* Say where, never what: the witness must not leak it again. */
            snprintf(why, whylen, "it quotes the payload (%zu bytes from its byte %zu on)",
                     win, i);
            return 0;
        }
    }
    char again[CW_ERROR_MAX + 1];
    cw_sanitize_error(err, again, sizeof(again));
    if (strcmp(again, err) != 0) {
        /* Say where the two part and what the sanitized text says there,
         * never what err holds: the witness must not leak it again. */
        size_t at = 0;
        while (err[at] != '\0' && err[at] == again[at])
            at++;
        snprintf(why, whylen, "sanitizing it again changes it from byte %zu on (to \"%.40s\")",
                 at, again + at);
        return 0;
    }
    return 1;
}

/* The attempt limits of the scenario's relays, from its file: the
 * smallest (no dead letter may come before it) and the largest (no retry
 * may come at or past it).  The database does not say which relay made a
 * claim, and a relay's word is no evidence; relays of one scenario share a
 * limit unless it is about them differing.  0 when it runs no relay. */
static void relay_limits(const struct scenario *sc, int *lo, int *hi)
{
    *lo = *hi = 0;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_RELAY)
            continue;
        int lim = sc->procs[p].max_attempts;
        if (*lo == 0 || lim < *lo)
            *lo = lim;
        if (lim > *hi)
            *hi = lim;
    }
}

/* Dead letters come at the limit, never before it.  The row's attempts may
 * pass the limit legitimately: a relay that crashes (or loses its lease) on
 * the claim at the limit never settles it, and the next claim counts one
 * more.  What must not happen is a settled failure at or past the limit
 * that is retried instead of dead-lettered: checked on every retry the
 * claim history recorded (claim_history.h), so the claim before a dead
 * letter at limit + k did not end in a retry.  Every error the relay
 * stored, at a dead letter or at a retry, is sanitized. */
static void inv_dead_letter_at_limit(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_DEAD_LETTER_AT_LIMIT];
    int limit, highest;
    relay_limits(c->in->sc, &limit, &highest);
    PGresult *r = q(c,
        "SELECT id::text, attempts, last_error, payload::text"
        "  FROM outbox_messages WHERE dead_lettered_at IS NOT NULL ORDER BY dead_lettered_at", 0, NULL);
    if (r == NULL)
        return;
    inv->ran = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        int attempts = atoi(PQgetvalue(r, i, 1));
        if (attempts < limit)
            violation(inv, "event %s was dead-lettered after %d attempts, before the limit (%d)",
                      PQgetvalue(r, i, 0), attempts, limit);
        if (PQgetisnull(r, i, 2)) {
            violation(inv, "event %s was dead-lettered without a last_error", PQgetvalue(r, i, 0));
            continue;
        }
        char why[160];
        if (!checker_error_sanitized(PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), why, sizeof(why)))
            violation(inv, "event %s: last_error is not sanitized: %s", PQgetvalue(r, i, 0), why);
    }
    PQclear(r);
    /* A requeued dead letter was dead at the limit too, and its recorded
     * error was sanitized then. */
    r = q(c,
        "SELECT q.message_id::text, q.attempts_before, q.last_error_before, o.payload::text"
        "  FROM outbox_requeues q LEFT JOIN outbox_messages o ON o.id = q.message_id"
        " ORDER BY q.id", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        int attempts = atoi(PQgetvalue(r, i, 1));
        if (attempts < limit)
            violation(inv, "event %s was requeued from a dead letter with %d attempts, "
                      "before the limit (%d)", PQgetvalue(r, i, 0), attempts, limit);
        char why[160];
        if (!PQgetisnull(r, i, 2) &&
            !checker_error_sanitized(PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), why, sizeof(why)))
            violation(inv, "event %s: its dead-letter error was not sanitized: %s",
                      PQgetvalue(r, i, 0), why);
    }
    PQclear(r);
    /* The error each retry stored, which the row keeps only until the next
     * settle: sanitized too, from the first refusal on, not only at the
     * limit. */
    if (c->has_claim_history) {
        r = q(c,
            "SELECT h.message_id::text, h.attempts, h.last_error, o.payload::text"
            "  FROM crashwindow_claims h LEFT JOIN outbox_messages o ON o.id = h.message_id"
            " WHERE h.kind = 'release' AND h.release_kind = 'retry'"
            "   AND h.last_error IS NOT NULL ORDER BY h.seq", 0, NULL);
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++) {
            inv->checked++;
            char why[160];
            if (!checker_error_sanitized(PQgetvalue(r, i, 2),
                                         PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
                                         why, sizeof(why)))
                violation(inv, "event %s: the error its retry at attempt %s stored is not "
                          "sanitized: %s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), why);
        }
        PQclear(r);
    }
    /* Every claim at or past the limit ends in a dead letter, a publish, or
     * nothing (crash, lease lost) -- never in a retry. */
    for (int i = 0; i < c->nretries && highest > 0; i++) {
        const struct retry_rec *t = &c->retries[i];
        inv->checked++;
        if (t->attempts >= highest)
            violation(inv, "message %s was retried (claim %s) at attempt %d although the "
                      "relays' attempt limit is %d: it should have been dead-lettered",
                      t->id, t->token, t->attempts, highest);
    }
}

/* ---- 9. versions_in_order ----------------------------------------------- */

static void inv_versions_in_order(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_VERSIONS_IN_ORDER];
    inv->ran = 1;
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        PGresult *r = qf(c, 1, p,
            "SELECT e.payment_id::text, e.aggregate_version, e.tbl || ' row ' || e.id"
            "  FROM %s e ORDER BY e.payment_id, e.id", effects_sql());
        if (r == NULL)
            return;
        const char *agg = NULL;
        long long last = 0;
        int broken = 0;
        for (int i = 0; i < PQntuples(r); i++) {
            const char *a = PQgetvalue(r, i, 0);
            long long v = atoll(PQgetvalue(r, i, 1));
            if (agg == NULL || strcmp(a, agg) != 0) {
                agg = a;
                last = 0;
                broken = 0;
                inv->checked++;
            }
            if (broken || v == last)
                continue; /* a repeat is effect_once's business */
            if (v != last + 1) {
                if (v < last)
                    violation(inv, "%s applied version %lld of payment %s after version %lld (%s)",
                              c->consumers[k], v, a, last, PQgetvalue(r, i, 2));
                else
                    violation(inv, "%s applied version %lld of payment %s without version %lld "
                              "before it (%s): a gap was applied", c->consumers[k], v, a,
                              last + 1, PQgetvalue(r, i, 2));
                broken = 1;
                continue;
            }
            last = v;
        }
        PQclear(r);
    }
}

/* ---- 10. one_payment_per_key --------------------------------------------
 *
 * An idempotency key belongs to a client: (client, key) is the unit, as in
 * the API and the idempotency_records primary key.  Three views, each able
 * to fail:
 *   - the client's: the 2xx answers to one (client, key) name one payment
 *     between them, and every settled answer is the same bytes;
 *   - the record's: the (client, key) record names the payment the client
 *     was given;
 *   - the payments': every payment is named by some record.  The record is
 *     unique per (client, key), so a second payment created for one key is
 *     named by none: this is where the database shows it.  (Counting the
 *     records' payments per (client, key) could never find two: that is
 *     their primary key.) */

static int same_owner(const struct http_rec *a, const struct http_rec *b)
{
    return a->creation && b->creation && strcmp(a->client, b->client) == 0 &&
           strcmp(a->key, b->key) == 0;
}

/* An earlier request for h's (client, key) that got no answer: the server
 * may still have been working on it while h was sent. */
static int earlier_unanswered(const struct chk_input *in, int idx)
{
    for (int j = 0; j < idx; j++)
        if (same_owner(&in->http[j], &in->http[idx]) && in->http[j].status == 0)
            return 1;
    return 0;
}

/* A 5xx answer to a creation says "nothing was stored" -- except the one
 * answer that says the outcome is unknown.  A record of its (client, key)
 * whose transaction began while that request was in flight (created_at is
 * the transaction's start), with no earlier request of the key left
 * unanswered, was stored by that very request: a payment the client was
 * told does not exist.  A record from before the request (an earlier
 * success) or after its answer (a retry) is no such thing. */
static void failed_answers_stored_nothing(struct ctx *c, struct chk_inv *inv)
{
    const struct chk_input *in = c->in;
    for (int i = 0; i < in->nhttp; i++) {
        const struct http_rec *h = &in->http[i];
        if (!h->creation || h->key[0] == '\0' || h->status < 500 ||
            strcmp(h->problem, "commit-outcome-unknown") == 0)
            continue;
        inv->checked++;
        if (earlier_unanswered(in, i))
            continue;
        const char *p[2] = { h->client, h->key };
        PGresult *r = q(c,
            "SELECT (extract(epoch FROM created_at) * 1000000)::bigint, payment_id::text"
            "  FROM idempotency_records WHERE client_id = $1 AND idempotency_key = $2", 2, p);
        if (r != NULL && PQntuples(r) == 1 && atoll(PQgetvalue(r, 0, 0)) >= h->t0_us &&
            atoll(PQgetvalue(r, 0, 0)) <= h->t1_us) {
            char t1[32], t2[32];
            fmt_time(atoll(PQgetvalue(r, 0, 0)), t1, sizeof(t1));
            fmt_time(h->t1_us, t2, sizeof(t2));
            violation(inv, "key %s of client %s was answered HTTP %d (nothing stored) at %s, "
                      "yet its record, naming payment %s, was created at %s by that request",
                      h->key, h->client, h->status, t2, PQgetvalue(r, 0, 1), t1);
        }
        PQclear(r);
    }
}

static void inv_one_payment_per_key(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_ONE_PAYMENT_PER_KEY];
    const struct chk_input *in = c->in;
    inv->ran = 1;
    for (int i = 0; i < in->nhttp; i++) {
        const struct http_rec *a = &in->http[i];
        if (!a->creation || a->key[0] == '\0')
            continue;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = !same_owner(&in->http[j], a);
        if (!first)
            continue;
        inv->checked++;
        /* The payments its 2xx answers named. */
        const char *ids[8];
        int nids = 0, more = 0;
        for (int j = i; j < in->nhttp; j++) {
            const struct http_rec *b = &in->http[j];
            if (!same_owner(a, b) || b->status < 200 || b->status > 299 || !b->payment_id[0])
                continue;
            int seen = 0;
            for (int k = 0; k < nids; k++)
                seen |= strcmp(ids[k], b->payment_id) == 0;
            if (seen)
                continue;
            if (nids < 8)
                ids[nids++] = b->payment_id;
            else
                more++;
        }
        if (nids > 1)
            violation(inv, "key %s of client %s created %d payments: %s, %s%s (each was "
                      "answered with 2xx)", a->key, a->client, nids + more, ids[0], ids[1],
                      nids + more > 2 ? ", ..." : "");
        /* The reference answer: the first settled one (2xx, or 4xx but 409,
         * which only says "in flight, retry"). */
        const struct http_rec *ref = NULL;
        for (int j = i; j < in->nhttp; j++) {
            const struct http_rec *b = &in->http[j];
            if (!same_owner(a, b))
                continue;
            int settled = (b->status >= 200 && b->status < 300) ||
                          (b->status >= 400 && b->status < 500 && b->status != 409);
            if (!settled)
                continue;
            if (ref == NULL) {
                ref = b;
                continue;
            }
            /* A different body under the same key must be refused (422),
             * and is not a replay; two payments are reported above. */
            if (b->status == 422 || ref->status == 422 ||
                (b->payment_id[0] && ref->payment_id[0] &&
                 strcmp(b->payment_id, ref->payment_id) != 0))
                continue;
            if (b->status != ref->status || strcmp(b->body_sha256, ref->body_sha256) != 0)
                violation(inv, "key %s of client %s: a retry got HTTP %d %s, the first "
                          "answer was HTTP %d %s", a->key, a->client, b->status, b->body_shown,
                          ref->status, ref->body_shown);
        }
        /* The database's view: the (client, key) record names each payment
         * the client was given. */
        for (int k = 0; k < nids; k++) {
            const char *p[3] = { a->client, a->key, ids[k] };
            long n = q_long(c,
                "SELECT count(*) FROM idempotency_records"
                " WHERE client_id = $1 AND idempotency_key = $2 AND payment_id::text = $3",
                3, p);
            if (n != 1)
                violation(inv, "key %s of client %s: its idempotency record does not name "
                          "payment %s, which the client was given", a->key, a->client, ids[k]);
        }
    }
    failed_answers_stored_nothing(c, inv);
    PGresult *r = q(c,
        "SELECT p.id::text, p.client_id FROM payments p"
        " WHERE NOT EXISTS (SELECT 1 FROM idempotency_records r WHERE r.payment_id = p.id)", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++)
        violation(inv, "payment %s of client %s is named by no idempotency record: a second "
                  "payment for a key whose record names another, or one created outside "
                  "the keyed path", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    inv->checked += q_long(c, "SELECT count(*) FROM payments", 0, NULL);
}

/* ---- counts and classification ------------------------------------------ */

static void counts(struct ctx *c)
{
    struct chk_result *res = c->res;
    const struct scenario *sc = c->in->sc;
    res->payments = q_long(c, "SELECT count(*) FROM payments", 0, NULL);
    res->outbox_rows = c->nrows;
    for (int i = 0; i < c->nrows; i++) {
        res->published += c->rows[i].published;
        res->dead_lettered += c->rows[i].dead;
        if (c->rows[i].attempts > res->max_attempts)
            res->max_attempts = c->rows[i].attempts;
    }
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        const char *n = ev_name(ev);
        if (strcmp(n, "publish") == 0) {
            if (publish_stored(ev))
                res->publishes++;
            else
                res->publishes_refused++;
        } else if (strcmp(n, "deliver") == 0) {
            res->deliveries++;
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "redelivered")))
                res->redeliveries++;
        }
    }
    long dup_events = 0, gap_events = 0;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_CONSUMER || c->in->proc_events[p] == NULL)
            continue;
        cJSON_ArrayForEach(ev, c->in->proc_events[p]) {
            const char *n = ev_name(ev);
            if (strcmp(n, "inbox_dup") == 0)
                dup_events++;
            if (strcmp(n, "gap") == 0)
                gap_events++;
        }
    }
    long dup_rows = q_long(c, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'duplicate'",
                           0, NULL);
    res->duplicates_absorbed = dup_events > dup_rows ? dup_events : dup_rows;
    long gap_rows = q_long(c, "SELECT count(*) FROM consumer_anomalies WHERE kind IN ('gap', 'gap_parked')",
                           0, NULL);
    res->gaps_detected = gap_events > gap_rows ? gap_events : gap_rows;
    pthread_once(&sqlset.once, sqlset_build);
    res->effects = q_long(c, sqlset.effects_total, 0, NULL);
    res->requeues = q_long(c, "SELECT count(*) FROM outbox_requeues", 0, NULL);
    res->removed = q_long(c, "SELECT count(*) FROM outbox_removed", 0, NULL);
    res->inbox_removed = q_long(c, "SELECT count(*) FROM inbox_removed", 0, NULL);
}

static void classify(struct ctx *c)
{
    struct chk_result *res = c->res;
    const struct chk_input *in = c->in;
    /* Per outbox event, over the consumer groups: the most effects one
     * group applied, whether some group neither applied nor parked it
     * (lost), and whether some group parked it instead of applying it. */
    int *maxv = calloc((size_t)c->nrows + 1, sizeof(int));
    char *lost = calloc((size_t)c->nrows + 1, 1);
    char *parked = calloc((size_t)c->nrows + 1, 1);
    char *recovered = calloc((size_t)c->nrows + 1, 1);
    int *got = calloc((size_t)c->nrows + 1, sizeof(int));
    char *park_here = calloc((size_t)c->nrows + 1, 1);
    if (maxv == NULL || lost == NULL || parked == NULL || recovered == NULL || got == NULL ||
        park_here == NULL)
        goto out;
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        memset(got, 0, sizeof(int) * ((size_t)c->nrows + 1));
        memset(park_here, 0, (size_t)c->nrows + 1);
        PGresult *r = qf(c, 1, p, "SELECT e.message_id::text, count(*) FROM %s e"
                                  " GROUP BY e.message_id", effects_sql());
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            struct orow *o = find_row(c, PQgetvalue(r, i, 0));
            if (o == NULL)
                res->unexpected++;
            else
                got[o - c->rows] = atoi(PQgetvalue(r, i, 1));
        }
        PQclear(r);
        r = q(c, "SELECT o.id::text FROM " OUTBOX_ALL " o WHERE " PARKED_BY_GROUP("o.id"),
              1, p);
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            struct orow *o = find_row(c, PQgetvalue(r, i, 0));
            if (o != NULL)
                park_here[o - c->rows] = 1;
        }
        PQclear(r);
        for (int i = 0; i < c->nrows; i++) {
            if (got[i] > maxv[i])
                maxv[i] = got[i];
            if (got[i] == 0 && park_here[i])
                parked[i] = 1;
            else if (got[i] == 0)
                lost[i] = 1;
        }
    }
    /* Recovered: the creation event of a payment whose key saw an error. */
    for (int i = 0; i < in->nhttp; i++) {
        const struct http_rec *h = &in->http[i];
        if (!h->creation || h->key[0] == '\0' || (h->status != 0 && h->status < 500))
            continue;
        const char *p[2] = { h->client, h->key };
        PGresult *r = q(c,
            "SELECT o.id::text FROM idempotency_records r"
            "  JOIN " OUTBOX_ALL " o ON o.aggregate_id = r.payment_id"
            "   AND o.event_type = 'PaymentCreated'"
            " WHERE r.client_id = $1 AND r.idempotency_key = $2", 2, p);
        for (int j = 0; r != NULL && j < PQntuples(r); j++) {
            struct orow *o = find_row(c, PQgetvalue(r, j, 0));
            if (o != NULL)
                recovered[o - c->rows] = 1;
        }
        PQclear(r);
    }
    /* Each event ends in exactly one class.  A relay dead letter, and a
     * version parked behind one (its gap cannot close before an operator
     * acts) or held back behind one by per-aggregate relays, is
     * dead-lettered: it waits where an operator sees it. */
    int held = scenario_relays_hold_order(in->sc);
    for (int i = 0; i < c->nrows; i++) {
        int behind = (parked[i] || (held && !c->rows[i].published)) &&
                     behind_dead_letter(c, &c->rows[i]);
        int dead = c->rows[i].dead || behind;
        if (maxv[i] > 1)
            res->duplicated++;
        else if (dead)
            res->dead_lettered_class++;
        else if (lost[i])
            res->lost++;
        else if (parked[i])
            res->parked++;
        else if (recovered[i])
            res->recovered++;
        else
            res->ok++;
    }
out:
    free(maxv);
    free(lost);
    free(parked);
    free(recovered);
    free(got);
    free(park_here);
}

/* ---- 11. publish_within_lease -------------------------------------------
 *
 * No publish may reach the broker after the lease that covered it ended: by
 * then the row may be another worker's.  The evidence comes from outside the
 * relay: the broker log says when each publish was stored (stored_us, the
 * instant the broker checked) and under which claim token it arrived; the
 * claim history (claim_history.h) says what lease the database committed for
 * that token on that row.  A stored publish whose token no committed claim
 * of the row holds was made under no lease at all, and so was one stored
 * before the claim's transaction committed (the history's commit time,
 * when the server keeps one): until then the lease existed for no one else,
 * and a rollback would have left the message published under no claim.  A
 * publish that arrived without a token (from a broker that cannot log one)
 * is not examined. */

static void inv_publish_within_lease(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_PUBLISH_WITHIN_LEASE];
    inv->ran = 1;
    if (!c->has_claim_history)
        return; /* a database the runner did not prepare: nothing to hold it to */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!is_publish(ev) || !publish_stored(ev))
            continue;
        const char *id = ev_str(ev, K_MSGID);
        const char *token = ev_str(ev, K_TOKEN);
        double at;
        /* The fake broker writes stored_us, the instant it checked the
         * lease; the RabbitMQ bridge cannot know it and writes none: its
         * line's own ts_us, when the trace reached it, is an upper bound
         * (rabbitbridge_main.c).  Two clocks, not two names of one. */
        if (token == NULL)
            continue;
        if (!ev_num(ev, "stored_us", &at))
            at = (double)ev_ts(ev);
        inv->checked++;
        const struct claim_rec *hit = find_claim(c, id, token);
        const char *client = ev_str(ev, "client");
        if (hit == NULL)
            violation(inv, "message %s was stored (from %s) under claim token %s, which no "
                      "committed claim of that row holds: a publish under no lease", id,
                      client ? client : "an unnamed client", token);
        else if ((long long)at < hit->committed_us)
            violation(inv, "message %s reached the broker (from %s) %.1f ms before its claim %s "
                      "committed: published under a lease no other worker could see yet, "
                      "which a rollback of the claim would have undone while the message "
                      "stayed published", id, client ? client : "an unnamed client",
                      (hit->committed_us - (long long)at) / 1000.0, token);
        else if ((long long)at > hit->until_us)
            violation(inv, "message %s reached the broker (from %s) %.1f ms after the lease of "
                      "its claim %s ended, when the row may already have been another "
                      "worker's", id, client ? client : "an unnamed client",
                      ((long long)at - hit->until_us) / 1000.0, token);
    }
}

/* ---- 14. ack_after_commit -----------------------------------------------
 *
 * The article's rule for the consumer: ACK only after COMMIT.  An ACK sent
 * first makes the broker forget a message the database may never keep: a
 * crash between the two loses it, and nothing_lost sees that loss only when
 * the crash comes and no later republish of the same id hides it.  The
 * order itself is checked, on every ACK, from outside the consumer: the
 * broker's log says when each ACK of a group arrived (the line's ts_us,
 * written after the frame was read), the consumer records of the claim
 * history say when that group's first row about the message committed (the
 * transaction's commit timestamp).  An ACK that arrived before that commit
 * was sent before it.  An ACK of a message the group has no committed
 * record of is not examined (nothing_lost judges what became of it); a
 * broker that logs no ACKs (RabbitMQ's trace has none) leaves the
 * invariant vacuous, and so does a database that may lose acknowledged
 * commits (an asynchronous standby promoted): there the record of the
 * commit an ACK followed can be gone, and a later one stand in its place. */

static void inv_ack_after_commit(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_ACK_AFTER_COMMIT];
    inv->ran = 1;
    if (c->ncrecs == 0 || (c->in->sc->standby && !c->in->sc->synchronous))
        return;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (strcmp(ev_name(ev), "ack") != 0)
            continue;
        const char *group = ev_str(ev, "group"), *id = ev_str(ev, K_MSGID);
        if (group == NULL || id == NULL)
            continue;
        struct consumer_rec key;
        snprintf(key.group, sizeof(key.group), "%s", group);
        copy_lower(key.id, sizeof(key.id), id);
        const struct consumer_rec *rec = bsearch(&key, c->crecs, (size_t)c->ncrecs,
                                                 sizeof(key), cmp_consumer_rec);
        if (rec == NULL)
            continue;
        inv->checked++;
        long long at = (long long)ev_ts(ev);
        if (at < rec->committed_us) {
            const char *who = ev_str(ev, "consumer");
            violation(inv, "the broker received %s's ACK of message %s (from %s) %.1f ms before "
                      "the group's first record of it committed: an ACK sent before the "
                      "COMMIT, which a crash between the two turns into a lost event",
                      group, key.id, who ? who : "an unnamed consumer",
                      (rec->committed_us - at) / 1000.0);
        }
    }
}

/* ---- 12. idle_transactions_bounded --------------------------------------
 *
 * A client that vanishes inside a transaction (its host partitioned away,
 * its socket given up by its kernel, no FIN ever sent) leaves a session on
 * the server holding that transaction's locks: an inbox row, an
 * Idempotency-Key, an outbox lease.  The product bounds it on the server's
 * side (idle_in_transaction_session_timeout, the process's database
 * deadline: pgx.c).  The evidence is the runner's: its sampler's view of
 * pg_stat_activity (the server's own clock), never the process's word.  A
 * session of a scenario process seen idle inside one transaction longer than
 * that bound plus a slack, in two samples at least SESSION_PERSIST_US apart
 * (a server frozen by the scenario runs its timers late, once), broke it. */

#define SESSION_SLACK_MS 1000
#define SESSION_PERSIST_US 500000

struct idle_episode {
    char app[SC_NAME_MAX];
    long pid;
    int64_t began_us;       /* sample time minus idle time */
    long max_idle_ms;
    int64_t first_over_us;  /* first sample past the bound, or 0 */
    int64_t last_over_us;
    int bound_ms;
};

static int proc_bound_ms(const struct scenario *sc, const char *app)
{
    for (int p = 0; p < sc->nprocs; p++)
        if (strcmp(sc->procs[p].name, app) == 0)
            return sc->procs[p].db_deadline_ms > 0 ? sc->procs[p].db_deadline_ms
                                                   : PGX_DEFAULT_DEADLINE_MS;
    return -1;
}

static void inv_idle_transactions_bounded(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_IDLE_TRANSACTIONS_BOUNDED];
    inv->ran = 1;
    struct idle_episode *eps = NULL;
    int n = 0, cap = 0;
    const cJSON *sample;
    cJSON_ArrayForEach(sample, c->in->samples) {
        const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(sample, "idle_in_transaction");
        int64_t ts = ev_ts(sample);
        const cJSON *se;
        cJSON_ArrayForEach(se, sessions) {
            const char *app = ev_str(se, "app");
            double pid, idle;
            if (app == NULL || !ev_num(se, "pid", &pid) || !ev_num(se, "idle_ms", &idle))
                continue;
            int bound = proc_bound_ms(c->in->sc, app);
            if (bound < 0)
                continue; /* the runner's own sessions: not the system under test */
            int64_t began = ts - (int64_t)idle * 1000;
            struct idle_episode *e = NULL;
            /* One episode: the same backend, idle since the same moment (the
             * two clocks agree within a sample's jitter). */
            for (int i = 0; i < n && e == NULL; i++)
                if (eps[i].pid == (long)pid && llabs(eps[i].began_us - began) < 200000)
                    e = &eps[i];
            if (e == NULL) {
                if (n == cap) {
                    int ncap = cap ? cap * 2 : 16;
                    struct idle_episode *g = realloc(eps, (size_t)ncap * sizeof(*g));
                    if (g == NULL)
                        break;
                    eps = g;
                    cap = ncap;
                }
                e = &eps[n++];
                memset(e, 0, sizeof(*e));
                snprintf(e->app, sizeof(e->app), "%s", app);
                e->pid = (long)pid;
                e->began_us = began;
                e->bound_ms = bound;
                inv->checked++;
            }
            if ((long)idle > e->max_idle_ms)
                e->max_idle_ms = (long)idle;
            if ((long)idle > e->bound_ms + SESSION_SLACK_MS) {
                if (e->first_over_us == 0)
                    e->first_over_us = ts;
                e->last_over_us = ts;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const struct idle_episode *e = &eps[i];
        if (e->first_over_us == 0 || e->last_over_us - e->first_over_us < SESSION_PERSIST_US)
            continue;
        char t[32];
        fmt_time(e->began_us, t, sizeof(t));
        violation(inv, "a session of %s (server pid %ld) sat idle inside an open transaction "
                  "from %s for at least %.1f s, past its bound of %.1f s (+%.1f s slack): "
                  "whatever it had locked stayed locked for a client that was gone",
                  e->app, e->pid, t, e->max_idle_ms / 1000.0, e->bound_ms / 1000.0,
                  SESSION_SLACK_MS / 1000.0);
    }
    free(eps);
}

/* ---- 13. relay_recovers_after_heal --------------------------------------
 *
 * A fault may delay delivery, never stop a relay for good.  The heal records
 * the instant every fault is off in the claim history (a 'faults_off'
 * record, the database's clock; runner_heal.c), and from then on a broker
 * connection that broke must be replaced, not reused: a healthy relay fails
 * at most the batch that found its connection dead, then publishes the next
 * on a new one.  So no relay worker may have two claims in a row, both made
 * after that instant, that each ended in a failed publish (a retry, or a
 * dead letter at the attempt limit) with no claim of its between whose
 * publishes were confirmed and marked.  A claim that ended neither way (its
 * lease ran out, an exhausted row's dead letter, a mark lost with the
 * database) neither breaks nor extends the run.  Without the dead letter
 * at the limit counted, a relay whose rows reach the limit inside the heal
 * would pass for one that recovered.  The database side likewise: a relay
 * still running when the heal ended must have had a session in the
 * database by then (the runner's 'session' records, runner_heal.c): one
 * that kept a connection it lost never claims again, however well the
 * other relays drain the outbox.  The evidence is the database's own
 * record of each claim and release and its own list of sessions, never
 * the relay's log. */

static void inv_relay_recovers_after_heal(struct ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_RELAY_RECOVERS_AFTER_HEAL];
    inv->ran = 1;
    if (!c->has_claim_history)
        return;
    int lo, hi;
    relay_limits(c->in->sc, &lo, &hi);
    char limit[16];
    snprintf(limit, sizeof(limit), "%d", lo);
    const char *p[1] = { limit };
    PGresult *r = q(c,
        "WITH t AS (SELECT max(claimed_at) AS at FROM crashwindow_claims"
        "           WHERE kind = 'faults_off'),"
        "     tok AS ("
        "  SELECT c.lock_id, c.locked_by, min(c.seq) AS seq, min(c.claimed_at) AS claimed_at,"
        "         coalesce(bool_or(r.release_kind = 'mark'), false) AS marked,"
        "         coalesce(bool_or(r.release_kind = 'retry'"
        "                          OR (r.release_kind = 'dead_letter'"
        "                              AND r.attempts <= $1::int)), false) AS failed"
        "    FROM crashwindow_claims c CROSS JOIN t"
        "    LEFT JOIN crashwindow_claims r ON r.kind = 'release'"
        "         AND r.lock_id = c.lock_id AND r.message_id = c.message_id"
        "   WHERE c.kind = 'claim' AND c.lock_id IS NOT NULL AND t.at IS NOT NULL"
        "     AND c.claimed_at >= t.at"
        "   GROUP BY c.lock_id, c.locked_by)"
        " SELECT lower(coalesce(locked_by::text, '')), lower(lock_id::text), marked, failed,"
        "        (extract(epoch FROM claimed_at) * 1000000)::bigint,"
        "        (SELECT (extract(epoch FROM at) * 1000000)::bigint FROM t)"
        "   FROM tok ORDER BY 1, seq", 1, p);
    if (r == NULL)
        return;
    const char *worker = NULL, *first = NULL;
    int run = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        const char *w = PQgetvalue(r, i, 0);
        if (worker == NULL || strcmp(worker, w) != 0) {
            worker = w;
            run = 0;
        }
        int marked = PQgetvalue(r, i, 2)[0] == 't', failed = PQgetvalue(r, i, 3)[0] == 't';
        if (!failed) {
            if (marked)
                run = 0;
            continue;
        }
        if (run++ == 0) {
            first = PQgetvalue(r, i, 1);
            continue;
        }
        if (run != 2)
            continue; /* one witness per run of failures */
        char off[32], at[32];
        fmt_time(atoll(PQgetvalue(r, i, 5)), off, sizeof(off));
        fmt_time(atoll(PQgetvalue(r, i, 4)), at, sizeof(at));
        violation(inv, "relay worker %s failed the publishes of two claims in a row after every "
                  "fault was off (at %s): claim %s, then claim %s at %s, with nothing of its "
                  "published between them: it kept a broken broker connection instead of "
                  "opening a new one", w, off, first, PQgetvalue(r, i, 1), at);
    }
    PQclear(r);
    r = q(c,
        "SELECT coalesce(proc, ''), coalesce(connected, false),"
        "       (extract(epoch FROM claimed_at) * 1000000)::bigint"
        "  FROM crashwindow_claims WHERE kind = 'session' ORDER BY seq", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        if (PQgetvalue(r, i, 1)[0] == 't')
            continue;
        char at[32];
        fmt_time(atoll(PQgetvalue(r, i, 2)), at, sizeof(at));
        violation(inv, "%s was still running when the heal ended (at %s) but the database "
                  "listed no session of it: it kept a database connection it had lost instead "
                  "of opening a new one, and will never claim again", PQgetvalue(r, i, 0), at);
    }
    PQclear(r);
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
static int input_lacks(const struct chk_input *in, struct chk_result *res)
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

/* ---- driver ------------------------------------------------------------- */

int checker_run(const struct chk_input *in, struct chk_result *res)
{
    struct ctx c;
    memset(res, 0, sizeof(*res));
    memset(&c, 0, sizeof(c));
    c.in = in;
    c.res = res;
    for (int i = 0; i < INV_COUNT; i++)
        res->inv[i].witnesses = cJSON_CreateArray();
    for (int p = 0; p < in->sc->nprocs; p++) {
        if (in->sc->procs[p].kind != SC_CONSUMER)
            continue;
        int dup = 0;
        for (int k = 0; k < c.nconsumers; k++)
            dup |= strcmp(c.consumers[k], in->sc->procs[p].consumer_name) == 0;
        if (!dup)
            c.consumers[c.nconsumers++] = in->sc->procs[p].consumer_name;
    }
    if (input_lacks(in, res) < 0) {
        for (int i = 0; i < INV_COUNT; i++)
            res->inv[i].pass = 0;
        return -1;
    }
    if (load_outbox(&c) == 0 && load_requeues(&c) == 0 && load_claim_history(&c) == 0 &&
        load_consumer_records(&c) == 0) {
        inv_payment_one_creation_event(&c);
        inv_nothing_lost(&c);
        inv_effect_once(&c);
        inv_broker_log_matches_outbox(&c);
        inv_republish_same_payload(&c);
        inv_no_two_live_leases(&c);
        inv_retry_respects_backoff(&c);
        inv_dead_letter_at_limit(&c);
        inv_versions_in_order(&c);
        inv_one_payment_per_key(&c);
        inv_publish_within_lease(&c);
        inv_idle_transactions_bounded(&c);
        inv_relay_recovers_after_heal(&c);
        inv_ack_after_commit(&c);
        counts(&c);
        classify(&c);
    }
    free(c.rows);
    free(c.requeues);
    free(c.claims);
    free(c.claims_seq);
    free(c.retries);
    free(c.crecs);
    for (int i = 0; i < INV_COUNT; i++)
        res->inv[i].pass = res->inv[i].ran && res->inv[i].violations == 0 && !c.db_failed;
    return c.db_failed ? -1 : 0;
}

void checker_free(struct chk_result *res)
{
    for (int i = 0; i < INV_COUNT; i++) {
        cJSON_Delete(res->inv[i].witnesses);
        res->inv[i].witnesses = NULL;
    }
}

static int listed(const struct scenario *sc, int inv)
{
    for (int i = 0; i < sc->ninvariants; i++)
        if ((int)sc->invariants[i] == inv)
            return 1;
    return 0;
}

int checker_inv_vacuous(const struct chk_result *res, int inv)
{
    const struct chk_inv *x = &res->inv[inv];
    return x->ran && x->checked == 0 && x->violations == 0;
}

int checker_inv_pass(const struct chk_result *res, const struct scenario *sc, int inv)
{
    const struct chk_inv *x = &res->inv[inv];
    if (!x->pass)
        return 0;
    return !(listed(sc, inv) && x->checked == 0);
}

cJSON *checker_invariants_json(const struct chk_result *res, const struct scenario *sc)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < INV_COUNT; i++) {
        const struct chk_inv *x = &res->inv[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", sc_invariant_name((enum sc_invariant)i));
        cJSON_AddStringToObject(o, "verdict", checker_inv_pass(res, sc, i) ? "pass" : "fail");
        cJSON_AddNumberToObject(o, "checked", (double)x->checked);
        cJSON_AddNumberToObject(o, "violations", (double)x->violations);
        cJSON_AddBoolToObject(o, "listed", listed(sc, i));
        cJSON_AddBoolToObject(o, "vacuous", checker_inv_vacuous(res, i));
        cJSON *w = x->witnesses ? cJSON_Duplicate(x->witnesses, 1) : cJSON_CreateArray();
        if (listed(sc, i) && checker_inv_vacuous(res, i))
            cJSON_AddItemToArray(w, cJSON_CreateString(
                "vacuous: the scenario lists this invariant but nothing was there to check"));
        if (!x->ran)
            cJSON_AddItemToArray(w, cJSON_CreateString(
                res->error[0] ? res->error : "not run: the checker could not read the database"));
        cJSON_AddItemToObject(o, "witnesses", w);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

cJSON *checker_counts_json(const struct chk_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "payments", (double)res->payments);
    cJSON_AddNumberToObject(o, "outbox_rows", (double)res->outbox_rows);
    cJSON_AddNumberToObject(o, "published", (double)res->published);
    cJSON_AddNumberToObject(o, "dead_lettered", (double)res->dead_lettered);
    cJSON_AddNumberToObject(o, "publishes", (double)res->publishes);
    cJSON_AddNumberToObject(o, "deliveries", (double)res->deliveries);
    cJSON_AddNumberToObject(o, "redeliveries", (double)res->redeliveries);
    cJSON_AddNumberToObject(o, "duplicates_absorbed", (double)res->duplicates_absorbed);
    cJSON_AddNumberToObject(o, "effects", (double)res->effects);
    cJSON_AddNumberToObject(o, "republished_same_id", (double)res->republished_same_id);
    cJSON_AddNumberToObject(o, "publishes_refused", (double)res->publishes_refused);
    cJSON_AddNumberToObject(o, "requeues", (double)res->requeues);
    cJSON_AddNumberToObject(o, "removed", (double)res->removed);
    cJSON_AddNumberToObject(o, "inbox_removed", (double)res->inbox_removed);
    cJSON_AddNumberToObject(o, "gaps_detected", (double)res->gaps_detected);
    cJSON_AddNumberToObject(o, "max_attempts", (double)res->max_attempts);
    return o;
}

cJSON *checker_class_json(const struct chk_result *res)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ok", (double)res->ok);
    cJSON_AddNumberToObject(o, "lost", (double)res->lost);
    cJSON_AddNumberToObject(o, "duplicated", (double)res->duplicated);
    cJSON_AddNumberToObject(o, "unexpected", (double)res->unexpected);
    cJSON_AddNumberToObject(o, "recovered", (double)res->recovered);
    cJSON_AddNumberToObject(o, "dead_lettered", (double)res->dead_lettered_class);
    cJSON_AddNumberToObject(o, "parked_unresolved", (double)res->parked);
    return o;
}

/* ---- expectations ------------------------------------------------------- */

static int metric(const struct chk_result *r, const char *name, long *v)
{
    struct { const char *n; long v; } m[] = {
        { "payments", r->payments }, { "outbox_rows", r->outbox_rows },
        { "published", r->published }, { "dead_lettered", r->dead_lettered },
        { "publishes", r->publishes }, { "deliveries", r->deliveries },
        { "redeliveries", r->redeliveries }, { "duplicates_absorbed", r->duplicates_absorbed },
        { "effects", r->effects }, { "ok", r->ok }, { "lost", r->lost },
        { "duplicated", r->duplicated }, { "unexpected", r->unexpected },
        { "recovered", r->recovered }, { "parked", r->parked },
        { "republished_same_id", r->republished_same_id },
        { "publishes_refused", r->publishes_refused }, { "requeues", r->requeues },
        { "removed", r->removed }, { "inbox_removed", r->inbox_removed },
        { "gaps_detected", r->gaps_detected }, { "max_attempts", r->max_attempts },
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        if (strcmp(m[i].n, name) == 0) {
            *v = m[i].v;
            return 1;
        }
    }
    return 0;
}

static int event_matches(const cJSON *ev, const char *name, const char *wk, const char *wv)
{
    return strcmp(ev_name(ev), name) == 0 && (wk == NULL || ev_field_equals(ev, wk, wv));
}

static long count_events(const cJSON *arr, const char *name, const char *wk, const char *wv)
{
    long n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, arr) {
        if (event_matches(ev, name, wk, wv))
            n++;
    }
    return n;
}

int checker_expect(const struct chk_input *in, const struct chk_result *res,
                   const struct sc_expect *x, char *detail, size_t detaillen)
{
    long v = 0;
    char what[160];
    snprintf(what, sizeof(what), "%s", x->check);
    if (metric(res, x->check, &v)) {
        /* a counter */
    } else if (strcmp(x->check, "events") == 0 || strcmp(x->check, "faults_fired") == 0) {
        const char *name = strcmp(x->check, "events") == 0 ? x->event : "fault_hit";
        const char *wk = x->where_key, *wv = x->where_value;
        if (x->point != NULL) {
            wk = "point";
            wv = x->point;
        }
        if (x->proc != NULL && strcmp(x->proc, "broker") == 0) {
            v = count_events(in->broker_events, name, wk, wv);
        } else {
            for (int p = 0; p < in->sc->nprocs; p++)
                if ((x->proc_idx < 0 || x->proc_idx == p) && in->proc_events[p] != NULL)
                    v += count_events(in->proc_events[p], name, wk, wv);
        }
        snprintf(what, sizeof(what), "%s%s%s%s%s%s%s", name, x->proc ? " of " : "",
                 x->proc ? x->proc : "", wk ? " where " : "", wk ? wk : "", wk ? "=" : "",
                 wv ? wv : "");
    } else if (strcmp(x->check, "sql") == 0) {
        char err[256];
        PGresult *r = pgx_exec(in->conn, x->sql, 0, NULL, NULL, err, sizeof(err));
        if (r == NULL) {
            snprintf(detail, detaillen, "sql failed: %s", err);
            return 0;
        }
        if (PQntuples(r) < 1 || PQnfields(r) < 1 || PQgetisnull(r, 0, 0)) {
            PQclear(r);
            snprintf(detail, detaillen, "sql returned no value");
            return 0;
        }
        v = atol(PQgetvalue(r, 0, 0));
        PQclear(r);
        snprintf(what, sizeof(what), "sql %.120s", x->sql);
    } else if (strcmp(x->check, "http_status") == 0) {
        int found = 0;
        for (int i = 0; i < in->nhttp; i++)
            if (strcmp(in->http[i].name, x->request) == 0) {
                v = in->http[i].status;
                found = 1;
            }
        if (!found) {
            snprintf(detail, detaillen, "request %s was never sent", x->request);
            return 0;
        }
        snprintf(what, sizeof(what), "HTTP status of %s", x->request);
    } else {
        snprintf(detail, detaillen, "unknown check %s", x->check);
        return 0;
    }
    int ok = 1;
    char want[96] = "";
    size_t n = 0;
    if (x->has_equals) {
        ok &= v == x->equals;
        n += (size_t)snprintf(want + n, sizeof(want) - n, "= %lld", x->equals);
    }
    if (x->has_min) {
        ok &= v >= x->min;
        n += (size_t)snprintf(want + n, sizeof(want) - n, "%s>= %lld", n ? ", " : "", x->min);
    }
    if (x->has_max) {
        ok &= v <= x->max;
        snprintf(want + n, sizeof(want) - n, "%s<= %lld", n ? ", " : "", x->max);
    }
    snprintf(detail, detaillen, "%s = %ld (want %s)", what, v, want);
    return ok;
}
