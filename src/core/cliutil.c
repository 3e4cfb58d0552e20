/* cliutil.c -- command-line values; see cliutil.h. */
#include "cliutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cw_parse_long(const char *flag, const char *s, long lo, long hi, long *out,
                  char *err, size_t errlen)
{
    char *end = NULL;
    long v = 0;
    errno = 0;
    if (s != NULL)
        v = strtol(s, &end, 10);
    if (s == NULL || errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: '%s' is not an integer in %ld..%ld",
                     flag ? flag : "value", s ? s : "", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cw_parse_int(const char *flag, const char *s, int lo, int hi, int *out,
                 char *err, size_t errlen)
{
    long v;
    if (cw_parse_long(flag, s, lo, hi, &v, err, errlen) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

int cw_next_flag(int argc, char **argv, int *i, const char **flag, const char **value,
                 char *err, size_t errlen)
{
    const char *a = argv[*i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
        return 0;
    if (strncmp(a, "--", 2) != 0) {
        snprintf(err, errlen, "unexpected argument '%s'", a);
        return -1;
    }
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "%s needs a value", a);
        return -1;
    }
    *flag = a;
    *value = argv[++*i];
    return 1;
}
