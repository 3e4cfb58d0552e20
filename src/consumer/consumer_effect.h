/* consumer_effect.h -- the business effect a consumer applies once per event.
 *
 * One binary serves several consumers; what differs is the effect, chosen
 * from a small table rather than by if-chains through the code:
 *
 *   effect         table            default for consumer name
 *   ledger         ledger_entries   accounting
 *   notification   notifications    notifications
 *
 * A consumer name not in the defaults needs an explicit effect (--effect).
 * Both effects store the continued trace; the ledger also stores the amount
 * and currency (NULL on events that carry none). */
#ifndef CW_CONSUMER_EFFECT_H
#define CW_CONSUMER_EFFECT_H

#include "consumer_event.h"

#include <libpq-fe.h>
#include <stddef.h>

struct consumer_effect {
    const char *name;        /* "ledger", "notification" */
    const char *table;       /* where its rows go */
    const char *insert_sql;  /* parameters: see consumer_effect_apply */
    int nparams;
};

/* The effect called name, or NULL. */
const struct consumer_effect *consumer_effect_by_name(const char *name);

/* The default effect of a consumer name, or NULL when the name has none. */
const struct consumer_effect *consumer_effect_for_consumer(const char *consumer_name);

/* A comma-separated list of effect names, for usage messages. */
const char *consumer_effect_names(void);

/* Writes the effect's row for ev inside the caller's open transaction.
 * Returns 0, or -1 with the SQLSTATE (may be "") and a message. */
int consumer_effect_apply(PGconn *conn, const struct consumer_effect *eff,
                          const char *consumer_name, const struct consumer_event *ev,
                          char sqlstate[6], char *err, size_t errlen);

#endif
