/* redact.h -- event payloads and response bodies made safe to show.
 *
 * Payloads and bodies carry business data (amounts, and in real systems
 * names, cards, addresses); operators need their shape, not their values.
 * cw_redact_json() keeps the structure of a JSON text -- every key, the
 * nesting -- and replaces every value with "[redacted]", as
 * `outboxctl dead-letters show` does by default, except what identifies
 * rather than describes: canonical UUIDs (ids of events and payments),
 * booleans and null, and the short enum-like values of the keys "status",
 * "type", "title", "event_type" and "EventType".  Text that is not JSON is
 * replaced whole: "[redacted: N bytes, not JSON]".  The result is bounded to
 * outlen - 1 bytes; a cut one ends with "..." (and is no longer JSON). */
#ifndef CW_REDACT_H
#define CW_REDACT_H

#include <stddef.h>

/* Writes the redacted form of json (NULL counts as "") into out; returns
 * its length.  outlen 0 writes nothing and returns 0. */
size_t cw_redact_json(const char *json, char *out, size_t outlen);

#endif
