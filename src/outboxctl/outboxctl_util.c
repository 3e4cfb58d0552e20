/* outboxctl_util.c -- what every outboxctl command shares: the lazily opened
 * connection, duration parsing and formatting, JSON string output.  Integer
 * flags are parsed by the core's cw_parse_long (cliutil.h). */
#include "outboxctl.h"
#include "pgx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

PGconn *ctl_conn(struct ctl *c)
{
    char err[512];
    if (c->conn != NULL)
        return c->conn;
    /* An operator's tool: a cleanup or a migration of a large outbox may
     * rightly take minutes, so its bound is ten of them. */
    pgx_set_deadline_ms(600000);
    c->conn = pgx_connect(c->db, err, sizeof(err));
    if (c->conn == NULL)
        fprintf(stderr, "outboxctl: %s\n", err);
    return c->conn;
}

int ctl_parse_duration(const char *s, int64_t *ms, char *err, size_t errlen)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = { { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
                  { "d", 86400000 } };
    const int64_t max_ms = (int64_t)100 * 365 * 86400000;
    if (s == NULL || *s < '0' || *s > '9')
        goto bad;
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno != 0 || n <= 0)
        goto bad;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) == 0) {
            if (n > max_ms / units[i].ms)
                goto bad;
            *ms = (int64_t)n * units[i].ms;
            return 0;
        }
    }
bad:
    snprintf(err, errlen, "'%s' is not a duration (a positive number and a unit: "
                          "ms, s, m, h or d, e.g. 30s, 15m, 2h, 7d; at most 100 years)",
             s ? s : "");
    return -1;
}

void ctl_format_duration(int64_t ms, char *out, size_t outlen)
{
    if (ms < 1000) {
        snprintf(out, outlen, "%lldms", (long long)ms);
        return;
    }
    int64_t s = ms / 1000;
    int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, sec = s % 60;
    /* Two units at most: precise enough for an operator, short to read. */
    int64_t big, small;
    char bu, su;
    if (d > 0) {
        big = d, bu = 'd', small = h, su = 'h';
    } else if (h > 0) {
        big = h, bu = 'h', small = m, su = 'm';
    } else if (m > 0) {
        big = m, bu = 'm', small = sec, su = 's';
    } else {
        snprintf(out, outlen, "%llds", (long long)sec);
        return;
    }
    if (small > 0)
        snprintf(out, outlen, "%lld%c%lld%c", (long long)big, bu, (long long)small, su);
    else
        snprintf(out, outlen, "%lld%c", (long long)big, bu);
}

int ctl_fingerprint_valid(const char *s)
{
    if (s == NULL || strlen(s) != 12)
        return 0;
    for (int i = 0; i < 12; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

void ctl_json_string(FILE *f, const char *s)
{
    if (s == NULL) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}
