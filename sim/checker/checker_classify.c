/* checker_classify.c -- what the checker counts and how it classifies every
 * outbox event (checker.h says the classes), the "counts" and
 * "classification" objects of result.json, and the scenario's
 * expectations over those figures and the logs. */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"
#include "pgx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- counts and classification ------------------------------------------ */

void chk_count_broker_log(struct chk_ctx *c)
{
    struct chk_result *res = c->res;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        const char *n = ev_name(ev);
        if (strcmp(n, "publish") == 0) {
            if (chk_publish_stored(ev))
                res->publishes++;
            else
                res->publishes_refused++;
        } else if (strcmp(n, "deliver") == 0) {
            res->deliveries++;
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "redelivered")))
                res->redeliveries++;
        }
    }
}

void chk_counts(struct chk_ctx *c)
{
    struct chk_result *res = c->res;
    const struct scenario *sc = c->in->sc;
    res->payments = chk_query_long(c, "SELECT count(*) FROM payments", 0, NULL);
    res->outbox_rows = c->nrows;
    for (int i = 0; i < c->nrows; i++) {
        res->published += c->rows[i].published;
        res->dead_lettered += c->rows[i].dead;
        if (c->rows[i].attempts > res->max_attempts)
            res->max_attempts = c->rows[i].attempts;
    }
    chk_count_broker_log(c);
    const cJSON *ev;
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
    long dup_rows = chk_query_long(c,
        "SELECT count(*) FROM consumer_anomalies WHERE kind = 'duplicate'", 0, NULL);
    res->duplicates_absorbed = dup_events > dup_rows ? dup_events : dup_rows;
    long gap_rows = chk_query_long(c, "SELECT count(*) FROM consumer_anomalies WHERE kind IN ('gap', 'gap_parked')",
                                   0, NULL);
    res->gaps_detected = gap_events > gap_rows ? gap_events : gap_rows;
    res->effects = chk_query_long(c, chk_effects_total_sql(), 0, NULL);
    res->requeues = chk_query_long(c, "SELECT count(*) FROM outbox_requeues", 0, NULL);
    res->removed = chk_query_long(c, "SELECT count(*) FROM outbox_removed", 0, NULL);
    res->inbox_removed = chk_query_long(c, "SELECT count(*) FROM inbox_removed", 0, NULL);
}

void chk_classify(struct chk_ctx *c)
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
        PGresult *r = chk_query_effects(c, 1, p, "SELECT e.message_id::text, count(*) FROM %s e"
                                  " GROUP BY e.message_id", chk_effects_sql());
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            struct orow *o = chk_find_row(c, PQgetvalue(r, i, 0));
            if (o == NULL)
                res->unexpected++;
            else
                got[o - c->rows] = atoi(PQgetvalue(r, i, 1));
        }
        PQclear(r);
        r = chk_query(c, "SELECT o.id::text FROM " OUTBOX_ALL " o WHERE " PARKED_BY_GROUP("o.id"),
                      1, p);
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            struct orow *o = chk_find_row(c, PQgetvalue(r, i, 0));
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
        PGresult *r = chk_query(c,
            "SELECT o.id::text FROM idempotency_records r"
            "  JOIN " OUTBOX_ALL " o ON o.aggregate_id = r.payment_id"
            "   AND o.event_type = 'PaymentCreated'"
            " WHERE r.client_id = $1 AND r.idempotency_key = $2", 2, p);
        for (int j = 0; r != NULL && j < PQntuples(r); j++) {
            struct orow *o = chk_find_row(c, PQgetvalue(r, j, 0));
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
                     chk_behind_dead_letter(c, &c->rows[i]);
        int dead = c->rows[i].dead || behind;
        if (maxv[i] > 1)
            res->duplicated++;
        else if (dead)
            res->dead_lettered_class++;
        else if (lost[i])
            res->lost++, res->lost_recoverable += recovered[i];
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

/* applied_payments: how many payments created or changed under an
 * Idempotency-Key starting with prefix (any client) exist with at least one
 * event, every event of theirs published and applied by every consumer
 * group of the scenario.  A promise such as "payments made after the
 * failover are published and applied" is this count.  -1 when the database
 * could not be read (err says why). */
static long applied_payments(const struct chk_input *in, const char *prefix, char *err,
                             size_t errlen)
{
    const char *p[1] = { prefix };
    char e[256];
    PGresult *r = pgx_exec(in->conn,
        "SELECT DISTINCT p.id::text FROM payments p"
        "  JOIN idempotency_records k ON k.payment_id = p.id"
        " WHERE left(k.idempotency_key, length($1)) = $1"
        "   AND EXISTS (SELECT 1 FROM " OUTBOX_ALL " o WHERE o.aggregate_id = p.id)"
        "   AND NOT EXISTS (SELECT 1 FROM " OUTBOX_ALL " o"
        "                    WHERE o.aggregate_id = p.id AND o.published_at IS NULL)"
        " ORDER BY 1", 1, p, NULL, e, sizeof(e));
    if (r == NULL) {
        snprintf(err, errlen, "sql failed: %s", e);
        return -1;
    }
    int n = PQntuples(r);
    char *ok = malloc((size_t)n + 1);
    if (ok == NULL) {
        PQclear(r);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(ok, 1, (size_t)n + 1);
    const struct scenario *sc = in->sc;
    for (int k = 0; k < sc->nprocs; k++) {
        if (sc->procs[k].kind != SC_CONSUMER)
            continue;
        /* The payments with an event this group has not applied. */
        char sql[4096];
        snprintf(sql, sizeof(sql),
                 "SELECT DISTINCT o.aggregate_id::text FROM " OUTBOX_ALL " o"
                 " WHERE NOT EXISTS (SELECT 1 FROM %s e WHERE e.message_id = o.id)",
                 chk_effects_sql());
        const char *g[1] = { sc->procs[k].consumer_name };
        PGresult *m = pgx_exec(in->conn, sql, 1, g, NULL, e, sizeof(e));
        if (m == NULL) {
            snprintf(err, errlen, "sql failed: %s", e);
            free(ok);
            PQclear(r);
            return -1;
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < PQntuples(m) && ok[i]; j++)
                if (strcmp(PQgetvalue(r, i, 0), PQgetvalue(m, j, 0)) == 0)
                    ok[i] = 0;
        PQclear(m);
    }
    long count = 0;
    for (int i = 0; i < n; i++)
        count += ok[i];
    free(ok);
    PQclear(r);
    return count;
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
    } else if (strcmp(x->check, "applied_payments") == 0) {
        char err[320];
        v = applied_payments(in, x->key_prefix, err, sizeof(err));
        if (v < 0) {
            snprintf(detail, detaillen, "%s", err);
            return 0;
        }
        snprintf(what, sizeof(what), "payments of keys %.60s... published and applied by every "
                 "consumer group", x->key_prefix);
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
