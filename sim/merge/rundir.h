/* rundir.h -- reading a run directory's result.json, and what every command
 * writes from it when it is done (JUnit XML, failure bundles).
 *
 * A run directory is what `crashwindow run`, `mutants`, `sim` and `merge`
 * leave: DIR/result.json and the files its "dir" fields point to.  Anything
 * written from a run directory is a pure function of it, so a merged
 * directory gets its report, JUnit file and bundles by the same code as a
 * single run. */
#ifndef CW_RUNDIR_H
#define CW_RUNDIR_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>

/* Typed lookups in a result.json object: NULL (or 0) when o is not an
 * object, or the key is missing or of another type. */
static inline const cJSON *rd_get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static inline const char *rd_str(const cJSON *o, const char *key)
{
    const cJSON *v = rd_get(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static inline double rd_num(const cJSON *o, const char *key)
{
    const cJSON *v = rd_get(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : 0;
}

/* 1 when d is a relative path inside the run directory: not empty, no
 * leading '/', no ".." part (a "dir" field must not point elsewhere). */
int rundir_safe_rel(const char *d);

/* DIR/result.json, parsed and checked at the top by common_result.h's
 * whole rules: a JSON object, "tool" "crashwindow", "kind" and "verdict"
 * strings, "scenarios" an array.  NULL with the reason in err: missing,
 * unreadable, too large (CW_RESULT_MAX_JSON), or what cw_result_parse
 * refuses: empty, not JSON (with the byte offset where parsing stopped: a
 * truncated file stops at its end), not a crashwindow result. */
cJSON *rundir_load(const char *dir, char *err, size_t errlen);

/* 1 when the scenario entry of result.json did not pass. */
int rundir_failed(const cJSON *sc);

/* 1 when one invariant or expectation entry of a scenario failed: a hazard
 * its invariant caught, an invariant a target's mapping cannot show ("not
 * examined") and a known finding reproduced are not failures. */
int rundir_check_failed(const cJSON *check);

/* What made a failed scenario fail, in one line: the first witness of the
 * first failed invariant ("nothing_lost: ..."), else the first failed
 * expectation, else the error; sig receives the invariant's name,
 * "expectation" or "error".  Either output may be NULL. */
void rundir_first_witness(const cJSON *sc, char *out, size_t outlen, char *sig,
                          size_t siglen);

/* Reads DIR/result.json and writes the JUnit file (when junit is not NULL)
 * and DIR/bundles/ (when bundles is set and something failed), printing a
 * line for each under the name who.  0, or -1 with the reason printed. */
int rundir_outputs(const char *dir, const char *junit, int bundles, const char *who);

#endif
