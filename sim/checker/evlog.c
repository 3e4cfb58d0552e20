/* evlog.c -- reading JSON-lines event files; see evlog.h.
 *
 * Files are read whole with stdio: they stay small (thousands of lines per
 * scenario) and are re-read by bounded polls, which keeps the reader
 * stateless and immune to a writer appending while we read (a partial last
 * line simply fails to parse and is picked up on the next poll). */
#include "evlog.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Calls fn for each line of path that is not blank, with its number and the
 * object it holds (NULL when it is not a JSON object: fn then decides), until
 * fn returns nonzero.  Returns that value, or 0 at the end of the file. */
static int each_line(const char *path, int (*fn)(void *arg, cJSON *obj, int lineno), void *arg)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, stop = 0;
    while (!stop && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        cJSON *obj = cJSON_ParseWithLength(line, (size_t)n);
        if (obj != NULL && !cJSON_IsObject(obj)) {
            cJSON_Delete(obj);
            obj = NULL;
        }
        stop = fn(arg, obj, lineno);
    }
    free(line);
    fclose(f);
    return stop;
}

struct read_ctx {
    cJSON *arr;
    int bad;                 /* lenient: lines skipped */
    const char *path;        /* strict: a bad line ends the read, said in err */
    evlog_check_fn check;
    void *check_arg;
    char *err;
    size_t errlen;
};

static int add_lenient(void *arg, cJSON *obj, int lineno)
{
    struct read_ctx *r = arg;
    (void)lineno;
    if (obj == NULL)
        r->bad++;
    else
        cJSON_AddItemToArray(r->arr, obj);
    return 0;
}

cJSON *evlog_read(const char *path, int *bad)
{
    struct read_ctx r = { .arr = cJSON_CreateArray() };
    if (r.arr == NULL)
        return NULL;
    each_line(path, add_lenient, &r);
    if (bad != NULL)
        *bad = r.bad;
    return r.arr;
}

static int add_strict(void *arg, cJSON *obj, int lineno)
{
    struct read_ctx *r = arg;
    if (obj == NULL) {
        snprintf(r->err, r->errlen, "%s:%d: the line is not a JSON object: the checker "
                 "cannot read its evidence", r->path, lineno);
        return -1;
    }
    const char *lacks = r->check != NULL ? r->check(obj, r->check_arg) : NULL;
    if (lacks != NULL) {
        snprintf(r->err, r->errlen, "%s:%d: the %s event lacks field \"%s\" (missing, or not "
                 "of the type its writer gives it), which the checker reads", r->path, lineno,
                 ev_name(obj)[0] ? ev_name(obj) : "unnamed", lacks);
        cJSON_Delete(obj);
        return -1;
    }
    cJSON_AddItemToArray(r->arr, obj);
    return 0;
}

cJSON *evlog_read_strict(const char *path, evlog_check_fn check, void *arg, char *err,
                         size_t errlen)
{
    struct read_ctx r = { .arr = cJSON_CreateArray(), .path = path, .check = check,
                          .check_arg = arg, .err = err, .errlen = errlen };
    if (r.arr == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (each_line(path, add_strict, &r) != 0) {
        cJSON_Delete(r.arr);
        return NULL;
    }
    return r.arr;
}

struct count_ctx {
    const char *event, *key, *value;
    int n;
};

int ev_field_equals(const cJSON *obj, const char *key, const char *value)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsString(it))
        return strcmp(it->valuestring, value) == 0;
    if (cJSON_IsNumber(it)) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%.0f", it->valuedouble);
        return strcmp(buf, value) == 0;
    }
    if (cJSON_IsBool(it))
        return strcmp(cJSON_IsTrue(it) ? "true" : "false", value) == 0;
    return 0;
}

static int count_one(void *arg, cJSON *obj, int lineno)
{
    struct count_ctx *c = arg;
    (void)lineno;
    if (obj != NULL && (c->event == NULL || strcmp(ev_name(obj), c->event) == 0) &&
        (c->key == NULL || ev_field_equals(obj, c->key, c->value)))
        c->n++;
    cJSON_Delete(obj);
    return 0;
}

int evlog_count(const char *path, const char *event, const char *key, const char *value)
{
    struct count_ctx c = { event, key, value, 0 };
    each_line(path, count_one, &c);
    return c.n;
}

int64_t ev_ts(const cJSON *ev)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, "ts_us");
    return cJSON_IsNumber(t) ? (int64_t)t->valuedouble : 0;
}

const char *ev_name(const cJSON *ev)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(ev, "event");
    return cJSON_IsString(e) ? e->valuestring : "";
}

const char *ev_str(const cJSON *ev, const char *name)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(ev, name);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

int ev_num(const cJSON *ev, const char *name, double *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(ev, name);
    if (!cJSON_IsNumber(it))
        return 0;
    *out = it->valuedouble;
    return 1;
}

const cJSON *ev_arr(const cJSON *ev, const char *name)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(ev, name);
    return cJSON_IsArray(it) ? it : NULL;
}

/* Reads exactly n digits at *p into *v. */
static int digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return 0;
        x = x * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return 1;
}

int iso_to_us(const char *s, int64_t *us)
{
    int y, mo, d, h, mi, sec;
    const char *p = s;
    if (s == NULL)
        return 0;
    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d) || (*p != 'T' && *p != ' '))
        return 0;
    p++;
    if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' ||
        !digits(&p, 2, &sec))
        return 0;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int scale = 0;
        while (isdigit((unsigned char)*p)) {
            if (scale < 6) {
                frac = frac * 10 + (*p - '0');
                scale++;
            }
            p++;
        }
        while (scale++ < 6)
            frac *= 10;
    }
    int64_t offset_s = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;
        int oh, om = 0;
        p++;
        if (!digits(&p, 2, &oh))
            return 0;
        if (*p == ':')
            p++;
        if (isdigit((unsigned char)*p) && !digits(&p, 2, &om))
            return 0;
        offset_s = sign * (oh * 3600 + om * 60);
    }
    if (*p != '\0')
        return 0;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return 0;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    *us = ((int64_t)t - offset_s) * 1000000 + frac;
    return 1;
}

int ev_time_us(const cJSON *item, int64_t *us)
{
    if (cJSON_IsNumber(item)) {
        double v = item->valuedouble;
        if (v <= 0)
            return 0;
        *us = v >= 1e14 ? (int64_t)v : (int64_t)(v * 1000.0);
        return 1;
    }
    if (cJSON_IsString(item))
        return iso_to_us(item->valuestring, us);
    return 0;
}

void us_to_iso(int64_t us, char *out, size_t outlen)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%03dZ", base, (int)((us / 1000) % 1000));
}
