/* claim_history.h -- the harness's record of every claim, kept by the
 * database itself.
 *
 * The outbox row holds only its latest lease: once a row is claimed again,
 * the lease an earlier claim held is gone, and with it the evidence needed to
 * say whether a publish reached the broker inside the lease that covered it.
 * The runner therefore installs a trigger in every scenario database (never
 * in the product's schema) that appends each claim -- an update that raised
 * attempts -- to crashwindow_claims, in the claiming transaction: a claim
 * rolled back leaves no record, a committed one always does.  A settle that
 * releases a lease (mark, retry, dead letter: locked_until set to NULL) is
 * recorded too, as kind 'release' with the token of the lease it ended,
 * what the settle made of the row (release_kind: 'mark' when published_at
 * is set, 'dead_letter' when dead_lettered_at is, else 'retry': still
 * unpublished) and, for a retry, the next_attempt_at the row holds after
 * it -- the backoff the retry really persisted, not the one it announced --
 * with the last_error the settle left (the row keeps only the latest).
 * A row already published whose published_at is set again is recorded as
 * kind 'remark': the fenced mark requires published_at IS NULL, so only a
 * settle by a claim that no longer held the row does that.  (An operator
 * replay sets published_at to NULL first: not a remark.)
 * The runner adds records of its own, each with the database's clock:
 * 'faults_off', the instant the heal turned every fault off, and at the
 * end of the heal one 'session' per relay still running (proc: its
 * scenario name), connected saying whether the database then listed a
 * session of it, and one 'broker_session' per relay and consumer still
 * running, connected saying whether its broker link (the fault proxy's)
 * then held an open connection.
 * When the scenario ends, before the history is saved, each record gets
 * committed_at, the commit timestamp of the transaction that wrote it
 * (claim_history_stamp_sql): a claim's lease exists for others only from
 * then on.  It needs track_commit_timestamp (on in every cluster
 * scripts/pg-cluster starts); on a server without it committed_at stays
 * NULL and the checks that need it examine nothing.
 * Nothing the relay says about itself goes into it.
 *
 * The consumers' side, in crashwindow_consumer_records: every row a
 * consumer commits about a message -- its inbox marker, a parked event or
 * dead letter, an anomaly other than a gap it still waits on (a duplicate,
 * a stale version, a park) -- with the consumer group, the message id, the
 * table it went to and, stamped the same way, committed_at.  A consumer
 * ACKs a message only once one of them committed (consumer_loop.c); the
 * broker's log says when each ACK arrived. */
#ifndef CW_CLAIM_HISTORY_H
#define CW_CLAIM_HISTORY_H

#include <libpq-fe.h>
#include <stddef.h>

/* The DDL: table crashwindow_claims (seq, kind 'claim', 'release', 'remark',
 * or the runner's 'faults_off' and 'session',
 * message_id, lock_id, locked_by, attempts, locked_until, claimed_at = the
 * recording transaction's now(), committed_at (above); for a release also release_kind,
 * next_attempt_at and last_error; for a runner's 'session' record proc and
 * connected) and its trigger on outbox_messages.
 * Idempotent. */
extern const char claim_history_sql[];

/* Fill committed_at of every record that has none (see above), one
 * statement per table. */
extern const char claim_history_stamp_sql[];
extern const char consumer_records_stamp_sql[];

/* Installs it in the database conn is connected to.  0, or -1 with a
 * message in err. */
int claim_history_install(PGconn *conn, char *err, size_t errlen);

#endif
