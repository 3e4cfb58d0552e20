/* mutants.h -- `crashwindow mutants`: known-wrong builds of the system
 * under test, each of which the scenarios must catch.  The list of mutants,
 * the mistake each one makes and the build and run steps are in mutants.c. */
#ifndef CW_MUTANTS_H
#define CW_MUTANTS_H

/* The subcommand: argv[0] is "mutants".  Exit status 0 when the unmutated
 * build passes and every mutant is killed, 1 otherwise, 2 on bad usage. */
int mutants_main(int argc, char **argv);

/* `mutants --full --jobs N` without --reach: the reach build and the reach
 * run (the scenarios against it, with the same --jobs) into OUT.reach,
 * before any share starts; *argv_out is then the command line every share
 * gets: --out OUT (made up when absent) and --reach OUT.reach added (the
 * caller frees the array, not its strings), and *order_out the order its
 * shares start in (costliest first; NULL: in turn).  0 (*argv_out NULL when
 * nothing was wanted), 1 when the reach run failed, 2 on bad usage
 * (printed). */
int mutants_jobs_reach(int argc, char **argv, char ***argv_out, const int **order_out);

/* How many mutants a command line (argv[0] "mutants") chooses: one per
 * --only, else the whole catalogue. */
int mutants_chosen_count(int argc, char **argv);

#endif
