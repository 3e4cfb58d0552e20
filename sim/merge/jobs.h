/* jobs.h -- `--jobs N` on run, mutants and sim: the shards of one command
 * run on this machine, N at a time, then merged.
 *
 *   crashwindow mutants --full --jobs 4 [--shares M] [--out DIR] [--junit FILE] ...
 *
 * is `crashwindow mutants --full --shard K/M --out DIR.jobs/K` for K = 1..M
 * as child processes, at most N at once (a slot freed starts the next K),
 * then `crashwindow merge DIR.jobs/1 .. DIR.jobs/M --out DIR [--junit
 * FILE]`.  A scenario spends most of its time waiting (for a lease to
 * lapse, a backoff, a process to restart), so several shards share two
 * cores well.  M is N unless --shares says otherwise, and for mutants one
 * per mutant: a mutant whose scenarios run to their timeouts costs many
 * times another, and with N static shares one slow share would hold the
 * end while the other slots sat idle.  Each child is an ordinary sharded
 * run: its own throwaway cluster (a database fault in one never touches
 * another), its own network namespace, its own broker.  The options that
 * would make children share or fight over something are refused: --shard
 * (--jobs chooses them), --pg and --pg-dir (a cluster that one child
 * crashes on purpose is the others' too), --keep, --dry-run, --replay and
 * --shrink (one schedule, no work to split).
 *
 * Each child's console goes to DIR.jobs/K.log; a line per minute says
 * where each stands, and a line per child when it ends.  When every child
 * ended with 0 or 1 the merge writes DIR (its own verdict, report, JUnit
 * file and bundles; each child's log becomes DIR/shards/K/console.log) and
 * DIR.jobs is removed.  When a child ended otherwise (bad usage, a signal),
 * no further share starts, those running are stopped, the last lines of
 * its log are printed, nothing is merged and DIR.jobs stays for a look.  SIGINT and SIGTERM are passed on to the children,
 * and after them nothing is merged (exit status 2).
 *
 * run's --report FILE is honoured: the merged report is copied there. */
#ifndef CW_JOBS_H
#define CW_JOBS_H

#define JOBS_MAX 16
#define JOBS_SHARES_MAX 256

/* 1 when argv (a subcommand's, argv[0] the subcommand) holds --jobs. */
int jobs_wanted(int argc, char **argv);

/* Runs the subcommand argv[0] ("run", "mutants" or "sim") as --jobs asks.
 * source_dir is where the default DIR (reports/<command>-<UTC timestamp>)
 * goes when there is no --out; default_shares is M without --shares (N
 * when it is smaller); max_shares, when not 0, is the most shares the work
 * splits into (a run's scenario files): without --shares, M and N are cut
 * to it.  Returns the exit status: the merge's (0 everything passed, 1
 * something failed), or 2 on bad usage or when a child or the merge could
 * not finish.  order, when its norder entries are the M shares, is the
 * order they start in (indexes from 0; the costliest first, so that none
 * holds the end alone); otherwise they start in turn. */
int jobs_main(int argc, char **argv, const char *source_dir, int default_shares,
              int max_shares, const int *order, int norder);

#endif
