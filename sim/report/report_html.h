/* report_html.h -- the output buffer and escaping rules of the HTML report.
 *
 * The report is built in memory in one growing buffer and written to disk at
 * the end, so a failure never leaves half a report behind.  The buffer has a
 * hard size cap: past it every append is refused and the buffer remembers the
 * overflow, which report_write turns into an error instead of a truncated
 * file.
 *
 * Every string that comes from a run (log fields, witnesses, error texts,
 * payloads, process names) goes through rbuf_esc, which makes it safe both as
 * element text and inside a double- or single-quoted attribute, and keeps the
 * document well-formed XML: invalid UTF-8 and the control characters XML
 * forbids become U+FFFD.  Markup of our own is appended raw with rbuf_puts
 * and rbuf_printf, which must therefore never see outside input with %s. */
#ifndef CW_REPORT_HTML_H
#define CW_REPORT_HTML_H

#include <stddef.h>

struct rbuf {
    char *data;      /* NUL-terminated while len > 0; owned */
    size_t len;
    size_t cap;      /* bytes allocated */
    size_t limit;    /* hard cap on len */
    int overflow;    /* set once an append was refused (full or out of memory) */
};

/* Initializes an empty buffer that will refuse to grow past limit bytes. */
void rbuf_init(struct rbuf *b, size_t limit);
/* Frees the data; the buffer is empty and reusable afterwards. */
void rbuf_free(struct rbuf *b);

/* Appends raw markup.  On overflow nothing more is appended and b->overflow
 * is set; the functions return 0 on success and -1 after an overflow. */
int rbuf_put(struct rbuf *b, const char *s, size_t n);
int rbuf_puts(struct rbuf *b, const char *s);
int rbuf_printf(struct rbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends s escaped for text and attributes (& < > " ' become references).
 * At most max_bytes input bytes are used (0: no limit); when s is longer an
 * ellipsis marks the cut, which never splits a UTF-8 sequence. NULL appends
 * nothing. */
int rbuf_esc(struct rbuf *b, const char *s, size_t max_bytes);

/* Escapes s into out (size outlen, always NUL-terminated when outlen > 0);
 * returns the length written, or 0 with out empty when the escaped text does
 * not fit (never a cut reference or character).  For tests and short labels. */
size_t html_escape(const char *s, char *out, size_t outlen);

#endif
