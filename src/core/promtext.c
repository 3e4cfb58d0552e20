/* promtext.c -- the Prometheus text format writer; see promtext.h.
 *
 * Checking names here, and not only in a test, is deliberate: a page with
 * one malformed line is refused whole by the scraper, so a mistake must show
 * as an error the moment it is made, with the name that caused it. */
#include "promtext.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void promtext_init(struct promtext *p)
{
    memset(p, 0, sizeof(*p));
}

void promtext_free(struct promtext *p)
{
    if (p == NULL)
        return;
    free(p->buf);
    memset(p, 0, sizeof(*p));
}

static void fail(struct promtext *p, const char *fmt, ...)
{
    if (p->error[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof(p->error), fmt, ap);
    va_end(ap);
}

/* Appends n bytes; on no memory the page fails. */
static void put(struct promtext *p, const char *s, size_t n)
{
    if (p->error[0] != '\0')
        return;
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 1024;
        while (p->len + n + 1 > cap)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (b == NULL) {
            fail(p, "out of memory");
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = '\0';
}

static void puts_(struct promtext *p, const char *s)
{
    put(p, s, strlen(s));
}

/* Escapes backslash and newline, and with quote also the double quote. */
static void put_escaped(struct promtext *p, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(p, "\\\\");
        else if (*s == '\n')
            puts_(p, "\\n");
        else if (quote && *s == '"')
            puts_(p, "\\\"");
        else
            put(p, s, 1);
    }
}

static int name_ok(const char *s, int colon)
{
    if (s == NULL || *s == '\0' || strlen(s) >= PROMTEXT_NAME_MAX)
        return 0;
    for (const char *c = s; *c; c++) {
        int alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' ||
                    (colon && *c == ':');
        int digit = *c >= '0' && *c <= '9';
        if (!alpha && !(digit && c != s))
            return 0;
    }
    return 1;
}

void promtext_family(struct promtext *p, const char *name, const char *type,
                     const char *help)
{
    static const char *const types[] = { "counter", "gauge", "summary", "histogram",
                                         "untyped" };
    int known = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        known |= type != NULL && strcmp(type, types[i]) == 0;
    if (!name_ok(name, 1)) {
        fail(p, "bad metric name '%s'", name ? name : "(null)");
        return;
    }
    if (!known) {
        fail(p, "%s: unknown type '%s'", name, type ? type : "(null)");
        return;
    }
    snprintf(p->family, sizeof(p->family), "%s", name);
    snprintf(p->type, sizeof(p->type), "%s", type);
    puts_(p, "# HELP ");
    puts_(p, name);
    puts_(p, " ");
    put_escaped(p, help ? help : "", 0);
    puts_(p, "\n# TYPE ");
    puts_(p, name);
    puts_(p, " ");
    puts_(p, type);
    puts_(p, "\n");
}

/* 1 when name may be a sample of the current family. */
static int belongs(const struct promtext *p, const char *name)
{
    size_t n = strlen(p->family);
    if (strncmp(name, p->family, n) != 0)
        return 0;
    const char *suffix = name + n;
    if (*suffix == '\0')
        return strcmp(p->type, "histogram") != 0;
    int summary = strcmp(p->type, "summary") == 0;
    int histogram = strcmp(p->type, "histogram") == 0;
    if (strcmp(suffix, "_sum") == 0 || strcmp(suffix, "_count") == 0)
        return summary || histogram;
    return histogram && strcmp(suffix, "_bucket") == 0;
}

void promtext_value(double value, char out[32])
{
    if (isnan(value)) {
        snprintf(out, 32, "NaN");
    } else if (isinf(value)) {
        snprintf(out, 32, value > 0 ? "+Inf" : "-Inf");
    } else if (value == floor(value) && fabs(value) < 1e15) {
        snprintf(out, 32, "%.0f", value);
    } else {
        for (int digits = 6; digits <= 17; digits++) {
            snprintf(out, 32, "%.*g", digits, value);
            if (strtod(out, NULL) == value)
                break;
        }
    }
}

void promtext_sample(struct promtext *p, const char *name, const char *const *labels,
                     double value)
{
    if (p->error[0] != '\0')
        return;
    if (p->family[0] == '\0' || name == NULL || !belongs(p, name)) {
        fail(p, "sample '%s' outside its family (current: '%s')", name ? name : "(null)",
             p->family);
        return;
    }
    if (strcmp(p->type, "counter") == 0 && !(value >= 0)) {
        fail(p, "counter %s given %g", name, value);
        return;
    }
    puts_(p, name);
    if (labels != NULL && labels[0] != NULL) {
        puts_(p, "{");
        for (size_t i = 0; labels[i] != NULL; i += 2) {
            if (!name_ok(labels[i], 0) || strncmp(labels[i], "__", 2) == 0) {
                fail(p, "%s: bad label name '%s'", name, labels[i]);
                return;
            }
            if (labels[i + 1] == NULL) {
                fail(p, "%s: label '%s' has no value", name, labels[i]);
                return;
            }
            if (i > 0)
                puts_(p, ",");
            puts_(p, labels[i]);
            puts_(p, "=\"");
            put_escaped(p, labels[i + 1], 1);
            puts_(p, "\"");
        }
        puts_(p, "}");
    }
    char v[32];
    promtext_value(value, v);
    puts_(p, " ");
    puts_(p, v);
    puts_(p, "\n");
}

void promtext_counters(struct promtext *p, const struct promtext_counter *rows,
                       const unsigned long long *values, size_t n,
                       const char *const *const_labels)
{
    const char *labels[16];
    size_t k = 0;
    for (; const_labels != NULL && const_labels[k] != NULL && k < 12; k += 2) {
        labels[k] = const_labels[k];
        labels[k + 1] = const_labels[k + 1];
    }
    if (const_labels != NULL && const_labels[k] != NULL) {
        fail(p, "%s: too many constant labels", n > 0 ? rows[0].name : "counters");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(rows[i].name, rows[i - 1].name) != 0)
            promtext_family(p, rows[i].name, "counter", rows[i].help);
        size_t m = k;
        if (rows[i].label != NULL) {
            labels[m++] = rows[i].label;
            labels[m++] = rows[i].value;
        }
        labels[m] = NULL;
        promtext_sample(p, rows[i].name, labels, (double)values[i]);
    }
}

const char *promtext_text(const struct promtext *p)
{
    if (p->error[0] != '\0')
        return NULL;
    return p->buf ? p->buf : "";
}

size_t promtext_len(const struct promtext *p)
{
    return p->error[0] != '\0' ? 0 : p->len;
}

const char *promtext_error(const struct promtext *p)
{
    return p->error[0] != '\0' ? p->error : NULL;
}
