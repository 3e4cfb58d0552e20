/* consumer_inbox.h -- the statements of one delivery, inside an open transaction.
 *
 * The caller (consumer_loop.c) owns BEGIN, COMMIT, ROLLBACK and the broker:
 * it commits and only then acknowledges.  This module decides, with the
 * database as the only arbiter, what one valid event means for one consumer:
 *
 *   1. lock the aggregate's applied version
 *        SELECT applied_version ... FOR UPDATE          (missing row = 0)
 *   2. classify the event's version against it
 *        version >  applied+1  GAP        nothing written; the caller records
 *                                         it (inbox_record_gap) and nacks it
 *                                         with a delay, or parks it
 *   3. claim the inbox marker (the arbiter of duplicates)
 *        INSERT INTO inbox_messages ... ON CONFLICT DO NOTHING
 *        0 rows                DUPLICATE  anomaly 'duplicate' recorded
 *   4.   version <= applied    STALE      marker kept, anomaly 'stale'
 *        version == applied+1  APPLIED    effect row written, applied
 *                                         version advanced; a parked gap
 *                                         that now follows is applied too
 *                                         (inbox_park kept its event)
 *
 * Why the version is looked at before the marker is claimed: a gap can never
 * already hold a marker (a marker is only written once the applied version
 * reached the event's version or passed it, and applied versions only grow),
 * so the gap path writes no marker that would have to be rolled back, and
 * the rest of a shared transaction (batching) stays intact.  Duplicates are
 * still decided by the unique marker alone: two deliveries of one event that
 * race both pass step 2, and the second marker INSERT waits for the first
 * transaction and then inserts nothing.  Distinct versions of one aggregate
 * are serialized by the FOR UPDATE row lock once the row exists; before it
 * exists only version 1 can be applied, and one event per version exists
 * (ux_outbox_aggregate_version).
 *
 * Fault points here: consumer/after_inbox_insert (marker inserted, effect not
 * yet applied, transaction open) and consumer/apply_fail (the effect fails). */
#ifndef CW_CONSUMER_INBOX_H
#define CW_CONSUMER_INBOX_H

#include "consumer_effect.h"
#include "consumer_event.h"

#include <libpq-fe.h>
#include <stddef.h>

enum inbox_verdict {
    INBOX_APPLIED = 0,
    INBOX_DUPLICATE,
    INBOX_STALE,
    INBOX_GAP
};

/* The longest chain of parked versions one application takes along. */
#define INBOX_MAX_CHAIN 16

struct inbox_result {
    enum inbox_verdict verdict;
    long long applied;   /* the aggregate's applied version before this event */
    /* APPLIED: parked versions that followed this one and were applied with
     * it (their ids, up to INBOX_MAX_CHAIN). */
    int unparked;
    char unparked_ids[INBOX_MAX_CHAIN][CW_UUID_LEN + 1];
};

/* inbox_process returns 0, or one of these. */
#define INBOX_ERR_SQL (-1)    /* a statement failed: sqlstate and err are set */
#define INBOX_ERR_APPLY (-2)  /* consumer/apply_fail fired: roll back and nack */

/* Steps 1-4 above for ev, in the caller's open transaction.  On any error
 * the transaction must be rolled back. */
int inbox_process(PGconn *conn, const char *consumer_name,
                  const struct consumer_effect *eff, const struct consumer_event *ev,
                  struct inbox_result *out, char sqlstate[6], char *err, size_t errlen);

/* Records a gap: the first time this consumer sees message_id out of order
 * it inserts a 'gap' anomaly (expected, got); later deliveries of the same
 * gap add nothing.  *age_ms is how long ago the gap was first recorded (0 the
 * first time): the caller parks the delivery when that exceeds its bound.
 * Returns 0 or -1 (sqlstate, err). */
int inbox_record_gap(PGconn *conn, const char *consumer_name,
                     const struct consumer_event *ev, long long expected,
                     long long *age_ms, char sqlstate[6], char *err, size_t errlen);

/* What a parked delivery is, for inbox_park. */
struct inbox_parking {
    const char *kind;          /* anomaly kind: "poison" or "gap_parked" */
    const char *message_id;    /* the delivery's message id, any text (sanitized here) */
    const char *anomaly_id;    /* uuid or "" (the anomaly's uuid column) */
    const char *aggregate_id;  /* uuid or "" */
    const char *reason;        /* never payload data */
    int deliveries;
    long long expected;        /* 0 = unknown */
    long long got;             /* 0 = unknown */
    const struct consumer_event *event;  /* a gap's validated event, kept so that
                                          * its predecessor applies it; NULL */
};

/* Parks a delivery in consumer_dead_letters (one row per consumer and
 * message; parking it again updates the row) and records the anomaly.
 * Returns 0 or -1 (sqlstate, err). */
int inbox_park(PGconn *conn, const char *consumer_name, const struct inbox_parking *p,
               char sqlstate[6], char *err, size_t errlen);

const char *inbox_verdict_name(enum inbox_verdict v);

#endif
