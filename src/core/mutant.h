/* mutant.h -- named hooks for the known-wrong variants of the code.
 *
 * `crashwindow mutants` builds each mutant with -DCW_MUTANT=<name>, which
 * defines CW_MUTANT_<name> to 1 (CMakeLists.txt).  Code bends at a hook:
 *
 *     const char *record = CW_MUTANT(cleanup_unrecorded) ? "false" : "true";
 *
 * CW_MUTANT(name) is the constant 1 in that mutant's build and 0 in every
 * other, so the production path reads as one program, the compiler drops
 * the dead branch, and a reader sees at a glance where a variant can bend
 * it (in the spirit of SQLite's testcase() and NEVER()).  The mutants'
 * catalogue with the mistake each one makes: sim/mutants/mutants.c.
 *
 * The reach build (-DCW_MUTANT_REACH=ON) is the real code in which every
 * hook is still 0 but notes its name, once per process, in the file named
 * by $CW_MUTANT_REACH_LOG.  A mutant's program is the real one until it
 * evaluates one of its hooks, so a scenario whose real run reaches no hook
 * of a mutant runs the same under that mutant: the full matrix skips it.
 * So a hook is asked last, after the conditions without which its mutant
 * does what the real code does (`attempt > 0 && CW_MUTANT(x)`, not
 * `CW_MUTANT(x) && attempt > 0`): the record then names only the runs
 * where the mutant can differ. */
#ifndef CW_MUTANT_H
#define CW_MUTANT_H

#define CW_MUTANT_REACH_ENV "CW_MUTANT_REACH_LOG"

#ifdef CW_MUTANT_REACH
#define CW_MUTANT(name) cw_mutant_reached(#name)
#else
/* 1 when CW_MUTANT_<name> is defined to 1, else 0 (the preprocessor test
 * of the Linux kernel's IS_ENABLED). */
#define CW_MUTANT(name) CW_MUTANT_IS_ONE_(CW_MUTANT_##name)
#define CW_MUTANT_IS_ONE_(x) CW_MUTANT_IS_ONE__(x)
#define CW_MUTANT_IS_ONE__(x) CW_MUTANT_PICK_(CW_MUTANT_PLACEHOLDER_##x)
#define CW_MUTANT_PICK_(one_or_junk) CW_MUTANT_SECOND_(one_or_junk 1, 0, ~)
#define CW_MUTANT_PLACEHOLDER_1 0,
#define CW_MUTANT_SECOND_(a, b, ...) b
#endif

/* Notes that the hook `name` was evaluated (the first time in this process
 * a call site's name is seen), then answers 0, the real code's value. */
int cw_mutant_reached(const char *name);

/* The name of the mutant this build is, or NULL in the real build: a
 * process says what it is when it starts. */
#ifdef CW_MUTANT_NAME
#define CW_MUTANT_BUILD CW_MUTANT_NAME
#else
#define CW_MUTANT_BUILD NULL
#endif

#endif
