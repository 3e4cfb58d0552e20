"""Integration tests of the fake broker: real broker processes, real client
processes killed with SIGKILL, assertions on the broker's log (dump_log and
the --events file) and its stats.

Run as a script, this file is also the helper consumer process the tests
start and kill:  test_broker.py consume SOCKET GROUP OUTFILE MODE
(MODE hold: take one delivery, record it, never ack; MODE work: ack every
delivery after a short random pause, recording each, until STOP file).
"""
# needs: nothing
import json
import os
import random
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from brokerclient import BrokerError, BrokerTimeout, connect  # noqa: E402
from cwtest import binary, read_events, wait_for  # noqa: E402

PY = "/usr/bin/python3"
HERE = os.path.abspath(__file__)


# -- helpers ---------------------------------------------------------------

def start_broker(procs, tmp_path, *extra, name="fakebroker", sock=None):
    sock = sock or str(tmp_path / "broker.sock")
    p = procs.start(name, [binary("fakebroker"), "--socket", sock, *extra])
    # a stale socket file may be there already: wait until this broker answers
    wait_for(lambda: not p.alive() or can_connect(sock), 10, "the broker to accept")
    assert p.alive(), p.stderr_text()
    return p, sock


def start_consumer(procs, sock, group, out, mode):
    return procs.start("consumer", [PY, HERE, "consume", sock, group, str(out), mode],
                       events=False)


def next_from(clients, timeout):
    """The first delivery any of clients receives: (client, delivery), or
    (None, None) after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in clients:
            d = c.next_delivery(timeout=0.02)
            if d is not None:
                return c, d
    return None, None


def can_connect(sock):
    try:
        connect(sock, "probe", timeout=1.0).close()
        return True
    except (OSError, BrokerError):
        return False


def lines(path):
    """JSON lines a helper consumer recorded (none yet: [])."""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(x) for x in f if x.strip()]
    except FileNotFoundError:
        return []


def entries(log, event, **match):
    return [e for e in log if e["event"] == event and all(e.get(k) == v for k, v in match.items())]


def group_stats(client, group):
    return client.stats()["groups"].get(group, {})


# -- at-least-once -----------------------------------------------------------

def test_sigkilled_consumer_message_redelivered(procs, tmp_path):
    broker, sock = start_broker(procs, tmp_path)
    pub = connect(sock, "publisher")
    conf = pub.publish(message_id="m-kill", payload='{"n":1}', partition_key="agg-1")
    assert conf["status"] == "stored" and conf["offset"] == 1

    out = tmp_path / "held.jsonl"
    victim = start_consumer(procs, sock, "accounting", out, "hold")
    wait_for(lambda: lines(out), 10, "the first consumer to receive the message")
    first = lines(out)[0]
    assert first["message_id"] == "m-kill" and first["delivery_count"] == 1
    assert first["redelivered"] is False
    victim.kill()  # SIGKILL before ack

    other = connect(sock, "second-consumer")
    other.subscribe("payments", "accounting", prefetch=1)
    d = other.next_delivery(timeout=10)
    assert d is not None, "message lost after the consumer was killed"
    assert d["message_id"] == "m-kill" and d["payload"] == '{"n":1}'
    assert d["redelivered"] is True and d["delivery_count"] == 2
    other.ack(d["tag"])
    wait_for(lambda: group_stats(pub, "accounting").get("acked") == 1, 10, "the ack")

    log = pub.dump_log()
    delivers = entries(log, "deliver", message_id="m-kill")
    assert [e["delivery_count"] for e in delivers] == [1, 2]
    assert delivers[0]["consumer"] != delivers[1]["consumer"]
    assert [e["reason"] for e in entries(log, "redeliver", message_id="m-kill")] == ["disconnect"]
    assert len(entries(log, "ack", message_id="m-kill")) == 1
    # the --events file holds the same story
    ev = read_events(broker.events_path)
    assert [e["delivery_count"] for e in entries(ev, "deliver", message_id="m-kill")] == [1, 2]


def test_visibility_timeout_redelivers(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path, "--visibility-timeout-ms", "500")
    pub = connect(sock, "publisher")
    pub.publish(message_id="m-slow")
    slow = connect(sock, "slow")
    slow.subscribe(group="g", prefetch=1)
    d1 = slow.next_delivery(timeout=5)
    assert d1 and d1["delivery_count"] == 1
    fast = connect(sock, "fast")
    fast.subscribe(group="g", prefetch=1)
    # the slow consumer holds it past 500 ms: it goes out again (to either)
    who, d2 = next_from([fast, slow], 5)
    assert d2 and d2["message_id"] == "m-slow" and d2["delivery_count"] == 2
    assert d2["redelivered"] is True
    who.ack(d2["tag"])
    # the late ack of the expired tag gets an error frame (read before the
    # stats reply on the same connection); the message stays acked once
    slow.ack(d1["tag"])
    slow.stats()
    assert [e["tag"] for e in slow.errors] == [d1["tag"]]
    assert slow.errors[0]["request"] == "ack"
    wait_for(lambda: group_stats(pub, "g").get("acked") == 1, 5, "the ack of the redelivery")
    log = pub.dump_log()
    reasons = {e["reason"] for e in entries(log, "redeliver", message_id="m-slow")}
    assert reasons == {"visibility_timeout"}
    assert group_stats(pub, "g")["unacked"] == 0


def test_restart_with_db_keeps_unacked(procs, tmp_path):
    db = str(tmp_path / "broker.db")
    broker, sock = start_broker(procs, tmp_path, "--db", db)
    pub = connect(sock, "publisher")
    for i in range(5):
        assert pub.publish(message_id=f"m-{i}", payload=f'{{"i":{i}}}')["status"] == "stored"
    cons = connect(sock, "consumer")
    cons.subscribe(group="accounting", prefetch=1)
    for i in range(2):
        d = cons.next_delivery(timeout=5)
        assert d["message_id"] == f"m-{i}"
        cons.ack(d["tag"])
    held = cons.next_delivery(timeout=5)   # in flight when the broker dies
    assert held["message_id"] == "m-2"
    wait_for(lambda: group_stats(pub, "accounting").get("acked") == 2, 10, "two acks")
    broker.kill()
    pub.close()
    cons.close()

    broker2, _ = start_broker(procs, tmp_path, "--db", db, name="fakebroker2", sock=sock)
    c2 = connect(sock, "consumer-after-restart")
    c2.subscribe(group="accounting", prefetch=10)
    got = []
    while len(got) < 3:
        d = c2.next_delivery(timeout=5)
        assert d is not None, f"only {got} after the restart"
        got.append((d["message_id"], d["delivery_count"], d["redelivered"], d["payload"]))
        c2.ack(d["tag"])
    assert got == [("m-2", 2, True, '{"i":2}'), ("m-3", 1, False, '{"i":3}'),
                   ("m-4", 1, False, '{"i":4}')]
    assert c2.next_delivery(timeout=0.3) is None   # acked ones stay acked
    st = c2.stats()
    assert st["stored"] == 5 and st["groups"]["accounting"]["acked"] == 5
    log = c2.dump_log()
    assert [e["message_id"] for e in entries(log, "redeliver", reason="restart")] == ["m-2"]
    # the log survived too: every publish of the first run is in it
    assert len(entries(log, "publish", status="stored")) == 5
    assert broker2.stop() == 0


# -- faults ------------------------------------------------------------------

def test_duplicate_mode_two_deliveries(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    ctl = connect(sock, "control")
    assert ctl.control(duplicate=True)["duplicate"] is True
    a = connect(sock, "consumer-a")
    b = connect(sock, "consumer-b")
    a.subscribe(group="accounting", prefetch=1)
    b.subscribe(group="accounting", prefetch=1)
    ctl.publish(message_id="m-dup", payload='{"x":1}')
    da = a.next_delivery(timeout=5)
    db_ = b.next_delivery(timeout=5)
    assert da and db_, "each consumer of the group gets a copy at once"
    assert da["message_id"] == db_["message_id"] == "m-dup"
    assert da["tag"] != db_["tag"]
    assert sorted([bool(da.get("duplicate")), bool(db_.get("duplicate"))]) == [False, True]
    a.ack(da["tag"])
    b.ack(db_["tag"])
    wait_for(lambda: len(entries(ctl.dump_log(), "ack", message_id="m-dup")) == 2, 5, "two acks")
    log = ctl.dump_log()
    assert len(entries(log, "deliver", message_id="m-dup")) == 2
    assert group_stats(ctl, "accounting")["acked"] == 1
    assert not a.errors and not b.errors


def test_outage_refuse_and_hang_then_recover(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    ctl = connect(sock, "control")
    ctl.control(outage="refuse")
    pub = connect(sock, "publisher", timeout=1.0)
    t0 = time.monotonic()
    conf = pub.publish(message_id="m-refused")
    assert conf["status"] == "refused" and conf["error"] == "broker outage"
    assert time.monotonic() - t0 < 1.0

    ctl.control(outage="hang")
    pub.publish_send(message_id="m-hung")
    t0 = time.monotonic()
    with pytest.raises(BrokerTimeout):
        pub.publish_confirm(timeout=0.5)
    assert time.monotonic() - t0 < 1.5
    pub.close()   # after a timeout the publisher reconnects

    ctl.control(outage="off")
    pub = connect(sock, "publisher-again", timeout=1.0)
    assert pub.publish(message_id="m-ok")["status"] == "stored"
    log = ctl.dump_log()
    assert [(e["message_id"], e["status"]) for e in entries(log, "publish")] == \
        [("m-refused", "refused"), ("m-hung", "unanswered"), ("m-ok", "stored")]
    assert ctl.stats()["stored"] == 1


def test_a_publish_arriving_after_its_lease_is_refused_and_not_stored(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    pub = connect(sock, "relay-1", timeout=1.0)
    now_us = time.time_ns() // 1000
    token = "7d9e3f4a-0b1c-4d2e-8f3a-5b6c7d8e9f00"
    late = pub.publish(message_id="m-late", claim_token=token, not_after_us=now_us - 1)
    assert late["status"] == "refused", late
    assert late["error"] == "lease ended before the publish arrived"
    in_time = pub.publish(message_id="m-in-time", claim_token=token,
                          not_after_us=now_us + 60_000_000)
    assert in_time["status"] == "stored", in_time
    log = pub.dump_log()
    assert [(e["message_id"], e["status"], e.get("claim_token"), e.get("not_after_us"))
            for e in entries(log, "publish")] == \
        [("m-late", "refused", token, now_us - 1),
         ("m-in-time", "stored", token, now_us + 60_000_000)]
    assert pub.stats()["stored"] == 1
    # A deadline that is not a count of microseconds is refused, naming the
    # field; nothing is stored.
    for bad in (-5, "soon", 1.5, 2**60):
        conf = pub.publish(message_id="m-bad", not_after_us=bad)
        assert conf["status"] == "refused" and "not_after_us" in conf["error"], (bad, conf)
    assert pub.stats()["stored"] == 1


def test_drop_before_confirm_and_poison(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    ctl = connect(sock, "control")
    ctl.control(drop_before_confirm=1)
    pub = connect(sock, "publisher")
    with pytest.raises(BrokerError):
        pub.publish(message_id="m-dropped", payload="{}")
    assert ctl.control()["drop_before_confirm"] == 0
    e = entries(ctl.dump_log(), "publish", message_id="m-dropped")
    assert e and e[0]["status"] == "stored" and e[0]["confirm"] == "dropped"
    pub = connect(sock, "publisher-2")
    assert pub.publish(message_id="m-dropped", payload="{}")["status"] == "stored"
    # republishing stores a second copy: the broker never deduplicates
    assert ctl.stats()["stored"] == 2

    ctl.control(max_payload_bytes=64)
    payload = json.dumps({"EventId": "p", "card": "4111111111111111", "pad": "x" * 100})
    conf = pub.publish(message_id="m-poison", payload=payload)
    assert conf["status"] == "refused"
    assert conf["error"].startswith(f"payload too large ({len(payload)} > 64 bytes): ")
    assert conf["error"].endswith(payload[:48])
    assert pub.publish(message_id="m-small", payload="{}")["status"] == "stored"


def test_delay_and_reorder(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    ctl = connect(sock, "control")
    ctl.control(reorder=True)
    for v in (1, 2, 3):
        ctl.publish(message_id=f"v{v}", partition_key="agg", headers={"aggregate_version": v})
    c = connect(sock, "consumer")
    c.subscribe(group="g", prefetch=3)
    seen = []
    expect = 1
    while len(seen) < 5:
        d = c.next_delivery(timeout=5)
        assert d is not None, seen
        seen.append(d["message_id"])
        if d["headers"]["aggregate_version"] == expect:
            c.ack(d["tag"])
            expect += 1
        else:
            c.nack(d["tag"], requeue=True)   # a gap: let it come back
    # newest never-delivered first, then publish order once all were seen
    assert seen == ["v3", "v2", "v1", "v2", "v3"]

    ctl.control(reorder=False, delay_ms=300)
    ctl.publish(message_id="late")
    d = c.next_delivery(timeout=5)
    assert d["message_id"] == "late"
    log = ctl.dump_log()
    pub_ts = entries(log, "publish", message_id="late")[0]["ts_us"]
    del_ts = entries(log, "deliver", message_id="late")[0]["ts_us"]
    assert del_ts - pub_ts >= 290_000


# -- ordering ----------------------------------------------------------------

def test_ordering_per_key_with_four_consumers(procs, tmp_path):
    _, sock = start_broker(procs, tmp_path)
    pub = connect(sock, "publisher")
    consumers = [start_consumer(procs, sock, "accounting", tmp_path / f"c{i}.jsonl", "work")
                 for i in range(4)]
    wait_for(lambda: group_stats(pub, "accounting").get("consumers") == 4, 10,
             "four consumers subscribed")
    keys = [f"agg-{k}" for k in range(12)]
    n = 0
    for version in range(1, 9):
        random.shuffle(keys)
        for key in keys:
            pub.publish_send(message_id=f"{key}-v{version}", partition_key=key,
                             headers={"aggregate_version": version})
            n += 1
    for _ in range(n):
        assert pub.publish_confirm()["status"] == "stored"
    wait_for(lambda: group_stats(pub, "accounting").get("acked") == n, 30,
             f"{n} messages acked")
    (tmp_path / "STOP").write_text("")

    log = pub.dump_log()
    in_flight = {}
    last_offset = {}
    consumers_used = set()
    for e in log:
        if e["event"] == "deliver":
            key = e["partition_key"]
            assert key not in in_flight, f"two messages of {key} in flight at once"
            assert e["offset"] > last_offset.get(key, 0), f"{key} delivered out of order"
            in_flight[key] = e["tag"]
            last_offset[key] = e["offset"]
            consumers_used.add(e["consumer"])
        elif e["event"] in ("ack", "nack", "redeliver"):
            key = e["message_id"].rsplit("-v", 1)[0]
            in_flight.pop(key, None)
    assert len(consumers_used) == 4, "the work was shared by the four consumers"
    # what the consumer processes saw, per key, is in version order
    seen = {}
    for i in range(4):
        for rec in lines(tmp_path / f"c{i}.jsonl"):
            seen.setdefault(rec["partition_key"], []).append((rec["ts"], rec["version"]))
    for key, recs in seen.items():
        assert [v for _, v in sorted(recs)] == list(range(1, 9)), key
    for p in consumers:
        p.wait_exit(10)


# -- process behaviour ---------------------------------------------------------

def test_sigterm_exit_and_stale_socket(procs, tmp_path):
    broker, sock = start_broker(procs, tmp_path)
    broker.kill()
    assert os.path.exists(sock)   # SIGKILL leaves the socket behind
    broker2, _ = start_broker(procs, tmp_path, name="fakebroker2", sock=sock)
    c = connect(sock, "after-stale")
    assert c.publish(message_id="m")["status"] == "stored"
    # a second broker on a live socket refuses to start
    third = procs.start("fakebroker3", [binary("fakebroker"), "--socket", sock])
    assert third.wait_exit(10) == 1
    assert "another broker" in third.stderr_text()
    assert broker2.stop() == 0
    assert not os.path.exists(sock)
    ev = broker2.events()
    assert ev[0]["event"] == "start" and ev[-1]["event"] == "shutdown"
    assert ev[-1]["stored"] == 1


def test_bad_command_line(procs, tmp_path):
    for args in ([], ["--socket"], ["--socket", "s", "--visibility-timeout-ms", "0"],
                 ["--socket", "s", "--bogus", "1"]):
        p = procs.start("badargs", [binary("fakebroker"), *args], events=False)
        assert p.wait_exit(10) == 2, args


# -- the helper consumer process -------------------------------------------------

def helper_consume(sock, group, out, mode):
    c = connect(sock, f"helper-{os.getpid()}")
    c.subscribe(group=group, prefetch=1 if mode == "hold" else 5)
    stop = os.path.join(os.path.dirname(out), "STOP")
    deadline = time.monotonic() + 60
    with open(out, "a", encoding="utf-8") as f:
        while time.monotonic() < deadline and not os.path.exists(stop):
            d = c.next_delivery(timeout=0.2)
            if d is None:
                continue
            f.write(json.dumps({"ts": time.monotonic(), "message_id": d["message_id"],
                                "partition_key": d.get("partition_key"),
                                "version": d["headers"].get("aggregate_version"),
                                "delivery_count": d["delivery_count"],
                                "redelivered": d["redelivered"]}) + "\n")
            f.flush()
            if mode == "hold":
                while time.monotonic() < deadline:
                    time.sleep(0.1)   # never acks: waits to be killed
                return
            time.sleep(random.uniform(0, 0.004))
            c.ack(d["tag"])


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "consume":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        helper_consume(*sys.argv[2:])
    else:
        sys.exit("usage: test_broker.py consume SOCKET GROUP OUTFILE hold|work")
