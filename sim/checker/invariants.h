/* invariants.h -- the fifteen invariants, stated once: one table.
 *
 * For each invariant of the scenario format (scenario.h's enum
 * sc_invariant, in its order): its name, what it asserts in one sentence,
 * what it reads, and the function that judges it.  The checker's driver
 * runs each invariant through this table's function pointer, so the table
 * cannot name a judge the checker does not run.  `crashwindow invariants`
 * prints it as Markdown; docs/invariants.md holds that output, and
 * tests/py/test_invariant_table.py keeps the page, the table, the judges'
 * files and the scenario format's names in agreement. */
#ifndef CW_INVARIANTS_H
#define CW_INVARIANTS_H

#include "scenario.h"

#include <stdio.h>

struct chk_ctx; /* the evidence the checker loaded (checker_internal.h) */

struct inv_info {
    const char *name;       /* as a scenario lists it: sc_invariant_name() */
    const char *asserts;    /* what holds, in one sentence */
    const char *reads;      /* the tables and logs it is decided on */
    const char *function;   /* the judge's name, and the file defining it */
    const char *file;
    void (*judge)(struct chk_ctx *c);
};

/* The table, indexed by enum sc_invariant: INV_COUNT entries. */
extern const struct inv_info inv_table[INV_COUNT];

/* The entry of the invariant called name, or NULL when there is none. */
const struct inv_info *inv_info(const char *name);

/* Writes the table to f as a Markdown table, one row per invariant in
 * the table's order.  0, or -1 when f reported a write error. */
int inv_write_markdown(FILE *f);

/* crashwindow invariants: prints the table as Markdown on stdout.
 * Returns the exit status (0, 1 when writing failed, 2 usage). */
int invariants_main(int argc, char **argv);

#endif
