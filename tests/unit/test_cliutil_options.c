/* Unit tests for cliutil.h's option tables: each kind stores its value, each
 * style words its refusals as the programs always have, and the index
 * returned says where parsing stopped. */
#include "cliutil.h"
#include "check.h"

#include <string.h>

struct opts {
    const char *db;
    int batch;
    int list;
    int calls;
    const char *last_call;
};

static int count_call(const char *value, void *ctx, char *err, size_t errlen)
{
    struct opts *o = ctx;
    if (strcmp(value, "bad") == 0) {
        snprintf(err, errlen, "--order: '%s' is refused", value);
        return -1;
    }
    o->calls++;
    o->last_call = value;
    return 0;
}

static int collect(const char *arg, void *ctx, char *err, size_t errlen)
{
    struct opts *o = ctx;
    if (o->calls == 2) {
        snprintf(err, errlen, "more than 2 directories (%s)", arg);
        return -1;
    }
    o->calls++;
    o->last_call = arg;
    return 0;
}

/* The relay's and the consumers' style (once cw_next_flag's). */
static const struct cw_opts_style daemon_style = {
    .prefix = "--",
    .help = CW_HELP_LONG | CW_HELP_SHORT,
    .value_first = 1,
    .unknown = "unknown option '%s'",
    .missing = "%s needs a value",
    .stray = "unexpected argument '%s'",
};

/* The harness commands' style: one message for both mistakes, flags. */
static const struct cw_opts_style command_style = {
    .help = CW_HELP_LONG | CW_HELP_SHORT,
    .unknown = "unknown option or missing value: '%s'",
    .missing = "unknown option or missing value: '%s'",
};

static int parse(const struct cw_opts_style *st, struct opts *o, int argc, char **argv,
                 int *next, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    const struct cw_opt table[] = {
        CW_OPT_STRING("--db", &o->db),
        CW_OPT_INT("--batch", &o->batch, 1, 100),
        CW_OPT_FLAG("--list", &o->list),
        CW_OPT_CALL("--order", count_call, o),
    };
    err[0] = '\0';
    return cw_opts_parse(table, CW_NOPTS(table), st, argc, argv, next, err, errlen);
}

#define ARGV(...) ((char *[]){ "prog", __VA_ARGS__, NULL })
#define ARGC(...) ((int)(sizeof((char *[]){ "prog", __VA_ARGS__ }) / sizeof(char *)))
#define PARSE(st, ...) parse((st), &o, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), &next, err, \
                             sizeof(err))

int main(void)
{
    struct opts o;
    char err[200];
    int next = -1;

    /* Every kind, in any order; a repeated option's last value wins. */
    CHECK(PARSE(&daemon_style, "--db", "x", "--batch", "7", "--order", "a", "--order", "b",
                "--db", "y") == CW_OPTS_OK);
    CHECK(strcmp(o.db, "y") == 0 && o.batch == 7 && o.calls == 2);
    CHECK(strcmp(o.last_call, "b") == 0 && next == 11);
    CHECK(parse(&daemon_style, &o, 1, ARGV(NULL), &next, err, sizeof(err)) == CW_OPTS_OK &&
          next == 1);

    /* A value that looks like an option is still the value. */
    CHECK(PARSE(&daemon_style, "--db", "--help") == CW_OPTS_OK && strcmp(o.db, "--help") == 0);

    /* Help, wherever it stands as an option. */
    CHECK(PARSE(&daemon_style, "--db", "x", "-h", "--bogus") == CW_OPTS_HELP && next == 3);
    CHECK(PARSE(&daemon_style, "--help") == CW_OPTS_HELP);

    /* The daemon style's refusals, as cw_next_flag worded them. */
    CHECK(PARSE(&daemon_style, "--bogus", "1") == CW_OPTS_USAGE);
    CHECK(strcmp(err, "unknown option '--bogus'") == 0 && next == 1);
    CHECK(PARSE(&daemon_style, "--db", "x", "--bogus") == CW_OPTS_USAGE);
    CHECK(strcmp(err, "--bogus needs a value") == 0 && next == 3);
    CHECK(PARSE(&daemon_style, "--db", "x", "stray", "y") == CW_OPTS_USAGE);
    CHECK(strcmp(err, "unexpected argument 'stray'") == 0);
    CHECK(PARSE(&daemon_style, "--batch", "0") == CW_OPTS_BAD_VALUE);
    CHECK(strcmp(err, "--batch: '0' is not an integer in 1..100") == 0 && o.batch == 0);
    CHECK(PARSE(&daemon_style, "--batch", "5x") == CW_OPTS_BAD_VALUE);
    CHECK(PARSE(&daemon_style, "--order", "bad") == CW_OPTS_BAD_VALUE);
    CHECK(strcmp(err, "--order: 'bad' is refused") == 0);

    /* The command style: flags, one message for both mistakes, and every
     * argument an option's name. */
    CHECK(PARSE(&command_style, "--list") == CW_OPTS_OK && o.list == 1);
    CHECK(PARSE(&command_style, "--list", "--db") == CW_OPTS_USAGE);
    CHECK(strcmp(err, "unknown option or missing value: '--db'") == 0 && next == 2);
    CHECK(PARSE(&command_style, "dir") == CW_OPTS_USAGE);
    CHECK(strcmp(err, "unknown option or missing value: 'dir'") == 0);
    CHECK(PARSE(&command_style, "--help") == CW_OPTS_HELP);

    /* Positional arguments collected, or parsing stopped at the first. */
    struct cw_opts_style collecting = command_style;
    collecting.prefix = "-";
    collecting.positional = collect;
    collecting.positional_ctx = &o;
    CHECK(PARSE(&collecting, "a", "--db", "x", "b") == CW_OPTS_OK);
    CHECK(o.calls == 2 && strcmp(o.last_call, "b") == 0 && strcmp(o.db, "x") == 0);
    /* The collector counts in o too: a third one is refused. */
    CHECK(PARSE(&collecting, "a", "b", "c") == CW_OPTS_BAD_VALUE);
    CHECK(strcmp(err, "more than 2 directories (c)") == 0 && next == 3);
    CHECK(PARSE(&collecting, "-") == CW_OPTS_USAGE);

    struct cw_opts_style stopping = {
        .prefix = "--",
        .help = CW_HELP_LONG,
        .unknown = "unknown option '%s'",
        .missing = "unknown option '%s'",
    };
    CHECK(PARSE(&stopping, "--db", "x", "status", "--json") == CW_OPTS_OK && next == 3);
    CHECK(PARSE(&stopping, "-h") == CW_OPTS_OK && next == 1);
    CHECK(PARSE(&stopping, "--db") == CW_OPTS_USAGE && strcmp(err, "unknown option '--db'") == 0);

    /* A template without "%s" is the message as it is. */
    struct cw_opts_style fixed = { .unknown = "usage: prog --db X", .missing = "usage: prog --db X" };
    CHECK(PARSE(&fixed, "-x") == CW_OPTS_USAGE && strcmp(err, "usage: prog --db X") == 0);
    CHECK(PARSE(&fixed, "--help") == CW_OPTS_USAGE);

    return check_report("test_cliutil_options");
}
