/* history.h -- a scenario's history: the checker's whole input, stored.
 *
 * At the end of each scenario the runner saves what the checker reads
 * beside the event logs, in the scenario's directory:
 *
 *   history/<table>.jsonl   every row of every table of the scenario's
 *                           database, one JSON object a line (row_to_json)
 *   history/http.jsonl      the runner's HTTP log: every request as the
 *                           client saw it (bodies as a SHA-256 and in the
 *                           redacted form witnesses show, never verbatim)
 *   <proc>.events.jsonl     the processes' and the broker's own logs
 *   metrics.jsonl           the runner's samples of the database, with the
 *                           sessions idle inside a transaction
 *   runner.events.jsonl     the runner's own log: when it stalled replication
 *                           or killed the broker (a hazard's explanations)
 *
 * and then checks that history -- the live run reads its HTTP log back
 * from the file like everyone else.  `crashwindow check RUNDIR` loads the
 * stored tables into a scratch database of a throwaway cluster and runs
 * the same check, so a stored run is re-checked with the same verdicts,
 * offline, with nothing of the run but its files. */
#ifndef CW_HISTORY_H
#define CW_HISTORY_H

#include "checker.h"
#include "scenario.h"

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stddef.h>

/* The checker's input as read from a scenario directory. */
struct history {
    cJSON *proc_events[SC_MAX_PROCS];   /* arrays, one per scenario process */
    cJSON *broker_events;
    struct http_rec *http;
    int nhttp;
    cJSON *samples;                     /* metrics.jsonl; NULL when the run kept none */
    cJSON *runner_events;               /* runner.events.jsonl: the runner's faults, or NULL */
};

/* Fills the digest fields of an HTTP record from its body (body_sha256,
 * body_shown, problem).  The body itself is never stored. */
void history_http_digest(struct http_rec *h);

/* Saves every table of conn's database and the HTTP log into dir/history.
 * 0, or -1 with a message in err. */
int history_save(PGconn *conn, const char *dir, const struct http_rec *http, int nhttp,
                 char *err, size_t errlen);

/* Loads dir/history's tables into conn's (empty, migrated) database.  0, or
 * -1 with a message in err (no history: a run from before it was kept). */
int history_load_tables(PGconn *conn, const char *dir, char *err, size_t errlen);

/* Reads the event logs and the stored HTTP log of sc's run in dir.  A line
 * that does not parse, or lacks a field the checker reads in it
 * (checker_event_lacks), is an error naming the file and the line: evidence
 * the checker cannot read proves nothing.  0, or -1 with a message in err
 * (h is then freed). */
int history_read(const struct scenario *sc, const char *dir, struct history *h,
                 char *err, size_t errlen);
void history_free(struct history *h);

/* Runs every invariant and expectation of sc over h and conn: fills res,
 * and appends {check, verdict, detail} per expectation to expects.  The
 * one check of a history, live or stored.  0, or -1 when the checker could
 * not run (res->error says why). */
int history_check(const struct scenario *sc, const struct history *h, PGconn *conn,
                  struct chk_result *res, cJSON *expects);

/* crashwindow check RUNDIR [--pg CONNINFO]: re-checks every scenario of a
 * stored run and compares each invariant's and expectation's verdict with
 * the run's result.json.  Exit 0 all the same, 1 a difference or a
 * scenario that could not be checked, 2 usage. */
int history_check_main(int argc, char **argv);

#endif
