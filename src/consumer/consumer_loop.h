/* consumer_loop.h -- the consumer daemon: deliveries in, one effect per event.
 *
 * Per transaction (one delivery, or up to --batch deliveries that share it):
 *
 *   BEGIN
 *     per delivery: inbox_process (consumer_inbox.h); a gap is recorded, or
 *     parked once it has been open longer than --gap-park-after-ms
 *   [consumer/before_commit]
 *   COMMIT
 *   [consumer/after_commit]          (crash here: committed, never acked)
 *   per delivery: ACK, or NACK with --gap-delay-ms for an open gap
 *   [consumer/after_ack]             (after each ACK)
 *
 * ACK strictly after COMMIT: a crash anywhere before the ACK leaves the
 * delivery unacknowledged and the broker redelivers it; the inbox marker then
 * turns the redelivery into a counted duplicate.  One delivery that fails
 * inside a shared transaction (apply_fail, a statement error) rolls the
 * transaction back, is nacked with --retry-delay-ms, and the others are run
 * again without it, so it cannot block them.
 *
 * Failures:
 *   40001 / 40P01        the transaction is run again (at most --tx-retries
 *                        times, with a short growing pause), decided from the
 *                        SQLSTATE only
 *   database lost        the deliveries in hand are nacked with
 *                        --retry-delay-ms (so another consumer of the group
 *                        may take them, or they come back here), then the
 *                        connection is re-established with backoff.  A COMMIT
 *                        cut off mid-flight has an unknown outcome: the
 *                        redelivery settles it through the inbox marker.
 *   broker lost          reconnect with backoff and subscribe again; the
 *                        broker redelivers whatever was not acknowledged
 *   poison               nacked with --poison-delay-ms until the broker's
 *                        delivery count reaches --poison-max-deliveries, then
 *                        parked in consumer_dead_letters and acknowledged.
 *                        Poison is what consumer_event_parse refuses, and an
 *                        event whose data the database refuses (SQLSTATE
 *                        class 22 or 23): retrying either cannot help
 *   other SQL errors     (e.g. lock_timeout behind a parked peer) that
 *                        delivery is nacked with --retry-delay-ms
 *
 * SIGTERM/SIGINT: the transaction in progress is finished (commit and ACKs)
 * with the signals blocked, then the daemon closes both connections (the
 * broker redelivers deliveries prefetched but not started) and returns. */
#ifndef CW_CONSUMER_LOOP_H
#define CW_CONSUMER_LOOP_H

#include "consumer_config.h"

/* Runs until consumer_request_stop().  Returns the exit code: 0 after a
 * requested stop, 1 when the database or the broker could not be reached
 * within --connect-timeout-ms at start. */
int consumer_run(const struct consumer_config *cfg);

/* Asks consumer_run to stop after the transaction in progress.
 * Async-signal-safe. */
void consumer_request_stop(void);

#endif
