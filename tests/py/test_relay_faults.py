"""outbox-relay at its crash windows: broker outage, poison message, crash
after publish, stale worker, lease stall, failed mark.  Assertions are on the
database rows and the broker's log; the relay's events say what it decided
(claims with their leases, the retry schedule) and are held against both."""
# needs: pg
import signal

from cwtest import proc_state, query, scalar, wait_for
from test_relay import (broker_connect, broker_log, insert_rows, sha256, start_relay,
                        stored, ts_us, wait_published)


def test_broker_outage_attempts_grow_and_no_publish_before_next_attempt_at(db, procs, broker):
    _, sock = broker
    with broker_connect(sock) as b:
        b.control(outage="refuse")
    ids = insert_rows(db, 4)
    relay = start_relay(procs, db, sock, backoff_base_ms=60, backoff_cap_ms=500,
                        max_attempts=50)
    wait_for(lambda: scalar(db, "SELECT min(attempts) FROM outbox_messages") >= 5, 30,
             "every row attempted 5 times")
    # While the broker refuses: nothing stored, the schedule is persisted.
    assert stored(sock) == []
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE last_error LIKE"
                      " '%%broker outage%%'") == 4

    with broker_connect(sock) as b:
        b.control(outage="off")
    wait_published(db, ids)
    assert relay.stop() == 0

    # Every publish the broker saw (refused or stored) of a row came at or
    # after the next_attempt_at the relay persisted for it after the
    # previous failure.
    retries = {}
    for e in relay.events("retry"):
        retries.setdefault(e["id"], []).append(e)
    log = [e for e in broker_log(sock) if e.get("event") == "publish"]
    checked = 0
    for mid in ids:
        pubs = sorted(e["ts_us"] for e in log if e["message_id"] == mid)
        sched = sorted(retries[mid], key=lambda e: e["ts_us"])
        assert len(pubs) == len(sched) + 1, f"{mid}: one publish per attempt"
        for r, p in zip(sched, pubs[1:]):
            assert p >= ts_us(r["next_attempt_at"]), \
                f"{mid} published at {p}, before its next_attempt_at {r['next_attempt_at']}"
            checked += 1
        # Attempts grow: one more per claim, never reset.
        attempts = [r["attempt"] for r in sched]
        assert attempts == list(range(1, len(sched) + 1))
        # And the backoff grew with them (ceiling base*2^attempt, capped).
        delays = [r["delay_ms"] for r in sched]
        ceilings = [min(500, 60 * 2 ** a) for a in attempts]
        assert all((c + 1) // 2 <= d <= c for c, d in zip(ceilings, delays)), delays
    assert checked >= 16
    final = dict(query(db, "SELECT id::text, attempts FROM outbox_messages"))
    for mid in ids:
        assert final[mid] == len(retries[mid]) + 1


def test_poison_message_is_dead_lettered_at_the_limit_with_a_sanitized_error(db, procs, broker):
    _, sock = broker
    with broker_connect(sock) as b:
        b.control(max_payload_bytes=300)
    # jsonb orders keys by length: "pw" comes first, so the broker's refusal
    # echoes it; "card" follows within the 48 bytes echoed.
    poison_body = ('{"pw": "hunter2-secret-77", "card": "4111111111111111", "pad": "'
                   + "x" * 600 + '"}')
    good = insert_rows(db, 3, age_s=50)
    poison = insert_rows(db, 1, payload=poison_body, age_s=40)[0]
    relay = start_relay(procs, db, sock, max_attempts=3)
    wait_for(lambda: scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages"
                                " WHERE id = %s", (poison,)), 20, "the poison row dead-lettered")
    wait_published(db, good)

    attempts, err, published = query(db, "SELECT attempts, last_error, published_at IS NOT NULL"
                                         " FROM outbox_messages WHERE id = %s", (poison,))[0]
    assert attempts == 3 and not published
    assert err.startswith("broker refused publish: payload too large"), err
    for secret in ("hunter2", "4111", "pw", "card", "{", "xxxx"):
        assert secret not in err, f"last_error leaks {secret!r}: {err}"
    assert len(err) <= 500

    # The broker refused it at every attempt and never stored it.
    refusals = [e for e in broker_log(sock)
                if e.get("event") == "publish" and e["message_id"] == poison]
    assert [e["status"] for e in refusals] == ["refused"] * 3
    dl = relay.events("dead_letter")
    assert [(e["id"], e["attempt"]) for e in dl] == [(poison, 3)]
    events_text = open(relay.events_path, encoding="utf-8").read()
    # The planted values whole: "4111" alone turns up in microsecond
    # timestamps and ids.
    assert "hunter2" not in events_text and "4111111111111111" not in events_text
    # Dead-lettered rows are no longer claimed.
    claims = [c for c in relay.events("claim") if poison in c["ids"]]
    assert len(claims) == 3
    assert relay.stop() == 0


def test_row_whose_publish_crashes_the_relay_every_time_is_dead_lettered_past_the_limit(
        db, procs, broker):
    _, sock = broker
    mid = insert_rows(db, 1)[0]
    # Each claim of the row takes its relay down before the publish is
    # settled: no failure is ever returned, only the claim count grows.
    for n in (1, 2):
        r = start_relay(procs, db, sock, f"relay-crash-{n}", lease_ms=300, max_attempts=2,
                        faults="relay/before_publish=crash@1")
        assert r.wait_exit(15) == -signal.SIGKILL
        assert scalar(db, "SELECT attempts FROM outbox_messages WHERE id = %s", (mid,)) == n
    good = insert_rows(db, 1, age_s=10)
    relay = start_relay(procs, db, sock, "relay-ok", lease_ms=300, max_attempts=2)
    wait_for(lambda: scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages"
                                " WHERE id = %s", (mid,)), 20, "the row dead-lettered")
    wait_published(db, good)
    assert relay.stop() == 0

    # Claimed a third time, past the limit of 2: dead-lettered (by the relay
    # that held the lease), never published, with an error that says why.
    attempts, err, published, locked_by = query(
        db, "SELECT attempts, last_error, published_at IS NOT NULL, locked_by::text"
            " FROM outbox_messages WHERE id = %s", (mid,))[0]
    assert attempts == 3 and not published
    assert err.startswith("attempt limit exceeded without a settled outcome"), err
    assert locked_by == relay.events("start")[0]["worker"]
    assert [e for e in broker_log(sock) if e.get("message_id") == mid] == [], \
        "the broker never saw it"
    assert [(e["id"], e["attempt"], e["reason"]) for e in relay.events("dead_letter")] == \
        [(mid, 3, "attempt_limit_exceeded")]
    assert not [e for e in relay.events("publish") if e["id"] == mid]
    assert [e["message_id"] for e in stored(sock)] == good


def test_crash_after_publish_republishes_the_same_id_and_payload_after_the_lease(
        db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 3)
    a = start_relay(procs, db, sock, "relay-a", lease_ms=1000,
                    faults="relay/after_publish=crash@1")
    assert a.wait_exit(15) == -signal.SIGKILL
    first = stored(sock)
    assert len(first) >= 1
    crashed_id = first[0]["message_id"]
    assert scalar(db, "SELECT published_at FROM outbox_messages WHERE id = %s",
                  (crashed_id,)) is None, "published but never marked"
    lease_until = ts_us(a.events("claim")[0]["lease_until"])

    b = start_relay(procs, db, sock, "relay-b", lease_ms=1000)
    wait_published(db, ids)
    assert b.stop() == 0

    payload = scalar(db, "SELECT payload::text FROM outbox_messages WHERE id = %s",
                     (crashed_id,))
    again = stored(sock, {crashed_id})
    assert len(again) == 2, "published once more, under the same id"
    assert {e["payload_sha256"] for e in again} == {sha256(payload)}, "with the same payload"
    assert again[1]["client"] == "relay-b"
    assert again[1]["ts_us"] >= lease_until, "not before the first lease expired"
    assert scalar(db, "SELECT attempts FROM outbox_messages WHERE id = %s", (crashed_id,)) == 2
    assert scalar(db, "SELECT value FROM pipeline_counters"
                      " WHERE counter = 'expired_leases_recovered'") == 3


def test_stale_relay_paused_past_its_lease_cannot_mark(db, procs, broker):
    _, sock = broker
    mid = insert_rows(db, 1)[0]
    a = start_relay(procs, db, sock, "relay-a", lease_ms=1000,
                    faults="relay/after_publish=park@1")
    wait_for(lambda: proc_state(a.pid) == "T", 10, "relay-a stopped after its publish")
    wait_for(lambda: scalar(db, "SELECT locked_until < now() FROM outbox_messages"
                                " WHERE id = %s", (mid,)), 10, "relay-a's lease to expire")

    b = start_relay(procs, db, sock, "relay-b", lease_ms=5000)
    wait_published(db, [mid])
    assert b.stop() == 0
    worker_b = b.events("start")[0]["worker"]
    before = query(db, "SELECT published_at, locked_by::text FROM outbox_messages WHERE id = %s",
                   (mid,))[0]
    assert before[1] == worker_b

    a.signal(signal.SIGCONT)
    wait_for(lambda: a.events("lease_lost"), 10, "relay-a to find its lease lost")
    lost = a.events("lease_lost")
    assert [(e["id"], e["op"]) for e in lost] == [(mid, "mark")]
    assert not a.events("mark") or all(m["n"] == 0 for m in a.events("mark"))
    after = query(db, "SELECT published_at, locked_by::text FROM outbox_messages WHERE id = %s",
                  (mid,))[0]
    assert after == before, "the stale worker changed the row"
    assert scalar(db, "SELECT value FROM pipeline_counters WHERE counter = 'leases_lost'") == 1
    # Both published it (at least once delivery); the inbox absorbs that.
    assert [e["client"] for e in stored(sock)] == ["relay-a", "relay-b"]
    assert a.stop() == 0


def test_lease_stall_past_the_lease_publishes_nothing_of_that_batch(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 3)
    a = start_relay(procs, db, sock, "relay-a", lease_ms=1000,
                    faults="relay/lease_stall=stall:1500@1")
    wait_for(lambda: a.events("lease_expiring"), 10, "relay-a to give up the stale batch")
    wait_published(db, ids)
    assert a.stop() == 0

    first = a.events("claim")[0]
    expired = a.events("lease_expiring")[0]
    assert sorted(expired["ids"]) == sorted(ids) and sorted(first["ids"]) == sorted(ids)
    lease_until = ts_us(first["lease_until"])
    pubs = stored(sock)
    assert sorted(e["message_id"] for e in pubs) == sorted(ids), "each published once"
    assert all(e["ts_us"] >= lease_until for e in pubs), \
        "a message was published under the lease that had expired"
    assert scalar(db, "SELECT min(attempts) FROM outbox_messages") == 2


def test_failed_mark_leaves_the_row_to_its_lease_and_it_is_published_again(db, procs, broker):
    _, sock = broker
    mid = insert_rows(db, 1)[0]
    relay = start_relay(procs, db, sock, lease_ms=1000, faults="relay/mark_fail=fail@1")
    wait_published(db, [mid])
    assert relay.stop() == 0
    assert [e["ids"] for e in relay.events("mark_failed")] == [[mid]]
    pubs = stored(sock)
    assert [e["message_id"] for e in pubs] == [mid, mid]
    lease_until = ts_us(relay.events("claim")[0]["lease_until"])
    assert pubs[1]["ts_us"] >= lease_until
    # Each claim counts an attempt: two, or more on a machine so busy that
    # a later publish reached the broker after its own lease and was
    # refused (the broker stores none of those).
    claims = [c for c in relay.events("claim") if mid in c["ids"]]
    assert len(claims) >= 2, claims
    assert scalar(db, "SELECT attempts FROM outbox_messages WHERE id = %s", (mid,)) == len(claims)


def test_failed_publish_schedules_a_retry_and_the_rest_of_the_batch_goes_on(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 4)
    relay = start_relay(procs, db, sock, batch=4, backoff_base_ms=200, backoff_cap_ms=400,
                        faults="relay/before_publish=fail@2")
    wait_published(db, ids)
    assert relay.stop() == 0
    retry = relay.events("retry")
    assert [(e["id"], e["attempt"]) for e in retry] == [(ids[1], 1)]
    assert "injected fault" in retry[0]["error"]
    first_claim = relay.events("claim")[0]
    assert sorted(first_claim["ids"]) == sorted(ids)
    # The other three went out in that same batch, before the retry.
    pubs = stored(sock)
    assert [e["message_id"] for e in pubs][:3] == [ids[0], ids[2], ids[3]]
    assert pubs[3]["message_id"] == ids[1]
    assert pubs[3]["ts_us"] >= ts_us(retry[0]["next_attempt_at"])
    row = query(db, "SELECT attempts, last_error FROM outbox_messages WHERE id = %s",
                (ids[1],))[0]
    assert row[0] == 2 and "injected fault" in row[1]


def test_crash_in_the_middle_of_a_backlog_loses_nothing(db, procs, broker):
    """With a backlog the relay claims ahead and marks a batch during the
    next one: a SIGKILL there leaves up to two batches unsettled.  Nothing is
    lost, and no row is marked published that the broker did not store."""
    _, sock = broker
    ids = insert_rows(db, 60)
    a = start_relay(procs, db, sock, "relay-a", batch=10, lease_ms=1000,
                    faults="relay/after_publish=crash@25")
    assert a.wait_exit(15) == -signal.SIGKILL
    stored_ids = {e["message_id"] for e in stored(sock)}
    marked = {r[0] for r in query(db, "SELECT id::text FROM outbox_messages"
                                      " WHERE published_at IS NOT NULL")}
    assert marked and marked <= stored_ids, "marked published without a broker confirm"
    assert len(marked) < 25, "the crashed batch was marked"

    b = start_relay(procs, db, sock, "relay-b", batch=10, lease_ms=1000)
    wait_published(db, ids)
    assert b.stop() == 0
    counts = {}
    for e in stored(sock):
        counts[e["message_id"]] = counts.get(e["message_id"], 0) + 1
    assert set(counts) == set(ids), "every row reached the broker"
    assert all(counts[m] == 1 for m in marked), "a settled row was published again"
    assert any(c == 2 for c in counts.values()), "the unsettled batch was published again"


def test_sigterm_in_a_backlog_marks_exactly_what_the_broker_stored(db, procs, broker):
    _, sock = broker
    insert_rows(db, 200)
    relay = start_relay(procs, db, sock, batch=10, lease_ms=30000,
                        faults="relay/after_publish=stall:800@35")
    wait_for(lambda: relay.events("fault_hit"), 10, "the stall in the fourth batch")
    relay.signal(signal.SIGTERM)
    assert relay.wait_exit(15) == 0
    stored_ids = [e["message_id"] for e in stored(sock)]
    marked = {r[0] for r in query(db, "SELECT id::text FROM outbox_messages"
                                      " WHERE published_at IS NOT NULL")}
    assert len(stored_ids) == len(set(stored_ids)) == 40, "four batches sent, once each"
    assert marked == set(stored_ids), "a stop must settle every confirmed message"
    # The batch claimed ahead was left to its lease, not published.
    leased = scalar(db, "SELECT count(*) FROM outbox_messages WHERE published_at IS NULL"
                        " AND locked_until > now()")
    assert leased == 10
