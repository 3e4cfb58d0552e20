/* checker_leases.c -- the invariants of the relays' leases and retries:
 * one live lease per row, publishes inside it, backoffs kept, dead letters
 * at the limit and for a cause the harness saw, sessions that never sit idle in a transaction, relays that
 * recover once the faults are off (invariants 6-8 and 11-13; invariants.c
 * states each).  Most read the claim history (claim_history.h). */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"
#include "fault.h"
#include "pgx.h"
#include "sanitize.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
static void leases_from_history(struct chk_ctx *c, struct chk_inv *inv)
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
            chk_fmt_time(b->claimed_us, t1, sizeof(t1));
            chk_violation(inv, "message %s was claimed at %s (claim %s) with a lease of %.3f ms, "
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
            chk_fmt_time(b->claimed_us, t1, sizeof(t1));
            chk_fmt_time(a->claimed_us, t2, sizeof(t2));
            chk_fmt_time(a->until_us, t3, sizeof(t3));
            chk_violation(inv, "message %s was claimed at %s (claim %s) while the lease of its "
                          "claim %s, taken at %s, was live until %s and never released "
                          "(claim history)", b->id, t1, b->token, a->token, t2, t3);
            break;
        }
    }
    free(v);
}

/* A settle by a claim that no longer held the row: the fenced mark needs
 * published_at IS NULL, so a row marked published a second time (the
 * history's 'remark') was marked by a worker whose lease another had taken,
 * or whose row another had already settled. */
static void remarks_from_history(struct chk_ctx *c, struct chk_inv *inv)
{
    PGresult *r = chk_query(c,
        "SELECT lower(message_id::text), coalesce(lower(lock_id::text), 'none'),"
        "       (extract(epoch FROM claimed_at) * 1000000)::bigint"
        "  FROM crashwindow_claims WHERE kind = 'remark' ORDER BY seq", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        char t[32];
        chk_fmt_time(atoll(PQgetvalue(r, i, 2)), t, sizeof(t));
        chk_violation(inv, "message %s, already published, was marked published again at %s "
                      "(the row's lease then was claim %s): a stale worker marked a row that was "
                      "no longer its own (claim history)", PQgetvalue(r, i, 0), t,
                      PQgetvalue(r, i, 1));
    }
    PQclear(r);
}

/* Only the claim history is evidence (claim_history.h): a run directory
 * older than it has nothing to hold the relays to, and the invariant then
 * checks nothing rather than take their word. */
void inv_no_two_live_leases(struct chk_ctx *c)
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
static const struct retry_rec *claimed_in_backoff(const struct chk_ctx *c,
                                                  const struct claim_rec *cl)
{
    int i;
    FIRST_OF(c->retries, c->nretries, cl->id, i);
    for (; i < c->nretries && strcmp(c->retries[i].id, cl->id) == 0; i++) {
        const struct retry_rec *r = &c->retries[i];
        if (r->seq < cl->seq && cl->claimed_us < r->next_us &&
            !chk_requeued_between(c, cl->id, r->at_us, cl->claimed_us))
            return r;
    }
    return NULL;
}

void inv_retry_respects_backoff(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_RETRY_RESPECTS_BACKOFF];
    inv->ran = 1;
    if (!c->has_claim_history)
        return;
    char t1[32], t2[32], t3[32];
    for (int i = 0; i < c->nretries; i++) {
        const struct retry_rec *r = &c->retries[i];
        inv->checked++;
        chk_fmt_time(r->at_us, t1, sizeof(t1));
        if (r->next_us <= r->at_us) {
            if (r->next_us == LLONG_MIN)
                snprintf(t2, sizeof(t2), "none");
            else
                chk_fmt_time(r->next_us, t2, sizeof(t2));
            chk_violation(inv, "message %s was retried at %s (ending claim %s) without a backoff: "
                          "the row holds next_attempt_at %s, not a moment after the retry "
                          "(claim history)", r->id, t1, r->token, t2);
            continue;
        }
        int k;
        FIRST_OF(c->claims_seq, c->nclaims, r->id, k);
        for (; k < c->nclaims && strcmp(c->claims_seq[k].id, r->id) == 0; k++) {
            const struct claim_rec *cl = &c->claims_seq[k];
            if (cl->seq < r->seq || cl->claimed_us >= r->next_us ||
                chk_requeued_between(c, r->id, r->at_us, cl->claimed_us))
                continue;
            chk_fmt_time(cl->claimed_us, t2, sizeof(t2));
            chk_fmt_time(r->next_us, t3, sizeof(t3));
            chk_violation(inv, "message %s was claimed at %s (claim %s), before the "
                          "next_attempt_at %s that its retry at %s persisted (claim history)",
                          r->id, t2, cl->token, t3, t1);
            break;
        }
    }
    const cJSON *b;
    cJSON_ArrayForEach(b, c->in->broker_events) {
        if (!chk_is_publish(b))
            continue;
        const struct claim_rec *made = chk_find_claim(c, ev_str(b, K_MSGID), ev_str(b, K_TOKEN));
        if (made == NULL)
            continue; /* under no committed claim: publish_within_lease's business */
        inv->checked++;
        const struct retry_rec *r = claimed_in_backoff(c, made);
        if (r == NULL)
            continue;
        chk_fmt_time(ev_ts(b), t1, sizeof(t1));
        chk_fmt_time(made->claimed_us, t2, sizeof(t2));
        chk_fmt_time(r->next_us, t3, sizeof(t3));
        chk_violation(inv, "message %s reached the broker at %s under claim %s, taken at %s inside "
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
                !chk_requeued_between(c, bcl->id, a->claimed_us, bcl->claimed_us))
                chk_violation(inv, "message %s was claimed with attempts %d (claim %s) after "
                              "attempts %d (claim %s): attempts went backwards", bcl->id,
                              bcl->attempts, bcl->token, a->attempts, a->token);
        }
        const struct orow *o = last ? chk_find_row(c, bcl->id) : NULL;
        if (o == NULL)
            continue;
        inv->checked++;
        if (o->attempts < bcl->attempts &&
            !chk_requeued_between(c, o->id, bcl->claimed_us, INT64_MAX))
            chk_violation(inv, "message %s holds attempts = %d although its last claim (%s) "
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
        struct orow *o = chk_is_publish(b) ? chk_find_row(c, ev_str(b, K_MSGID)) : NULL;
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
            chk_violation(inv, "message %s reached the broker %d times but only %ld claims "
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

/* ---- the cause of a dead letter -----------------------------------------
 *
 * A dead letter gives an event up, so it needs a cause the harness saw, not
 * only the relay's count of attempts: a relay that never reached the broker
 * would otherwise dead-letter its rows and pass.  A cause is one of: a
 * publish of the event that the broker refused, left unanswered or stored
 * without its confirm (the broker's log); a fault on the relays' path to
 * the broker while the event was being attempted -- a broker switch that
 * fails or slows publishes, a restart of the broker (broker_crash: a new
 * "start" in its log), connections it closed, a fault the scenario sets on
 * a relay's broker link; a fault point the scenario armed in a relay that
 * fired then (its "fault_hit" lines, the record faults_fired counts); or
 * the scenario planting the event as poison ("poison_events").  Times are
 * compared with a second's slack: the broker's log and the database read
 * the same host clock, but not in the same instant. */

#define CAUSE_SLACK_US 1000000LL

/* Is ts between from and to, give or take the slack?  from may be
 * INT64_MIN: since the start. */
static int in_window(int64_t ts, int64_t from, int64_t to)
{
    return (from == INT64_MIN || ts >= from - CAUSE_SLACK_US) && ts <= to + CAUSE_SLACK_US;
}

/* 1 when a broker control line leaves a switch set that fails, refuses or
 * slows every publish (fakebroker.h: the switches after the change).  Not
 * max_payload_bytes: it refuses only the payloads over it, and each such
 * refusal is in the log under its message's id. */
static int control_faults_publish(const cJSON *ev)
{
    static const char *const switches[] = { "delay_ms", "drop_before_confirm" };
    const char *outage = ev_str(ev, "outage");
    if (outage != NULL && strcmp(outage, "off") != 0)
        return 1;
    for (size_t i = 0; i < sizeof(switches) / sizeof(switches[0]); i++) {
        double v;
        if (ev_num(ev, switches[i], &v) && v > 0)
            return 1;
    }
    return 0;
}

/* The broker log's word on event id between from and to: a failed publish
 * of it, or a fault of the broker in that time, into why.  1 when found. */
static int broker_cause(const struct chk_ctx *c, const char *id, int64_t from, int64_t to,
                        char *why, size_t whylen)
{
    long failed = 0;
    const char *failed_how = NULL;
    int switched_before = 0, starts = 0;
    char at[32];
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        const char *name = ev_name(ev);
        int64_t ts = ev_ts(ev);
        int inside = in_window(ts, from, to);
        if (strcmp(name, "publish") == 0) {
            const char *mid = ev_str(ev, K_MSGID), *st = ev_str(ev, K_STATUS),
                       *confirm = ev_str(ev, "confirm");
            if (mid == NULL || strcasecmp(mid, id) != 0 || st == NULL)
                continue;
            if (strcmp(st, "stored") != 0) {
                failed++;
                failed_how = st;
            } else if (confirm != NULL && strcmp(confirm, "dropped") == 0) {
                failed++;
                failed_how = "stored without a confirm";
            }
        } else if (strcmp(name, "control") == 0) {
            if (!inside && ts < to) {
                switched_before = control_faults_publish(ev);
            } else if (inside && control_faults_publish(ev)) {
                chk_fmt_time(ts, at, sizeof(at));
                snprintf(why, whylen, "a broker switch failing publishes was set at %s", at);
                return 1;
            }
        } else if (strcmp(name, "start") == 0) {
            if (starts++ > 0 && inside) {
                chk_fmt_time(ts, at, sizeof(at));
                snprintf(why, whylen, "the broker was restarted at %s", at);
                return 1;
            }
        } else if (strcmp(name, "disconnect") == 0 && inside) {
            const char *reason = ev_str(ev, "reason");
            if (reason != NULL && strcmp(reason, "closed_by_broker") == 0) {
                chk_fmt_time(ts, at, sizeof(at));
                snprintf(why, whylen, "the broker closed its connections at %s", at);
                return 1;
            }
        }
    }
    if (failed > 0) {
        snprintf(why, whylen, "the broker logged %ld failed publishes of it (last: %s)", failed,
                 failed_how);
        return 1;
    }
    if (switched_before) {
        snprintf(why, whylen, "a broker switch failing publishes was set before its attempts");
        return 1;
    }
    return 0;
}

/* Does the scenario arm fault point `point` in process p, at its autostart
 * or on one of its start steps?  Read with the processes' own parser. */
static int scenario_arms_point(const struct scenario *sc, int p, const char *point)
{
    for (int i = -1; i < sc->nsteps; i++) {
        const char *spec = i < 0 ? sc->procs[p].faults
                           : sc->steps[i].proc == p ? sc->steps[i].faults : NULL;
        struct fault_item items[FAULT_MAX_ITEMS];
        char err[200];
        int n = spec != NULL ? fault_parse_items(spec, items, err, sizeof(err)) : 0;
        for (int k = 0; k < n; k++)
            if (strcmp(items[k].name, point) == 0)
                return 1;
    }
    return 0;
}

/* A fault the scenario puts on a relay: a fault point it armed in the
 * relay that fired between from and to (the line the fault library writes
 * when it injects, counted by faults_fired: the harness's fault, not the
 * relay's account of a failure), or a net step on its broker link.  1 with
 * why. */
static int relay_fault_cause(const struct chk_ctx *c, int64_t from, int64_t to, char *why,
                             size_t whylen)
{
    const struct scenario *sc = c->in->sc;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_RELAY)
            continue;
        const cJSON *ev;
        cJSON_ArrayForEach(ev, c->in->proc_events[p]) {
            int64_t ts = ev_ts(ev);
            if (strcmp(ev_name(ev), "fault_hit") != 0 || !in_window(ts, from, to))
                continue;
            const char *point = ev_str(ev, "point"), *action = ev_str(ev, "action");
            if (point == NULL || !scenario_arms_point(sc, p, point))
                continue;
            char at[32];
            chk_fmt_time(ts, at, sizeof(at));
            snprintf(why, whylen, "%s hit fault point %s (%s) at %s", sc->procs[p].name, point,
                     action ? action : "?", at);
            return 1;
        }
    }
    /* The runner applies a net step or fails the run (runner_net.c); its
     * time is not part of the checker's evidence, so any step counts. */
    for (int i = 0; i < sc->nsteps; i++) {
        const struct sc_step *st = &sc->steps[i];
        if (st->verb != V_NET || st->net_clear || st->net_peer == NP_PG || st->proc < 0 ||
            sc->procs[st->proc].kind != SC_RELAY)
            continue;
        snprintf(why, whylen, "step %d faults link %s", i + 1, st->link);
        return 1;
    }
    return 0;
}

/* When the attempts of row id that ended at `to` (its dead letter, or the
 * requeue that lifted it) began: its first committed claim after the
 * previous requeue, or INT64_MIN when the claim history has none. */
static int64_t attempts_began(const struct chk_ctx *c, const char *id, int64_t to)
{
    int64_t after = INT64_MIN, first = INT64_MAX;
    for (int i = 0; i < c->nrequeues; i++)
        if (strcasecmp(c->requeues[i].id, id) == 0 && c->requeues[i].at_us < to &&
            c->requeues[i].at_us > after)
            after = c->requeues[i].at_us;
    for (int i = 0; i < c->nclaims; i++) {
        const struct claim_rec *k = &c->claims[i];
        if (strcasecmp(k->id, id) == 0 && k->claimed_us > after && k->claimed_us <= to &&
            k->claimed_us < first)
            first = k->claimed_us;
    }
    return first == INT64_MAX ? after : first;
}

/* Checks that the dead letter of id (attempts, ended at `to`) has a cause
 * (above); a violation of inv naming the event otherwise. */
static void dead_letter_has_cause(struct chk_ctx *c, struct chk_inv *inv, const char *id,
                                  int attempts, int64_t to, const char *what)
{
    char why[200];
    int64_t from = attempts_began(c, id, to);
    if (chk_names_poison(c->in->sc, id) || broker_cause(c, id, from, to, why, sizeof(why)) ||
        relay_fault_cause(c, from, to, why, sizeof(why)))
        return;
    char t0[32], t1[32];
    chk_fmt_time(from, t0, sizeof(t0));
    chk_fmt_time(to, t1, sizeof(t1));
    chk_violation(inv, "event %s was %s after %d attempts without cause: the broker refused or "
                  "failed no publish of it, nothing faulted the relays' path to the broker "
                  "while it was attempted (%s to %s), and the scenario names it as no poison",
                  id, what, attempts, from == INT64_MIN ? "the start" : t0, t1);
}

/* Dead letters come at the limit, never before it.  The row's attempts may
 * pass the limit legitimately: a relay that crashes (or loses its lease) on
 * the claim at the limit never settles it, and the next claim counts one
 * more.  What must not happen is a settled failure at or past the limit
 * that is retried instead of dead-lettered: checked on every retry the
 * claim history recorded (claim_history.h), so the claim before a dead
 * letter at limit + k did not end in a retry.  Every error the relay
 * stored, at a dead letter or at a retry, is sanitized. */
void inv_dead_letter_at_limit(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_DEAD_LETTER_AT_LIMIT];
    int limit, highest;
    relay_limits(c->in->sc, &limit, &highest);
    PGresult *r = chk_query(c,
        "SELECT id::text, attempts, last_error, payload::text,"
        "       (extract(epoch FROM dead_lettered_at) * 1000000)::bigint"
        "  FROM outbox_messages WHERE dead_lettered_at IS NOT NULL ORDER BY dead_lettered_at", 0, NULL);
    if (r == NULL)
        return;
    inv->ran = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        int attempts = atoi(PQgetvalue(r, i, 1));
        if (attempts < limit)
            chk_violation(inv, "event %s was dead-lettered after %d attempts, before the limit "
                          "(%d)", PQgetvalue(r, i, 0), attempts, limit);
        dead_letter_has_cause(c, inv, PQgetvalue(r, i, 0), attempts,
                              atoll(PQgetvalue(r, i, 4)), "dead-lettered");
        if (PQgetisnull(r, i, 2)) {
            chk_violation(inv, "event %s was dead-lettered without a last_error",
                          PQgetvalue(r, i, 0));
            continue;
        }
        char why[160];
        if (!checker_error_sanitized(PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), why, sizeof(why)))
            chk_violation(inv, "event %s: last_error is not sanitized: %s", PQgetvalue(r, i, 0),
                          why);
    }
    PQclear(r);
    /* A requeued dead letter was dead at the limit too, and its recorded
     * error was sanitized then.  A consumer's parked replay restarts its
     * published row the same way (outboxctl parked replay writes both
     * records in one statement, hence one now()): that row was never a
     * dead letter of the relay. */
    r = chk_query(c,
        "SELECT q.message_id::text, q.attempts_before, q.last_error_before, o.payload::text,"
        "       (extract(epoch FROM q.requeued_at) * 1000000)::bigint"
        "  FROM outbox_requeues q LEFT JOIN outbox_messages o ON o.id = q.message_id"
        " WHERE NOT EXISTS (SELECT 1 FROM consumer_replays p"
        "                    WHERE p.message_id = q.message_id AND p.replayed_at = q.requeued_at)"
        " ORDER BY q.id", 0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        int attempts = atoi(PQgetvalue(r, i, 1));
        if (attempts < limit)
            chk_violation(inv, "event %s was requeued from a dead letter with %d attempts, "
                          "before the limit (%d)", PQgetvalue(r, i, 0), attempts, limit);
        dead_letter_has_cause(c, inv, PQgetvalue(r, i, 0), attempts,
                              atoll(PQgetvalue(r, i, 4)), "dead-lettered (and later requeued)");
        char why[160];
        if (!PQgetisnull(r, i, 2) &&
            !checker_error_sanitized(PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), why, sizeof(why)))
            chk_violation(inv, "event %s: its dead-letter error was not sanitized: %s",
                          PQgetvalue(r, i, 0), why);
    }
    PQclear(r);
    /* The error each retry stored, which the row keeps only until the next
     * settle: sanitized too, from the first refusal on, not only at the
     * limit. */
    if (c->has_claim_history) {
        r = chk_query(c,
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
                chk_violation(inv, "event %s: the error its retry at attempt %s stored is not "
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
            chk_violation(inv, "message %s was retried (claim %s) at attempt %d although the "
                          "relays' attempt limit is %d: it should have been dead-lettered",
                          t->id, t->token, t->attempts, highest);
    }
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

/* Is name one of the scenario's relays? */
static int is_relay(const struct scenario *sc, const char *name)
{
    for (int p = 0; p < sc->nprocs; p++)
        if (sc->procs[p].kind == SC_RELAY && strcmp(sc->procs[p].name, name) == 0)
            return 1;
    return 0;
}

void inv_publish_within_lease(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_PUBLISH_WITHIN_LEASE];
    inv->ran = 1;
    if (!c->has_claim_history)
        return; /* a database the runner did not prepare: nothing to hold it to */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, c->in->broker_events) {
        if (!chk_is_publish(ev) || !chk_publish_stored(ev))
            continue;
        const char *id = ev_str(ev, K_MSGID);
        const char *token = ev_str(ev, K_TOKEN);
        double at;
        /* The fake broker writes stored_us, the instant it checked the
         * lease; the RabbitMQ bridge cannot know it and writes none: its
         * line's own ts_us, when the trace reached it, is an upper bound
         * (rabbitbridge_main.c).  Two clocks, not two names of one. */
        const char *client = ev_str(ev, "client");
        if (token == NULL) {
            /* Every relay's publish carries its claim's token on both buses;
             * one without it is a publish nobody can hold to a lease. */
            if (client != NULL && is_relay(c->in->sc, client)) {
                inv->checked++;
                chk_violation(inv, "message %s was stored (from %s) without the claim token "
                              "every relay publish carries: a publish under no lease anyone "
                              "can check", id, client);
            }
            continue;
        }
        /* A line written late (the bridge catching up after a reconnect)
         * bounds nothing in time: its token is held to its claim only. */
        int late = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "ts_late"));
        if (!ev_num(ev, "stored_us", &at))
            at = (double)ev_ts(ev);
        inv->checked++;
        const struct claim_rec *hit = chk_find_claim(c, id, token);
        if (hit == NULL)
            chk_violation_hazard(inv, chk_hazard_event(c, id, NULL), "message %s was stored (from %s) under claim token %s, which no "
                          "committed claim of that row holds: a publish under no lease", id,
                          client ? client : "an unnamed client", token);
        else if (late)
            continue;
        else if ((long long)at < hit->committed_us)
            chk_violation(inv, "message %s reached the broker (from %s) %.1f ms before its claim "
                          "%s committed: published under a lease no other worker could see yet, "
                          "which a rollback of the claim would have undone while the message "
                          "stayed published", id, client ? client : "an unnamed client",
                          (hit->committed_us - (long long)at) / 1000.0, token);
        else if ((long long)at > hit->until_us)
            chk_violation(inv, "message %s reached the broker (from %s) %.1f ms after the lease of "
                          "its claim %s ended, when the row may already have been another "
                          "worker's", id, client ? client : "an unnamed client",
                          ((long long)at - hit->until_us) / 1000.0, token);
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

void inv_idle_transactions_bounded(struct chk_ctx *c)
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
        chk_fmt_time(e->began_us, t, sizeof(t));
        chk_violation(inv, "a session of %s (server pid %ld) sat idle inside an open transaction "
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

void inv_relay_recovers_after_heal(struct chk_ctx *c)
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
    PGresult *r = chk_query(c,
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
        chk_fmt_time(atoll(PQgetvalue(r, i, 5)), off, sizeof(off));
        chk_fmt_time(atoll(PQgetvalue(r, i, 4)), at, sizeof(at));
        chk_violation(inv, "relay worker %s failed the publishes of two claims in a row after "
                      "every fault was off (at %s): claim %s, then claim %s at %s, with nothing of "
                      "its published between them: it kept a broken broker connection instead of "
                      "opening a new one", w, off, first, PQgetvalue(r, i, 1), at);
    }
    PQclear(r);
    r = chk_query(c,
        "SELECT coalesce(proc, ''), coalesce(connected, false),"
        "       (extract(epoch FROM claimed_at) * 1000000)::bigint, kind"
        "  FROM crashwindow_claims WHERE kind IN ('session', 'broker_session') ORDER BY seq",
        0, NULL);
    if (r == NULL)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        inv->checked++;
        if (PQgetvalue(r, i, 1)[0] == 't')
            continue;
        char at[32];
        chk_fmt_time(atoll(PQgetvalue(r, i, 2)), at, sizeof(at));
        if (strcmp(PQgetvalue(r, i, 3), "broker_session") == 0)
            chk_violation(inv, "%s was still running when the heal ended (at %s) but held no "
                          "connection to the broker (its link had none open): it kept a broker "
                          "connection it had lost instead of opening a new one",
                          PQgetvalue(r, i, 0), at);
        else
            chk_violation(inv, "%s was still running when the heal ended (at %s) but the "
                          "database listed no session of it: it kept a database connection it "
                          "had lost instead of opening a new one, and will never claim again",
                          PQgetvalue(r, i, 0), at);
    }
    PQclear(r);
}

/* ---- marks_committed ------------------------------------------------------ */

/* A relay's account of what it marked is held to the database's.  A mark
 * the relay believes while its transaction never committed -- a pipeline
 * whose connection was lost with the COMMIT in flight, a refused COMMIT
 * read as a success -- costs nothing at once (the row is published again
 * when its lease ends, and the inbox absorbs the copy), which is why no
 * other invariant sees it; but the relay's counts and its operator's view
 * are then wrong, and a relay that trusts an unconfirmed mark trusts other
 * unconfirmed things too.  The evidence is the claim history: each
 * committed claim, with whether a release by a mark (recorded by the
 * trigger inside the marking transaction, so only when it committed) ended
 * it.  Under a replication-stall hazard the database is the promoted
 * standby, which never got what the old primary committed after the stall:
 * marks reported from then on are not judged. */
void inv_marks_committed(struct chk_ctx *c)
{
    struct chk_inv *inv = &c->res->inv[INV_MARKS_COMMITTED];
    if (!c->has_claim_history)
        return;
    inv->ran = 1;
    const struct scenario *sc = c->in->sc;
    int64_t unjudged_from = sc->hazard_explains == SC_HAZARD_REPLICATION_STALL
                                ? c->hazard_began_us : INT64_MAX;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_RELAY)
            continue;
        const cJSON *ev;
        cJSON_ArrayForEach(ev, c->in->proc_events[p]) {
            if (strcmp(ev_name(ev), "mark") != 0 || ev_ts(ev) >= unjudged_from)
                continue;
            const char *token = ev_str(ev, "token");
            const cJSON *id;
            cJSON_ArrayForEach(id, ev_arr(ev, "ids")) {
                inv->checked++;
                const struct claim_rec *k = chk_find_claim(c, id->valuestring, token);
                if (k != NULL && k->marked)
                    continue;
                char at[32];
                chk_fmt_time(ev_ts(ev), at, sizeof(at));
                chk_violation(inv, "%s reported event %s marked published under claim %s at %s, "
                              "but no committed transaction marked it under that claim: the "
                              "relay believed a mark the database never kept",
                              sc->procs[p].name, id->valuestring, token, at);
            }
        }
    }
}
