/* checker_delivery.c -- the invariants of delivery: every payment's event
 * is in the outbox once, reaches the broker as stored, and is applied once
 * and in order by every consumer group, acknowledged only after its
 * commit (invariants 1-5, 9 and 14; invariants.c states each). */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- 1. payment_one_creation_event -------------------------------------- */

void inv_payment_one_creation_event(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_PAYMENT_ONE_CREATION_EVENT];
    PGresult *r = chk_query(c,
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
            chk_violation(inv, "payment %s has %ld PaymentCreated events in the outbox (want 1)",
                          PQgetvalue(r, i, 0), n);
    }
    PQclear(r);
    r = chk_query(c,
        "SELECT o.id::text, o.aggregate_id::text"
        "  FROM " OUTBOX_ALL " o"
        " WHERE o.event_type = 'PaymentCreated'"
        "   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.id = o.aggregate_id)", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        chk_violation(inv, "outbox event %s announces payment %s, which does not exist "
                      "(the command rolled back but its event survived)",
                      PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    }
    PQclear(r);
    /* Every later version too: each change of a payment commits with its
     * event, so the payment's version is its highest event's, and versions
     * 1..N each exist once, in the outbox or in its removal record.  A
     * change committed without its event (a capture the consumers never
     * hear of) leaves the payment a version ahead, or a hole. */
    r = chk_query(c,
        "SELECT p.id::text, p.version, coalesce(max(o.aggregate_version), 0),"
        "       count(o.id), count(DISTINCT o.aggregate_version),"
        "       coalesce(min(o.aggregate_version), 0),"
        "       coalesce(string_agg(o.event_type || ' v' || o.aggregate_version, ', '"
        "                           ORDER BY o.aggregate_version, o.event_type), 'none')"
        "  FROM payments p"
        "  LEFT JOIN " OUTBOX_ALL " o ON o.aggregate_id = p.id"
        " GROUP BY p.id, p.version ORDER BY p.id", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        long long version = atoll(PQgetvalue(r, i, 1)), top = atoll(PQgetvalue(r, i, 2));
        long long n = atoll(PQgetvalue(r, i, 3)), distinct = atoll(PQgetvalue(r, i, 4));
        long long low = atoll(PQgetvalue(r, i, 5));
        if (top != version)
            chk_violation(inv, "payment %s is at version %lld but its highest event is version "
                          "%lld (events: %.300s): a change committed without its event",
                          PQgetvalue(r, i, 0), version, top, PQgetvalue(r, i, 6));
        else if (n != version || distinct != n || (n > 0 && low != 1))
            chk_violation(inv, "payment %s is at version %lld but its events are %.300s "
                          "(want versions 1 to %lld, each once)", PQgetvalue(r, i, 0), version,
                          PQgetvalue(r, i, 6), version);
    }
    PQclear(r);
}

/* ---- 2. nothing_lost ---------------------------------------------------- */

int chk_names_poison(const struct scenario *sc, const char *id)
{
    for (int i = 0; i < sc->npoison; i++)
        if (strcasecmp(sc->poison[i], id) == 0)
            return 1;
    return 0;
}

/* Whether an older version of o's aggregate was dead-lettered by a relay. */
int chk_behind_dead_letter(const struct chk_ctx *c, const struct orow *o)
{
    for (int i = 0; i < c->nrows; i++) {
        const struct orow *d = &c->rows[i];
        if (d->dead && d->version < o->version &&
            strcmp(d->aggregate_id, o->aggregate_id) == 0)
            return 1;
    }
    return 0;
}

void inv_nothing_lost(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_NOTHING_LOST];
    PGresult *r = chk_query(c,
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
        const struct orow *row = held ? chk_find_row(c, PQgetvalue(r, i, 0)) : NULL;
        if (row != NULL && chk_behind_dead_letter(c, row))
            continue;
        const char *why = PQgetvalue(r, i, 4)[0] == 't' ? "under a live lease"
                          : PQgetvalue(r, i, 5)[0] == 't' ? "waiting on its backoff"
                                                          : "ready but never published";
        chk_violation(inv, "event %s (%s) is still pending after heal, %s (attempts %s%s%s)",
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
        r = chk_query(c, checker_unconsumed_sql(), 1, p);
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++)
            chk_violation_hazard(inv, chk_hazard_event(c, PQgetvalue(r, i, 0), c->consumers[k]),
                          "event %s (%s v%s of %s) was published but never applied by %s "
                          "and is not parked",
                          PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                          PQgetvalue(r, i, 3), c->consumers[k]);
        PQclear(r);

        r = chk_query_effects(c, 1, p,
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
            " ORDER BY o.occurred_at, o.id", chk_effects_sql(), chk_effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++) {
            /* A version parked for a gap whose predecessor was then applied
             * is lost, whatever the scenario expects: nothing closes the gap
             * any more.  No expectation excuses it. */
            if (PQgetvalue(r, i, 4)[0] == 't') {
                chk_violation(inv, "event %s (%s v%s) was parked by %s for a version gap, and "
                              "its predecessor was applied later, yet it never was: lost",
                              PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                              c->consumers[k]);
                continue;
            }
            if (chk_names_poison(c->in->sc, PQgetvalue(r, i, 0)) ||
                !PQgetisnull(r, i, 5))
                continue;
            chk_violation(inv, "event %s (%s v%s) was parked by %s instead of applied (%s), "
                          "and nothing resolves it: parked-and-unresolved",
                          PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                          c->consumers[k], PQgetvalue(r, i, 3));
        }
        PQclear(r);
    }

    /* What the client was told exists must exist. */
    for (int i = 0; i < c->in->nhttp; i++) {
        const struct http_rec *h = &c->in->http[i];
        struct chk_transition t;
        if (chk_transition(h, &t) && h->status >= 200 && h->status <= 299) {
            /* A change the client was told of is in the payment, with its
             * event: the payment reached (or passed) the status, and the
             * outbox (or its removal record) holds the event. */
            const char *p[2] = { t.payment_id, t.event_type };
            inv->checked++;
            PGresult *q = chk_query(c,
                "SELECT p.status, EXISTS (SELECT 1 FROM " OUTBOX_ALL " o"
                "                          WHERE o.aggregate_id = p.id AND o.event_type = $2)"
                "  FROM payments p WHERE p.id::text = $1", 2, p);
            if (q == NULL)
                return;
            if (PQntuples(q) == 0)
                chk_violation(inv, "the client was answered HTTP %d on %s of payment %s (key %s), "
                              "which is not in the database", h->status, t.verb, t.payment_id,
                              h->key);
            else if (chk_status_rank(PQgetvalue(q, 0, 0)) < chk_status_rank(t.status))
                chk_violation(inv, "the client was answered HTTP %d on %s of payment %s (key %s), "
                              "but the payment is %s", h->status, t.verb, t.payment_id, h->key,
                              PQgetvalue(q, 0, 0));
            else if (PQgetvalue(q, 0, 1)[0] != 't')
                chk_violation(inv, "the client was answered HTTP %d on %s of payment %s (key %s), "
                              "but no %s event of it was ever in the outbox: a change the "
                              "consumers never hear of", h->status, t.verb, t.payment_id, h->key,
                              t.event_type);
            PQclear(q);
            continue;
        }
        if (!h->creation || h->status < 200 || h->status > 299 || h->payment_id[0] == '\0')
            continue;
        const char *p[1] = { h->payment_id };
        inv->checked++;
        if (chk_query_long(c, "SELECT count(*) FROM payments WHERE id::text = $1", 1, p) != 1)
            chk_violation_hazard(inv, chk_hazard_payment(c, h), "payment %s was confirmed to the client (HTTP %d for key %s) "
                          "but is not in the database", h->payment_id, h->status, h->key);
    }
}

/* ---- 3. effect_once ----------------------------------------------------- */

void inv_effect_once(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_EFFECT_ONCE];
    inv->ran = 1;
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        /* A marker the runbook removed (inbox_removed) excuses no second
         * effect: the witness says so, since that is how one came about. */
        PGresult *r = chk_query_effects(c, 1, p,
            "SELECT e.message_id::text, count(*), string_agg(e.tbl || ' row ' || e.id, ', ' ORDER BY e.id),"
            "       coalesce((SELECT ' (its inbox marker was removed by ' || x.removed_by || ' at '"
            "                        || x.removed_at::text || ')'"
            "                   FROM inbox_removed x"
            "                  WHERE x.consumer_name = $1 AND x.message_id = e.message_id"
            "                  ORDER BY x.id LIMIT 1), '')"
            "  FROM %s e GROUP BY e.message_id ORDER BY min(e.id)", chk_effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++) {
            inv->checked++;
            long n = atol(PQgetvalue(r, i, 1));
            if (n > 1)
                chk_violation(inv, "event %s was applied %ld times by %s: %s%s",
                              PQgetvalue(r, i, 0), n, c->consumers[k], PQgetvalue(r, i, 2),
                              PQgetvalue(r, i, 3));
            if (chk_find_row(c, PQgetvalue(r, i, 0)) == NULL)
                chk_violation_hazard(inv, chk_hazard_event(c, PQgetvalue(r, i, 0), c->consumers[k]),
                              "%s applied event %s (%s), which is not in the outbox "
                              "(an effect without a committed event)",
                              c->consumers[k], PQgetvalue(r, i, 0), PQgetvalue(r, i, 2));
        }
        PQclear(r);
        /* Each effect records its own event: the payment, version and type
         * of its outbox row, and the payment, version, amount and currency
         * its payload carries (a removed row keeps no payload: its columns
         * only).  An effect applied once but with another event's figures
         * is no faithful effect of the event the outbox committed. */
        r = chk_query_effects(c, 1, p,
            "SELECT e.message_id::text, e.tbl || ' row ' || e.id, f.field, f.source,"
            "       coalesce(f.applied, 'nothing'), coalesce(f.committed, 'nothing')"
            "  FROM %s e"
            "  JOIN (SELECT id, aggregate_id, aggregate_version, event_type, payload"
            "          FROM outbox_messages"
            "        UNION ALL"
            "        SELECT id, aggregate_id, aggregate_version, event_type, NULL::jsonb"
            "          FROM outbox_removed) o ON o.id = e.message_id"
            " CROSS JOIN LATERAL (VALUES"
            "   ('payment', 'its outbox row', e.payment_id::text, o.aggregate_id::text,"
            "    e.payment_id = o.aggregate_id),"
            "   ('version', 'its outbox row', e.aggregate_version::text,"
            "    o.aggregate_version::text, e.aggregate_version = o.aggregate_version),"
            "   ('event type', 'its outbox row', e.event_type, o.event_type,"
            "    e.event_type = o.event_type),"
            "   ('payment', 'its payload', e.payment_id::text, o.payload->>'PaymentId',"
            "    o.payload IS NULL OR lower(o.payload->>'PaymentId') = e.payment_id::text),"
            "   ('version', 'its payload', e.aggregate_version::text,"
            "    o.payload->>'AggregateVersion',"
            "    o.payload IS NULL OR (o.payload->>'AggregateVersion' ~ '^[0-9]{1,18}$'"
            "                          AND (o.payload->>'AggregateVersion')::bigint"
            "                              = e.aggregate_version)),"
            "   ('amount', 'its payload', e.amount::text, o.payload->>'Amount',"
            "    NOT e.money OR o.payload IS NULL"
            "    OR CASE WHEN o.payload->>'Amount' IS NULL THEN e.amount IS NULL"
            "            WHEN o.payload->>'Amount' ~ '^[0-9]{1,18}([.][0-9]{1,2})?$'"
            "            THEN e.amount IS NOT DISTINCT FROM (o.payload->>'Amount')::numeric"
            "            ELSE false END),"
            "   ('currency', 'its payload', e.currency, o.payload->>'Currency',"
            "    NOT e.money OR o.payload IS NULL"
            "    OR e.currency IS NOT DISTINCT FROM o.payload->>'Currency')"
            " ) f(field, source, applied, committed, same)"
            " WHERE NOT coalesce(f.same, false)"
            " ORDER BY e.id", chk_effects_fields_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++)
            chk_violation(inv, "%s applied event %s with %s %s, but %s says %s (%s)",
                          c->consumers[k], PQgetvalue(r, i, 0), PQgetvalue(r, i, 2),
                          PQgetvalue(r, i, 4), PQgetvalue(r, i, 3), PQgetvalue(r, i, 5),
                          PQgetvalue(r, i, 1));
        PQclear(r);
        /* An effect whose marker the runbook removed (outboxctl
         * cleanup-inbox records each in inbox_removed) is history, not a
         * marker that never committed. */
        r = chk_query_effects(c, 1, p,
            "SELECT e.message_id::text, e.tbl || ' row ' || e.id"
            "  FROM %s e"
            " WHERE NOT EXISTS (SELECT 1 FROM inbox_messages i"
            "                    WHERE i.consumer_name = $1 AND i.message_id = e.message_id)"
            "   AND NOT EXISTS (SELECT 1 FROM inbox_removed x"
            "                    WHERE x.consumer_name = $1 AND x.message_id = e.message_id)"
            " ORDER BY e.id", chk_effects_sql());
        if (r == NULL)
            return;
        for (int i = 0; i < PQntuples(r); i++)
            chk_violation(inv, "%s has an effect for event %s (%s) but no inbox marker for it",
                          c->consumers[k], PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        PQclear(r);
        /* A marker without an effect is excused only where the consumer
         * committed it knowingly without one: a stale version, or a parked
         * event.  Not a duplicate: a redelivery finds the marker of the
         * first delivery, whose effect must be there -- the marker that
         * committed apart from its effect (then lost in a crash) is exactly
         * what a redelivery reports as a duplicate. */
        r = chk_query_effects(c, 1, p,
            "SELECT i.message_id::text FROM inbox_messages i"
            " WHERE i.consumer_name = $1"
            "   AND NOT EXISTS (SELECT 1 FROM %s e WHERE e.message_id = i.message_id)"
            "   AND NOT EXISTS (SELECT 1 FROM consumer_anomalies a"
            "                    WHERE a.consumer_name = $1 AND a.message_id = i.message_id"
            "                      AND a.kind = 'stale')"
            "   AND NOT " PARKED_BY_GROUP("i.message_id")
            " ORDER BY i.processed_at", chk_effects_sql());
        if (r == NULL)
            return;
        inv->checked += chk_query_long(c,
            "SELECT count(*) FROM inbox_messages WHERE consumer_name = $1", 1, p);
        for (int i = 0; i < PQntuples(r); i++) {
            chk_violation(inv, "%s holds an inbox marker for event %s without its effect "
                          "(the marker committed apart from the effect)",
                          c->consumers[k], PQgetvalue(r, i, 0));
        }
        PQclear(r);
    }
}

/* ---- 4. broker_log_matches_outbox --------------------------------------- */

void inv_broker_log_matches_outbox(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_BROKER_LOG_MATCHES_OUTBOX];
    inv->ran = 1;
    const cJSON *ev;
    /* Marks on the rows: a stored publish seen. */
    char *seen = calloc((size_t)c->nrows + 1, 1);
    if (seen == NULL)
        return;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!chk_is_publish(ev) || !chk_publish_stored(ev))
            continue;
        const char *id = ev_str(ev, K_MSGID);
        inv->checked++;
        struct orow *o = chk_find_row(c, id);
        if (o == NULL) {
            const char *client = ev_str(ev, "client");
            chk_violation_hazard(inv, chk_hazard_event(c, id, NULL),
                          "the broker stored message %s (from %s), which is not an outbox row "
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
            chk_violation(inv, "event %s (%s) is marked published but the broker never stored it",
                          c->rows[i].id, c->rows[i].event_type);
    }
    free(seen);
}

/* ---- 5. republish_same_payload ------------------------------------------ */

void inv_republish_same_payload(struct chk_ctx *c)
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
        if (!chk_is_publish(ev))
            continue;
        const char *status = ev_str(ev, K_STATUS);
        if (status != NULL && strcmp(status, "stored") != 0 && strcmp(status, "refused") != 0)
            continue;
        struct orow *o = chk_find_row(c, ev_str(ev, K_MSGID));
        const char *sha = ev_str(ev, K_SHA);
        if (o == NULL || sha == NULL)
            continue;
        size_t i = (size_t)(o - c->rows);
        count[i]++;
        inv->checked++;
        if (count[i] == 1) {
            snprintf(first[i], 65, "%s", sha);
            if (strcasecmp(sha, o->sha) != 0)
                chk_violation(inv, "message %s was published with payload sha256 %.12s..., but its "
                              "outbox payload hashes to %.12s...", o->id, sha, o->sha);
        } else if (strcasecmp(sha, first[i]) != 0) {
            chk_violation(inv, "message %s was published again with a different payload "
                          "(sha256 %.12s... after %.12s...)", o->id, sha, first[i]);
        }
    }
    for (int i = 0; i < c->nrows; i++)
        if (count[i] > 1)
            c->res->republished_same_id++;
    free(first);
    free(count);
}

/* ---- 9. versions_in_order ----------------------------------------------- */

void inv_versions_in_order(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_VERSIONS_IN_ORDER];
    inv->ran = 1;
    for (int k = 0; k < c->nconsumers; k++) {
        const char *p[1] = { c->consumers[k] };
        PGresult *r = chk_query_effects(c, 1, p,
            "SELECT e.payment_id::text, e.aggregate_version, e.tbl || ' row ' || e.id"
            "  FROM %s e ORDER BY e.payment_id, e.id", chk_effects_sql());
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
                    chk_violation(inv, "%s applied version %lld of payment %s after version "
                                  "%lld (%s)", c->consumers[k], v, a, last, PQgetvalue(r, i, 2));
                else
                    chk_violation(inv, "%s applied version %lld of payment %s without version %lld "
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

/* ---- 14. ack_after_commit -----------------------------------------------
 *
 * The source article's (README) rule for the consumer: ACK only after COMMIT.  An ACK sent
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

void inv_ack_after_commit(struct chk_ctx *c)
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
        chk_copy_lower(key.id, sizeof(key.id), id);
        const struct consumer_rec *rec = bsearch(&key, c->crecs, (size_t)c->ncrecs,
                                                 sizeof(key), chk_cmp_consumer_rec);
        if (rec == NULL)
            continue;
        inv->checked++;
        long long at = (long long)ev_ts(ev);
        if (at < rec->committed_us) {
            const char *who = ev_str(ev, "consumer");
            chk_violation(inv, "the broker received %s's ACK of message %s (from %s) %.1f ms "
                          "before the group's first record of it committed: an ACK sent before the "
                          "COMMIT, which a crash between the two turns into a lost event",
                          group, key.id, who ? who : "an unnamed consumer",
                          (rec->committed_us - at) / 1000.0);
        }
    }
}
