/* scenario_internal.h -- what scenario.c (the file), scenario_steps.c (the
 * verbs) and scenario_describe.c (the describer) share; scenario.h is the
 * public interface.  The helpers validate one field each: they return 0 or
 * 1 as documented, or -1 with "FILE: FIELD: problem" already in the
 * context's err (sc_verr). */
#ifndef CW_SCENARIO_INTERNAL_H
#define CW_SCENARIO_INTERNAL_H

#include "scenario.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Validation context: the file name and where the message goes. */
struct vctx {
    const char *path;
    char *err;
    size_t errlen;
    const char *const *points;
};

/* Formats "PATH: FIELD: message" (or "PATH: message" when field is empty)
 * into v->err.  Always returns -1, so a failing check ends in one line. */
__attribute__((format(printf, 3, 4)))
int sc_verr(struct vctx *v, const char *field, const char *fmt, ...);

/* The names of the enums of scenario.h, as a scenario file spells them
 * (sized, so that a name missing from a table fails to compile). */
extern const char *const sc_kind_names[SC_CONSUMER + 1];
extern const char *const sc_verb_names[V_NET + 1];
extern const char *const sc_db_action_names[DB_STALL_REPLICATION + 1];
extern const char *const sc_until_names[U_SQL + 1];
extern const char *const sc_invariant_names[INV_COUNT];

/* 1 when s is in the NULL-terminated list, else 0. */
int sc_in_list(const char *s, const char *const *list);
/* Every key of obj must be in allowed (NULL-terminated): 0, or -1. */
int sc_only_fields(struct vctx *v, const cJSON *obj, const char *field,
                   const char *const *allowed);
/* A string field: 1 found, 0 absent (when optional), -1 error. */
int sc_get_str(struct vctx *v, const cJSON *obj, const char *key, const char *field,
               int required, const char **out);
/* An integer field within [lo, hi]: 1 found, 0 absent (when optional),
 * -1 error. */
int sc_get_int(struct vctx *v, const cJSON *obj, const char *key, const char *field,
               int required, long long lo, long long hi, long long *out);
/* An optional integer field within [lo, hi] stored into an int: *out is
 * set when the field is given and left at the caller's default when it is
 * absent or null.  0, or -1 (not an integer, out of range). */
int sc_opt_int(struct vctx *v, const cJSON *obj, const char *key, const char *field,
               long long lo, long long hi, int *out);
/* The index of name in names[0..n-1], -1 when it is not there. */
int sc_name_index(const char *const *names, int n, const char *name);
/* An optional true/false field into *out: 1 found, 0 absent, -1 error. */
int sc_get_bool(struct vctx *v, const cJSON *obj, const char *key, const char *field,
                int *out);
/* The index of the process called name, -1 when none is. */
int sc_find_proc(const struct scenario *sc, const char *name);
/* Validates the switches of a broker control object (their types; the
 * broker judges the values): 0 or -1. */
int sc_check_control(struct vctx *v, const cJSON *c, const char *field);
/* An optional "where": {"key": value} into *key and *value: value borrows
 * the tree's string, is the literal "true" or "false", or is buf (of
 * buflen bytes) holding a number's text.  0 or -1. */
int sc_get_where(struct vctx *v, const cJSON *s, const char *field,
                 const char **key, const char **value, char *buf, size_t buflen);

/* scenario_steps.c: parses steps[idx] into sc->steps[idx] (sc->steps is
 * allocated for every step).  0 or -1. */
int sc_parse_step(struct vctx *v, struct scenario *sc, const cJSON *s, int idx);

#endif
