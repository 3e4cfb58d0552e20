/* pgx.h -- the few libpq idioms every crashwindow process uses.
 *
 * All statements go through PQexecParams (pgx_exec): values are never spliced
 * into SQL text.  Errors are judged from SQLSTATE (PG_DIAG_SQLSTATE), never
 * from message text. */
#ifndef CW_PGX_H
#define CW_PGX_H

#include <libpq-fe.h>
#include <stddef.h>

/* How long any one database call may take, connecting included, unless
 * pgx_set_deadline_ms or the environment (CW_DB_DEADLINE_MS, read at the
 * first connect; a bad value fails that connect) says otherwise.  A call that misses it fails with
 * SQLSTATE 08006 and the connection shut down (pgx_conn_lost is then true):
 * a peer that stops answering is never waited on forever. */
#define PGX_DEFAULT_DEADLINE_MS 5000

/* Sets the deadline of every later call (100..3600000 ms): 0, or -1 when
 * out of range (nothing changed). */
int pgx_set_deadline_ms(int ms);
int pgx_deadline_ms(void);

/* Connects; returns the connection or NULL with a message in err (the
 * conninfo itself, which may hold a password, is never copied into err; what
 * libpq says, which may quote parts of it, is sanitized).  Unless the
 * conninfo says otherwise, the session gets: connect_timeout, TCP keepalives
 * (idle 2 s, interval 1 s, 3 probes) and tcp_user_timeout, which notice a
 * peer whose kernel went silent; idle_in_transaction_session_timeout at the
 * call deadline, so that the server too gives up on a client that stopped
 * answering and releases its locks, and statement_timeout at three
 * quarters of it, so that a statement a live server cannot finish in time
 * (it waits on a lock) is refused over the connection (57014), which
 * stays, before the client's own deadline would shut it (options=-c ...). */
PGconn *pgx_connect(const char *conninfo, char *err, size_t errlen);

/* pgx_connect with the caller's own keys first (keys/vals NULL-terminated,
 * at most 12; they win over the defaults above, and the conninfo wins over
 * both). */
PGconn *pgx_connect_params(const char *const *keys, const char *const *vals,
                           const char *conninfo, char *err, size_t errlen);

/* Waits until the statement sent on conn has its answer, within the call
 * deadline.  0 (read it with PQgetResult), or -1 when the deadline passed:
 * the connection is then shut down and err says so. */
int pgx_wait_result(PGconn *conn, char *err, size_t errlen);

/* PQgetResult within the call deadline (for pipelines and other loops over
 * results): when the deadline passes the connection is shut, and what
 * comes back is libpq's error for a lost connection, then NULL. */
PGresult *pgx_next_result(PGconn *conn);

/* Runs sql with nparams text parameters.  Returns the result when its status
 * is PGRES_COMMAND_OK or PGRES_TUPLES_OK; otherwise clears it, writes a short
 * message and the SQLSTATE (5 chars + NUL, "" if none) and returns NULL.
 * sqlstate and err may be NULL. */
PGresult *pgx_exec(PGconn *conn, const char *sql, int nparams,
                   const char *const *params, char *sqlstate,
                   char *err, size_t errlen);

/* pgx_exec for statements whose result is not needed: 0 or -1. */
int pgx_cmd(PGconn *conn, const char *sql, int nparams,
            const char *const *params, char *sqlstate, char *err, size_t errlen);

/* Reads the result of a statement sent with PQsendQueryParams, and every
 * result after it, so that the connection is idle again whatever happened;
 * bounded by the call deadline (SQLSTATE 08006 when it passes).
 * Returns the statement's result when its status is PGRES_COMMAND_OK or
 * PGRES_TUPLES_OK (caller clears it); otherwise NULL with the SQLSTATE and a
 * short message, as pgx_exec.  sqlstate and err may be NULL. */
PGresult *pgx_get_result(PGconn *conn, char *sqlstate, char *err, size_t errlen);

/* BEGIN, then sql, in one round trip (a pipeline of the two and one Sync,
 * which commits nothing: the transaction stays open for the caller's next
 * statement or COMMIT).  Returns sql's result, as pgx_exec does; NULL with
 * the SQLSTATE and a message when BEGIN or sql failed (the transaction is
 * then aborted, or the connection lost: 08006).  The connection leaves
 * pipeline mode either way. */
PGresult *pgx_begin_exec(PGconn *conn, const char *sql, int nparams,
                         const char *const *params, char *sqlstate, char *err, size_t errlen);

/* Rolls back the open transaction, ignoring a failure: on a dead connection
 * there is nothing left to undo, and the caller learns of the loss from its
 * own failed statement (or from PQtransactionStatus). */
void pgx_rollback(PGconn *conn);

/* A PostgreSQL array literal "{id,id,...}" of the n UUIDs ids[0..n), to pass
 * as a uuid[] parameter (n 0 gives "{}").  Every id must be canonical UUID
 * text (cw_uuid_valid, either case): nothing else can then end up as an
 * extra element.  Returns a malloc'd string (caller frees), or NULL when an
 * id is not a UUID or memory ran out. */
char *pgx_uuid_array(const char *const *ids, size_t n);

/* True for SQLSTATEs a transaction may simply be retried on:
 * 40001 serialization_failure, 40P01 deadlock_detected. */
int pgx_is_retryable(const char *sqlstate);

/* True when the connection is gone (state or SQLSTATE class 08/57P0x) or
 * unusable (stuck in pipeline mode). */
int pgx_conn_lost(PGconn *conn, const char *sqlstate);

#endif
