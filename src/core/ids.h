/* ids.h -- identifiers: UUIDs (libuuid) and W3C traceparent values.
 *
 * traceparent (https://www.w3.org/TR/trace-context/):
 *   version "-" trace-id "-" parent-id "-" flags  =  00-<32 hex>-<16 hex>-<2 hex>
 * lowercase hex only; an all-zero trace-id or parent-id is invalid; version ff
 * is invalid. */
#ifndef CW_IDS_H
#define CW_IDS_H

#include <stddef.h>

#define CW_UUID_LEN 36
#define CW_TRACEPARENT_LEN 55

/* Writes a new random (v4) UUID, lowercase, NUL-terminated, into out[37]. */
void cw_uuid_new(char out[CW_UUID_LEN + 1]);

/* 1 when s is a canonical UUID text (8-4-4-4-12 hex), else 0. */
int cw_uuid_valid(const char *s);

/* 1 when s is a valid traceparent of version 00, else 0. */
int cw_traceparent_valid(const char *s);

/* Writes a new traceparent with fresh random trace and span ids. */
void cw_traceparent_new(char out[CW_TRACEPARENT_LEN + 1]);

/* Continues parent's trace: same trace id and flags, new span id.  The new
 * span's parent is parent's span id (returned in parent_span[17] if not NULL).
 * Returns 0, or -1 when parent is not valid (out then holds a new trace). */
int cw_traceparent_child(const char *parent, char out[CW_TRACEPARENT_LEN + 1],
                         char *parent_span);

/* Lowercase hex of n random bytes into out[2n+1] (from /dev/urandom via
 * libuuid's generator, never all zeros). */
void cw_random_hex(char *out, size_t nbytes);

#endif
