/* check.h -- a minimal assertion helper for the unit tests: every failed
 * CHECK prints its file, line and expression, and the test exits non-zero. */
#ifndef CW_CHECK_H
#define CW_CHECK_H

#include <stdio.h>

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

static inline int check_report(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
