/* merge.h -- `crashwindow merge DIR... --out DIR`: the run directories of
 * the shards of one run (`--shard K/N` on run, mutants or sim) become one
 * run directory: one result.json, one verdict, one HTML report (the
 * report's own code, from the merged directory), one JUnit file and the
 * failure bundles.
 *
 * The merge is a pure function of the shard directories; no coordinator
 * took part in the run.  It refuses, naming the shard and the problem, and
 * writes nothing, when
 *   - a shard's result.json is missing, empty, cut short or not JSON, not a
 *     crashwindow result, or not a shard (no "shard" in it);
 *   - shards differ in kind, in N, in commit, or in the work they split
 *     (the scenario list and the digest of its files, the mutant list, the
 *     seed and run count);
 *   - two directories are the same shard, or hold the same work (overlap);
 *   - a shard is missing: every absent K of 1..N is named with the work it
 *     held, since a missing shard must fail, never pass by omission;
 *   - a shard's result does not hold exactly the work of its share (a run
 *     cut short, a file edited), or a scenario's files are missing.
 *
 * The merged directory:
 *   OUT/result.json     the kind of the shards; scenarios (and mutants, or
 *                       simulator statistics) of every shard in the order of
 *                       the unsharded run; totals summed; "merged": the
 *                       shards, their hosts and times
 *   OUT/shards/K/       shard K's directory (hard links where possible)
 *   OUT/report.html     the HTML report
 *   OUT/junit.xml       one JUnit file for every shard
 *   OUT/bundles/        a failure bundle per failure (bundle.h)
 * It is built in a temporary directory beside OUT and renamed into place,
 * so OUT is either complete or absent.
 *
 * Exit status: 0 merged and everything passed, 1 merged and something
 * failed, 2 nothing merged (bad usage, bad or missing shards, or the output
 * could not be written). */
#ifndef CW_MERGE_H
#define CW_MERGE_H

/* The subcommand: argv[0] is "merge".  Returns the exit status. */
int merge_main(int argc, char **argv);

#endif
