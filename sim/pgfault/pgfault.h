/* pgfault.h -- PostgreSQL itself as a fault target: freeze the server,
 * find a standby's WAL receiver (whose stall, scripts/pg-cluster detach,
 * the runner waits on), terminate one process's sessions.
 *
 * The cluster is a throwaway one that scripts/pg-cluster started in DIR (its
 * data directory is DIR/data); crash, restart, standby creation and
 * promotion are that script's verbs, which the runner calls.  What is here
 * needs the server's processes themselves: they are found from
 * DIR/data/postmaster.pid and /proc (the postmaster's children), never by
 * name, so only the server the run started is ever signalled. */
#ifndef CW_PGFAULT_H
#define CW_PGFAULT_H

#include <stddef.h>
#include <sys/types.h>

#define PGF_MAX_PIDS 512

/* The postmaster of the cluster in dir (first) and its children, into
 * pids[max].  Returns the count, or -1 with a message in err when the
 * server is not running. */
int pgf_server_pids(const char *dir, pid_t *pids, int max, char *err, size_t errlen);

/* Freezes the server: SIGSTOP to the postmaster, then to every child, so
 * no new backend can be forked meanwhile.  The pids signalled go to
 * pids[max] for pgf_thaw.  Returns their count, or -1 with err. */
int pgf_freeze(const char *dir, pid_t *pids, int max, char *err, size_t errlen);

/* SIGCONT to every pid, children first and the postmaster last. */
void pgf_thaw(const pid_t *pids, int n);

/* Sends sig to the standby's WAL receiver (the child of the standby's
 * postmaster whose title is "postgres: walreceiver"); signal 0 asks whether
 * one runs.  Returns 0, 1 when no WAL receiver runs, -1 with err. */
int pgf_signal_walreceiver(const char *dir, int sig, char *err, size_t errlen);

/* The statement that terminates the sessions of database $1 whose
 * application_name is $2 ('' for any of the names in $3, a text[] of the
 * scenario's process names); it returns how many were terminated. */
const char *pgf_terminate_sql(void);

#endif
