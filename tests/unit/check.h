/* check.h -- a minimal assertion helper for the unit tests: every failed
 * check prints its file, line and expression, and the test exits non-zero.
 *
 *   CHECK(expr)                 expr is true
 *   CHECK_EQ_INT(actual, want)  two integers are equal; prints both values
 *   CHECK_EQ_STR(actual, want)  two strings are equal; prints both (NULL too)
 *
 * Each is one check in the count check_report() prints. */
#ifndef CW_CHECK_H
#define CW_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(expr)                                                            \
    do {                                                                       \
        check_count++;                                                         \
        if (!(expr)) {                                                         \
            check_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,   \
                    #expr);                                                    \
        }                                                                      \
    } while (0)

/* Compile-time guard of CHECK_EQ_INT: a pointer (no multiplication), a
 * struct, or a floating value (which the comparison would truncate) is an
 * error, not a silently wrong check.  Evaluates nothing. */
#define CHECK_INTEGER_(x)                                                      \
    ((void)sizeof((x) * 1),                                                    \
     (void)sizeof(char[_Generic((x), float: -1, double: -1,                    \
                                long double: -1, default: 1)]))

/* actual == want as integers (both converted to long long), each evaluated
 * once; a failure prints the expressions and both values. */
#define CHECK_EQ_INT(actual, want)                                             \
    do {                                                                       \
        CHECK_INTEGER_(actual);                                                \
        CHECK_INTEGER_(want);                                                  \
        long long check_actual_ = (long long)(actual);                         \
        long long check_want_ = (long long)(want);                             \
        check_count++;                                                         \
        if (check_actual_ != check_want_) {                                    \
            check_failures++;                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s: got %lld, want %lld\n", \
                    __FILE__, __LINE__, #actual, #want, check_actual_,         \
                    check_want_);                                              \
        }                                                                      \
    } while (0)

/* Two strings are equal, each evaluated once; a NULL equals nothing (and
 * is printed as NULL rather than dereferenced). */
#define CHECK_EQ_STR(actual, want)                                             \
    check_eq_str_((actual), (want), #actual, #want, __FILE__, __LINE__)

static inline void check_eq_str_(const char *actual, const char *want, const char *actual_text,
                                 const char *want_text, const char *file, int line)
{
    check_count++;
    if (actual != NULL && want != NULL && strcmp(actual, want) == 0)
        return;
    check_failures++;
    fprintf(stderr, "%s:%d: CHECK failed: %s equals %s: got %s%s%s, want %s%s%s\n", file, line,
            actual_text, want_text, actual ? "\"" : "", actual ? actual : "NULL",
            actual ? "\"" : "", want ? "\"" : "", want ? want : "NULL", want ? "\"" : "");
}

static inline int check_report(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
