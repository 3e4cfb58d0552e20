/* outboxctl.h -- the operator's runbook commands, and the helpers they share.
 *
 * Every command validates its own arguments first (exit 2 on bad usage, with
 * a message naming the argument), then connects through ctl_conn() (exit 1
 * when the database is unreachable) and runs.  Commands return the process
 * exit code: 0 success, 1 the operation failed or was refused, 2 bad usage. */
#ifndef CW_OUTBOXCTL_H
#define CW_OUTBOXCTL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_OK 0
#define CTL_FAILED 1
#define CTL_USAGE 2

/* The database handle, opened on first use. */
struct ctl {
    const char *db; /* conninfo; never printed */
    PGconn *conn;
};

/* Connects on first call; NULL after printing "outboxctl: could not connect
 * ..." to stderr (the conninfo itself is never printed). */
PGconn *ctl_conn(struct ctl *c);

/* Parses a duration "N" followed by ms, s, m, h or d (e.g. 30s, 15m, 2h,
 * 7d) into milliseconds, 1 ms .. 100 years.  0, or -1 with a message. */
int ctl_parse_duration(const char *s, int64_t *ms, char *err, size_t errlen);

/* Formats ms as a short human duration ("1d2h", "29m30s", "750ms") into out. */
void ctl_format_duration(int64_t ms, char *out, size_t outlen);

/* 1 when s is a 12-digit lowercase hex error fingerprint. */
int ctl_fingerprint_valid(const char *s);

/* The SQL expression of a dead letter's error fingerprint over the column
 * last_error: digits are folded (so "5000 > 4096 bytes" and "6000 > 4096
 * bytes" group together), then hashed to 12 hex digits.  A constant. */
#define CTL_FINGERPRINT_SQL \
    "left(md5(regexp_replace(coalesce(last_error, ''), '[0-9]+', 'N', 'g')), 12)"

/* Writes s as a JSON string literal (quotes included) to f; NULL -> null. */
void ctl_json_string(FILE *f, const char *s);

/* Commands (argv[0] is the first argument after the command name). */
int ctl_status(struct ctl *c, int argc, char **argv);
int ctl_metrics(struct ctl *c, int argc, char **argv);
int ctl_dead_letters(struct ctl *c, int argc, char **argv);
int ctl_requeue(struct ctl *c, int argc, char **argv);
int ctl_cleanup(struct ctl *c, int argc, char **argv);
int ctl_cleanup_inbox(struct ctl *c, int argc, char **argv);
int ctl_parked(struct ctl *c, int argc, char **argv);

#endif
