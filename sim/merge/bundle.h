/* bundle.h -- failure bundles: one directory per failure, ready to attach
 * to a bug report, in the manner of TigerBeetle's VOPR reports.
 *
 * DIR/bundles/<name>/ for every failing scenario (a scenario of a run, of a
 * mutant matrix's baseline, or a simulator seed) holds
 *   summary.md     what failed, the first witness, the commit, how to replay
 *   replay.sh      the exact command that replays it, from a checkout of
 *                  the commit (sh replay.sh; CW_BUILD names the build tree)
 *   scenario.json  the scenario as run (a seed: as generated)
 *   shrunk.json    a seed shrunk with --shrink: the smallest failing schedule
 *   verdict.json   the scenario's entry of result.json: every invariant,
 *                  witness and count
 *   logs/          the run's record: each process's events and output, the
 *                  broker's log, timeline.jsonl (the merged history) and
 *                  metrics.jsonl
 * and DIR/bundles/mutant-<name>/ for every mutant that survived (or could
 * not be built or run): its summary, replay.sh, build.log and each aimed
 * scenario's record under logs/<scenario>/.
 *
 * A bundle is a pure function of the run directory: the bundles of a merged
 * directory come from the same code. */
#ifndef CW_BUNDLE_H
#define CW_BUNDLE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Writes DIR/bundles/ afresh (an old one is removed first) from result,
 * the parsed DIR/result.json.  Returns the number of bundles (0: nothing
 * failed, and no bundles/ is left), or -1 with the reason in err. */
int bundle_write_all(const char *dir, const cJSON *result, char *err, size_t errlen);

#endif
