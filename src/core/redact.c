/* redact.c -- JSON values replaced, structure kept; see redact.h.
 *
 * The text is parsed with cJSON, rewritten in place (values replaced) and
 * printed compactly; a parse failure never echoes a byte of the input. */
#include "redact.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define SHOWN_VALUE_MAX 40

static int is_uuid(const char *s)
{
    if (strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (dash ? c != '-' : !hex)
            return 0;
    }
    return 1;
}

/* A short enum-like word ("created", "PaymentCreated", a problem type URN). */
static int enum_like(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SHOWN_VALUE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == ':' || c == '.' || c == ' '))
            return 0;
    }
    return 1;
}

static int shown_key(const char *key)
{
    static const char *const keys[] = { "status", "type", "title", "event_type", "EventType",
                                        NULL };
    for (int i = 0; key != NULL && keys[i] != NULL; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

/* Is scalar v (under key, NULL in an array) shown as it is? */
static int shown(const cJSON *v, const char *key)
{
    if (cJSON_IsBool(v) || cJSON_IsNull(v))
        return 1;
    return cJSON_IsString(v) &&
           (is_uuid(v->valuestring) || (shown_key(key) && enum_like(v->valuestring)));
}

/* Replaces every value under container c that is not shown. */
static void redact_children(cJSON *c)
{
    int object = cJSON_IsObject(c);
    cJSON *child = c->child;
    while (child != NULL) {
        cJSON *next = child->next;
        if (cJSON_IsObject(child) || cJSON_IsArray(child)) {
            redact_children(child);
        } else if (!shown(child, object ? child->string : NULL)) {
            cJSON *r = cJSON_CreateString("[redacted]");
            if (r != NULL && object)
                cJSON_ReplaceItemInObjectCaseSensitive(c, child->string, r);
            else if (r != NULL)
                cJSON_ReplaceItemViaPointer(c, child, r);
        }
        child = next;
    }
}

size_t cw_redact_json(const char *json, char *out, size_t outlen)
{
    if (outlen == 0)
        return 0;
    if (json == NULL)
        json = "";
    cJSON *root = cJSON_Parse(json);
    char *text = NULL;
    if (root != NULL && !cJSON_IsObject(root) && !cJSON_IsArray(root) && !shown(root, NULL)) {
        cJSON_Delete(root);
        root = cJSON_CreateString("[redacted]");
    }
    if (root != NULL) {
        if (cJSON_IsObject(root) || cJSON_IsArray(root))
            redact_children(root);
        text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
    }
    int n;
    if (text == NULL)
        n = snprintf(out, outlen, "[redacted: %zu bytes, not JSON]", strlen(json));
    else
        n = snprintf(out, outlen, "%s", text);
    cJSON_free(text);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len >= outlen) {
        /* Cut on a character boundary, then mark the cut. */
        len = outlen - 1;
        size_t keep = len >= 3 ? len - 3 : 0;
        while (keep > 0 && ((unsigned char)out[keep] & 0xc0) == 0x80)
            keep--;
        size_t dots = len - keep < 3 ? len - keep : 3;
        memcpy(out + keep, "...", dots);
        len = keep + dots;
        out[len] = '\0';
    }
    return len;
}
