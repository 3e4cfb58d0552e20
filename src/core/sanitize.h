/* sanitize.h -- error text made safe to store and to log.
 *
 * A publish error ends up in outbox_messages.last_error, in the relay's
 * events and in outboxctl's output; a database or broker error ends up in the
 * events of the relay, the consumer and the API.  Operators and log pipelines
 * read all of them.  Brokers and drivers are careless with their messages: a
 * refusal may echo the start of the payload, a connection failure (libpq's
 * PQerrorMessage included) may quote a connection string or a URL with
 * credentials.  cw_sanitize_error() keeps the shape of the message (what went
 * wrong) and replaces what could be a secret or business data:
 *
 *   conninfo-like pairs      password=..., user=..., host=..., dbname=...  -> [redacted]
 *   secret-like pairs        token: ..., api_key=..., secret=..., credential=,
 *                            authorization: ..., AccountKey=, X-Amz-Signature=,
 *                            any case, quoted keys too ('password': ...);
 *                            a value ending in ',' or ';' takes the name=value
 *                            pairs after it (Cookie, Digest)              -> [redacted]
 *   bearer/basic credentials "Bearer abc..."                              -> [redacted]
 *   libpq parse errors       missing "=" after "<fragment>"               -> "[redacted]"
 *   URLs with credentials    scheme://user:pass@host/..., any postgres:// URL,
 *                            webhook hosts (hooks.slack.com, ...)         -> [url]
 *   PEM blocks               -----BEGIN ...----- to -----END ...----- or the
 *                            end of the input                             -> [pem]
 *   JWTs and opaque tokens   eyJ..., issuer-prefixed tokens (ghp_, glpat-,
 *                            xoxb-, sk_live_, whsec_, AIza, SG., npm_, ...),
 *                            AWS access key ids (AKIA...), standard base64
 *                            with '/' or '+' that looks random (20+ chars,
 *                            three classes, frequent class changes: paths do
 *                            not), runs of 24+ token characters mixing
 *                            letters and digits (canonical UUIDs are kept:
 *                            they are message ids, not secrets)            -> [token]
 *   long digit runs          12+ digits, spaces or dashes allowed between
 *                            (card and account numbers)                    -> [number]
 *   payload fragments        JSON object/array text from '{' (or '[' before
 *                            '{' / '"') to its end or to the end of input,
 *                            and "key": value members                     -> [payload]
 *
 * tests/data/secrets.json is the measure: every format there, alone, in its
 * own message and planted into libpq, broker and HTTP errors, must leave no
 * trace (tests/unit/test_sanitize.c; scripts/fuzz-sanitize fuzzes the same
 * property).  A quoted string or a bare value never runs past the end of
 * its line.
 *
 * Control characters become spaces, invalid UTF-8 becomes '?', and the result
 * is bounded to CW_ERROR_MAX bytes (cut after a space, never inside a word,
 * "..." appended).  Sanitizing a result again changes nothing, so "is this
 * text sanitized?" is "does sanitizing it change it?" (the checker asks
 * that of every stored error).  Redaction errs on the side of removing too
 * much. */
#ifndef CW_SANITIZE_H
#define CW_SANITIZE_H

#include <stddef.h>

/* Longest sanitized error kept, in bytes, without the NUL. */
#define CW_ERROR_MAX 500

/* Writes the sanitized form of in (NULL counts as "") into out, at most
 * min(outlen - 1, CW_ERROR_MAX) bytes plus a NUL.  Returns the length
 * written.  outlen 0 writes nothing and returns 0. */
size_t cw_sanitize_error(const char *in, char *out, size_t outlen);

#endif
