/* report_html.c -- output buffer and escaping for the HTML report.
 *
 * The escaping is deliberately stricter than HTML needs: the report is
 * checked as XML (every tag closed, attributes quoted), so besides the five
 * markup characters it also replaces what an XML parser rejects (C0 controls
 * other than tab, newline and carriage return, U+FFFE/U+FFFF, and malformed or
 * overlong UTF-8, surrogates) with U+FFFD.  A payload can then never close an
 * element, open a tag or break the parse, whatever bytes it holds. */
#include "report_html.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rbuf_init(struct rbuf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
    b->overflow = 0;
}

void rbuf_free(struct rbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->overflow = 0;
}

/* Makes room for n more bytes plus the NUL; 0 or -1 (overflow set). */
static int rbuf_reserve(struct rbuf *b, size_t n)
{
    if (b->overflow)
        return -1;
    if (n > b->limit || b->len > b->limit - n) {
        b->overflow = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < need)
        ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (nd == NULL) {
        b->overflow = 1;
        return -1;
    }
    b->data = nd;
    b->cap = ncap;
    return 0;
}

int rbuf_put(struct rbuf *b, const char *s, size_t n)
{
    if (rbuf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int rbuf_puts(struct rbuf *b, const char *s)
{
    return rbuf_put(b, s, strlen(s));
}

int rbuf_printf(struct rbuf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->overflow = 1;
        return -1;
    }
    if ((size_t)n < sizeof(small))
        return rbuf_put(b, small, (size_t)n);
    if (rbuf_reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

/* Length of the valid, XML-allowed UTF-8 sequence at s (at most avail bytes),
 * or 0 when the bytes there must be replaced (then one byte is skipped). */
static size_t utf8_ok(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    if (c < 0x80) {
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return 0;
        return 1;
    }
    size_t n;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0; /* overlong or out of range */
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0; /* surrogate */
    if (cp == 0xFFFE || cp == 0xFFFF)
        return 0; /* not characters in XML */
    return n;
}

int rbuf_esc(struct rbuf *b, const char *s, size_t max_bytes)
{
    if (s == NULL)
        return b->overflow ? -1 : 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t total = strlen(s);
    size_t end = total;
    int cut = 0;
    if (max_bytes > 0 && total > max_bytes) {
        end = max_bytes;
        cut = 1;
    }
    size_t i = 0;
    size_t run = 0; /* start of the pending run of bytes copied verbatim */
    while (i < end) {
        const char *rep = NULL;
        size_t n = utf8_ok(p + i, total - i);
        if (n > 0 && i + n > end) {
            break; /* the cut would split this sequence: stop before it */
        } else if (n == 0) {
            rep = "\xEF\xBF\xBD";
            n = 1;
        } else if (n == 1) {
            switch (p[i]) {
            case '&': rep = "&amp;"; break;
            case '<': rep = "&lt;"; break;
            case '>': rep = "&gt;"; break;
            case '"': rep = "&quot;"; break;
            case '\'': rep = "&#39;"; break;
            default: break;
            }
        }
        if (rep != NULL) {
            if (i > run)
                rbuf_put(b, s + run, i - run);
            rbuf_puts(b, rep);
            run = i + n;
        }
        i += n;
    }
    if (i > run)
        rbuf_put(b, s + run, i - run);
    if (cut)
        rbuf_puts(b, "\xE2\x80\xA6"); /* U+2026 HORIZONTAL ELLIPSIS */
    return b->overflow ? -1 : 0;
}

size_t html_escape(const char *s, char *out, size_t outlen)
{
    struct rbuf b;
    rbuf_init(&b, 1u << 20);
    rbuf_esc(&b, s, 0);
    size_t n = 0;
    if (outlen > 0) {
        /* All or nothing: a cut could split a reference or a character. */
        if (!b.overflow && b.len < outlen) {
            n = b.len;
            if (n > 0)
                memcpy(out, b.data, n);
        }
        out[n] = '\0';
    }
    rbuf_free(&b);
    return n;
}
