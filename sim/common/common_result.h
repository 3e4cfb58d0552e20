/* common_result.h -- the one check of a run directory's result.json, for
 * every harness folder that reads one (merge's rundir_load, which check,
 * merge and --shard-weights go through, and the HTML report).
 *
 * A result.json is outside input (a run directory may be copied, cut short
 * or edited), so its top is checked before any field is read: a JSON
 * object, "tool" "crashwindow", "kind" and "verdict" strings, "scenarios"
 * an array.  Reading the file stays with the callers, whose messages for a
 * missing or unreadable file differ and are asserted on. */
#ifndef CW_COMMON_RESULT_H
#define CW_COMMON_RESULT_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* result.json is never larger than this. */
#define CW_RESULT_MAX_JSON (64u * 1024 * 1024)

/* cw_result_parse's rules. */
enum cw_result_rules {
    /* "kind", "verdict" and "scenarios" required: what a command that acts
     * on the run (check, merge, --shard-weights) needs. */
    CW_RESULT_WHOLE,
    /* Only "tool" required; "scenarios" and "verdict" checked when present,
     * "kind" not read: the report draws any crashwindow result it is given
     * (a missing verdict reads as FAIL, missing scenarios as none). */
    CW_RESULT_DRAWABLE,
};

/* Parses text (len bytes, the contents of path, which names the file in
 * messages) and checks its top by rules.  Returns the parsed object (the
 * caller frees it with cJSON_Delete), or NULL with the reason in err:
 * "PATH is empty", "PATH is not valid JSON (parsing stopped at byte N of
 * LEN; ...)" saying whether the file looks cut short or corrupt, "PATH is
 * not a JSON object", "PATH is not a crashwindow result (...)", then
 * per rules "PATH has no \"kind\"" (\"verdict\", \"scenarios\" array) or
 * "PATH: \"scenarios\" must be an array" (\"verdict\" ... a string). */
cJSON *cw_result_parse(const char *path, const char *text, size_t len,
                       enum cw_result_rules rules, char *err, size_t errlen);

#endif
