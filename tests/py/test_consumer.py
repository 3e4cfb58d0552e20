"""Integration tests of accounting-consumer: real consumers, a real cluster and
the fake broker.  Events are published with brokerclient exactly as the relay
publishes them (message_id = event id, partition_key = payment id, headers
traceparent / aggregate_version / schema_version, payload = the outbox JSON).
Every test asserts on database rows and on the broker's log; the consumers'
own events are used only to know when a process reached a point.
"""
# needs: pg
import json
import signal
import uuid

import psycopg
import pytest

from brokerclient import connect
from cwtest import binary, query, scalar, wait_for, wait_value

TYPES = {1: "PaymentCreated", 2: "PaymentAuthorized", 3: "PaymentCaptured"}


def new_traceparent():
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


def event(payment_id, version, traceparent=None, event_id=None, amount="12.50",
          currency="EUR", schema_version=1):
    """One outbox event as the relay publishes it."""
    eid = event_id or str(uuid.uuid4())
    body = {"EventId": eid, "PaymentId": payment_id}
    if version == 1:
        body["Amount"] = amount
    body.update({"Currency": currency, "AggregateVersion": version,
                 "OccurredAtUtc": "2026-11-29T21:00:00.000000Z"})
    headers = {"aggregate_version": version, "schema_version": schema_version,
               "occurred_at": "2026-11-29T21:00:00Z"}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    return {"message_id": eid, "type": TYPES[version], "partition_key": payment_id,
            "headers": headers, "payload": json.dumps(body)}


def payment_events(versions=(1,), traceparent=None):
    pid = str(uuid.uuid4())
    tp = traceparent or new_traceparent()
    return [event(pid, v, traceparent=tp) for v in versions]


def publish(sock, msgs):
    with connect(sock, client="test-publisher") as b:
        for m in msgs:
            confirm = b.publish(**m)
            assert confirm["status"] == "stored", confirm


def control(sock, **switches):
    with connect(sock, client="test-control") as b:
        return b.control(**switches)


def broker_log(sock):
    with connect(sock, client="test-log") as b:
        return b.dump_log()


def group_stats(sock, group):
    with connect(sock, client="test-stats") as b:
        return b.stats().get("groups", {}).get(group, {})


def settled(sock, group="accounting"):
    st = group_stats(sock, group)
    return st.get("acked"), st.get("unacked", 0), st.get("ready", 0) + st.get("delayed", 0)


def log_of(log, event, group="accounting", message_id=None):
    return [e for e in log if e.get("event") == event and e.get("group") == group
            and (message_id is None or e.get("message_id") == message_id)]


def start_consumer(procs, db, sock, name="accounting", proc=None, faults=None, args=()):
    proc = proc or name
    argv = [binary("accounting-consumer"), "--db", db, "--broker", sock, "--name", name,
            "--proc-name", proc, "--retry-delay-ms", "50", "--gap-delay-ms", "50",
            "--poison-delay-ms", "50", *args]
    p = procs.start(proc, argv, env={"CW_FAULTS": faults} if faults else None)
    wait_for(lambda: p.events("start") or not p.alive(), 15, f"{proc} to subscribe")
    assert p.alive(), p.stderr_text()
    return p


def count(db, sql, params=None):
    return scalar(db, sql, params)


def ledger_count(db, consumer="accounting"):
    return count(db, "SELECT count(*) FROM ledger_entries WHERE consumer_name = %s", (consumer,))


def assert_once_each(db, ids, consumer="accounting", table="ledger_entries"):
    """Exactly one effect row and one inbox marker per event id."""
    rows = query(db, f"SELECT message_id::text, count(*) FROM {table}"
                     " WHERE consumer_name = %s GROUP BY 1", (consumer,))
    effects = dict(rows)
    markers = dict(query(db, "SELECT message_id::text, count(*) FROM inbox_messages"
                             " WHERE consumer_name = %s GROUP BY 1", (consumer,)))
    for i in ids:
        assert effects.get(i) == 1, f"{consumer}: event {i} has {effects.get(i, 0)} {table} rows"
        assert markers.get(i) == 1, f"{consumer}: event {i} has {markers.get(i, 0)} markers"
    assert set(effects) == set(ids), f"{consumer}: effects for unknown events"


# ---------------------------------------------------------------------------

def test_unknown_name_without_effect_is_refused(tmp_path):
    import subprocess
    r = subprocess.run([binary("accounting-consumer"), "--db", "dbname=x", "--broker",
                        str(tmp_path / "none.sock"), "--name", "acounting"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--effect" in r.stderr
    r = subprocess.run([binary("accounting-consumer"), "--db", "dbname=x", "--broker",
                        "b", "--prefetch", "many"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--prefetch" in r.stderr
    # A malformed broker URL is refused at start, not retried for ever, and
    # its password is not repeated.
    r = subprocess.run([binary("accounting-consumer"), "--db", "dbname=x", "--broker",
                        "amqp://u:s3cret@h:0/"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--broker: broker URL port must be in 1..65535" in r.stderr
    assert "s3cret" not in r.stderr


def test_every_version_applied_once_with_the_trace_continued(db, broker, procs):
    _, sock = broker
    # The client reused its traceparent for create, authorize and capture, so
    # all three events of a payment share one trace id: each is still its
    # own event with its own inbox marker.
    msgs = payment_events((1, 2, 3)) + payment_events((1, 2, 3))
    start_consumer(procs, db, sock)
    publish(sock, msgs)
    wait_value(lambda: ledger_count(db), 6, 20, "six ledger entries")

    ids = [m["message_id"] for m in msgs]
    assert_once_each(db, ids)
    rows = {r[0]: r[1:] for r in query(
        db, "SELECT message_id::text, payment_id::text, event_type, aggregate_version,"
            " amount::text, currency, trace_parent FROM ledger_entries")}
    for m in msgs:
        pid, etype, version, amount, currency, trace = rows[m["message_id"]]
        assert pid == m["partition_key"] and etype == m["type"]
        assert version == m["headers"]["aggregate_version"]
        assert amount == ("12.50" if version == 1 else None)
        assert currency == "EUR"
        parent = m["headers"]["traceparent"]
        assert trace[:36] == parent[:36], "same trace id"
        assert trace[36:52] != parent[36:52], "a new span of the consumer"
        assert len(trace) == 55 and trace[52:] == parent[52:]
    assert query(db, "SELECT DISTINCT applied_version FROM aggregate_versions") == [(3,)]
    assert count(db, "SELECT count(*) FROM consumer_anomalies") == 0

    log = broker_log(sock)
    for i in ids:
        assert len(log_of(log, "ack", message_id=i)) == 1, f"{i} acked once"


def test_accounting_and_notifications_each_apply_every_event_once(db, broker, procs):
    _, sock = broker
    msgs = payment_events((1, 2)) + payment_events((1,)) + payment_events((1, 2, 3))
    ids = [m["message_id"] for m in msgs]
    start_consumer(procs, db, sock, name="accounting")
    start_consumer(procs, db, sock, name="notifications")
    publish(sock, msgs)
    wait_value(lambda: (ledger_count(db),
                        count(db, "SELECT count(*) FROM notifications")), (6, 6), 20,
               "six ledger entries and six notifications")
    assert_once_each(db, ids, "accounting", "ledger_entries")
    assert_once_each(db, ids, "notifications", "notifications")
    # The composite key: one marker per (consumer, event), two per event.
    assert count(db, "SELECT count(DISTINCT message_id) FROM inbox_messages") == 6
    assert count(db, "SELECT count(*) FROM inbox_messages") == 12
    log = broker_log(sock)
    for g in ("accounting", "notifications"):
        assert {e["message_id"] for e in log_of(log, "ack", group=g)} == set(ids)


def test_crash_after_commit_is_redelivered_and_applied_once(db, broker, procs):
    _, sock = broker
    first = payment_events((1,))
    c = start_consumer(procs, db, sock, faults="consumer/after_commit=crash@1")
    publish(sock, first)
    assert c.wait_exit(15) == -signal.SIGKILL
    # Committed, never acknowledged.
    assert ledger_count(db) == 1
    assert group_stats(sock, "accounting").get("acked", 0) == 0

    start_consumer(procs, db, sock, proc="accounting-2")
    later = payment_events((1,))
    publish(sock, later)
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 2, 20, "both acked")
    mid = first[0]["message_id"]
    assert_once_each(db, [mid, later[0]["message_id"]])
    assert count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'duplicate'"
                     " AND message_id = %s", (mid,)) == 1
    deliveries = log_of(broker_log(sock), "deliver", message_id=mid)
    assert len(deliveries) == 2 and deliveries[1]["redelivered"] is True
    assert deliveries[1]["delivery_count"] == 2


@pytest.mark.parametrize("point", ["consumer/before_commit", "consumer/after_inbox_insert"])
def test_crash_before_commit_applies_nothing_then_once(db, broker, procs, point):
    _, sock = broker
    msgs = payment_events((1,))
    mid = msgs[0]["message_id"]
    c = start_consumer(procs, db, sock, faults=f"{point}=crash@1")
    publish(sock, msgs)
    assert c.wait_exit(15) == -signal.SIGKILL
    assert ledger_count(db) == 0
    assert count(db, "SELECT count(*) FROM inbox_messages") == 0
    assert count(db, "SELECT count(*) FROM aggregate_versions") == 0

    start_consumer(procs, db, sock, proc="accounting-2")
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 1, 20, "the ack")
    assert_once_each(db, [mid])
    assert count(db, "SELECT count(*) FROM consumer_anomalies") == 0
    log = broker_log(sock)
    assert len(log_of(log, "deliver", message_id=mid)) == 2
    assert len(log_of(log, "ack", message_id=mid)) == 1


def test_crash_after_ack_loses_nothing(db, broker, procs):
    _, sock = broker
    msgs = payment_events((1,))
    c = start_consumer(procs, db, sock, faults="consumer/after_ack=crash@1")
    publish(sock, msgs)
    assert c.wait_exit(15) == -signal.SIGKILL
    start_consumer(procs, db, sock, proc="accounting-2")
    more = payment_events((1,))
    publish(sock, more)
    wait_value(lambda: ledger_count(db), 2, 20, "two ledger entries")
    assert_once_each(db, [msgs[0]["message_id"], more[0]["message_id"]])
    assert len(log_of(broker_log(sock), "deliver", message_id=msgs[0]["message_id"])) == 1


def test_apply_fail_rolls_back_nacks_and_applies_later(db, broker, procs):
    _, sock = broker
    msgs = payment_events((1,)) + payment_events((1,)) + payment_events((1,))
    start_consumer(procs, db, sock, faults="consumer/apply_fail=fail@1")
    publish(sock, msgs)
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 3, 20, "three acks")
    ids = [m["message_id"] for m in msgs]
    assert_once_each(db, ids)
    log = broker_log(sock)
    nacks = log_of(log, "nack")
    assert len(nacks) == 1 and nacks[0]["requeue"] is True and nacks[0]["delay_ms"] == 50
    assert len(log_of(log, "deliver", message_id=nacks[0]["message_id"])) == 2


def test_concurrent_duplicate_deliveries_take_effect_once(db, broker, procs):
    _, sock = broker
    control(sock, duplicate=True)
    # Both consumers hold their transaction open for a while before COMMIT,
    # so the twin deliveries of each event overlap in time.
    faults = "consumer/before_commit=stall:300+"
    start_consumer(procs, db, sock, proc="accounting-a", faults=faults)
    start_consumer(procs, db, sock, proc="accounting-b", faults=faults)
    msgs = [m for _ in range(4) for m in payment_events((1,))]
    ids = [m["message_id"] for m in msgs]
    publish(sock, msgs)
    wait_value(lambda: count(db, "SELECT count(*) FROM consumer_anomalies"
                                 " WHERE kind = 'duplicate'"), 4, 30, "four duplicates counted")
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 4, 20, "four acked")
    assert_once_each(db, ids)
    log = broker_log(sock)
    for i in ids:
        consumers = {e["consumer"] for e in log_of(log, "deliver", message_id=i)}
        assert len(consumers) == 2, f"{i} was delivered to both consumers"


def test_a_transaction_holding_the_marker_does_not_stall_the_consumer(db, broker, procs):
    _, sock = broker
    stuck = payment_events((1,))
    mid = stuck[0]["message_id"]
    start_consumer(procs, db, sock, args=("--lock-timeout-ms", "300"))
    # A peer frozen inside its transaction, between its marker INSERT and
    # its COMMIT, holds the event's marker: here the test is that peer.
    with psycopg.connect(db) as peer:
        peer.execute("INSERT INTO inbox_messages (consumer_name, message_id, processed_at)"
                     " VALUES ('accounting', %s, now())", (mid,))
        publish(sock, stuck)
        # The consumer gives up after its lock_timeout and hands the event back.
        wait_for(lambda: log_of(broker_log(sock), "nack", message_id=mid), 15,
                 "the consumer to hand back the event it could not lock")
        others = payment_events((1,)) + payment_events((1,))
        publish(sock, others)
        wait_value(lambda: ledger_count(db), 2, 20, "the other events to flow meanwhile")
        assert count(db, "SELECT count(*) FROM ledger_entries WHERE message_id = %s",
                     (mid,)) == 0
        peer.rollback()
    # The peer died without committing: the redelivery takes effect, once.
    wait_value(lambda: settled(sock), (3, 0, 0), 20, "every event acked")
    assert_once_each(db, [mid] + [m["message_id"] for m in others])
    assert count(db, "SELECT count(*) FROM consumer_anomalies") == 0


def test_reordered_versions_are_held_back_then_applied_in_order(db, broker, procs):
    _, sock = broker
    control(sock, reorder=True)
    payments = [payment_events((1, 2, 3)) for _ in range(3)]
    msgs = [m for p in payments for m in p]
    publish(sock, msgs)
    start_consumer(procs, db, sock)
    wait_value(lambda: ledger_count(db), 9, 30, "nine ledger entries")
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 9, 20, "nine acked")
    assert_once_each(db, [m["message_id"] for m in msgs])
    for p in payments:
        versions = [r[0] for r in query(db, "SELECT aggregate_version FROM ledger_entries"
                                            " WHERE payment_id = %s ORDER BY id",
                                        (p[0]["partition_key"],))]
        assert versions == [1, 2, 3], f"applied out of order: {versions}"
    assert count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'gap'") >= 1
    assert count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'gap'"
                     " AND got_version <= expected_version") == 0
    assert count(db, "SELECT count(*) FROM consumer_dead_letters") == 0
    assert log_of(broker_log(sock), "nack"), "gaps were nacked for later"


def test_poison_is_parked_after_n_deliveries_while_others_flow(db, broker, procs):
    _, sock = broker
    secret = "SECRET-4111111111111111"
    good = payment_events((1,)) + payment_events((1,))
    bad_json = event(str(uuid.uuid4()), 1)
    bad_json["payload"] = '{"EventId": "' + secret
    bad_schema = event(str(uuid.uuid4()), 1, schema_version=2)
    bad_amount = event(str(uuid.uuid4()), 1)
    body = json.loads(bad_amount["payload"])
    body["Amount"] = 12.5
    body["Card"] = secret
    bad_amount["payload"] = json.dumps(body)
    bad_id = event(str(uuid.uuid4()), 1)
    bad_id["message_id"] = "not-a-uuid"
    poison = [bad_json, bad_schema, bad_amount, bad_id]

    start_consumer(procs, db, sock, args=("--poison-max-deliveries", "3"))
    publish(sock, [good[0]] + poison + [good[1]])
    wait_value(lambda: count(db, "SELECT count(*) FROM consumer_dead_letters"), 4, 30,
               "four parked poison messages")
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 6, 20, "six acked")
    assert_once_each(db, [m["message_id"] for m in good])

    parked = {r[0]: r[1:] for r in query(
        db, "SELECT message_id, reason, deliveries FROM consumer_dead_letters")}
    assert set(parked) == {m["message_id"] for m in poison}
    assert "JSON" in parked[bad_json["message_id"]][0]
    assert "schema_version 2" in parked[bad_schema["message_id"]][0]
    assert "Amount" in parked[bad_amount["message_id"]][0]
    assert "message_id" in parked["not-a-uuid"][0]
    for reason, deliveries in parked.values():
        assert deliveries == 3
        assert "SECRET" not in reason and "4111" not in reason
    assert count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'poison'") == 4
    assert count(db, "SELECT count(*) FROM consumer_anomalies WHERE detail LIKE '%%4111%%'") == 0
    assert count(db, "SELECT count(*) FROM inbox_messages") == 2

    log = broker_log(sock)
    for m in poison:
        assert len(log_of(log, "deliver", message_id=m["message_id"])) == 3
        assert len(log_of(log, "ack", message_id=m["message_id"])) == 1


def test_event_the_database_refuses_is_parked_not_retried_forever(db, broker, procs):
    _, sock = broker
    # A rule the ledger enforces that the event cannot satisfy: no retry helps.
    query(db, "ALTER TABLE ledger_entries ADD CONSTRAINT no_xts CHECK (currency <> 'XTS')")
    pid = str(uuid.uuid4())
    refused = event(pid, 1, currency="XTS", traceparent=new_traceparent())
    good = payment_events((1,))
    start_consumer(procs, db, sock, args=("--poison-max-deliveries", "2"))
    publish(sock, [refused] + good)
    wait_value(lambda: count(db, "SELECT count(*) FROM consumer_dead_letters"), 1, 20,
               "the refused event to be parked")
    reason, deliveries = query(db, "SELECT reason, deliveries FROM consumer_dead_letters")[0]
    assert "23514" in reason and deliveries == 2
    assert_once_each(db, [good[0]["message_id"]])
    assert count(db, "SELECT count(*) FROM inbox_messages WHERE message_id = %s",
                 (refused["message_id"],)) == 0
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 2, 10, "two acks")


def test_gap_that_never_closes_is_parked(db, broker, procs):
    _, sock = broker
    pid = str(uuid.uuid4())
    orphan = event(pid, 2, traceparent=new_traceparent())   # version 1 never comes
    start_consumer(procs, db, sock, args=("--gap-park-after-ms", "500"))
    publish(sock, [orphan])
    wait_value(lambda: count(db, "SELECT count(*) FROM consumer_dead_letters"), 1, 20,
               "the gap to be parked")
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 1, 10, "its ack")
    mid = orphan["message_id"]
    reason, = query(db, "SELECT reason FROM consumer_dead_letters WHERE message_id = %s", (mid,))[0]
    assert "expected 1, got 2" in reason
    kinds = dict(query(db, "SELECT kind, count(*) FROM consumer_anomalies"
                           " WHERE message_id = %s GROUP BY kind", (mid,)))
    assert kinds == {"gap": 1, "gap_parked": 1}
    assert ledger_count(db) == 0 and count(db, "SELECT count(*) FROM inbox_messages") == 0
    assert len(log_of(broker_log(sock), "deliver", message_id=mid)) >= 2


def test_stale_redelivery_after_marker_cleanup_is_not_applied(db, broker, procs):
    _, sock = broker
    msgs = payment_events((1, 2))
    start_consumer(procs, db, sock)
    publish(sock, msgs)
    wait_value(lambda: ledger_count(db), 2, 20, "two ledger entries")
    # An inbox cleanup removed the markers; then the relay republishes the
    # first event (same id): the version check still refuses it.
    query(db, "DELETE FROM inbox_messages")
    publish(sock, [msgs[0]])
    wait_value(lambda: count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'stale'"),
               1, 20, "a stale anomaly")
    assert ledger_count(db) == 2
    row = query(db, "SELECT message_id::text, expected_version, got_version"
                    " FROM consumer_anomalies WHERE kind = 'stale'")[0]
    assert row == (msgs[0]["message_id"], 3, 1)
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 3, 10, "three acks")


def test_sigterm_finishes_the_delivery_in_progress(db, broker, procs):
    _, sock = broker
    msgs = payment_events((1,))
    c = start_consumer(procs, db, sock, faults="consumer/before_commit=stall:800")
    publish(sock, msgs)
    wait_for(lambda: c.events("fault_hit"), 15, "the consumer to reach before_commit")
    c.signal(signal.SIGTERM)
    assert c.wait_exit(15) == 0
    assert_once_each(db, [msgs[0]["message_id"]])
    assert len(log_of(broker_log(sock), "ack", message_id=msgs[0]["message_id"])) == 1


def test_lost_database_connection_is_reestablished(db, broker, procs):
    _, sock = broker
    first = payment_events((1,))
    start_consumer(procs, db, sock, proc="acct-dblost")
    publish(sock, first)
    wait_value(lambda: ledger_count(db), 1, 20, "the first entry")
    killed = query(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE application_name = 'acct-dblost'")
    assert killed == [(True,)]
    more = payment_events((1, 2)) + payment_events((1,))
    publish(sock, more)
    wait_value(lambda: ledger_count(db), 4, 20, "all four entries")
    assert_once_each(db, [m["message_id"] for m in first + more])
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 4, 10, "four acks")


def test_lost_broker_is_reconnected_and_resubscribed(db, broker, procs, tmp_path):
    old, sock = broker
    start_consumer(procs, db, sock)
    old.kill()
    fresh = procs.start("fakebroker-2", [binary("fakebroker"), "--socket", sock])
    msgs = payment_events((1,)) + payment_events((1,))

    def try_publish():
        try:
            publish(sock, msgs)
            return True
        except OSError:
            return False

    wait_for(try_publish, 10, "the restarted broker to accept publishes")
    wait_value(lambda: ledger_count(db), 2, 20, "entries through the new broker")
    assert_once_each(db, [m["message_id"] for m in msgs])
    assert fresh.alive()
    wait_value(lambda: group_stats(sock, "accounting").get("acked"), 2, 10, "two acks")


def test_batches_keep_one_effect_per_event(db, broker, procs):
    _, sock = broker
    control(sock, duplicate=True)
    args = ("--batch", "16", "--prefetch", "32")
    batch_a = start_consumer(procs, db, sock, proc="batch-a", args=args,
                             faults="consumer/apply_fail=fail@2")
    start_consumer(procs, db, sock, proc="batch-b", args=args)
    msgs = [m for _ in range(40) for m in payment_events((1, 2))]
    ids = [m["message_id"] for m in msgs]
    publish(sock, msgs)
    wait_value(lambda: settled(sock), (len(msgs), 0, 0), 60, "every event acked, none in flight")
    assert_once_each(db, ids)
    assert query(db, "SELECT DISTINCT applied_version FROM aggregate_versions") == [(2,)]
    # Every acknowledged delivery is the event's one effect or a counted
    # duplicate (the twin of the delivery that apply_fail sent back may have
    # been applied first: then that event has no duplicate).
    acks = len(log_of(broker_log(sock), "ack"))
    dups = count(db, "SELECT count(*) FROM consumer_anomalies WHERE kind = 'duplicate'")
    assert dups == acks - len(msgs) and dups >= len(msgs) - 1
    # Each injected apply failure sent its delivery back, once.  (Under load
    # batch-b may apply nearly everything first: batch-a then meets only
    # copies the inbox absorbs, and the fault has nothing to fire on.)
    fired = [e for e in batch_a.events("fault_hit") if e.get("point") == "consumer/apply_fail"]
    assert len(fired) <= 1
    assert len(log_of(broker_log(sock), "nack")) == len(fired)
