/* check.h -- a minimal assertion helper for the unit tests: every failed
 * check prints its file, line and expression, and the test exits non-zero.
 *
 *   CHECK(expr)                 expr is true
 *   CHECK_EQ_INT(actual, want)  two integers are equal; prints both values
 *   CHECK_EQ_STR(actual, want)  two strings are equal; prints both (NULL too)
 *   WAIT_FOR(cond, timeout_ms)  cond comes true within timeout_ms (a poll)
 *
 * Each is one check in the count check_report() prints. */
#ifndef CW_CHECK_H
#define CW_CHECK_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static int check_failures;
static int check_count;

/* The outcome of the last WAIT_FOR: 1 when its condition came true, 0 when
 * it timed out (a caller that must clean up after a timeout reads it). */
static int check_waited;

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

static inline long long check_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One round of WAIT_FOR's poll: returns 1 to poll again (after sleeping
 * 5 ms), 0 when done -- the condition met, or the deadline passed, which
 * is a failed check naming the condition.  Sets check_waited. */
static inline int check_wait_again_(int met, long long deadline_ms, long long timeout_ms,
                                    const char *cond_text, const char *file, int line)
{
    if (met) {
        check_waited = 1;
        return 0;
    }
    if (check_now_ms() >= deadline_ms) {
        check_waited = 0;
        check_failures++;
        fprintf(stderr, "%s:%d: WAIT_FOR timed out after %lld ms: %s\n", file, line, timeout_ms,
                cond_text);
        return 0;
    }
    struct timespec pause = { 0, 5 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    return 1;
}

/* Polls cond (evaluated again each round, so it may do the work, like
 * waitpid(..., WNOHANG)) until it is true or timeout_ms have passed; never
 * a fixed sleep.  One check: a timeout fails it with cond's text.
 * check_waited says afterwards which way it ended. */
#define WAIT_FOR(cond, timeout_ms)                                             \
    do {                                                                       \
        long long check_timeout_ = (timeout_ms);                               \
        long long check_deadline_ = check_now_ms() + check_timeout_;           \
        check_count++;                                                         \
        while (check_wait_again_((cond) ? 1 : 0, check_deadline_,              \
                                 check_timeout_, #cond, __FILE__, __LINE__))   \
            ;                                                                  \
    } while (0)

static inline int check_report(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif
