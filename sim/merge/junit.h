/* junit.h -- JUnit XML from a result.json, the format CI systems show as
 * test results (GitHub Actions reporters, GitLab's junit artifacts, Jenkins).
 *
 * One <testcase> per scenario of a run, per randomized run (seed) of the
 * simulator, and per mutant of the mutant matrix (plus the baseline's
 * scenarios); a failing one carries a <failure> whose message is the first
 * witness and whose text lists every failed check and, for a seed, the
 * command that replays it.  A merged result gives one file for all shards.
 * Text goes through the report's escaping, so the file is well-formed XML
 * whatever bytes a witness holds. */
#ifndef CW_JUNIT_H
#define CW_JUNIT_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Writes the JUnit XML of result (a parsed result.json of any kind) to
 * path, whole or not at all.  0, or -1 with the reason in err. */
int junit_write(const cJSON *result, const char *path, char *err, size_t errlen);

#endif
