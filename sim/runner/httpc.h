/* httpc.h -- the runner's HTTP/1.1 client, one request per connection.
 *
 * The runner is the payments API's client: it must see exactly what a real
 * client sees, including the failures that matter to the scenarios (the API
 * killed after COMMIT closes the connection without an answer; a hung API
 * times out).  Those come back as status 0 with the reason in error, never
 * as a runner failure: "the client saw an error" is data for the checker
 * (a payment that exists although the client saw an error is "recovered").
 *
 * Requests use "Connection: close"; responses are read to EOF and framed by
 * Content-Length or chunked encoding.  Bodies are capped at 1 MiB. */
#ifndef CW_HTTPC_H
#define CW_HTTPC_H

#include <stddef.h>

struct http_resp {
    int status;          /* 0 when no complete response arrived */
    char *body;          /* NUL-terminated, owned; "" when none */
    size_t body_len;
    char error[160];     /* why status is 0 ("timed out after 5000 ms", ...) */
    int retry_after_s;   /* the Retry-After header's seconds, -1 when absent */
};

/* Sends one request to 127.0.0.1:port.  headers is a NULL-terminated list of
 * "Name: value" lines (may be NULL); body may be NULL (then no
 * Content-Type/Length is sent).  Always fills r (free with http_resp_free);
 * returns 0 when a response was read, -1 when not (r->status 0). */
int http_request(int port, const char *method, const char *path,
                 const char *const *headers, const char *body, int timeout_ms,
                 struct http_resp *r);
void http_resp_free(struct http_resp *r);

/* Parses a complete raw response (for tests): 0 or -1. */
int http_parse_response(const char *raw, size_t len, struct http_resp *r);

#endif
