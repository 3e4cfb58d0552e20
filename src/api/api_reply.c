/* api_reply.c -- building the API's responses; see api_reply.h.
 *
 * Out of memory while building a reply is not something a request can
 * recover from, and a half-built problem body would be worse than none, so
 * allocation failures abort (as cwlog does). */
#include "api_reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_die(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        abort();
    return d;
}

void api_reply_init(struct api_reply *r)
{
    memset(r, 0, sizeof(*r));
}

void api_reply_clear(struct api_reply *r)
{
    free(r->body);
    api_reply_init(r);
}

void api_reply_problem(struct api_reply *r, int status, const char *slug,
                       const char *title, const char *detail_fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, ap);
    va_end(ap);

    char type[128];
    snprintf(type, sizeof(type), "%s%s", API_PROBLEM_TYPE_PREFIX, slug);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        abort();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddStringToObject(o, "title", title);
    cJSON_AddNumberToObject(o, "status", status);
    cJSON_AddStringToObject(o, "detail", detail);
    api_reply_json(r, status, o);
    r->content_type = "application/problem+json";
}

void api_reply_json(struct api_reply *r, int status, cJSON *obj)
{
    char *text = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (text == NULL)
        abort();
    /* cJSON allocates with malloc by default; copy anyway so that body is
     * always freed with free() whatever hooks cJSON was built with. */
    api_reply_text(r, status, "application/json", text);
    cJSON_free(text);
}

void api_reply_text(struct api_reply *r, int status, const char *content_type,
                    const char *body)
{
    free(r->body);
    r->body = dup_or_die(body);
    r->status = status;
    r->content_type = content_type;
    r->location[0] = '\0';
    r->allow = NULL;
    r->retry_after = 0;
    r->replayed = 0;
}

char *api_payment_body(const char *payment_id, const char *status)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        abort();
    cJSON_AddStringToObject(o, "id", payment_id);
    cJSON_AddStringToObject(o, "status", status);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        abort();
    char *out = dup_or_die(text);
    cJSON_free(text);
    return out;
}
