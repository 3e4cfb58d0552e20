"""outboxctl's replay and retention against each other and against the relay:
a replayed row gets a full retry budget (it was published at its last attempt,
and is published again, not dead-lettered), `cleanup` racing a replay never
deletes the row the replay made pending, and `cleanup-inbox` racing a replay
keeps the other groups' markers of that row.

Each interleaving is forced, not hoped for: the test holds a row lock in a
session of its own, starts the commands with an application_name, and moves
on only when pg_stat_activity shows a command waiting on a lock (or gone)."""
# needs: pg
import psycopg

from cwtest import binary, query, scalar, wait_for
from test_outboxctl import ctl, row
from test_relay import start_relay

OLD = "now() - interval '2 days'"


def park(conn, consumer, mid):
    """consumer has parked mid as poison (the outbox row exists)."""
    conn.execute("INSERT INTO consumer_dead_letters (consumer_name, message_id, reason,"
                 " deliveries) VALUES (%s, %s, 'poison: ledger rule', 2)", (consumer, mid))


def mark(conn, consumer, mid, processed_at="now()"):
    # Test-only SQL: processed_at is one of this file's constants.
    conn.execute(f"INSERT INTO inbox_messages VALUES (%s, %s, {processed_at})", (consumer, mid))


def start_ctl(procs, db, app, *args):
    """outboxctl in the background, its session named app in pg_stat_activity."""
    return procs.start(app, [binary("outboxctl"), "--db", f"{db} application_name={app}"]
                       + list(args), events=False)


def waits_on_lock(db, app):
    """Whether the session named app is waiting for a lock."""
    return scalar(db, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                      " AND wait_event_type = 'Lock' AND cardinality(pg_blocking_pids(pid)) > 0",
                  (app,)) > 0


def test_replay_of_a_row_published_at_its_last_attempt_is_published_again(db, procs, broker):
    """A row that needed all three of the relay's attempts and was published at
    the third is parked by a consumer and replayed.  The replay resets its
    attempts, recording the old count as a requeue does, so the relay claims
    it at attempt 1 and publishes it; kept at 3, the claim at 4 would pass
    the limit and dead-letter it unpublished."""
    _, sock = broker
    err = "broker refused publish: queue full"
    x = row(db, attempts="3", last_error=f"'{err}'", published_at="now() - interval '1 minute'")
    with psycopg.connect(db, autocommit=True) as conn:
        park(conn, "accounting", x)
        mark(conn, "notifications", x)

    r = ctl(db, "parked", "replay", "accounting", x)
    assert r.returncode == 0, r.stdout + r.stderr
    assert scalar(db, "SELECT published_at IS NULL FROM outbox_messages WHERE id = %s", (x,))

    relay = start_relay(procs, db, sock, max_attempts=3)
    wait_for(lambda: scalar(db, "SELECT published_at IS NOT NULL OR dead_lettered_at IS NOT NULL"
                                " FROM outbox_messages WHERE id = %s", (x,)), 20,
             "the replayed row to be published or dead-lettered")
    assert relay.stop() == 0
    assert query(db, "SELECT published_at IS NOT NULL, dead_lettered_at IS NULL, attempts,"
                     " last_error FROM outbox_messages WHERE id = %s", (x,)) == \
        [(True, True, 1, None)], "published at its first attempt after the replay"
    assert query(db, "SELECT message_id::text, attempts_before, last_error_before"
                     " FROM outbox_requeues") == [(x, 3, err)]
    assert scalar(db, "SELECT count(*) FROM consumer_replays") == 1
    assert query(db, "SELECT consumer_name FROM inbox_messages") == [("notifications",)]


def test_cleanup_racing_a_replay_never_deletes_the_row_it_made_pending(db, procs):
    """The replay has locked the outbox row and waits (on an inbox marker the
    test holds) to commit; meanwhile cleanup's batch sees the row published
    and old.  Cleanup must not delete it once the replay has made it pending:
    it skips the locked row, deletes the other published row, and records
    exactly what it deleted."""
    x = row(db, attempts="1", published_at="now() - interval '1 hour'")
    y = row(db, attempts="1", published_at="now() - interval '1 hour'")
    with psycopg.connect(db, autocommit=True) as conn:
        park(conn, "accounting", x)
        mark(conn, "accounting", x)
    with psycopg.connect(db) as hold:
        hold.execute("SELECT 1 FROM inbox_messages WHERE consumer_name = 'accounting'"
                     " AND message_id = %s FOR UPDATE", (x,))
        replay = start_ctl(procs, db, "cw-replay", "parked", "replay", "accounting", x)
        wait_for(lambda: waits_on_lock(db, "cw-replay"), 20,
                 "the replay to lock the outbox row and wait for the inbox marker")
        cleanup = start_ctl(procs, db, "cw-cleanup", "cleanup", "--published-older-than", "1ms")
        wait_for(lambda: not cleanup.alive() or waits_on_lock(db, "cw-cleanup"), 20,
                 "the cleanup to finish or to wait for the replay's lock")
        hold.rollback()
    assert replay.wait_exit(20) == 0, replay.stderr_text()
    assert cleanup.wait_exit(20) == 0, cleanup.stderr_text()

    assert query(db, "SELECT id::text, published_at IS NULL FROM outbox_messages") == \
        [(x, True)], "the replayed row is pending, not deleted"
    assert query(db, "SELECT id::text FROM outbox_removed") == [(y,)]
    assert scalar(db, "SELECT value FROM pipeline_counters"
                      " WHERE counter = 'published_rows_deleted'") == 1
    assert scalar(db, "SELECT count(*) FROM consumer_replays") == 1


def test_cleanup_inbox_racing_a_replay_keeps_the_markers_of_the_row_it_made_pending(db, procs):
    """cleanup-inbox starts while both rows are published and their markers
    old, and is held (by locks the test holds on the first row and its
    marker) after its statement began; the replay of the second row commits
    meanwhile.  The second row is pending when the cleanup goes on, so the
    other group's marker of it is kept: deleting it would let that group
    apply the replayed copy a second time."""
    w = row(db, id="'00000000-0000-4000-8000-000000000001'", attempts="1", published_at=OLD)
    x = row(db, id="'ffffffff-ffff-4fff-bfff-ffffffffffff'", attempts="1", published_at=OLD)
    with psycopg.connect(db, autocommit=True) as conn:
        park(conn, "accounting", x)
        mark(conn, "notifications", w, OLD)
        mark(conn, "notifications", x, OLD)
    with psycopg.connect(db) as hold:
        hold.execute("SELECT 1 FROM outbox_messages WHERE id = %s FOR UPDATE", (w,))
        hold.execute("SELECT 1 FROM inbox_messages WHERE message_id = %s FOR UPDATE", (w,))
        cleanup = start_ctl(procs, db, "cw-cleanup-inbox", "cleanup-inbox",
                            "--older-than", "1d", "--horizon", "1h")
        wait_for(lambda: waits_on_lock(db, "cw-cleanup-inbox"), 20,
                 "the inbox cleanup to begin and wait for a lock the test holds")
        r = ctl(db, "parked", "replay", "accounting", x)
        assert r.returncode == 0, r.stdout + r.stderr
        hold.rollback()
    assert cleanup.wait_exit(20) == 0, cleanup.stderr_text()

    assert query(db, "SELECT consumer_name, message_id::text FROM inbox_messages") == \
        [("notifications", x)], "the marker of the replayed, pending row is kept"
    assert query(db, "SELECT consumer_name, message_id::text FROM inbox_removed") == \
        [("notifications", w)]
    assert scalar(db, "SELECT published_at IS NULL FROM outbox_messages WHERE id = %s", (x,))
