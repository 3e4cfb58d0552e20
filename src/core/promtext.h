/* promtext.h -- the Prometheus text exposition format (version 0.0.4),
 * written into a growing buffer.
 *
 * A page is a sequence of metric families: promtext_family writes the
 * family's "# HELP" and "# TYPE" lines, then promtext_sample one line per
 * sample.  Names are checked (metric [a-zA-Z_:][a-zA-Z0-9_:]*, label
 * [a-zA-Z_][a-zA-Z0-9_]*, no label named __*), label values and help text
 * escaped, values written so that they parse back to the same double.  A
 * mistake (a bad name, a sample outside its family, no memory) makes the
 * page invalid: promtext_error then says what was wrong, and nothing after
 * the first mistake is written.
 *
 *   struct promtext p;
 *   promtext_init(&p);
 *   promtext_family(&p, "outbox_relay_published_total", "counter", "Messages ...");
 *   promtext_sample(&p, "outbox_relay_published_total", NULL, 42);
 *   const char *page = promtext_text(&p);   (NULL after a mistake)
 *   promtext_free(&p); */
#ifndef CW_PROMTEXT_H
#define CW_PROMTEXT_H

#include <stddef.h>

#define PROMTEXT_NAME_MAX 128

struct promtext {
    char *buf;                       /* the page, NUL-terminated; owned */
    size_t len, cap;
    char family[PROMTEXT_NAME_MAX];  /* the family being written */
    char type[16];                   /* its type */
    char error[160];                 /* the first mistake; "" while none */
};

/* The content type of a page: what a /metrics endpoint answers with. */
#define PROMTEXT_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

void promtext_init(struct promtext *p);

/* Frees the buffer; the struct may be initialized again.  NULL is fine. */
void promtext_free(struct promtext *p);

/* Starts the family name of type "counter", "gauge", "summary", "histogram"
 * or "untyped", with its help text (one line; escaped here). */
void promtext_family(struct promtext *p, const char *name, const char *type,
                     const char *help);

/* One sample of the current family.  name is the family's name, or for a
 * summary or histogram the family's name with _sum, _count or (histogram)
 * _bucket.  labels: NULL, or pairs of name and value ending with NULL, e.g.
 * (const char *[]){ "consumer", "accounting", NULL }.  A counter must not be
 * negative. */
void promtext_sample(struct promtext *p, const char *name, const char *const *labels,
                     double value);

/* One row of a table of counters: a family, and the label (or none) of one
 * of its samples.  Rows of one family follow each other; its help is taken
 * from its first row. */
struct promtext_counter {
    const char *name;
    const char *help;
    const char *label;  /* NULL: the family's only, unlabeled sample */
    const char *value;
};

/* Writes the table: n rows, values[i] the value of row i.  const_labels
 * (pairs ending with NULL, or NULL) go first on every sample. */
void promtext_counters(struct promtext *p, const struct promtext_counter *rows,
                       const unsigned long long *values, size_t n,
                       const char *const *const_labels);

/* The page, or NULL when a mistake was made (see promtext_error). */
const char *promtext_text(const struct promtext *p);
size_t promtext_len(const struct promtext *p);

/* The first mistake, or NULL when there was none. */
const char *promtext_error(const struct promtext *p);

/* Writes value as the format wants it: integral values without exponent
 * or fraction, others with the fewest digits that parse back exactly, and
 * NaN, +Inf, -Inf.  out must hold 32 bytes. */
void promtext_value(double value, char out[32]);

#endif
