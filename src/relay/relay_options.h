/* relay_options.h -- the relay's option table, the one relay_config_parse
 * reads its command line over.
 *
 * The harness checks a scenario's "args" for a relay against this same
 * table before it starts anything (sim/scenario), so what a scenario may
 * say and what the relay accepts cannot drift apart.  This header is the
 * relay's only one the harness may include. */
#ifndef CW_RELAY_OPTIONS_H
#define CW_RELAY_OPTIONS_H

#include "cliutil.h"

#include <stddef.h>

struct relay_config;

#define RELAY_NOPTS 14

/* Fills opts[0..RELAY_NOPTS) with the relay's options, their values stored
 * into cfg; returns RELAY_NOPTS. */
size_t relay_options(struct relay_config *cfg, struct cw_opt *opts);

/* Reads argv (argv[0] the program) over the relay's options alone, into
 * scratch storage: the names and each value's kind and range, not which
 * options are required nor how they combine.  Returns a CW_OPTS_ code, with
 * the message in err on an error (it names the option). */
int relay_options_check(int argc, char **argv, char *err, size_t errlen);

#endif
