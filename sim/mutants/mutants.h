/* mutants.h -- `crashwindow mutants`: known-wrong builds of the system
 * under test, each of which the scenarios must catch.  The list of mutants,
 * the mistake each one makes and the build and run steps are in mutants.c. */
#ifndef CW_MUTANTS_H
#define CW_MUTANTS_H

/* The subcommand: argv[0] is "mutants".  Exit status 0 when the unmutated
 * build passes and every mutant is killed, 1 otherwise, 2 on bad usage. */
int mutants_main(int argc, char **argv);

/* How many mutants a command line (argv[0] "mutants") chooses: one per
 * --only, else the whole catalogue. */
int mutants_chosen_count(int argc, char **argv);

#endif
