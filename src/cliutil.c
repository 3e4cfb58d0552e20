/* cliutil.c -- command-line values; see cliutil.h. */
#include "cliutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
