/* api_validate.h -- checking everything a client sends to the payments API,
 * and the canonical form of a request that its idempotency hash is taken of.
 *
 * What the API accepts (anything else is a 4xx problem and stores nothing):
 *
 *   Idempotency-Key   required on every POST, exactly once; 1-255 printable
 *                     ASCII characters (0x20-0x7E).                      400
 *   X-Client-Id       required on every POST, exactly once: the namespace of
 *                     its Idempotency-Key; 1-64 of [A-Za-z0-9._-].      400
 *   traceparent       optional; used when it is one valid W3C value, else a
 *                     new trace is started (never an error).
 *   Content-Type      application/json (parameters allowed, charset only
 *                     utf-8) on every POST that has a body.              415
 *   body              at most API_MAX_BODY bytes.                        413
 *   header fields     at most API_MAX_HEADERS of them, API_MAX_HEADER_BYTES
 *                     of names and values together.                      431
 *                     (Past libmicrohttpd's per-connection memory, 64 KiB,
 *                     it answers 431 itself, with its own HTML body.)
 *   URL               at most API_MAX_URL bytes.                         414
 *   time              the whole request within --request-timeout-ms, or the
 *                     connection is closed (api_deadline.h).
 *
 *   POST /payments    {"amount":"12.50","currency":"EUR"}
 *     malformed JSON, not an object, a missing field, a field of the wrong
 *     JSON type, an unknown or repeated field                            400
 *     amount: a JSON *string* holding a plain decimal: digits, optionally a
 *     point and 1-2 digits ("12", "12.5", "12.50"; leading zeros ignored).
 *     JSON numbers are refused (400): most clients produce them from binary
 *     floating point, and a payment amount must be exact.  A string that is
 *     not such a decimal, has more than 2 decimals, is <= 0 or is above
 *     1000000000000.00                                                   422
 *     currency: three uppercase ASCII letters                           422
 *
 *   POST /payments/{id}/authorize|capture: no body, or the JSON object {}.
 *
 * 400 means "this is not a request we can read", 422 "we read it and its
 * values are not acceptable".
 *
 * Canonical request (what the SHA-256 in idempotency_records is taken of):
 *
 *   METHOD " " PATH "\n" CANONICAL-BODY
 *
 * PATH with the payment id in lowercase; CANONICAL-BODY the parsed body as
 * compact JSON with members in a fixed order and normalized values
 * ({"amount":"12.50","currency":"EUR"}; "{}" for authorize and capture).  The
 * same logical request therefore always hashes the same ("12.5" and "012.50"
 * are one amount) while any change of amount, currency, method or path
 * changes the hash. */
#ifndef CW_API_VALIDATE_H
#define CW_API_VALIDATE_H

#include "api_reply.h"

#include <stddef.h>

#define API_MAX_BODY (64 * 1024)
#define API_MAX_HEADERS 64              /* header fields per request */
#define API_MAX_HEADER_BYTES (8 * 1024) /* their names and values together */
#define API_MAX_URL 2048
#define API_KEY_MAX 255
#define API_CLIENT_MAX 64
#define API_AMOUNT_MAX 24      /* "1000000000000.00" plus room; normalized form */
#define API_HASH_HEX 64

/* A parsed, validated POST /payments body. */
struct api_create_body {
    char amount[API_AMOUNT_MAX];  /* normalized: no leading zeros, 2 decimals */
    char currency[4];
};

/* Each check returns 0 when the input is acceptable, or -1 after filling r
 * with the problem (400/413/415/422) that names what is wrong. */

/* value is the header as received, or NULL when absent. */
int api_check_idempotency_key(const char *value, struct api_reply *r);

/* Writes the client id into out[API_CLIENT_MAX + 1].  0, or -1 with r
 * filled (400) when it is absent (value NULL) or malformed. */
int api_check_client_id(const char *value, char *out, struct api_reply *r);

/* value is the Content-Type header or NULL. */
int api_check_content_type(const char *value, struct api_reply *r);

/* Normalizes an amount string into out[API_AMOUNT_MAX]. */
int api_normalize_amount(const char *in, char *out, struct api_reply *r);

int api_check_currency(const char *in, struct api_reply *r);

/* Parses and validates a POST /payments body of len bytes (need not be
 * NUL-terminated). */
int api_parse_create_body(const char *body, size_t len, struct api_create_body *out,
                          struct api_reply *r);

/* Validates the body of authorize/capture: empty, or a JSON object with no
 * members. */
int api_parse_empty_body(const char *body, size_t len, struct api_reply *r);

/* Writes the canonical request text into out (outlen bytes).  body_json is
 * the canonical body.  Returns 0, or -1 when out is too small. */
int api_canonical_request(const char *method, const char *path, const char *body_json,
                          char *out, size_t outlen);

/* The canonical body of a create request: compact JSON, fixed member order. */
int api_canonical_create_body(const struct api_create_body *b, char *out, size_t outlen);

/* Lowercase hex SHA-256 of data into out[API_HASH_HEX + 1].  0 or -1. */
int api_sha256_hex(const char *data, size_t len, char *out);

/* The traceparent stored on the outbox row: value itself when it is a valid
 * W3C traceparent (so every event of one client trace shares it), otherwise
 * (absent: NULL, repeated, or invalid) a new trace.  out[56]. */
void api_trace_for_request(const char *value, char *out);

/* If path is "/payments/{uuid}" + suffix (suffix "" or e.g. "/authorize"),
 * writes the uuid in lowercase into id[37] and returns 1; otherwise 0. */
int api_match_payment_path(const char *path, const char *suffix, char *id);

#endif
