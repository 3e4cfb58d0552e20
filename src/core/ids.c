/* ids.c -- UUIDs and traceparent values; see ids.h. */
#include "ids.h"

#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

void cw_uuid_new(char out[CW_UUID_LEN + 1])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, out);
}

static int is_lhex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int is_hex(char c)
{
    return is_lhex(c) || (c >= 'A' && c <= 'F');
}

int cw_uuid_valid(const char *s)
{
    if (s == NULL || strlen(s) != CW_UUID_LEN)
        return 0;
    for (int i = 0; i < CW_UUID_LEN; i++) {
        int dash = (i == 8 || i == 13 || i == 18 || i == 23);
        if (dash ? s[i] != '-' : !is_hex(s[i]))
            return 0;
    }
    return 1;
}

/* 1 when s[0..n) is lowercase hex and not all zeros. */
static int hex_nonzero(const char *s, int n)
{
    int nonzero = 0;
    for (int i = 0; i < n; i++) {
        if (!is_lhex(s[i]))
            return 0;
        if (s[i] != '0')
            nonzero = 1;
    }
    return nonzero;
}

int cw_traceparent_valid(const char *s)
{
    if (s == NULL || strlen(s) != CW_TRACEPARENT_LEN)
        return 0;
    if (s[0] != '0' || s[1] != '0' || s[2] != '-' || s[35] != '-' || s[52] != '-')
        return 0;
    return hex_nonzero(s + 3, 32) && hex_nonzero(s + 36, 16) &&
           is_lhex(s[53]) && is_lhex(s[54]);
}

void cw_random_hex(char *out, size_t nbytes)
{
    static const char digits[] = "0123456789abcdef";
    size_t done = 0;
    int nonzero = 0;
    while (done < nbytes) {
        uuid_t u;
        uuid_generate_random(u);
        /* bytes 6 and 8 carry version/variant bits: skip them */
        static const int usable[] = { 0, 1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 13, 14, 15 };
        for (size_t i = 0; i < sizeof(usable) / sizeof(usable[0]) && done < nbytes; i++) {
            unsigned char b = u[usable[i]];
            if (b != 0)
                nonzero = 1;
            out[2 * done] = digits[b >> 4];
            out[2 * done + 1] = digits[b & 15];
            done++;
        }
    }
    if (!nonzero && nbytes > 0)
        out[2 * nbytes - 1] = '1';
    out[2 * nbytes] = '\0';
}

void cw_traceparent_new(char out[CW_TRACEPARENT_LEN + 1])
{
    char trace[33], span[17];
    cw_random_hex(trace, 16);
    cw_random_hex(span, 8);
    snprintf(out, CW_TRACEPARENT_LEN + 1, "00-%s-%s-01", trace, span);
}

int cw_traceparent_child(const char *parent, char out[CW_TRACEPARENT_LEN + 1],
                         char *parent_span)
{
    if (!cw_traceparent_valid(parent)) {
        cw_traceparent_new(out);
        if (parent_span != NULL)
            parent_span[0] = '\0';
        return -1;
    }
    char span[17];
    cw_random_hex(span, 8);
    snprintf(out, CW_TRACEPARENT_LEN + 1, "00-%.32s-%s-%.2s", parent + 3, span, parent + 53);
    if (parent_span != NULL)
        snprintf(parent_span, 17, "%.16s", parent + 36);
    return 0;
}
