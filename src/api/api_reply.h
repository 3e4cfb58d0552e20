/* api_reply.h -- what the payments API answers: status, headers, body.
 *
 * Every handler of the API fills one struct api_reply; the HTTP glue
 * (api_http.c) turns it into a libmicrohttpd response.  Bodies are JSON built
 * with cJSON: either a resource (application/json) or an RFC 9457 problem
 * (application/problem+json) with the members type, title, status and detail.
 *
 * Problem types are URNs of the form "urn:crashwindow:problem:<slug>"; the
 * slug names the problem for machines ("invalid-amount", "key-in-flight"),
 * the title for people, and detail says what exactly was wrong with this
 * request.  A problem body never echoes a secret or the request body. */
#ifndef CW_API_REPLY_H
#define CW_API_REPLY_H

#include <cjson/cJSON.h>

#define API_PROBLEM_TYPE_PREFIX "urn:crashwindow:problem:"

struct api_reply {
    int status;                /* HTTP status; 0 while nothing was decided */
    char *body;                /* NUL-terminated, owned (malloc) */
    const char *content_type;  /* static string */
    char location[64];         /* Location header, "" for none */
    const char *allow;         /* Allow header (405), static or NULL */
    int retry_after;           /* Retry-After seconds, 0 for none */
    int replayed;              /* 1: answered from a stored idempotency record */
};

/* Resets r to "nothing decided" without freeing (use on fresh structs). */
void api_reply_init(struct api_reply *r);

/* Frees the body and resets r.  Safe on an initialized, empty reply. */
void api_reply_clear(struct api_reply *r);

/* Replaces r's content with a problem response.  detail is printf-style.
 * slug and title must be static strings. */
void api_reply_problem(struct api_reply *r, int status, const char *slug,
                       const char *title, const char *detail_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Replaces r's content with obj printed compactly (takes ownership of obj). */
void api_reply_json(struct api_reply *r, int status, cJSON *obj);

/* Replaces r's content with a body given as text (copied), e.g. a response
 * stored in an idempotency record, which must go out byte for byte. */
void api_reply_text(struct api_reply *r, int status, const char *content_type,
                    const char *body);

/* The payment resource body the API stores and returns for commands:
 * {"id":"<payment id>","status":"<status>"}.  Returns a malloc'd string. */
char *api_payment_body(const char *payment_id, const char *status);

#endif
