"""payments-api at its crash windows: api/before_commit, api/after_commit,
api/commit_lost, a connection that really breaks while COMMIT is in flight,
and pooled connections that died while idle.  Every test asserts on rows."""
# needs: pg
import http.client
import signal
import threading

import psycopg

from apiclient import assert_problem, counts, killed_by_sigkill, start_api
from cwtest import proc_state, query, scalar, wait_for

ZERO = {"payments": 0, "outbox_messages": 0, "idempotency_records": 0}
ONE = {"payments": 1, "outbox_messages": 1, "idempotency_records": 1}


def stored(db, key):
    rows = query(db, "SELECT status_code, response_body, payment_id::text"
                     " FROM idempotency_records WHERE idempotency_key = %s", (key,))
    assert len(rows) == 1, rows
    return rows[0]


def api_backends(db):
    return query(db, "SELECT pid FROM pg_stat_activity WHERE application_name = 'payments-api'"
                     " AND datname = current_database()")


def test_before_commit_fail_rolls_everything_back(procs, db):
    api = start_api(procs, db, env={"CW_FAULTS": "api/before_commit=fail@1"})
    r = api.post_payment("k1")
    assert_problem(r, 503)
    assert r.header("retry-after") == "1"
    assert counts(db) == ZERO
    hit = api.proc.events("fault_hit")
    assert [(e["point"], e["action"]) for e in hit] == [("api/before_commit", "fail")]
    # Nothing was stored, so the same key is free for the retry.
    again = api.post_payment("k1")
    assert again.status == 201 and again.header("idempotent-replayed") is None
    assert counts(db) == ONE


def test_before_commit_fail_on_authorize_leaves_the_payment_as_it_was(procs, db):
    api = start_api(procs, db, env={"CW_FAULTS": "api/before_commit=fail@2"})
    pid = api.post_payment("c").json()["id"]
    assert_problem(api.command(pid, "authorize", "a"), 503)
    assert query(db, "SELECT status, version FROM payments") == [("created", 1)]
    assert query(db, "SELECT aggregate_version FROM outbox_messages") == [(1,)]
    assert api.command(pid, "authorize", "a").status == 200
    assert query(db, "SELECT aggregate_version FROM outbox_messages ORDER BY 1") == [(1,), (2,)]


def test_crash_after_commit_then_retry_gets_the_original_response(procs, db):
    api = start_api(procs, db, env={"CW_FAULTS": "api/after_commit=crash@1"})
    try:
        api.post_payment("crash-key", amount="42.00")
        raise AssertionError("the API answered although it should have died")
    except (http.client.HTTPException, ConnectionError):
        pass
    api.proc.wait_exit(10)
    assert killed_by_sigkill(api.proc), api.proc.popen.returncode
    # The commit happened: payment, event and record survive the crash.
    assert counts(db) == ONE
    status, body, pid = stored(db, "crash-key")
    assert status == 201
    assert query(db, "SELECT aggregate_id::text, event_type FROM outbox_messages") == \
        [(pid, "PaymentCreated")]

    # The client retries against a restarted API (no faults this time).
    api2 = start_api(procs, db, name="api-restarted")
    r = api2.post_payment("crash-key", amount="42.00")
    assert r.status == 201
    assert r.body == body.encode()            # the original response, byte for byte
    assert r.json()["id"] == pid
    assert r.header("location") == f"/payments/{pid}"
    assert r.header("idempotent-replayed") == "true"
    assert counts(db) == ONE


def test_commit_lost_is_settled_from_the_transaction_id(procs, db):
    api = start_api(procs, db, env={"CW_FAULTS": "api/commit_lost=fail@1"})
    r = api.post_payment("lost-key")
    # COMMIT did reach the server: the API must find that out, not guess.
    assert r.status == 201, r
    status, body, pid = stored(db, "lost-key")
    assert r.body == body.encode() and r.json()["id"] == pid
    assert counts(db) == ONE
    amb = api.proc.events("ambiguous_commit")
    assert len(amb) == 1
    assert amb[0]["resolution"] == "committed" and amb[0]["xact_status"] == "committed"
    assert amb[0]["payment_id"] == pid
    assert not api.proc.events("retry"), "the API wrote again after an ambiguous commit"
    # And a retry of the request replays it.
    again = api.post_payment("lost-key")
    assert again.status == 201 and again.body == r.body
    assert counts(db) == ONE


def test_connection_broken_during_commit_that_did_not_commit(procs, db):
    """The API is parked just before COMMIT; its database session is killed;
    it resumes and sends COMMIT on a dead connection.  It must find out from
    pg_xact_status that nothing committed, answer 503 and store nothing."""
    api = start_api(procs, db, env={"CW_FAULTS": "api/before_commit=park@1"})
    result = {}
    t = threading.Thread(target=lambda: result.update(r=api.post_payment("doomed")))
    t.start()
    wait_for(lambda: proc_state(api.proc.pid) == "T", 10, "the API to park before COMMIT")
    killed = query(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE application_name = 'payments-api' AND datname = current_database()"
                       " AND state = 'idle in transaction'")
    assert killed == [(True,)]
    wait_for(lambda: not api_backends(db), 10, "the API's session to end")
    api.proc.signal(signal.SIGCONT)
    t.join(timeout=20)
    assert "r" in result, "no answer after the resume"
    assert_problem(result["r"], 503, "commit-failed")
    assert counts(db) == ZERO
    amb = api.proc.events("ambiguous_commit")
    assert [(a["resolution"], a["xact_status"]) for a in amb] == [("aborted", "aborted")]
    # The key is free: the retry creates the payment once.
    r = api.post_payment("doomed")
    assert r.status == 201 and r.header("idempotent-replayed") is None
    assert counts(db) == ONE


def test_dead_pooled_connections_are_replaced_with_the_same_event_id(procs, db):
    api = start_api(procs, db, extra=["--threads", "2"])
    assert api.post_payment("warm").status == 201
    query(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
              " WHERE application_name = 'payments-api' AND datname = current_database()")
    wait_for(lambda: not api_backends(db), 10, "the API's sessions to end")
    r = api.post_payment("after-restart")
    assert r.status == 201, r
    assert counts(db)["payments"] == 2
    retries = api.proc.events("retry")
    assert retries and retries[0]["reason"] == "connection_lost"
    # The retry wrote the event id chosen before the first attempt.
    pid = r.json()["id"]
    assert query(db, "SELECT id::text FROM outbox_messages WHERE aggregate_id = %s", (pid,)) == \
        [(retries[0]["event_id"],)]


def test_a_commit_queued_behind_anothers_notification_is_not_refused(procs, db, pg_cluster):
    """Every transaction that writes an outbox row notifies the relays, and
    PostgreSQL serialises notifying COMMITs on one lock.  A payment whose
    COMMIT waits there collided with nothing: it must wait, not be refused
    by the API's lock_timeout (50 ms) and answered 503.  Another session
    that notified is held inside its COMMIT (a synchronous standby that does
    not exist) while the API commits; the API's COMMIT must wait on the
    lock well past lock_timeout, and answer 201 once the other is let go."""
    api = start_api(procs, db)
    query(db, "CREATE TABLE notify_blocker (x int)")
    query(pg_cluster, "ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    query(pg_cluster, "SELECT pg_reload_conf()")
    blocker = None
    try:
        wait_for(lambda: scalar(db, "SHOW synchronous_standby_names") == "nobody", 10,
                 "the server to read synchronous_standby_names")
        blocker = psycopg.connect(db)
        blocker.execute("INSERT INTO notify_blocker VALUES (1)")
        blocker.execute("NOTIFY outbox_ready")
        held = threading.Thread(target=blocker.commit, daemon=True)
        held.start()
        wait_for(lambda: scalar(db, "SELECT count(*) FROM pg_stat_activity"
                                    " WHERE wait_event = 'SyncRep'") == 1, 10,
                 "the other session to hold its COMMIT")
        answer = {}
        client = threading.Thread(
            target=lambda: answer.update(r=api.post_payment("k-notify-queue")), daemon=True)
        client.start()
        # The API's COMMIT waits on the notification lock for 1 s, twenty
        # times its lock_timeout, and the client has no answer yet.
        wait_for(lambda: scalar(db, "SELECT count(*) FROM pg_stat_activity"
                                    " WHERE query = 'COMMIT' AND wait_event_type = 'Lock'"
                                    " AND now() - query_start > interval '1 second'") == 1
                 or "r" in answer, 10, "the API's COMMIT to wait on the notification lock")
        assert "r" not in answer, answer["r"]
    finally:
        query(pg_cluster, "ALTER SYSTEM RESET synchronous_standby_names")
        query(pg_cluster, "SELECT pg_reload_conf()")
    client.join(15)
    held.join(15)
    blocker.close()
    assert answer["r"].status == 201, answer["r"]
    assert counts(db) == {"payments": 1, "outbox_messages": 1, "idempotency_records": 1}
