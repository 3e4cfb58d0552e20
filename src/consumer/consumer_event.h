/* consumer_event.h -- a delivery of the "payments" topic, parsed and validated.
 *
 * The consumers trust nothing that arrives from the broker.  A delivery is
 * turned into a consumer_event only when every header and payload field the
 * effect needs is present, well-typed and consistent; anything else is a
 * poison message, and the reason says which rule it broke without quoting a
 * byte of the payload (reasons end up in consumer_dead_letters and in logs).
 *
 * Rules (schema version 1, the only one this consumer knows):
 *   headers   message_id is a uuid; schema_version is 1; type is one of
 *             PaymentCreated, PaymentAuthorized, PaymentCaptured; when
 *             partition_key or aggregate_version are present they agree
 *             with the payload.
 *   payload   a JSON object with EventId (uuid equal to message_id),
 *             PaymentId (uuid), AggregateVersion (integer >= 1),
 *             OccurredAtUtc (string).  PaymentCreated also carries Amount,
 *             an exact decimal string (digits, at most 2 decimals, > 0, at
 *             most 18 integer digits: numeric(20,2)) and Currency (three
 *             uppercase letters); other types may carry them, and then they
 *             are validated the same way.  Amount is never converted to a
 *             floating-point number.
 *
 * The trace is continued here too: the consumer's own span is a child of the
 * message's traceparent (same trace id, new span id); a missing or invalid
 * traceparent starts a new trace rather than poisoning the message, because
 * tracing must never decide whether money is booked. */
#ifndef CW_CONSUMER_EVENT_H
#define CW_CONSUMER_EVENT_H

#include "bus.h"
#include "ids.h"

#include <stddef.h>

#define CONSUMER_SCHEMA_VERSION 1
#define CONSUMER_AMOUNT_MAX 32
/* Payloads larger than this are poison: the events are a few hundred bytes. */
#define CONSUMER_PAYLOAD_MAX (64 * 1024)

enum consumer_event_type {
    EVENT_PAYMENT_CREATED = 1,
    EVENT_PAYMENT_AUTHORIZED,
    EVENT_PAYMENT_CAPTURED
};

struct consumer_event {
    char message_id[CW_UUID_LEN + 1];  /* lowercase */
    char payment_id[CW_UUID_LEN + 1];  /* the aggregate id, lowercase */
    enum consumer_event_type type;
    const char *type_name;             /* static string, e.g. "PaymentCreated" */
    long long version;                 /* AggregateVersion, >= 1 */
    int has_amount;
    char amount[CONSUMER_AMOUNT_MAX];  /* exact decimal text as received */
    int has_currency;
    char currency[4];
    int has_parent_trace;              /* the message carried a valid traceparent */
    char parent_trace[CW_TRACEPARENT_LEN + 1];
    char trace[CW_TRACEPARENT_LEN + 1]; /* this consumer's span: a child of parent_trace */
};

/* Parses and validates d into ev and continues its trace.  Returns 0, or -1
 * with a short reason (never payload data) in reason; ev is then only
 * partially filled: see consumer_event_ids for what a poison message still
 * tells about itself. */
int consumer_event_parse(const struct bus_delivery *d, struct consumer_event *ev,
                         char *reason, size_t reasonlen);

/* What a delivery says about its identity even when it is poison: the
 * message id when it is a uuid (else ""), and the aggregate id from
 * partition_key when that is a uuid (else "").  Both lowercase. */
void consumer_event_ids(const struct bus_delivery *d, char message_id[CW_UUID_LEN + 1],
                        char aggregate_id[CW_UUID_LEN + 1]);

/* The known event type called name: its static name string, with *type
 * set; NULL when name is not a type this consumer knows. */
const char *consumer_event_type_name(const char *name, enum consumer_event_type *type);

/* The key of the inbox marker: the event id, always.  (Writes 37 bytes.) */
void consumer_event_inbox_key(const struct consumer_event *ev, char out[CW_UUID_LEN + 1]);

/* 1 when s is an exact positive decimal that fits numeric(20,2): 1-18
 * digits, optionally '.' and 1-2 digits, not zero.  Exposed for tests. */
int consumer_amount_valid(const char *s);

/* A printable, bounded copy of an untrusted identifier for storage as text
 * (bytes outside printable ASCII become '?', at most outlen-1 bytes; NULL or
 * empty becomes "(missing)"). */
void consumer_safe_text(const char *s, char *out, size_t outlen);

#endif
