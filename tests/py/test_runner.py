"""`crashwindow run` itself: usage, validation, dry runs, and a harness that
can fail -- broken data makes the named invariant fail with its offending
rows, a wait that cannot be met fails naming what it waited for, and the
exit status follows the verdict.  Also --keep, --repeat, result.json's
shape, and fault control at runtime through libfiu's FIFOs.

Scenarios here are written into tmp_path: they test the runner, they are not
part of the suite in scenarios/.
"""
# needs: pg
import json
import os
import re
import signal
import urllib.request

import pytest

from cwtest import (PIPELINE, RELAY, SOURCE_DIR, by_name, crashwindow, inv, load_result,
                    read_events, scenario, wait_for)


def test_usage_errors_exit_2(tmp_path):
    assert crashwindow().returncode == 2
    assert crashwindow("frobnicate").returncode == 2
    r = crashwindow("run")
    assert r.returncode == 2 and "give scenario files or --all" in r.stderr
    assert crashwindow("run", "--all", "--repeat", "0").returncode == 2
    assert crashwindow("run", "--all", "--bogus").returncode == 2
    assert crashwindow("run", "--all", "x.json").returncode == 2
    assert crashwindow("run", "--help").returncode == 0


@pytest.mark.parametrize("steps,extra,message", [
    ([{"do": "kill", "proc": "relay-9"}], {}, "steps[0].proc: unknown process 'relay-9'"),
    ([{"do": "wait", "until": "exited", "proc": "api"}], {}, "steps[0].timeout_ms: missing"),
    ([{"do": "sleep"}], {}, "steps[0].ms: missing"),
    ([{"do": "wait", "until": "quiet", "count": 3, "timeout_ms": 100}], {},
     "steps[0].count: ignored by until 'quiet'"),
    ([], {"processes": {"api": {"kind": "api"},
                        "relay-1": {"kind": "relay", "autostart": False,
                                    "faults": "relay/after_publish=crash@1"}}},
     "processes.relay-1: faults: ignored on a process with \"autostart\": false"),
    ([], {"expect": [{"check": "effects", "proc": "api", "min": 1}]},
     "expect[0].proc: ignored by check 'effects'"),
    ([{"do": "start", "proc": "api", "faults": "api/no_such_window=crash"}], {},
     "steps[0].faults: unknown fault point 'api/no_such_window'"),
    ([], {"invariants": ["everything_fine"]}, "invariants[0]: unknown invariant 'everything_fine'"),
    ([], {"expect": [{"check": "effects"}]}, "expect[0]: give min, max or equals"),
    ([{"do": "wait", "until": "quiet", "timeout_ms": 100, "on_timeout": "ignore"}], {},
     "steps[0].on_timeout: must be \"fail\" or \"continue\", not 'ignore'"),
])
def test_bad_scenario_names_file_and_field(tmp_path, steps, extra, message):
    path = scenario(tmp_path, "bad", steps, **extra)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: {message}" in r.stderr
    assert not out.exists(), "a bad scenario file must stop the run before anything starts"


def test_not_json_is_reported(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",\n "title": ')
    r = crashwindow("run", str(path))
    assert r.returncode == 2 and f"{path}: not valid JSON (near line 2)" in r.stderr


def test_dry_run_prints_every_scenario_and_does_nothing(tmp_path):
    out = tmp_path / "out"
    r = crashwindow("run", "--all", "--dry-run", "--out", str(out))
    assert r.returncode == 0, r.stderr
    names = sorted(n[:-5] for n in os.listdir(os.path.join(SOURCE_DIR, "scenarios"))
                   if n.endswith(".json"))
    assert len(names) >= 15
    for n in names:
        assert f"scenario {n}:" in r.stdout
    assert "crash window: relay/after_publish" in r.stdout
    assert "wait until relay-1 exited (10000 ms)" in r.stdout
    assert not out.exists()


def test_broken_data_fails_the_named_invariants(tmp_path, pg_cluster):
    """The checker must be able to fail: a second ledger entry for one event,
    an effect for an event that does not exist, a consumed event whose effect
    and marker vanish, and a wait that cannot be met."""
    ledger_copy = (
        "INSERT INTO ledger_entries (consumer_name, message_id, payment_id, event_type,"
        " aggregate_version, amount, currency)"
        " SELECT consumer_name, message_id, payment_id, event_type, aggregate_version, amount,"
        " currency FROM ledger_entries ORDER BY id LIMIT 1")
    ghost = (
        "INSERT INTO ledger_entries (consumer_name, message_id, payment_id, event_type,"
        " aggregate_version, amount, currency) VALUES ('accounting',"
        " '00000000-0000-4000-8000-00000000beef', '00000000-0000-4000-8000-00000000cafe',"
        " 'PaymentCreated', 1, 1.00, 'EUR')")
    double = scenario(tmp_path, "double-effect", [
        {"do": "payments", "count": 2, "key_prefix": "t-dbl"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
        {"do": "sql", "sql": ledger_copy, "expect_rows": 1},
        {"do": "sql", "sql": ghost},
    ], invariants=["effect_once", "nothing_lost"])
    forget = (
        "WITH gone AS (DELETE FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries)"
        " RETURNING message_id)"
        " DELETE FROM inbox_messages WHERE message_id IN (SELECT message_id FROM gone)")
    lost = scenario(tmp_path, "lost-event", [
        {"do": "payments", "count": 2, "key_prefix": "t-lost"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
        {"do": "sql", "sql": forget},
    ], invariants=["nothing_lost"], heal={"timeout_ms": 1000})
    stuck = scenario(tmp_path, "stuck-wait", [
        {"do": "payments", "count": 1, "key_prefix": "t-stuck"},
        {"do": "wait", "until": "consumed", "count": 5, "timeout_ms": 500},
        {"do": "payments", "count": 1, "key_prefix": "t-never"},
    ])
    out = tmp_path / "out"
    r = crashwindow("run", double, lost, stuck, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    res = load_result(out)
    assert res["verdict"] == "fail" and res["totals"]["passed"] == 0
    scs = by_name(res)

    d = scs["double-effect"]
    assert d["verdict"] == "fail" and d["error"] is None
    eo = inv(d, "effect_once")
    assert eo["verdict"] == "fail" and eo["violations"] >= 2
    assert any("was applied 2 times by accounting: ledger row" in w for w in eo["witnesses"])
    assert any("00000000-0000-4000-8000-00000000beef" in w and "not in the outbox" in w
               for w in eo["witnesses"])
    assert d["classification"]["duplicated"] == 1 and d["classification"]["unexpected"] == 1
    assert inv(d, "nothing_lost")["verdict"] == "pass"
    assert "invariant effect_once failed" in r.stdout

    lo = scs["lost-event"]
    assert lo["verdict"] == "fail"
    assert "heal: the pipeline did not converge within 1000 ms" in lo["error"]
    assert "1 published events not yet consumed by accounting" in lo["error"]
    nl = inv(lo, "nothing_lost")
    assert nl["verdict"] == "fail" and nl["violations"] == 1
    assert "was published but never applied by accounting" in nl["witnesses"][0]
    assert lo["classification"]["lost"] == 1

    st = scs["stuck-wait"]
    assert st["verdict"] == "fail"
    assert st["error"].startswith("steps[1]: wait until 5 events consumed by accounting (500 ms): "
                                  "timed out after")
    # The count last seen: the one payment's event, unless the machine is
    # so busy that the relay and consumer have not moved it within the wait.
    assert re.search(r"\(last: [01] consumed\)", st["error"]), st["error"]
    # The steps after the failed wait never ran; heal and the checker did.
    assert st["counts"]["payments"] == 1
    assert all(i["verdict"] == "pass" for i in st["invariants"])


def witnesses(sc, name):
    return inv(sc, name)["witnesses"]


def test_keys_are_per_client_and_a_second_payment_is_caught(tmp_path, pg_cluster):
    """one_payment_per_key judges (client, key) pairs and can fail: a key
    whose record vanished gets a second payment (the client sees two, the
    first payment is named by no record); a record pointed at another
    client's payment is caught; and two clients using the same key, each
    with its own payment, is correct and passes."""
    body = {"amount": "12.00", "currency": "EUR"}
    twice = scenario(tmp_path, "two-payments-one-key", [
        {"do": "http", "name": "first", "key": "k-dup", "body": body, "expect_status": 201},
        {"do": "sql", "expect_rows": 1,
         "why": "the key's record is lost, as if it had committed apart from its payment",
         "sql": "DELETE FROM idempotency_records WHERE idempotency_key = 'k-dup'"},
        {"do": "http", "name": "second", "key": "k-dup", "body": body, "expect_status": 201},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
    ], invariants=["one_payment_per_key"])
    shared = [
        {"do": "http", "name": "a", "key": "k-shared", "headers": {"X-Client-Id": "shop-a"},
         "body": {"amount": "10.00", "currency": "EUR"}, "expect_status": 201},
        {"do": "http", "name": "b", "key": "k-shared",
         "body": {"amount": "20.00", "currency": "EUR"}, "expect_status": 201},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
    ]
    good = scenario(tmp_path, "keys-per-client", shared, invariants=["one_payment_per_key"])
    swap = ("UPDATE idempotency_records SET payment_id = (SELECT payment_id FROM"
            " idempotency_records WHERE client_id = 'crashwindow' AND idempotency_key = 'k-shared')"
            " WHERE client_id = 'shop-a' AND idempotency_key = 'k-shared'")
    bad = scenario(tmp_path, "record-names-other-payment",
                   shared + [{"do": "sql", "sql": swap, "expect_rows": 1}],
                   invariants=["one_payment_per_key"])
    out = tmp_path / "out"
    r = crashwindow("run", twice, good, bad, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    scs = by_name(load_result(out))

    t = scs["two-payments-one-key"]
    assert t["verdict"] == "fail" and t["error"] is None and t["counts"]["payments"] == 2
    w = witnesses(t, "one_payment_per_key")
    assert any("key k-dup of client crashwindow created 2 payments" in x for x in w), w
    assert any("is named by no idempotency record" in x for x in w), w
    assert any("its idempotency record does not name payment" in x for x in w), w

    g = scs["keys-per-client"]
    assert g["verdict"] == "pass", failures_text(g)
    assert inv(g, "one_payment_per_key")["checked"] >= 4  # two (client, key) pairs, two payments

    b = scs["record-names-other-payment"]
    w = witnesses(b, "one_payment_per_key")
    assert b["verdict"] == "fail" and inv(b, "one_payment_per_key")["verdict"] == "fail"
    assert any("key k-shared of client shop-a: its idempotency record does not name" in x
               for x in w), w
    assert not any("of client crashwindow" in x for x in w), w


def test_consumer_side_breakage_is_caught(tmp_path, pg_cluster):
    """effect_once flags an inbox marker without its effect even when a
    duplicate was recorded for it (what a redelivery records after the marker
    committed on its own); heal waits on the checker's own definition of
    "consumed", so it does not take that marker for a consumed event; a
    parked event fails nothing_lost unless the scenario expects parking."""
    consumed = [
        {"do": "payments", "count": 2, "key_prefix": "t-cons"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
    ]
    marker_only = (
        "WITH gone AS (DELETE FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries)"
        " RETURNING consumer_name, message_id, payment_id, aggregate_version)"
        " INSERT INTO consumer_anomalies (consumer_name, message_id, aggregate_id, kind,"
        " got_version) SELECT consumer_name, message_id, payment_id, 'duplicate',"
        " aggregate_version FROM gone")
    dup = scenario(tmp_path, "marker-without-effect", consumed + [
        {"do": "sql", "sql": marker_only, "expect_rows": 1},
    ], invariants=["effect_once", "nothing_lost"], heal={"timeout_ms": 1000})
    park = (
        "WITH gone AS (DELETE FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries)"
        " RETURNING consumer_name, message_id, payment_id, aggregate_version),"
        " m AS (DELETE FROM inbox_messages i USING gone g WHERE i.consumer_name = g.consumer_name"
        " AND i.message_id = g.message_id RETURNING i.message_id),"
        " d AS (INSERT INTO consumer_dead_letters (consumer_name, message_id, reason, deliveries)"
        " SELECT consumer_name, message_id::text, 'version gap never closed', 1 FROM gone)"
        " INSERT INTO consumer_anomalies (consumer_name, message_id, aggregate_id, kind,"
        " expected_version, got_version, detail) SELECT consumer_name, message_id, payment_id,"
        " 'gap_parked', aggregate_version, aggregate_version, 'version gap never closed'"
        " FROM gone")
    park_steps = consumed + [{"do": "sql", "sql": park, "expect_rows": 1}]
    unexpected = scenario(tmp_path, "parked-unexpected", park_steps, invariants=["nothing_lost"])
    expected = scenario(tmp_path, "parked-expected", park_steps, invariants=["nothing_lost"],
                        expect=[{"check": "parked", "equals": 1}])
    # Naming an event as planted poison is the one way a parked event is
    # accepted; a name no step plants is refused at load
    # (test_db_faults.py), so it can excuse nothing.
    out = tmp_path / "out"
    r = crashwindow("run", dup, unexpected, expected, "--pg", pg_cluster,
                    "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    scs = by_name(load_result(out))

    d = scs["marker-without-effect"]
    eo = inv(d, "effect_once")
    assert eo["verdict"] == "fail", eo
    assert any("holds an inbox marker for event" in w and "without its effect" in w
               for w in eo["witnesses"]), eo["witnesses"]
    assert "1 published events not yet consumed by accounting" in (d["error"] or ""), d["error"]
    assert inv(d, "nothing_lost")["verdict"] == "fail"

    u = scs["parked-unexpected"]
    nl = inv(u, "nothing_lost")
    assert u["verdict"] == "fail" and u["error"] is None and nl["verdict"] == "fail"
    assert any("was parked by accounting instead of applied (gap_parked: version gap never"
               " closed), and nothing resolves it: parked-and-unresolved" in w
               for w in nl["witnesses"]), nl["witnesses"]
    assert u["classification"]["parked_unresolved"] == 1 and u["classification"]["lost"] == 0

    # An expectation of parking switches nothing off: the same failure.
    for name in ("parked-expected",):
        e = scs[name]
        assert e["verdict"] == "fail" and inv(e, "nothing_lost")["verdict"] == "fail", name
        assert e["classification"]["parked_unresolved"] == 1 and e["classification"]["ok"] == 1


POISON_SQL = (
    "WITH p AS (INSERT INTO payments (id, client_id, amount, currency, status, version)"
    " VALUES ('{pay}', 'runner', 9.99, 'EUR', 'created', 1) RETURNING id),"
    " i AS (INSERT INTO idempotency_records (client_id, idempotency_key, request_hash,"
    " payment_id, status_code, response_body) SELECT 'runner', 'k-{pay}', repeat('0', 64), id,"
    " 201, '{{}}' FROM p)"
    " INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
    " event_type, schema_version, payload, occurred_at{cols})"
    " SELECT '{evt}', 'payment', id, 1, 'PaymentCreated', 1,"
    " jsonb_build_object('EventId', '{evt}', 'Memo', repeat('x', 6000)), now(){vals} FROM p")


def test_relay_side_breakage_is_caught(tmp_path, pg_cluster):
    """dead_letter_at_limit accepts a dead letter past the limit when the claim
    at the limit crashed, and still fails one before the limit.  (That
    no_two_live_leases fails on a doubly held lease is what the mutant
    claim_ignores_lease proves, against 03-two-relays.)"""
    limited = {"kind": "relay", "faults": "relay/after_claim=crash@3",
               "args": {"lease-ms": 2000, "idle-ms": 50, "batch": 10, "max-attempts": 3,
                        "backoff-base-ms": 20, "backoff-cap-ms": 50}}
    past = scenario(tmp_path, "dead-letter-past-limit", [
        {"do": "sql", "expect_rows": 1,
         "sql": POISON_SQL.format(pay="00000000-0000-4000-8000-0000000007a1",
                                  evt="00000000-0000-4000-8000-0000000007e1", cols="", vals="")},
        {"do": "wait", "until": "exited", "proc": "relay-1", "timeout_ms": 10000,
         "why": "the claim at the limit (attempt 3) crashes and never settles"},
        {"do": "restart", "proc": "relay-1"},
        {"do": "wait", "until": "dead_lettered", "count": 1, "timeout_ms": 10000},
    ], invariants=["dead_letter_at_limit"], processes={"relay-1": limited},
        broker={"max_payload_bytes": 4096},
        expect=[{"check": "max_attempts", "equals": 4},
                {"check": "faults_fired", "point": "relay/after_claim", "equals": 1}])
    early = scenario(tmp_path, "dead-letter-before-limit", [
        {"do": "sql", "expect_rows": 1,
         "sql": POISON_SQL.format(pay="00000000-0000-4000-8000-0000000007a2",
                                  evt="00000000-0000-4000-8000-0000000007e2",
                                  cols=", attempts, dead_lettered_at, last_error",
                                  vals=", 1, now(), 'refused'")},
    ], invariants=["dead_letter_at_limit"],
        processes={"relay-1": {"kind": "relay", "args": {"max-attempts": 3, "idle-ms": 50}}})
    out = tmp_path / "out"
    r = crashwindow("run", past, early, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    scs = by_name(load_result(out))

    p = scs["dead-letter-past-limit"]
    assert p["verdict"] == "pass", failures_text(p)
    assert inv(p, "dead_letter_at_limit")["checked"] >= 2  # the row, the claim past the limit

    e = scs["dead-letter-before-limit"]
    dl = inv(e, "dead_letter_at_limit")
    assert dl["verdict"] == "fail"
    assert any("dead-lettered after 1 attempts, before the limit (3)" in w
               for w in dl["witnesses"]), dl["witnesses"]


def failures_text(sc):
    out = [f"error: {sc['error']}"] if sc["error"] else []
    out += [f"{i['name']}: {i['witnesses'][:3]}" for i in sc["invariants"] if i["verdict"] != "pass"]
    out += [f"expect {x['check']}: {x['detail']}" for x in sc["expect"] if x["verdict"] != "pass"]
    return "; ".join(out)


def test_restart_is_fresh_and_runtime_faults_park(tmp_path, pg_cluster):
    """A one-time crash from CW_FAULTS does not come back after a restart; a
    fault enabled at runtime through fiu-ctrl parks the relay at its window
    (state T), and can be turned off once it is resumed."""
    path = scenario(tmp_path, "runtime-faults", [
        {"do": "start", "proc": "relay-1", "faults": "relay/after_claim=crash@1"},
        {"do": "payments", "count": 1, "key_prefix": "t-rt"},
        {"do": "wait", "until": "exited", "proc": "relay-1", "timeout_ms": 10000},
        {"do": "restart", "proc": "relay-1"},
        {"do": "fault", "proc": "relay-1", "point": "relay/after_publish", "action": "park"},
        {"do": "wait", "until": "parked", "proc": "relay-1", "point": "relay/after_publish",
         "timeout_ms": 10000},
        {"do": "resume", "proc": "relay-1"},
        {"do": "fault", "proc": "relay-1", "point": "relay/after_publish", "disable": True},
        {"do": "payments", "count": 2, "key_prefix": "t-rt2"},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 10000},
    ], invariants=["nothing_lost", "effect_once"],
        processes={**PIPELINE, "relay-1": {**RELAY, "autostart": False}},
        expect=[{"check": "faults_fired", "point": "relay/after_claim", "equals": 1},
                {"check": "faults_fired", "point": "relay/after_publish", "min": 1},
                {"check": "effects", "equals": 3}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    res = load_result(out)
    sc = res["scenarios"][0]
    assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout + r.stderr
    assert sc["kills"] == 1 and sc["pauses"] == 1 and sc["restarts"] == 1
    points = [f["point"] for f in sc["faults_fired"]]
    assert points.count("relay/after_claim") == 1
    assert sc["faults_not_hit"] == []
    runner = read_events(str(out / sc["dir"] / "runner.events.jsonl"))
    kinds = [e["event"] for e in runner]
    for k in ("start", "restart", "fault", "exit", "resume", "heal_start", "heal_done"):
        assert k in kinds, f"runner event {k} missing"
    fault = next(e for e in runner if e["event"] == "fault")
    assert fault["command"] == "enable name=relay/after_publish,failinfo=2"


def test_unhit_fault_fails_the_scenario(tmp_path, pg_cluster):
    """A fault armed and never fired means the run never reached its window:
    the scenario fails, naming the fault, unless it says its faults are
    optional (generated schedules), when it is only noted."""
    steps = [
        {"do": "payments", "count": 1, "key_prefix": "t-nh"},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000},
    ]
    procs = {**PIPELINE, "relay-1": {**RELAY, "faults": "relay/before_mark=crash@50"}}
    strict = scenario(tmp_path, "never-hit", steps, processes=procs)
    optional = scenario(tmp_path, "never-hit-optional", steps, processes=procs,
                        faults_optional=True)
    out = tmp_path / "out"
    r = crashwindow("run", strict, optional, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    scs = by_name(load_result(out))
    for name in ("never-hit", "never-hit-optional"):
        assert scs[name]["faults_not_hit"] == [{"point": "relay/before_mark", "proc": "relay-1",
                                                "action": "crash@50"}]
        assert all(i["verdict"] == "pass" for i in scs[name]["invariants"])
    st = scs["never-hit"]
    assert st["verdict"] == "fail"
    assert st["error"].startswith("armed fault never hit: relay/before_mark=crash@50 in relay-1: "
                                  "the run never reached the window"), st["error"]
    assert scs["never-hit-optional"]["verdict"] == "pass"
    assert scs["never-hit-optional"]["error"] is None
    assert "note: fault relay/before_mark armed in relay-1 was never hit" in r.stdout


def test_an_anchor_wait_goes_on_where_a_plain_wait_fails(tmp_path, pg_cluster):
    """A wait with "on_timeout": "continue" is an anchor: the park it waits
    for never comes (no fault is armed), and the scenario goes on and passes,
    the runner logging wait_timeout; the same wait without it fails."""
    def steps(anchor):
        wait = {"do": "wait", "until": "parked", "proc": "relay-1",
                "point": "relay/after_publish", "timeout_ms": 300}
        if anchor:
            wait["on_timeout"] = "continue"
        return [{"do": "payments", "count": 1, "key_prefix": "t-an"}, wait,
                {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000}]
    anchor = scenario(tmp_path, "anchor", steps(True))
    plain = scenario(tmp_path, "plain", steps(False))
    out = tmp_path / "out"
    r = crashwindow("run", anchor, plain, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    scs = by_name(load_result(out))
    assert scs["anchor"]["verdict"] == "pass" and scs["anchor"]["error"] is None
    runner = read_events(str(out / scs["anchor"]["dir"] / "runner.events.jsonl"))
    waited = [e for e in runner if e["event"] == "wait_timeout"]
    assert len(waited) == 1 and waited[0]["until"] == "parked"
    assert waited[0]["waited_ms"] >= 300
    assert scs["plain"]["verdict"] == "fail"
    assert "timed out after" in scs["plain"]["error"], scs["plain"]["error"]


def test_keep_leaves_it_running_and_cleans_dead_fifos(tmp_path, pg_cluster):
    path = scenario(tmp_path, "keep-me", [
        {"do": "payments", "count": 2, "key_prefix": "t-keep"},
        {"do": "wait", "until": "exited", "proc": "relay-1", "timeout_ms": 10000},
        {"do": "restart", "proc": "relay-1"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
    ], processes={**PIPELINE, "relay-1": {**RELAY, "faults": "relay/after_publish=crash@1"}})
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out), "--keep")
    sc = load_result(out)["scenarios"][0]
    runner = read_events(str(out / sc["dir"] / "runner.events.jsonl"))
    started = [e["target_pid"] for e in runner if e["event"] in ("start", "restart")]
    exited = {e["target_pid"] for e in runner if e["event"] == "exit"}
    alive = [p for p in started if p not in exited]
    alive += [e["netproxy_pid"] for e in runner if e["event"] == "netproxy_start"]
    try:
        assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout + r.stderr
        assert "psql \"" in r.stdout and "fiu-ctrl -f " in r.stdout and "curl -s -X POST" in r.stdout
        # broker, the fault proxy, api, relay-1 (2nd), accounting
        assert len(exited) == 1 and len(alive) == 5
        for pid in alive:
            os.kill(pid, 0)
        # The connection string reaches the children through their
        # environment, never their command line (world-readable in ps).
        with_db = 0
        for pid in alive:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            assert "--db" not in argv and not any("dbname" in a for a in argv), argv
            with open(f"/proc/{pid}/environ", "rb") as f:
                with_db += any(v.startswith(b"CW_DB=") for v in f.read().split(b"\0"))
        assert with_db == 3  # api, relay-1, accounting; not the broker
        prefix = r.stdout.split("fiu-ctrl -f ", 1)[1].split()[0]
        fifo_dir = os.path.dirname(prefix)
        crashed = next(iter(exited))
        assert not os.path.exists(f"{prefix}-{crashed}.in"), "a SIGKILLed process's FIFO was left"
        live_relay = [e["target_pid"] for e in runner if e["event"] == "restart"][0]
        assert os.path.exists(f"{prefix}-{live_relay}.in")
        port = int(r.stdout.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
        req = urllib.request.Request(f"http://127.0.0.1:{port}/payments", method="POST",
                                     data=b'{"amount":"1.00","currency":"EUR"}',
                                     headers={"Idempotency-Key": "poke-1", "X-Client-Id": "poke",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 201
    finally:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in alive:
        wait_for(lambda p=pid: not os.path.exists(f"/proc/{p}"), 10, f"kept process {pid} to go")
    for name in os.listdir(fifo_dir):
        os.unlink(os.path.join(fifo_dir, name))
    os.rmdir(fifo_dir)


def test_a_second_run_into_the_same_out_starts_from_empty_scenario_dirs(tmp_path, pg_cluster):
    """The event logs are appended to: files an earlier run left in --out
    must not be read as this run's (they once failed a passing scenario
    with another run's publishes)."""
    path = os.path.join(SOURCE_DIR, "scenarios", "01-command-rollback.json")
    out = tmp_path / "out"
    for _ in range(2):
        r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
    sdir = out / "01-command-rollback"
    starts = [json.loads(line) for line in open(sdir / "runner.events.jsonl")
              if '"scenario_start"' in line]
    assert len(starts) == 1, "the second run's logs hold the first run's events too"


def test_repeat_and_result_shape(tmp_path, pg_cluster):
    path = os.path.join(SOURCE_DIR, "scenarios", "02-crash-after-commit.json")
    out = tmp_path / "out"
    r = crashwindow("run", path, "--repeat", "2", "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    res = load_result(out)
    for key in ("tool", "kind", "version", "started_at", "duration_ms", "commit", "machine",
                "bin", "mutant", "verdict", "totals", "scenarios"):
        assert key in res, key
    assert res["tool"] == "crashwindow" and res["kind"] == "run" and res["version"] == 1
    assert res["mutant"] is None and res["verdict"] == "pass"
    assert set(res["machine"]) == {"hostname", "cpus", "postgres"}
    assert res["machine"]["postgres"].startswith("15.")
    t = res["totals"]
    assert t["scenarios"] == 2 and t["passed"] == 2 and t["invariants_checked"] == 2 * 15
    assert t["kills"] == 2 and t["restarts"] == 2 and t["faults_fired"] == 2
    assert [s["repeat"] for s in res["scenarios"]] == [1, 2]
    assert [s["dir"] for s in res["scenarios"]] == ["02-crash-after-commit.r1",
                                                     "02-crash-after-commit.r2"]
    sc = res["scenarios"][0]
    for key in ("name", "title", "crash_window", "article_case", "verdict", "duration_ms", "dir",
                "faults_fired", "faults_not_hit", "kills", "pauses", "restarts", "counts",
                "classification", "invariants", "expect", "error"):
        assert key in sc, key
    assert set(sc["classification"]) == {"ok", "lost", "duplicated", "unexpected", "recovered",
                                         "dead_lettered", "parked_unresolved"}
    for key in ("payments", "outbox_rows", "published", "dead_lettered", "publishes",
                "deliveries", "redeliveries", "duplicates_absorbed", "effects"):
        assert isinstance(sc["counts"][key], int)
    assert sc["faults_fired"][0]["point"] == "api/after_commit"
    assert sc["faults_fired"][0]["proc"] == "api" and sc["faults_fired"][0]["action"] == "crash"
    metrics = read_events(str(out / sc["dir"] / "metrics.jsonl"))
    for key in ("ts_us", "pending", "oldest_pending_age_ms", "attempts_total", "dead_letters",
                "published", "consumed", "duplicates_ignored", "publish_latency_p50_ms",
                "publish_latency_p99_ms", "processing_latency_p50_ms",
                "processing_latency_p99_ms"):
        assert key in metrics[-1], key
    assert metrics[-1]["consumed"] == {"accounting": 3}
    for rep in res["scenarios"]:
        assert_microseconds_are_digits(out / rep["dir"])


US_FIELD = re.compile(r'"([a-z0-9_]*_us)":(-?[0-9.eE+]+)')


def assert_microseconds_are_digits(scenario_dir):
    """Every *_us field of the merged timeline, the metrics and each process's
    events is written as integer digits: a reader that keeps integers as
    integers must never meet 1.76445000012346e+15.  About one timestamp in
    ten ends in 0 and would print in exponent form as a double."""
    seen = 0
    for name in sorted(os.listdir(scenario_dir)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(scenario_dir, name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for field, value in US_FIELD.findall(line):
                    assert re.fullmatch(r"-?[0-9]+", value), f"{name}:{n}: {field}={value}"
                    seen += 1
    assert seen > 100, seen


def test_idle_transaction_past_its_bound_fails_on_the_runners_samples(tmp_path, pg_cluster):
    """idle_transactions_bounded judges the runner's own samples of
    pg_stat_activity, never a process's word: a stored run whose samples show
    a scenario process's session idle inside one transaction past its bound
    (twice, 600 ms apart) fails on re-check; one late sample alone (a frozen
    server's timer firing late) does not, nor does the runner's own session."""
    path = scenario(tmp_path, "idle-tx", [
        {"do": "payments", "count": 1, "key_prefix": "k-idle"},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000},
    ], processes={"api": {"kind": "api"}, "relay-1": {"kind": "relay"},
                  "accounting": {"kind": "consumer", "db_deadline_ms": 900,
                                 "args": {"name": "accounting"}}})
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sc = load_result(out)["scenarios"][0]
    metrics = out / sc["dir"] / "metrics.jsonl"
    clean = metrics.read_text()
    t0 = json.loads(clean.splitlines()[-1])["ts_us"]

    def sample(ts, sessions):
        return json.dumps({"ts_us": ts, "idle_in_transaction": sessions}) + "\n"

    def recheck(extra):
        metrics.write_text(clean + extra)
        return crashwindow("check", str(out), "--pg", pg_cluster)

    # accounting's bound is 900 ms (+1 s slack): 2.5 s, then 3.1 s, one episode.
    gone = [{"app": "accounting", "pid": 4242, "idle_ms": 2500}]
    later = [{"app": "accounting", "pid": 4242, "idle_ms": 3100}]
    c = recheck(sample(t0 + 1_000_000, gone) + sample(t0 + 1_600_000, later))
    assert c.returncode == 1, c.stdout + c.stderr
    assert "idle_transactions_bounded" in c.stdout, c.stdout

    once = recheck(sample(t0 + 1_000_000, gone))
    assert once.returncode == 0, once.stdout + once.stderr
    runner_own = [{"app": "crashwindow", "pid": 77, "idle_ms": 60000}]
    own = recheck(sample(t0 + 1_000_000, runner_own) + sample(t0 + 2_000_000, runner_own))
    assert own.returncode == 0, own.stdout + own.stderr


def test_a_busy_answer_is_sent_again_as_a_client_would(tmp_path, pg_cluster):
    """A payments step repeats a 503 that carries Retry-After with the same
    key and body, as the article's client does, and each answer is judged;
    with busy_retries 0 the 503 is final.  The API's first transaction fails
    before COMMIT (503, Retry-After: 1, nothing stored)."""
    procs = {**PIPELINE, "api": {"kind": "api", "faults": "api/before_commit=fail@1"}}
    wait = {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 15000}
    retried = scenario(tmp_path, "busy-retried",
                       [{"do": "payments", "count": 2, "key_prefix": "t-busy"}, wait],
                       invariants=("nothing_lost", "one_payment_per_key"), processes=procs)
    final = scenario(tmp_path, "busy-final",
                     [{"do": "payments", "count": 2, "key_prefix": "t-final",
                       "busy_retries": 0},
                      {**wait, "count": 1}],
                     invariants=("nothing_lost", "one_payment_per_key"), processes=procs)
    out = tmp_path / "out"
    r = crashwindow("run", retried, final, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    scs = by_name(load_result(out))

    def answers(name):
        path = out / scs[name]["dir"] / "history" / "http.jsonl"
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        return [(x["key"], x["status"]) for x in recs]

    def stored_keys(name):
        path = out / scs[name]["dir"] / "history" / "idempotency_records.jsonl"
        return sorted(json.loads(x)["idempotency_key"] for x in path.read_text().splitlines())

    assert answers("busy-retried") == [("t-busy-1", 503), ("t-busy-1", 201), ("t-busy-2", 201)]
    assert answers("busy-final") == [("t-final-1", 503), ("t-final-2", 201)]
    # The database, saved at the end of each run: one record per key answered 201.
    assert stored_keys("busy-retried") == ["t-busy-1", "t-busy-2"]
    assert stored_keys("busy-final") == ["t-final-2"]
    for name in ("busy-retried", "busy-final"):
        assert scs[name]["verdict"] == "pass"
        assert inv(scs[name], "one_payment_per_key")["checked"] >= 2


def test_faults_made_from_outside_are_counted_and_listed(tmp_path, pg_cluster):
    """A link broken by the proxy, a database crash, a broker crash, a broker
    switch (publishes refused, at the start and as a step) and a process
    started with a shifted clock are faults: each is in faults_fired (with
    its kind), in the totals and in the report's Faults table, though no
    process was compiled to know it; and each is drawn on the timeline as a
    window on the lane of what it broke."""
    procs = {**PIPELINE, "api": {"kind": "api", "clock": {"offset_s": -30}}}
    path = scenario(tmp_path, "outside", [
        {"do": "payments", "count": 2, "key_prefix": "t-out"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
        {"do": "net", "link": "relay-1->broker", "fault": "reset"},
        {"do": "db", "action": "crash"},
        {"do": "payments", "count": 2, "key_prefix": "t-out2", "retries": 2},
        {"do": "wait", "until": "consumed", "count": 4, "timeout_ms": 20000},
        {"do": "broker", "control": {"outage": "refuse"}},
        {"do": "payments", "count": 1, "key_prefix": "t-out3"},
        {"do": "sleep", "ms": 300},
        {"do": "broker", "control": {"outage": "off", "max_payload_bytes": 0}},
        {"do": "broker_crash", "down_ms": 200},
        {"do": "wait", "until": "consumed", "count": 5, "timeout_ms": 20000}],
        processes=procs, broker={"durable": True, "delay_ms": 20})
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out), "--brief")
    result = load_result(out)
    sc = result["scenarios"][0]
    assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout[-3000:] + r.stderr[-2000:]
    fired = {(f["point"], f["proc"], f["action"], f["kind"]) for f in sc["faults_fired"]}
    assert {("net/relay-1->broker/reset", "relay-1", "reset", "net"),
            ("postgres/crash", "postgres", "crash", "database"),
            ("broker/crash", "broker", "crash", "broker"),
            ("broker/delay_ms", "broker", "20", "broker"),
            ("broker/outage", "broker", "refuse", "broker"),
            ("clock/offset", "api", "-30s", "clock")} <= fired, fired
    # a switch set back to its default (max_payload_bytes 0: no limit) is no
    # fault of its own
    points = [f["point"] for f in sc["faults_fired"]]
    assert points.count("broker/outage") == 1 and "broker/max_payload_bytes" not in points
    assert result["totals"]["faults_fired"] == len(sc["faults_fired"]) >= 6
    rep = crashwindow("report", out, "-o", tmp_path / "report.html", timeout=120)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    page = (tmp_path / "report.html").read_text()
    assert "net/relay-1-&gt;broker/reset" in page and "postgres/crash" in page
    assert "broker/outage" in page and "broker/crash" in page
    wins = {}
    for cls, title in re.findall(r'<rect class="win-(\w+)"[^>]*><title>([^<]*)</title>', page):
        wins.setdefault(cls, []).append(title)
    assert any(t.startswith("broker crash: durable store in broker") for t in wins["broker"]), wins
    refused = [t for t in wins["broker"] if t.startswith("broker fault outage=refuse in broker")]
    assert len(refused) == 1, wins
    # the refusal ends where the step turned it off: some 300 ms, not the run
    ms = float(re.search(r"\(([0-9.]+) ms\)", refused[0]).group(1))
    assert 250 <= ms < 5000, refused
    assert any(t.startswith("broker fault delay_ms=20 in broker") for t in wins["broker"])
    assert any(t.startswith("clock shifted (libfaketime -30s) in api") for t in wins["clock"])
    assert not any("broker" in t for t in wins.get("db", [])), wins
    assert "broker fault (crash" in page and "process clock shifted" in page


def test_processing_latency_is_never_negative(tmp_path, pg_cluster):
    """The relay marks a row published after the broker's confirm, and a fast
    consumer may commit before that mark lands: processed_at - published_at
    is then negative.  The runner's samples (the report's chart) clamp it at
    0 as /metrics does.  The rows' marks are moved after their consumption
    here, and the last sample is read."""
    path = scenario(tmp_path, "latency", [
        {"do": "payments", "count": 3, "key_prefix": "t-lat"},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 10000},
        {"do": "sql", "sql": "UPDATE outbox_messages SET published_at = published_at"
                             " + interval '10 seconds'", "expect_rows": 3}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out), "--brief")
    sc = load_result(out)["scenarios"][0]
    assert sc["error"] is None, r.stdout[-3000:] + r.stderr[-2000:]
    last = read_events(str(out / sc["dir"] / "metrics.jsonl"))[-1]
    assert last["processing_latency_p50_ms"] == 0 and last["processing_latency_p99_ms"] == 0, last


def test_a_request_unanswered_in_time_is_sent_again_with_its_key(tmp_path, pg_cluster):
    """timeout_retries: a request whose answer does not come within
    timeout_ms is sent again with its key, as the article's client does
    after a timeout; each answer is judged.  The API's first transaction
    stalls 1.5 s before COMMIT, three times the client's timeout: the
    retry meets the key in flight (409 with Retry-After), then the stored
    201.  Without timeout_retries the timeout is the last answer."""
    procs = {**PIPELINE, "api": {"kind": "api", "faults": "api/before_commit=stall:1500@1"}}
    wait = {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 15000}
    retried = scenario(tmp_path, "timeout-retried",
                       [{"do": "payments", "count": 2, "key_prefix": "t-to", "timeout_ms": 500,
                         "timeout_retries": 3}, wait],
                       invariants=("nothing_lost", "one_payment_per_key"), processes=procs)
    final = scenario(tmp_path, "timeout-final",
                     [{"do": "payments", "count": 2, "key_prefix": "t-tf", "timeout_ms": 500},
                      wait],
                     invariants=("nothing_lost", "one_payment_per_key"), processes=procs)
    out = tmp_path / "out"
    r = crashwindow("run", retried, final, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    scs = by_name(load_result(out))

    def answers(name, key):
        path = out / scs[name]["dir"] / "history" / "http.jsonl"
        return [x["status"] for x in map(json.loads, path.read_text().splitlines())
                if x["key"] == key]

    first = answers("timeout-retried", "t-to-1")
    assert first[0] == 0 and first[-1] == 201 and 0 < first.count(0) <= 4, first
    assert answers("timeout-retried", "t-to-2") == [201]
    assert answers("timeout-final", "t-tf-1") == [0]
    for name in ("timeout-retried", "timeout-final"):
        assert scs[name]["verdict"] == "pass", scs[name]
