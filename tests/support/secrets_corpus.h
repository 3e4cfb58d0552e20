/* secrets_corpus.h -- the corpus of leaked credential formats
 * (tests/data/secrets.json), shared by the sanitizer's unit test and its
 * fuzz target so that both judge by the same data and the same rule.
 *
 * The rule: a secret survives when any window of 8 characters (or a whole
 * run, when shorter) of one of its runs of 6+ letters and digits appears in
 * the output.  Letters and digits are copied as they are or not at all, and
 * every placeholder the sanitizer writes is bracketed, so such a window in
 * the output came from the input: from the planted secret, unless the text
 * around it held the same window (which the caller excludes). */
#ifndef CW_SECRETS_CORPUS_H
#define CW_SECRETS_CORPUS_H

#include <stddef.h>

#define SECRETS_CONTEXTS 3

struct secret_format {
    char *name;
    char *form;       /* the fragment as it leaks */
    char *text;       /* a realistic message carrying it */
    char **needles;   /* what must not survive */
    int nneedles;
};

struct secrets_corpus {
    struct secret_format *v;
    int n;
    char *context[SECRETS_CONTEXTS];      /* message with one %s slot */
    const char *context_name[SECRETS_CONTEXTS];
    char **ordinary;                       /* must pass unchanged */
    int nordinary;
};

/* Loads path.  0, or -1 with the reason in err (the corpus is then empty). */
int secrets_corpus_load(const char *path, struct secrets_corpus *c, char *err, size_t errlen);
void secrets_corpus_free(struct secrets_corpus *c);

/* context with its %s replaced by form (no printf: forms hold '%').  The
 * caller frees the result; NULL on out of memory. */
char *secrets_plant(const char *context, const char *form);

/* Does a window of one of s's needles occur in out but in none of the
 * nexclude texts of exclude?  1 with the window in win (NUL-terminated,
 * winlen >= 9), else 0. */
int secrets_leak(const struct secret_format *s, const char *out, const char *const *exclude,
                 int nexclude, char *win, size_t winlen);

#endif
