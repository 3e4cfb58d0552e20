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

/* tmpl with its first "%s" replaced by arg, into out. */
static void expand(char *out, size_t outlen, const char *tmpl, const char *arg)
{
    if (out == NULL || outlen == 0)
        return;
    const char *at = tmpl != NULL ? strstr(tmpl, "%s") : NULL;
    if (tmpl == NULL)
        snprintf(out, outlen, "%s", arg);
    else if (at == NULL)
        snprintf(out, outlen, "%s", tmpl);
    else
        snprintf(out, outlen, "%.*s%s%s", (int)(at - tmpl), tmpl, arg, at + 2);
}

static int is_help(int help, const char *a)
{
    return ((help & CW_HELP_LONG) && strcmp(a, "--help") == 0) ||
           ((help & CW_HELP_SHORT) && strcmp(a, "-h") == 0);
}

static const struct cw_opt *find_opt(const struct cw_opt *opts, size_t nopts, const char *name)
{
    for (size_t k = 0; k < nopts; k++)
        if (strcmp(opts[k].name, name) == 0)
            return &opts[k];
    return NULL;
}

/* Stores v as o's kind says.  0, or -1 with err. */
static int take_value(const struct cw_opt *o, const char *v, char *err, size_t errlen)
{
    switch (o->kind) {
    case CW_KIND_STRING:
        *(const char **)o->dest = v;
        return 0;
    case CW_KIND_INT:
        return cw_parse_int(o->name, v, o->lo, o->hi, o->dest, err, errlen);
    case CW_KIND_CALL:
        return o->call(v, o->dest, err, errlen);
    case CW_KIND_FLAG:
        break;
    }
    return -1;
}

/* CW_LIST_OPTIONS: the table itself, for a test that holds --help to it. */
static void list_options(const struct cw_opt *opts, size_t nopts)
{
    static const char *const kinds[] = { "flag", "string", "int", "call" };
    for (size_t k = 0; k < nopts; k++)
        printf("%s %s\n", opts[k].name, kinds[opts[k].kind]);
    fflush(stdout);
}

int cw_opts_parse(const struct cw_opt *opts, size_t nopts, const struct cw_opts_style *style,
                  int argc, char **argv, int *next, char *err, size_t errlen)
{
    int rc = CW_OPTS_OK;
    int i;
    const char *list = getenv("CW_LIST_OPTIONS");
    if (list != NULL && list[0] != '\0') {
        list_options(opts, nopts);
        exit(0);
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(style->help, a)) {
            rc = CW_OPTS_HELP;
            break;
        }
        if (style->prefix != NULL && strncmp(a, style->prefix, strlen(style->prefix)) != 0) {
            if (style->stray != NULL) {
                expand(err, errlen, style->stray, a);
                rc = CW_OPTS_USAGE;
                break;
            }
            if (style->positional == NULL)
                break;
            if (style->positional(a, style->positional_ctx, err, errlen) < 0) {
                rc = CW_OPTS_BAD_VALUE;
                break;
            }
            continue;
        }
        int has_value = i + 1 < argc;
        if (style->value_first && !has_value) {
            expand(err, errlen, style->missing, a);
            rc = CW_OPTS_USAGE;
            break;
        }
        const struct cw_opt *o = find_opt(opts, nopts, a);
        if (o == NULL) {
            expand(err, errlen, style->unknown, a);
            rc = CW_OPTS_USAGE;
            break;
        }
        if (o->kind == CW_KIND_FLAG) {
            *(int *)o->dest = 1;
            continue;
        }
        if (!has_value) {
            expand(err, errlen, style->missing, a);
            rc = CW_OPTS_USAGE;
            break;
        }
        if (take_value(o, argv[i + 1], err, errlen) < 0) {
            rc = CW_OPTS_BAD_VALUE;
            break;
        }
        i++;
    }
    if (next != NULL)
        *next = i;
    return rc;
}

const struct cw_opts_style cw_pairs_style = {
    .prefix = "--",
    .help = CW_HELP_LONG | CW_HELP_SHORT,
    .value_first = 1,
    .unknown = "unknown option '%s'",
    .missing = "%s needs a value",
    .stray = "unexpected argument '%s'",
};
