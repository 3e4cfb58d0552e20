/* crashwindow -- the harness's command line.
 *
 *   crashwindow run [SCENARIO.json...|--all] [--pg CONNINFO] [--out DIR]
 *                   [--keep] [--dry-run] [--repeat N] [--bin DIR]
 *   crashwindow check DIR [--pg CONNINFO]     (sim/runner/history.c)
 *   crashwindow report DIR -o FILE.html
 *   crashwindow mutants [--only NAME...] [--out DIR] [--pg CONNINFO] [--list]
 *   crashwindow sim [--seed S] [--runs N] [--replay S:I] [--shrink] ...
 *   crashwindow merge DIR... --out DIR [--junit FILE]
 *   crashwindow invariants
 *
 * run, mutants and sim take --shard K/N (one share of the work) and
 * --junit FILE; merge makes one run directory of the shards'.  With
 * --jobs N they run N shards side by side here and merge them (jobs.h).
 *
 * Each subcommand lives in its own module; this file only dispatches. */
#include "cwlog.h"
#include "fault.h"
#include "jobs.h"
#include "merge.h"
#include "mutants.h"
#include "report.h"
#include "runner.h"
#include "simulator.h"
#include "history.h"
#include "invariants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow COMMAND [ARGS]\n"
        "commands:\n"
        "  run       run failure scenarios against the real binaries and check invariants\n"
        "  report    write the HTML reliability report of a run directory\n"
        "  mutants   build known-wrong variants and show the scenarios catch each one\n"
        "  sim       randomized fault schedules from a seed: replay and shrink failures\n"
        "  merge     one verdict, report and JUnit file from the run directories of shards\n"
        "  check     re-check a stored run from its files alone, with the same verdicts\n"
        "  invariants print the checker's invariants as a Markdown table\n"
        "run 'crashwindow COMMAND --help' for a command's options\n");
}

int main(int argc, char **argv)
{
    char err[256];
    cwlog_open(NULL, "crashwindow");
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow: %s\n", err);
        return 2;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if ((strcmp(cmd, "run") == 0 || strcmp(cmd, "mutants") == 0 || strcmp(cmd, "sim") == 0)
        && jobs_wanted(argc - 1, argv + 1)) {
        runner_pin_commit();
        /* A full matrix's shares read one reach run, made before them, and
         * start costliest first. */
        int jargc = argc - 1;
        char **jargv = argv + 1, **with_reach = NULL;
        const int *order = NULL;
        if (strcmp(cmd, "mutants") == 0) {
            int rc = mutants_jobs_reach(jargc, jargv, &with_reach, &order);
            if (rc != 0)
                return rc;
            if (with_reach != NULL) {
                jargv = with_reach;
                for (jargc = 0; jargv[jargc] != NULL; jargc++)
                    ;
            }
        }
        /* One share per mutant: a mutant whose scenarios all run to their
         * timeouts takes many times another's, and finer shares keep the
         * slots busy until the end. */
        int mutants = strcmp(cmd, "mutants") == 0 ? mutants_chosen_count(jargc, jargv) : 0;
        int rc = jobs_main(jargc, jargv, runner_source_dir(), mutants,
                           strcmp(cmd, "run") == 0 ? runner_share_count(jargc, jargv) : 0,
                           order, mutants);
        free(with_reach);
        return rc;
    }
    if (strcmp(cmd, "run") == 0)
        return runner_main(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return report_main(argc - 1, argv + 1);
    if (strcmp(cmd, "mutants") == 0)
        return mutants_main(argc - 1, argv + 1);
    if (strcmp(cmd, "sim") == 0)
        return simulator_main(argc - 1, argv + 1);
    if (strcmp(cmd, "merge") == 0)
        return merge_main(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return history_check_main(argc - 1, argv + 1);
    if (strcmp(cmd, "invariants") == 0)
        return invariants_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "crashwindow: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
