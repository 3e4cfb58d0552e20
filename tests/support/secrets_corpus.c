/* secrets_corpus.c -- loading the corpus and judging an output; see
 * secrets_corpus.h. */
#include "secrets_corpus.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 8
#define MIN_RUN 6

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

static char *dup_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static int load_format(const cJSON *e, struct secret_format *f)
{
    memset(f, 0, sizeof(*f));
    f->name = dup_str(e, "name");
    f->form = dup_str(e, "form");
    f->text = dup_str(e, "text");
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(e, "secret");
    int n = cJSON_GetArraySize(sec);
    if (f->name == NULL || f->form == NULL || f->text == NULL || !cJSON_IsArray(sec) || n < 1)
        return -1;
    f->needles = calloc((size_t)n, sizeof(char *));
    if (f->needles == NULL)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, sec) {
        if (!cJSON_IsString(it))
            return -1;
        f->needles[f->nneedles++] = strdup(it->valuestring);
    }
    return 0;
}

int secrets_corpus_load(const char *path, struct secrets_corpus *c, char *err, size_t errlen)
{
    static const char *const names[SECRETS_CONTEXTS] = { "libpq", "broker", "http" };
    memset(c, 0, sizeof(*c));
    char *text = read_all(path);
    if (text == NULL) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(root, "contexts");
    const cJSON *secrets = cJSON_GetObjectItemCaseSensitive(root, "secrets");
    const cJSON *ordinary = cJSON_GetObjectItemCaseSensitive(root, "ordinary");
    if (!cJSON_IsArray(secrets) || !cJSON_IsArray(ordinary) || !cJSON_IsObject(ctx)) {
        snprintf(err, errlen, "%s: want contexts, secrets and ordinary", path);
        goto fail;
    }
    for (int k = 0; k < SECRETS_CONTEXTS; k++) {
        c->context_name[k] = names[k];
        c->context[k] = dup_str(ctx, names[k]);
        if (c->context[k] == NULL || strstr(c->context[k], "%s") == NULL) {
            snprintf(err, errlen, "%s: contexts.%s must be a string with %%s", path, names[k]);
            goto fail;
        }
    }
    c->v = calloc((size_t)cJSON_GetArraySize(secrets) + 1, sizeof(*c->v));
    c->ordinary = calloc((size_t)cJSON_GetArraySize(ordinary) + 1, sizeof(char *));
    if (c->v == NULL || c->ordinary == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, secrets) {
        if (load_format(it, &c->v[c->n++]) < 0) {
            snprintf(err, errlen, "%s: secrets[%d] needs name, form, text and secret [...]",
                     path, c->n - 1);
            goto fail;
        }
    }
    cJSON_ArrayForEach(it, ordinary) {
        if (cJSON_IsString(it))
            c->ordinary[c->nordinary++] = strdup(it->valuestring);
    }
    cJSON_Delete(root);
    return 0;
fail:
    cJSON_Delete(root);
    secrets_corpus_free(c);
    return -1;
}

void secrets_corpus_free(struct secrets_corpus *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].form);
        free(c->v[i].text);
        for (int k = 0; k < c->v[i].nneedles; k++)
            free(c->v[i].needles[k]);
        free(c->v[i].needles);
    }
    free(c->v);
    for (int k = 0; k < SECRETS_CONTEXTS; k++)
        free(c->context[k]);
    for (int i = 0; i < c->nordinary; i++)
        free(c->ordinary[i]);
    free(c->ordinary);
    memset(c, 0, sizeof(*c));
}

char *secrets_plant(const char *context, const char *form)
{
    const char *slot = strstr(context, "%s");
    size_t pre = slot ? (size_t)(slot - context) : strlen(context);
    const char *post = slot ? slot + 2 : "";
    size_t len = pre + strlen(form) + strlen(post);
    char *out = malloc(len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, context, pre);
    memcpy(out + pre, form, strlen(form));
    memcpy(out + pre + strlen(form), post, strlen(post) + 1);
    return out;
}

static int alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int excluded(const char *w, const char *const *exclude, int nexclude)
{
    for (int i = 0; i < nexclude; i++)
        if (exclude[i] != NULL && strstr(exclude[i], w) != NULL)
            return 1;
    return 0;
}

int secrets_leak(const struct secret_format *s, const char *out, const char *const *exclude,
                 int nexclude, char *win, size_t winlen)
{
    for (int k = 0; k < s->nneedles; k++) {
        const char *p = s->needles[k];
        while (*p) {
            while (*p && !alnum(*p))
                p++;
            size_t run = 0;
            while (alnum(p[run]))
                run++;
            size_t w = run < WINDOW ? run : WINDOW;
            for (size_t off = 0; run >= MIN_RUN && off + w <= run && w < winlen; off++) {
                memcpy(win, p + off, w);
                win[w] = '\0';
                if (strstr(out, win) != NULL && !excluded(win, exclude, nexclude))
                    return 1;
            }
            p += run;
        }
    }
    return 0;
}
