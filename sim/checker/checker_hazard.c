/* checker_hazard.c -- what a hazard scenario's setting can explain, event by
 * event.
 *
 * A hazard scenario (scenario.h: "hazard") demonstrates a loss its setting
 * allows.  Its invariants must report that loss, but a loss of the setting
 * and a bug of the pipeline look alike in an invariant's count: a consumer
 * that drops effects fails nothing_lost exactly as a failover does.  So a
 * hazard excuses a violation only when its witness is an event (or an
 * acknowledged payment) the hazard can explain, decided here from evidence
 * outside the pipeline -- the database, the broker's log, the runner's own
 * record of when it stalled replication or killed the broker:
 *
 *   replication_stall  the event is absent from the database (outbox and
 *                      outbox_removed: the promoted standby never had it)
 *                      and the broker first stored it after the stall
 *                      began; an acknowledged payment is absent from the
 *                      database and its request was sent after the stall
 *                      began.  An event the database holds is never one.
 *   broker_memory      the event is in the database and published, a
 *                      broker instance stored it before the crash, no
 *                      later instance stored it again, and the consumer
 *                      group never acknowledged it: it was held only in
 *                      the memory that died.
 *
 * Every other event is judged as in any scenario.  The hazard's "at_most"
 * bounds it: once that many events (or acknowledged payments) are
 * explained, no further one is, so a loss larger than the scenario states
 * fails as a loss. */
#include "checker.h"
#include "checker_internal.h"
#include "evlog.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* When the hazard began, from the runner's log (runner.events.jsonl): the
 * start of its db_fault event for the hazard's action; INT64_MAX when the
 * log has none (then nothing is explained). */
static int64_t hazard_began(const struct scenario *sc, const cJSON *runner_events)
{
    const char *target = sc->hazard_explains == SC_HAZARD_REPLICATION_STALL ? "postgres" : "broker";
    const char *action = sc->hazard_explains == SC_HAZARD_REPLICATION_STALL ? "stall_replication"
                                                                           : "crash";
    const cJSON *ev;
    cJSON_ArrayForEach(ev, runner_events) {
        if (!ev_field_equals(ev, "event", "db_fault") || !ev_field_equals(ev, "target", target) ||
            !ev_field_equals(ev, "action", action))
            continue;
        double started;
        return ev_num(ev, "started_us", &started) ? (int64_t)started : ev_ts(ev);
    }
    return INT64_MAX;
}

/* The broker-log test of each kind, for event id (and consumer group, or
 * NULL for any): in_db says whether the database holds the event. */
static int explains_event(enum sc_hazard_kind kind, int64_t began, const cJSON *broker_events,
                          const char *id, const char *group, int in_db)
{
    if (kind == SC_HAZARD_NONE || began == INT64_MAX || id == NULL)
        return 0;
    int stored_before = 0, stored_after = 0, acked = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, broker_events) {
        const char *mid = ev_str(ev, K_MSGID);
        if (mid == NULL || strcasecmp(mid, id) != 0)
            continue;
        int64_t at = ev_ts(ev);
        if (chk_is_publish(ev) && chk_publish_stored(ev)) {
            stored_before |= at < began;
            stored_after |= at >= began;
        } else if (strcmp(ev_name(ev), "ack") == 0 &&
                   (group == NULL || ev_field_equals(ev, "group", group))) {
            acked = 1;
        }
    }
    if (kind == SC_HAZARD_REPLICATION_STALL)
        return !in_db && stored_after && !stored_before;
    return in_db && stored_before && !stored_after && !acked;
}

int checker_hazard_explains_unconsumed(const struct scenario *sc, const cJSON *broker_events,
                                       const cJSON *runner_events, const char *id,
                                       const char *group)
{
    return explains_event(sc->hazard_explains, hazard_began(sc, runner_events), broker_events,
                          id, group, 1);
}

void chk_load_hazard(struct chk_ctx *c)
{
    c->hazard_began_us = c->in->sc->nhazard > 0 ? hazard_began(c->in->sc, c->in->runner_events)
                                                : INT64_MAX;
}

/* Records id among the explained ones of list (up to the hazard's bound):
 * 1 when it is (or was already) one of them, 0 when the bound is reached. */
static int within_bound(struct chk_ctx *c, struct chk_idset *list, const char *id)
{
    char key[40];
    chk_copy_lower(key, sizeof(key), id);
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->ids[i], key) == 0)
            return 1;
    if (list->n >= c->in->sc->hazard_at_most || list->n >= CHK_MAX_HAZARD_IDS)
        return 0;
    memcpy(list->ids[list->n++], key, sizeof(key));
    return 1;
}

int chk_hazard_event(struct chk_ctx *c, const char *id, const char *group)
{
    const struct scenario *sc = c->in->sc;
    if (sc->nhazard == 0 || id == NULL)
        return 0;
    if (!explains_event(sc->hazard_explains, c->hazard_began_us, c->in->broker_events, id, group,
                        chk_find_row(c, id) != NULL))
        return 0;
    if (!within_bound(c, &c->hazard_events, id))
        return 0;
    c->res->hazard_events = c->hazard_events.n;
    return 1;
}

int chk_hazard_payment(struct chk_ctx *c, const struct http_rec *h)
{
    const struct scenario *sc = c->in->sc;
    if (sc->nhazard == 0 || sc->hazard_explains != SC_HAZARD_REPLICATION_STALL ||
        c->hazard_began_us == INT64_MAX || h->payment_id[0] == '\0' ||
        h->t0_us < c->hazard_began_us)
        return 0;
    const char *p[1] = { h->payment_id };
    if (chk_query_long(c, "SELECT count(*) FROM payments WHERE id::text = $1", 1, p) != 0)
        return 0;
    if (!within_bound(c, &c->hazard_payments, h->payment_id))
        return 0;
    c->res->hazard_payments = c->hazard_payments.n;
    return 1;
}

int checker_inv_hazard(const struct chk_result *res, const struct scenario *sc, int inv)
{
    if (!sc_is_hazard_invariant(sc, inv))
        return 0;
    const struct chk_inv *x = &res->inv[inv];
    if (!x->ran || x->violations == 0)
        return CHK_HAZARD_NOT_CAUGHT;
    return x->hazard_explained == x->violations ? CHK_HAZARD_CAUGHT : CHK_HAZARD_UNEXPLAINED;
}
