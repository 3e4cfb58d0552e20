/* consumer_event.c -- parsing and validating a delivery; see consumer_event.h.
 *
 * Every rule is checked in the order a reader would expect (headers first,
 * then the payload), and the first broken rule names the poison.  The payload
 * is parsed with cJSON; numbers are only used for AggregateVersion, whose
 * range (< 2^53) is exact in a double.  Amount stays text from the wire to the
 * numeric column. */
#include "consumer_event.h"
#include "mutant.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* AggregateVersion above this is not exactly representable as read by cJSON. */
#define VERSION_MAX 9007199254740991.0

static const struct {
    const char *name;
    enum consumer_event_type type;
} event_types[] = {
    { "PaymentCreated", EVENT_PAYMENT_CREATED },
    { "PaymentAuthorized", EVENT_PAYMENT_AUTHORIZED },
    { "PaymentCaptured", EVENT_PAYMENT_CAPTURED },
};

const char *consumer_event_type_name(const char *name, enum consumer_event_type *type)
{
    for (size_t i = 0; i < sizeof(event_types) / sizeof(event_types[0]); i++) {
        if (strcmp(name, event_types[i].name) == 0) {
            *type = event_types[i].type;
            return event_types[i].name;
        }
    }
    return NULL;
}

static void set_reason(char *reason, size_t len, const char *msg)
{
    if (reason != NULL && len > 0)
        snprintf(reason, len, "%s", msg);
}

/* Copies a valid uuid in lowercase. */
static void uuid_lower(const char *in, char out[CW_UUID_LEN + 1])
{
    for (int i = 0; i < CW_UUID_LEN; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[CW_UUID_LEN] = '\0';
}

int consumer_amount_valid(const char *s)
{
    if (s == NULL)
        return 0;
    size_t i = 0, ints = 0, decs = 0;
    int nonzero = 0;
    while (s[i] >= '0' && s[i] <= '9') {
        if (s[i] != '0')
            nonzero = 1;
        i++;
        ints++;
    }
    if (ints == 0 || ints > 18)
        return 0;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9') {
            if (s[i] != '0')
                nonzero = 1;
            i++;
            decs++;
        }
        if (decs == 0 || decs > 2)
            return 0;
    }
    return s[i] == '\0' && nonzero;
}

static int currency_valid(const char *s)
{
    if (s == NULL || strlen(s) != 3)
        return 0;
    for (int i = 0; i < 3; i++)
        if (s[i] < 'A' || s[i] > 'Z')
            return 0;
    return 1;
}

void consumer_safe_text(const char *s, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    if (s == NULL || *s == '\0') {
        snprintf(out, outlen, "%s", "(missing)");
        return;
    }
    size_t n = 0;
    for (; s[n] != '\0' && n + 1 < outlen; n++) {
        unsigned char c = (unsigned char)s[n];
        out[n] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[n] = '\0';
}

void consumer_event_ids(const struct bus_delivery *d, char message_id[CW_UUID_LEN + 1],
                        char aggregate_id[CW_UUID_LEN + 1])
{
    message_id[0] = '\0';
    aggregate_id[0] = '\0';
    if (d->message_id != NULL && cw_uuid_valid(d->message_id))
        uuid_lower(d->message_id, message_id);
    if (d->partition_key != NULL && cw_uuid_valid(d->partition_key))
        uuid_lower(d->partition_key, aggregate_id);
}

/* The string member `key` of obj when it is a string, else NULL. */
static const char *str_field(const cJSON *obj, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* Validates the payload object against the rules; fills ev. */
static int parse_payload(const struct bus_delivery *d, const cJSON *root,
                         struct consumer_event *ev, char *reason, size_t reasonlen)
{
    const char *event_id = str_field(root, "EventId");
    if (event_id == NULL || !cw_uuid_valid(event_id)) {
        set_reason(reason, reasonlen, "EventId is missing or not a uuid");
        return -1;
    }
    if (strcasecmp(event_id, ev->message_id) != 0) {
        set_reason(reason, reasonlen, "EventId does not match message_id");
        return -1;
    }

    const char *payment_id = str_field(root, "PaymentId");
    if (payment_id == NULL || !cw_uuid_valid(payment_id)) {
        set_reason(reason, reasonlen, "PaymentId is missing or not a uuid");
        return -1;
    }
    uuid_lower(payment_id, ev->payment_id);
    if (d->partition_key != NULL && strcasecmp(d->partition_key, ev->payment_id) != 0) {
        set_reason(reason, reasonlen, "PaymentId does not match partition_key");
        return -1;
    }

    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "AggregateVersion");
    /* The range check comes first, so the cast that tests "whole" is exact. */
    if (!cJSON_IsNumber(ver) || !(ver->valuedouble >= 1 && ver->valuedouble <= VERSION_MAX) ||
        (double)(long long)ver->valuedouble != ver->valuedouble) {
        set_reason(reason, reasonlen, "AggregateVersion is missing or not a positive integer");
        return -1;
    }
    ev->version = (long long)ver->valuedouble;
    if (d->aggregate_version != 0 && d->aggregate_version != ev->version) {
        set_reason(reason, reasonlen,
                   "AggregateVersion does not match the aggregate_version header");
        return -1;
    }

    const char *occurred = str_field(root, "OccurredAtUtc");
    if (occurred == NULL || occurred[0] == '\0' || strlen(occurred) > 64) {
        set_reason(reason, reasonlen, "OccurredAtUtc is missing or not a timestamp string");
        return -1;
    }

    /* Amount and Currency: required on creation, validated wherever present. */
    const cJSON *amount = cJSON_GetObjectItemCaseSensitive(root, "Amount");
    if (amount != NULL || ev->type == EVENT_PAYMENT_CREATED) {
        if (!cJSON_IsString(amount) || !consumer_amount_valid(amount->valuestring)) {
            set_reason(reason, reasonlen,
                       "Amount is missing or not an exact positive decimal string");
            return -1;
        }
        snprintf(ev->amount, sizeof(ev->amount), "%s", amount->valuestring);
        ev->has_amount = 1;
    }
    const cJSON *currency = cJSON_GetObjectItemCaseSensitive(root, "Currency");
    if (currency != NULL || ev->type == EVENT_PAYMENT_CREATED) {
        if (!cJSON_IsString(currency) || !currency_valid(currency->valuestring)) {
            set_reason(reason, reasonlen, "Currency is missing or not a 3-letter code");
            return -1;
        }
        memcpy(ev->currency, currency->valuestring, 4);
        ev->has_currency = 1;
    }
    return 0;
}

int consumer_event_parse(const struct bus_delivery *d, struct consumer_event *ev,
                         char *reason, size_t reasonlen)
{
    memset(ev, 0, sizeof(*ev));

    if (d->message_id == NULL || !cw_uuid_valid(d->message_id)) {
        set_reason(reason, reasonlen, "message_id is missing or not a uuid");
        return -1;
    }
    uuid_lower(d->message_id, ev->message_id);

    if (d->schema_version != CONSUMER_SCHEMA_VERSION) {
        if (reason != NULL && reasonlen > 0)
            snprintf(reason, reasonlen, "schema_version %d is not supported (only %d)",
                     d->schema_version, CONSUMER_SCHEMA_VERSION);
        return -1;
    }

    ev->type_name = d->type != NULL ? consumer_event_type_name(d->type, &ev->type) : NULL;
    if (ev->type_name == NULL) {
        set_reason(reason, reasonlen, "unknown or missing event type");
        return -1;
    }

    if (d->partition_key != NULL && !cw_uuid_valid(d->partition_key)) {
        set_reason(reason, reasonlen, "partition_key is not a uuid");
        return -1;
    }

    if (d->payload == NULL || d->payload[0] == '\0') {
        set_reason(reason, reasonlen, "payload is missing");
        return -1;
    }
    size_t plen = strlen(d->payload);
    if (plen > CONSUMER_PAYLOAD_MAX) {
        set_reason(reason, reasonlen, "payload is larger than 64 KiB");
        return -1;
    }
    /* cJSON checks "nothing after the value" by looking for the NUL inside
     * the given length, so the length counts the terminator. */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(d->payload, plen + 1, &end, 1);
    if (root == NULL || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        set_reason(reason, reasonlen, "payload is not a JSON object");
        return -1;
    }
    int rc = parse_payload(d, root, ev, reason, reasonlen);
    cJSON_Delete(root);
    if (rc < 0)
        return -1;

    /* Continue the producer's trace; a bad traceparent starts a new one. */
    if (d->traceparent != NULL && cw_traceparent_valid(d->traceparent)) {
        snprintf(ev->parent_trace, sizeof(ev->parent_trace), "%s", d->traceparent);
        ev->has_parent_trace = 1;
    }
    cw_traceparent_child(ev->has_parent_trace ? ev->parent_trace : NULL, ev->trace, NULL);
    return 0;
}

void consumer_event_inbox_key(const struct consumer_event *ev, char out[CW_UUID_LEN + 1])
{
    /* Mutant: "the trace id identifies the request, so it identifies the
     * event".  Every event of one request trace (or of one payment whose
     * client reuses its traceparent) then shares one inbox marker. */
    /* Mutant: "every delivery is a message" -- a fresh key per delivery, so
     * no redelivery ever meets the marker of the first. */
    if (CW_MUTANT(inbox_key_per_delivery)) {
        cw_uuid_new(out);
        return;
    }
    if (ev->has_parent_trace && CW_MUTANT(trace_as_inbox_key)) {
        const char *t = ev->parent_trace + 3;
        snprintf(out, CW_UUID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", t, t + 8, t + 12,
                 t + 16, t + 20);
        return;
    }
    memcpy(out, ev->message_id, CW_UUID_LEN + 1);
}
