/* checker_target.c -- the invariants judged on a target: someone else's
 * outbox, seen only through its profile's mapping (the views
 * cw_target_outbox, cw_target_effects, and cw_target_acknowledged when
 * mapped: sim/target/target.h), the broker log and the runner's own record
 * of what its clients were told.
 *
 * The same names as on our pipeline, judged from outside:
 *   nothing_lost             every operation acknowledged to a client has an
 *                            outbox message of its aggregate, and every
 *                            message reaches an effect in every consumer
 *                            group; a message the target gave up on is lost
 *                            like any other, and one it dead-lettered (kept
 *                            for an operator) is excused only when the
 *                            scenario faulted the broker or its links;
 *   effect_once              no group applied a message twice;
 *   broker_log_matches_outbox every message the broker stored is in the
 *                            outbox, and every message the outbox calls
 *                            published reached the broker;
 *   versions_in_order        each group applied each aggregate's versions
 *                            in increasing order (by the effects' seq);
 *   one_payment_per_key      one Idempotency-Key, one aggregate.
 * Every other invariant reads the insides of our own pipeline (claims,
 * leases, retries, sessions) and is marked not examined: never passed. */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum sc_invariant judged[] = {
    INV_NOTHING_LOST, INV_EFFECT_ONCE, INV_BROKER_LOG_MATCHES_OUTBOX, INV_VERSIONS_IN_ORDER,
    INV_ONE_PAYMENT_PER_KEY
};

int checker_target_judges(int inv)
{
    for (size_t i = 0; i < sizeof(judged) / sizeof(judged[0]); i++)
        if ((int)judged[i] == inv)
            return 1;
    return 0;
}

/* Did the scenario fault the broker or a link to it?  Then a message the
 * target dead-lettered (kept for an operator) has a cause the harness saw. */
static int broker_faulted(const struct scenario *sc)
{
    for (int i = 0; i < sc->nsteps; i++) {
        const struct sc_step *st = &sc->steps[i];
        if (st->verb == V_BROKER_CRASH || st->verb == V_BROKER ||
            (st->verb == V_NET && st->net_peer != NP_PG && !st->net_clear))
            return 1;
    }
    return 0;
}

/* The scenario's consumer groups, each once. */
static int groups_of(const struct scenario *sc, const char **out)
{
    int n = 0;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_CONSUMER)
            continue;
        const char *g = sc->procs[p].group ? sc->procs[p].group : sc->procs[p].consumer_name;
        int dup = 0;
        for (int k = 0; k < n; k++)
            dup |= strcmp(out[k], g) == 0;
        if (!dup)
            out[n++] = g;
    }
    return n;
}

static void judge_nothing_lost(struct chk_ctx *c, const char *const *groups, int ngroups,
                               int acknowledged_mapped)
{
    struct chk_inv *inv = &c->res->inv[INV_NOTHING_LOST];
    inv->ran = 1;
    /* What the clients were told: an acknowledged create has its message. */
    for (int i = 0; i < c->in->nhttp; i++) {
        const struct http_rec *h = &c->in->http[i];
        if (!h->creation || h->status < 200 || h->status > 299 || h->payment_id[0] == '\0')
            continue;
        inv->checked++;
        const char *p[1] = { h->payment_id };
        if (chk_query_long(c, "SELECT count(*) FROM cw_target_outbox WHERE aggregate_id = $1",
                           1, p) == 0)
            chk_violation(inv, "aggregate %s was acknowledged to the client (HTTP %d, key %s) "
                          "and has no outbox message", h->payment_id, h->status, h->key);
    }
    if (acknowledged_mapped) {
        PGresult *r = chk_query(c,
            "SELECT a.key, a.aggregate_id FROM cw_target_acknowledged a"
            " WHERE NOT EXISTS (SELECT 1 FROM cw_target_outbox o"
            "                   WHERE o.aggregate_id = a.aggregate_id)", 0, NULL);
        for (int i = 0; r != NULL && i < PQntuples(r); i++)
            chk_violation(inv, "operation %s (aggregate %s) is stored as acknowledged and has "
                          "no outbox message", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        PQclear(r);
    }
    int excused = broker_faulted(c->in->sc);
    for (int g = 0; g < ngroups; g++) {
        const char *p[1] = { groups[g] };
        inv->checked += chk_query_long(c, "SELECT count(*) FROM cw_target_outbox", 0, NULL);
        PGresult *r = chk_query(c,
            "SELECT o.id, o.aggregate_id, o.version, o.state FROM cw_target_outbox o"
            " WHERE NOT EXISTS (SELECT 1 FROM cw_target_effects e"
            "                   WHERE e.consumer = $1 AND e.message_id = o.id)"
            " ORDER BY o.aggregate_id, o.version, o.id", 1, p);
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            const char *state = PQgetvalue(r, i, 3);
            if (strcmp(state, "dead_lettered") == 0 && excused)
                continue;
            chk_violation(inv, "message %s (aggregate %s, version %s) was never applied by "
                          "%s: the target left it %s%s", PQgetvalue(r, i, 0),
                          PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), groups[g], state,
                          strcmp(state, "dead_lettered") == 0
                              ? " with no broker fault in the scenario to explain it" : "");
        }
        PQclear(r);
    }
}

static void judge_effect_once(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_EFFECT_ONCE];
    inv->ran = 1;
    inv->checked = chk_query_long(c, "SELECT count(*) FROM cw_target_effects", 0, NULL);
    PGresult *r = chk_query(c,
        "SELECT consumer, message_id, count(*), string_agg(seq::text, ', ' ORDER BY seq)"
        " FROM cw_target_effects GROUP BY consumer, message_id HAVING count(*) > 1"
        " ORDER BY consumer, message_id", 0, NULL);
    for (int i = 0; r != NULL && i < PQntuples(r); i++)
        chk_violation(inv, "message %s was applied %s times by %s (effects seq %s)",
                      PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 0),
                      PQgetvalue(r, i, 3));
    PQclear(r);
}

static void judge_broker_log(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_BROKER_LOG_MATCHES_OUTBOX];
    inv->ran = 1;
    /* Every id the broker stored, once, as a text[] literal's elements. */
    cJSON *ids = cJSON_CreateArray();
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!chk_is_publish(ev) || !chk_publish_stored(ev))
            continue;
        const char *id = ev_str(ev, K_MSGID);
        inv->checked++;
        if (id == NULL || id[0] == '\0') {
            chk_violation(inv, "the broker stored a message without an id (the profile's "
                          "broker.message_id names where the target puts it)");
            continue;
        }
        cJSON_AddItemToArray(ids, cJSON_CreateString(id));
    }
    char *json = cJSON_PrintUnformatted(ids);
    cJSON_Delete(ids);
    const char *p[1] = { json ? json : "[]" };
    PGresult *r = chk_query(c,
        "SELECT DISTINCT j.id FROM jsonb_array_elements_text($1::jsonb) AS j(id)"
        " WHERE NOT EXISTS (SELECT 1 FROM cw_target_outbox o WHERE o.id = j.id)"
        " ORDER BY 1", 1, p);
    for (int i = 0; r != NULL && i < PQntuples(r); i++)
        chk_violation(inv, "the broker stored message %s, which no outbox message is",
                      PQgetvalue(r, i, 0));
    PQclear(r);
    r = chk_query(c,
        "SELECT o.id, o.aggregate_id, o.version FROM cw_target_outbox o"
        " WHERE o.state = 'published' AND NOT EXISTS"
        "   (SELECT 1 FROM jsonb_array_elements_text($1::jsonb) AS j(id) WHERE j.id = o.id)"
        " ORDER BY o.aggregate_id, o.version", 1, p);
    for (int i = 0; r != NULL && i < PQntuples(r); i++) {
        inv->checked++;
        chk_violation(inv, "message %s (aggregate %s, version %s) is marked published and the "
                      "broker never stored it", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                      PQgetvalue(r, i, 2));
    }
    PQclear(r);
    cJSON_free(json);
}

static void judge_versions(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_VERSIONS_IN_ORDER];
    inv->ran = 1;
    inv->checked = chk_query_long(c, "SELECT count(*) FROM cw_target_effects", 0, NULL);
    PGresult *r = chk_query(c,
        "SELECT consumer, aggregate_id, message_id, version, prev_version, seq FROM"
        " (SELECT e.*, lag(version) OVER (PARTITION BY consumer, aggregate_id ORDER BY seq)"
        "         AS prev_version FROM cw_target_effects e) x"
        " WHERE version < prev_version ORDER BY consumer, aggregate_id, seq", 0, NULL);
    for (int i = 0; r != NULL && i < PQntuples(r); i++)
        chk_violation(inv, "%s applied version %s of aggregate %s (message %s, seq %s) after "
                      "version %s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 3),
                      PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 5),
                      PQgetvalue(r, i, 4));
    PQclear(r);
}

static void judge_one_per_key(struct chk_ctx *c, int acknowledged_mapped)
{
    struct chk_inv *inv = &c->res->inv[INV_ONE_PAYMENT_PER_KEY];
    inv->ran = 1;
    /* What the clients were told: one key, one aggregate in every answer. */
    for (int i = 0; i < c->in->nhttp; i++) {
        const struct http_rec *a = &c->in->http[i];
        if (!a->creation || a->payment_id[0] == '\0' || a->key[0] == '\0')
            continue;
        inv->checked++;
        for (int k = 0; k < i; k++) {
            const struct http_rec *b = &c->in->http[k];
            if (b->creation && strcmp(a->key, b->key) == 0 && b->payment_id[0] != '\0' &&
                strcmp(a->payment_id, b->payment_id) != 0) {
                chk_violation(inv, "key %s was answered with aggregate %s, then with %s",
                              a->key, b->payment_id, a->payment_id);
                break;
            }
        }
    }
    if (!acknowledged_mapped)
        return;
    inv->checked += chk_query_long(c, "SELECT count(DISTINCT key) FROM cw_target_acknowledged",
                                   0, NULL);
    PGresult *r = chk_query(c,
        "SELECT key, string_agg(DISTINCT aggregate_id, ', ') FROM cw_target_acknowledged"
        " GROUP BY key HAVING count(DISTINCT aggregate_id) > 1 ORDER BY key", 0, NULL);
    for (int i = 0; r != NULL && i < PQntuples(r); i++)
        chk_violation(inv, "key %s is stored with aggregates %s", PQgetvalue(r, i, 0),
                      PQgetvalue(r, i, 1));
    PQclear(r);
}

/* The counts of result.json and the classification of every message. */
static void target_counts(struct chk_ctx *c, const char *const *groups, int ngroups,
                          int acknowledged_mapped)
{
    struct chk_result *res = c->res;
    res->outbox_rows = chk_query_long(c, "SELECT count(*) FROM cw_target_outbox", 0, NULL);
    res->published = chk_query_long(c, "SELECT count(*) FROM cw_target_outbox"
                                    " WHERE state = 'published'", 0, NULL);
    res->dead_lettered = chk_query_long(c, "SELECT count(*) FROM cw_target_outbox"
                                        " WHERE state IN ('dead_lettered', 'given_up')", 0, NULL);
    res->effects = chk_query_long(c, "SELECT count(*) FROM cw_target_effects", 0, NULL);
    res->payments = chk_query_long(c, "SELECT count(DISTINCT aggregate_id)"
                                   " FROM cw_target_outbox", 0, NULL);
    chk_count_broker_log(c);
    /* Each message: the fewest and the most effects any group has of it. */
    for (int g = 0; g < ngroups; g++) {
        const char *p[1] = { groups[g] };
        PGresult *r = chk_query(c,
            "SELECT o.state, (SELECT count(*) FROM cw_target_effects e"
            "                 WHERE e.consumer = $1 AND e.message_id = o.id)"
            " FROM cw_target_outbox o", 1, p);
        for (int i = 0; r != NULL && i < PQntuples(r); i++) {
            long n = atol(PQgetvalue(r, i, 1));
            const char *state = PQgetvalue(r, i, 0);
            if (g > 0)
                continue; /* one group classifies; the others only add losses below */
            if (n == 1)
                res->ok++;
            else if (n > 1)
                res->duplicated++;
            else if (strcmp(state, "dead_lettered") == 0 || strcmp(state, "given_up") == 0)
                res->dead_lettered_class++;
            else
                res->lost++;
        }
        PQclear(r);
    }
    for (int i = 0; acknowledged_mapped && i < c->in->nhttp; i++) {
        const struct http_rec *h = &c->in->http[i];
        if (!h->creation || h->status != 0 || h->key[0] == '\0')
            continue;
        const char *p[1] = { h->key };
        /* The client saw no answer: was its operation stored (a row), and
         * its message applied (recovered) or not (lost, though it would
         * have been recovered)? */
        PGresult *r = chk_query(c,
            "SELECT EXISTS (SELECT 1 FROM cw_target_outbox o JOIN cw_target_effects e"
            "               ON e.message_id = o.id WHERE o.aggregate_id = a.aggregate_id)"
            " FROM cw_target_acknowledged a WHERE a.key = $1 LIMIT 1", 1, p);
        if (r != NULL && PQntuples(r) == 1) {
            if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
                res->recovered++;
            else
                res->lost_recoverable++;
        }
        PQclear(r);
    }
}

int checker_inv_finding(const struct chk_result *res, int inv)
{
    const struct chk_inv *x = &res->inv[inv];
    return x->explains != NULL && x->violations > 0 && x->explained == x->violations;
}

int checker_run_target(const struct chk_input *in, int acknowledged_mapped,
                       struct chk_result *res)
{
    struct chk_ctx c;
    memset(res, 0, sizeof(*res));
    memset(&c, 0, sizeof(c));
    c.in = in;
    c.res = res;
    for (int i = 0; i < INV_COUNT; i++) {
        res->inv[i].witnesses = cJSON_CreateArray();
        res->inv[i].not_examined = !checker_target_judges(i);
        res->inv[i].explains = in->explains[i];
    }
    const char *groups[SC_MAX_PROCS];
    int ngroups = groups_of(in->sc, groups);
    judge_nothing_lost(&c, groups, ngroups, acknowledged_mapped);
    judge_effect_once(&c);
    judge_broker_log(&c);
    judge_versions(&c);
    judge_one_per_key(&c, acknowledged_mapped);
    target_counts(&c, groups, ngroups, acknowledged_mapped);
    for (int i = 0; i < INV_COUNT; i++)
        res->inv[i].pass = res->inv[i].ran && res->inv[i].violations == 0 && !c.db_failed;
    /* Every message in nothing_lost's known finding and no effect at all: an
     * invariant that judges effects has nothing to look at because of that
     * finding, which is not a vacuous pass of its own. */
    if (!c.db_failed && res->effects == 0 && checker_inv_finding(res, INV_NOTHING_LOST) &&
        res->inv[INV_NOTHING_LOST].explained >= res->outbox_rows) {
        for (int i = 0; i < INV_COUNT; i++) {
            struct chk_inv *x = &res->inv[i];
            if (i == INV_NOTHING_LOST || x->not_examined || x->checked > 0)
                continue;
            x->not_examined = 1;
            cJSON_AddItemToArray(x->witnesses, cJSON_CreateString(
                "not examined: no effect to judge, every message is in nothing_lost's "
                "known finding"));
        }
    }
    return c.db_failed ? -1 : 0;
}
