/* checker_answers.c -- the invariant of the client's answers: one payment
 * per idempotency key, the same answer to every retry, and no payment
 * behind an answer that said nothing was stored (invariant 10;
 * invariants.c states it). */
#include "checker.h"
#include "checker_internal.h"

#include <stdlib.h>
#include <string.h>

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
 *     their primary key.)
 * And two answers that say what the server did, judged by what the
 * clients saw: a 5xx stored nothing, and a 409 key-in-flight had another
 * request of its key in flight. */

static int same_owner(const struct http_rec *a, const struct http_rec *b)
{
    return a->creation && b->creation && strcmp(a->client, b->client) == 0 &&
           strcmp(a->key, b->key) == 0;
}

static const struct {
    const char *verb, *event_type, *status;
} TRANSITIONS[] = {
    { "authorize", "PaymentAuthorized", "authorized" },
    { "capture", "PaymentCaptured", "captured" },
};

int chk_transition(const struct http_rec *h, struct chk_transition *t)
{
    static const char prefix[] = "/payments/";
    if (strcmp(h->method, "POST") != 0 || strncmp(h->path, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    const char *id = h->path + sizeof(prefix) - 1;
    const char *slash = strchr(id, '/');
    if (slash == NULL || slash == id || (size_t)(slash - id) >= sizeof(t->payment_id))
        return 0;
    for (size_t i = 0; i < sizeof(TRANSITIONS) / sizeof(TRANSITIONS[0]); i++) {
        if (strcmp(slash + 1, TRANSITIONS[i].verb) != 0)
            continue;
        char raw[40];
        snprintf(raw, sizeof(raw), "%.*s", (int)(slash - id), id);
        chk_copy_lower(t->payment_id, sizeof(t->payment_id), raw);
        t->verb = TRANSITIONS[i].verb;
        t->event_type = TRANSITIONS[i].event_type;
        t->status = TRANSITIONS[i].status;
        return 1;
    }
    return 0;
}

int chk_status_rank(const char *status)
{
    static const char *const order[] = { "created", "authorized", "captured" };
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
        if (strcmp(status, order[i]) == 0)
            return (int)i + 1;
    return 0;
}

/* Two requests under one (client, key) for one command: both creations, or
 * the same transition of the same payment. */
static int same_command(const struct http_rec *a, const struct http_rec *b)
{
    if (a->creation || b->creation)
        return same_owner(a, b);
    return strcmp(a->client, b->client) == 0 && strcmp(a->key, b->key) == 0 &&
           strcmp(a->method, b->method) == 0 && strcmp(a->path, b->path) == 0;
}

/* An earlier request for h's (client, key) that got no answer: the server
 * may still have been working on it while h was sent. */
static int earlier_unanswered(const struct chk_input *in, int idx)
{
    for (int j = 0; j < idx; j++)
        if (same_command(&in->http[j], &in->http[idx]) && in->http[j].status == 0)
            return 1;
    return 0;
}

/* A 5xx answer to a creation or a transition says "nothing was stored" --
 * except the one answer that says the outcome is unknown.  A record of its (client, key)
 * whose transaction began while that request was in flight (created_at is
 * the transaction's start), with no earlier request of the key left
 * unanswered, was stored by that very request: a payment the client was
 * told does not exist.  A record from before the request (an earlier
 * success) or after its answer (a retry) is no such thing. */
static void failed_answers_stored_nothing(struct chk_ctx *c, struct chk_inv *inv)
{
    const struct chk_input *in = c->in;
    for (int i = 0; i < in->nhttp; i++) {
        const struct http_rec *h = &in->http[i];
        struct chk_transition t;
        int change = !h->creation && chk_transition(h, &t);
        if ((!h->creation && !change) || h->key[0] == '\0' || h->status < 500 ||
            strcmp(h->problem, "commit-outcome-unknown") == 0)
            continue;
        inv->checked++;
        if (earlier_unanswered(in, i))
            continue;
        const char *p[2] = { h->client, h->key };
        PGresult *r = chk_query(c,
            "SELECT (extract(epoch FROM created_at) * 1000000)::bigint, payment_id::text"
            "  FROM idempotency_records WHERE client_id = $1 AND idempotency_key = $2", 2, p);
        if (r != NULL && PQntuples(r) == 1 && atoll(PQgetvalue(r, 0, 0)) >= h->t0_us &&
            atoll(PQgetvalue(r, 0, 0)) <= h->t1_us) {
            char t1[32], t2[32];
            chk_fmt_time(atoll(PQgetvalue(r, 0, 0)), t1, sizeof(t1));
            chk_fmt_time(h->t1_us, t2, sizeof(t2));
            chk_violation(inv, "key %s of client %s was answered HTTP %d (nothing stored) on %s "
                          "at %s, yet its record, naming payment %s, was created at %s by that "
                          "request", h->key, h->client, h->status,
                          change ? t.verb : "a creation", t2, PQgetvalue(r, 0, 1), t1);
        }
        PQclear(r);
    }
}

/* A 409 key-in-flight tells the client that another request of its key is
 * still being worked on, so it waits and retries.  That is true only when
 * such a request exists: one of the same command whose time overlaps this
 * one's, or an earlier one that got no answer (the server may still be
 * working on it).  Otherwise the server refused the request for another
 * reason (a lock held by another session, say) and told the client a
 * story: a client that takes it at its word waits for a request that does
 * not exist. */
static void in_flight_answers_true(struct chk_ctx *c, struct chk_inv *inv)
{
    const struct chk_input *in = c->in;
    for (int i = 0; i < in->nhttp; i++) {
        const struct http_rec *h = &in->http[i];
        if (h->status != 409 || strcmp(h->problem, "key-in-flight") != 0 || h->key[0] == '\0')
            continue;
        inv->checked++;
        int other = 0;
        for (int j = 0; j < in->nhttp && !other; j++) {
            const struct http_rec *o = &in->http[j];
            if (j == i || !same_command(o, h))
                continue;
            other = (o->t0_us < h->t1_us && o->t1_us > h->t0_us) ||
                    (o->status == 0 && o->t0_us < h->t1_us);
        }
        if (!other) {
            char t[32];
            chk_fmt_time(h->t1_us, t, sizeof(t));
            chk_violation(inv, "key %s of client %s was answered HTTP 409 key-in-flight at %s, "
                          "yet no other request of that key was in flight: the request was "
                          "refused for another reason", h->key, h->client, t);
        }
    }
}

void inv_one_payment_per_key(struct chk_ctx *c)
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
            chk_violation(inv, "key %s of client %s created %d payments: %s, %s%s (each was "
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
                chk_violation(inv, "key %s of client %s: a retry got HTTP %d %s, the first "
                              "answer was HTTP %d %s", a->key, a->client, b->status, b->body_shown,
                              ref->status, ref->body_shown);
        }
        /* The database's view: the (client, key) record names each payment
         * the client was given. */
        for (int k = 0; k < nids; k++) {
            const char *p[3] = { a->client, a->key, ids[k] };
            long n = chk_query_long(c,
                "SELECT count(*) FROM idempotency_records"
                " WHERE client_id = $1 AND idempotency_key = $2 AND payment_id::text = $3",
                3, p);
            const struct http_rec *told = NULL;
            for (int j = i; j < in->nhttp && told == NULL; j++)
                if (same_owner(a, &in->http[j]) && in->http[j].status >= 200 &&
                    in->http[j].status <= 299 && strcmp(in->http[j].payment_id, ids[k]) == 0)
                    told = &in->http[j];
            if (n != 1)
                chk_violation_hazard(inv, told != NULL && chk_hazard_payment(c, told),
                              "key %s of client %s: its idempotency record does not name "
                              "payment %s, which the client was given", a->key, a->client, ids[k]);
        }
    }
    failed_answers_stored_nothing(c, inv);
    in_flight_answers_true(c, inv);
    PGresult *r = chk_query(c,
        "SELECT p.id::text, p.client_id FROM payments p"
        " WHERE NOT EXISTS (SELECT 1 FROM idempotency_records r WHERE r.payment_id = p.id)", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++)
        chk_violation(inv, "payment %s of client %s is named by no idempotency record: a second "
                      "payment for a key whose record names another, or one created outside "
                      "the keyed path", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
    PQclear(r);
    inv->checked += chk_query_long(c, "SELECT count(*) FROM payments", 0, NULL);
}
