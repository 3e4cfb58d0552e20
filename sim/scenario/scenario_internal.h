/* scenario_internal.h -- what scenario.c (the file), scenario_steps.c (the
 * verbs) and scenario_describe.c (the describer) share; scenario.h is the
 * public interface.  The helpers validate one field each: they return 0 or
 * 1 as documented, or -1 with "FILE: FIELD: problem" already in the
 * context's err (jv_err). */
#ifndef CW_SCENARIO_INTERNAL_H
#define CW_SCENARIO_INTERNAL_H

#include "common_json.h"
#include "scenario.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* The names of the enums of scenario.h, as a scenario file spells them
 * (sized, so that a name missing from a table fails to compile). */
extern const char *const sc_kind_names[SC_CONSUMER + 1];
extern const char *const sc_verb_names[V_SCRAPE + 1];
extern const char *const sc_db_action_names[DB_SEVER + 1];
extern const char *const sc_until_names[U_SQL + 1];
extern const char *const sc_invariant_names[INV_COUNT];

/* The index of the process called name, -1 when none is. */
int sc_find_proc(const struct scenario *sc, const char *name);
/* Validates the switches of a broker control object (their types; the
 * broker judges the values): 0 or -1. */
int sc_check_control(struct jv_ctx *v, const cJSON *c, const char *field);
/* An optional "where": {"key": value} into *key and *value: value borrows
 * the tree's string, is the literal "true" or "false", or is buf (of
 * buflen bytes) holding a number's text.  0 or -1. */
int sc_get_where(struct jv_ctx *v, const cJSON *s, const char *field,
                 const char **key, const char **value, char *buf, size_t buflen);

/* scenario_steps.c: parses steps[idx] into sc->steps[idx] (sc->steps is
 * allocated for every step).  0 or -1. */
int sc_parse_step(struct jv_ctx *v, struct scenario *sc, const cJSON *s, int idx);

#endif
