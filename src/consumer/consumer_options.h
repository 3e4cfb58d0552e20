/* consumer_options.h -- the consumer's option table, the one
 * consumer_config_parse reads its command line over.
 *
 * The harness checks a scenario's "args" for a consumer against this same
 * table before it starts anything (sim/scenario), so what a scenario may
 * say and what the consumer accepts cannot drift apart.  This header is the
 * consumer's only one the harness may include. */
#ifndef CW_CONSUMER_OPTIONS_H
#define CW_CONSUMER_OPTIONS_H

#include "cliutil.h"

#include <stddef.h>

struct consumer_config;

#define CONSUMER_NOPTS 21

/* Fills opts[0..CONSUMER_NOPTS) with the consumer's options, their values
 * stored into cfg, except --effect's and --proc-name's, which go to *effect
 * and *proc (the parse resolves them once every option is read); returns
 * CONSUMER_NOPTS. */
size_t consumer_options(struct consumer_config *cfg, const char **effect, const char **proc,
                        struct cw_opt *opts);

/* Reads argv (argv[0] the program) over the consumer's options alone, into
 * scratch storage: the names and each value's kind and range, not which
 * options are required nor how they combine.  Returns a CW_OPTS_ code, with
 * the message in err on an error (it names the option). */
int consumer_options_check(int argc, char **argv, char *err, size_t errlen);

#endif
