/* consumer_effect.c -- the effect table; see consumer_effect.h.
 *
 * Every effect takes the same parameter vector, in this order, and uses a
 * prefix of it: $1 consumer_name, $2 message_id, $3 payment_id, $4 event_type,
 * $5 aggregate_version, $6 trace_parent, $7 amount, $8 currency.  Adding an
 * effect is one row here, plus its table in the invariant checker's list
 * (EFFECT_TABLES in sim/checker/checker_load.c): the checker keeps its own list on purpose,
 * so that it judges the database without trusting the code under test. */
#include "consumer_effect.h"
#include "mutant.h"
#include "pgx.h"

#include <stdio.h>
#include <string.h>

static const struct consumer_effect effects[] = {
    { "ledger", "ledger_entries",
      "INSERT INTO ledger_entries (consumer_name, message_id, payment_id, event_type,"
      " aggregate_version, trace_parent, amount, currency)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
      8 },
    { "notification", "notifications",
      "INSERT INTO notifications (consumer_name, message_id, payment_id, event_type,"
      " aggregate_version, trace_parent)"
      " VALUES ($1, $2, $3, $4, $5, $6)",
      6 },
};

static const struct {
    const char *consumer_name;
    const char *effect;
} defaults[] = {
    { "accounting", "ledger" },
    { "notifications", "notification" },
};

const struct consumer_effect *consumer_effect_by_name(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(effects) / sizeof(effects[0]); i++)
        if (strcmp(effects[i].name, name) == 0)
            return &effects[i];
    return NULL;
}

const struct consumer_effect *consumer_effect_for_consumer(const char *consumer_name)
{
    for (size_t i = 0; consumer_name != NULL && i < sizeof(defaults) / sizeof(defaults[0]); i++)
        if (strcmp(defaults[i].consumer_name, consumer_name) == 0)
            return consumer_effect_by_name(defaults[i].effect);
    return NULL;
}

const char *consumer_effect_names(void)
{
    return "ledger, notification";
}

int consumer_effect_apply(PGconn *conn, const struct consumer_effect *eff,
                          const char *consumer_name, const struct consumer_event *ev,
                          char sqlstate[6], char *err, size_t errlen)
{
    char version[24];
    snprintf(version, sizeof(version), "%lld", ev->version);
    char amount[sizeof(ev->amount)];
    snprintf(amount, sizeof(amount), "%s", ev->amount);
    if (CW_MUTANT(effect_amount_without_cents))
        amount[strcspn(amount, ".")] = '\0';
    const char *params[8] = {
        consumer_name,
        ev->message_id,
        ev->payment_id,
        ev->type_name,
        version,
        ev->trace,
        ev->has_amount ? amount : NULL,
        ev->has_currency ? ev->currency : NULL,
    };
    return pgx_cmd(conn, eff->insert_sql, eff->nparams, params, sqlstate, err, errlen);
}
