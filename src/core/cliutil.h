/* cliutil.h -- command-line values and option tables shared by every
 * crashwindow program.
 *
 * A flag's value is accepted only when it is a whole decimal integer
 * (strtol's form: optional leading blanks and sign, then digits, and nothing
 * after them) inside the flag's range; anything
 * else is refused with a message naming the flag, the value and the range,
 * so a daemon never starts with a setting it misread. */
#ifndef CW_CLIUTIL_H
#define CW_CLIUTIL_H

#include <stddef.h>

/* Parses s as a decimal integer in [lo, hi] into *out.  Returns 0, or -1
 * with "FLAG: 'S' is not an integer in LO..HI" in err (*out unchanged).
 * s NULL or empty, trailing characters and overflow are refused.  err may be
 * NULL; flag NULL reads as "value". */
int cw_parse_long(const char *flag, const char *s, long lo, long hi, long *out,
                  char *err, size_t errlen);

/* cw_parse_long for an int destination; lo and hi are ints, so the value
 * always fits. */
int cw_parse_int(const char *flag, const char *s, int lo, int hi, int *out,
                 char *err, size_t errlen);

/* Takes the "--flag VALUE" pair at argv[*i] (argv[0] is the program) and moves *i
 * onto its value.  Returns 1 with *flag and *value set; 0 when argv[*i] is --help
 * or -h; -1 with "unexpected argument 'X'" (not a --flag) or "X needs a value"
 * (the last argument) in err.  *flag and *value point into argv. */
int cw_next_flag(int argc, char **argv, int *i, const char **flag, const char **value,
                 char *err, size_t errlen);

/* ---- option tables ------------------------------------------------------
 *
 * A program lists its options once, as a table of {name, kind, destination},
 * and cw_opts_parse walks argv over it in one call.  The programs' messages
 * for bad usage predate the table and differ (tests and operators read
 * them), so each program describes its own in a struct cw_opts_style; the
 * table does not generate the usage text, which each program keeps whole.
 *
 *   struct cw_opt opts[] = {
 *       CW_OPT_STRING("--db", &o.db),
 *       CW_OPT_INT("--threads", &o.threads, 1, 64),
 *       CW_OPT_FLAG("--list", &o.list),
 *       CW_OPT_CALL("--order", parse_order, &o),
 *   };
 *   rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, err, sizeof(err));
 */

enum cw_opt_kind {
    CW_KIND_FLAG,   /* no value: the int at dest becomes 1 */
    CW_KIND_STRING, /* the const char * at dest points at the value (inside argv) */
    CW_KIND_INT,    /* cw_parse_int's whole number in lo..hi into the int at dest */
    CW_KIND_CALL,   /* call(value, dest, err, errlen) checks and stores the value */
};

/* The check of a CW_KIND_CALL option: 0, or -1 with the message in err. */
typedef int cw_opt_call(const char *value, void *ctx, char *err, size_t errlen);

struct cw_opt {
    const char *name;      /* as written on the command line: "--batch" */
    enum cw_opt_kind kind;
    void *dest;            /* int *, const char ** or the call's context */
    int lo, hi;            /* CW_KIND_INT's range */
    cw_opt_call *call;     /* CW_KIND_CALL */
};

/* Table entries; the conditional makes the compiler check dest's type. */
#define CW_OPT_FLAG(name, p) { (name), CW_KIND_FLAG, (1 ? (p) : (int *)0), 0, 0, NULL }
#define CW_OPT_STRING(name, p) \
    { (name), CW_KIND_STRING, (1 ? (p) : (const char **)0), 0, 0, NULL }
#define CW_OPT_INT(name, p, lo, hi) \
    { (name), CW_KIND_INT, (1 ? (p) : (int *)0), (lo), (hi), NULL }
#define CW_OPT_CALL(name, fn, ctx) { (name), CW_KIND_CALL, (ctx), 0, 0, (fn) }
#define CW_NOPTS(table) (sizeof(table) / sizeof((table)[0]))

/* Which arguments ask for help (struct cw_opts_style.help). */
#define CW_HELP_LONG 1  /* --help */
#define CW_HELP_SHORT 2 /* -h */

/* How a program's command line reads, and what it says when it is wrong.
 * The messages are templates in which the first "%s" stands for the
 * offending argument (no other conversion is read; a template without one
 * is printed as it is). */
struct cw_opts_style {
    const char *prefix;     /* what an option starts with ("--", "-"); NULL: every
                             * argument is an option's name */
    int help;               /* CW_HELP_LONG | CW_HELP_SHORT, or 0 */
    int value_first;        /* a last argument is refused as missing its value
                             * before its name is looked up (programs whose every
                             * option takes a value always did so) */
    const char *unknown;    /* an option not in the table */
    const char *missing;    /* an option whose value is missing */
    const char *stray;      /* an argument without the prefix; NULL: see positional */
    cw_opt_call *positional; /* with stray NULL: takes an argument without the prefix
                              * (ctx positional_ctx); NULL: parsing stops there */
    void *positional_ctx;
};

/* The daemons' style (relay, consumer): every option takes a value, as
 * "--flag VALUE" pairs; --help and -h ask for help; "unknown option 'X'",
 * "X needs a value", "unexpected argument 'X'". */
extern const struct cw_opts_style cw_pairs_style;

/* What cw_opts_parse found. */
enum {
    CW_OPTS_OK = 0,
    CW_OPTS_HELP = 1,       /* a help argument: the caller prints its usage */
    CW_OPTS_USAGE = -1,     /* unknown option, missing value or stray argument */
    CW_OPTS_BAD_VALUE = -2, /* a value its kind or its call refused */
};

/* Parses argv[1..argc-1] over the nopts options of opts, storing each value
 * as its kind says, left to right (a repeated option's last value wins;
 * a call sees every one).  Returns a CW_OPTS_ code; on an error err holds
 * the message (without the program's name).  *next (next may be NULL)
 * receives the index of the first argument not taken: argc, the help
 * argument, the one in error, or the first positional argument where
 * parsing stops. */
int cw_opts_parse(const struct cw_opt *opts, size_t nopts, const struct cw_opts_style *style,
                  int argc, char **argv, int *next, char *err, size_t errlen);

/* With CW_LIST_OPTIONS set (non-empty) in the environment, cw_opts_parse
 * prints its table instead -- "NAME KIND" a line, KIND flag, string, int or
 * call -- and exits 0: the test that holds every program's --help to the
 * options it accepts reads the very table the program parses with. */

#endif
