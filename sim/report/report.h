/* report.h -- the self-contained HTML reliability report.
 *
 * Reads a run directory written by `crashwindow run` (result.json, and per
 * scenario timeline.jsonl and metrics.jsonl; mutants and simulator results
 * when present in result.json) and writes one HTML file with inline CSS and
 * SVG, no network access, every string from logs or payloads escaped. */
#ifndef CW_REPORT_H
#define CW_REPORT_H

#include <stddef.h>

/* Writes the report for run directory dir into out_path.  Returns 0, or -1
 * with a message in err (the output file is then not left half-written). */
int report_write(const char *dir, const char *out_path, char *err, size_t errlen);

/* The same, with the mutant matrix of another run directory (a `crashwindow
 * mutants` run's, matrix_dir; NULL: none) shown when dir's result has none. */
int report_write_matrix(const char *dir, const char *out_path, const char *matrix_dir,
                        char *err, size_t errlen);

/* `crashwindow report DIR -o FILE.html [--matrix MUTANTS_DIR]`: returns the
 * process exit code. */
int report_main(int argc, char **argv);

#endif
