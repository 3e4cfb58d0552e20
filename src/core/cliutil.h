/* cliutil.h -- command-line values shared by every crashwindow program.
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

#endif
