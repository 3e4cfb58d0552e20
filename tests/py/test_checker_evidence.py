"""The checker asks for evidence where a process's account would do.

One small run dead-letters a row the broker refuses (its payload is over the
broker's size limit) and applies the other events; its stored history is
then doctored and judged again with `crashwindow check`:
  - a dead letter needs a cause the harness saw: without the broker's
    refusals of that row in its log (and with no fault on the relays' path
    to the broker, and no poison named), dead_letter_at_limit fails on it,
    naming the event, its attempts and the absence of a cause; the same
    history with the row named as poison passes again;
  - every effect is compared with its event: a ledger row whose amount,
    currency, payment or version differs from the outbox event's fails
    effect_once, naming the event and the field.

Later versions are judged as creations are (the same run, doctored): a
payment a version ahead of its events fails payment_one_creation_event; a
capture the client was answered 200 on that the payment does not show fails
nothing_lost; a capture answered 503 ("nothing was stored") whose key's
record was created by that very request fails one_payment_per_key.

A run of scenario 20 (a failover with asynchronous replication, a hazard)
is doctored too: a consumer that kept its inbox markers but dropped the
effects of half the events is no loss the hazard explains, so nothing_lost
and effect_once fail on the events the database still holds, and the
promise of its description (payments made after the failover are applied)
fails with them.

Scenarios here are written into tmp_path: they test the checker, they are
not part of the suite in scenarios/.
"""
# needs: pg
import json
import os
import shutil

import pytest

from cwtest import by_name, crashwindow, inv, load_result, scenario

# The row the broker refuses: a creation event whose payload is over the
# broker's limit (4096 bytes), under fixed ids.
REFUSED_EVENT = "00000000-0000-4000-8000-0000000de701"
REFUSED_SQL = (
    "WITH p AS (INSERT INTO payments (id, client_id, amount, currency, status, version)"
    " VALUES ('00000000-0000-4000-8000-0000000dea01', 'runner', 7.07, 'EUR', 'created', 1)"
    " RETURNING id),"
    " i AS (INSERT INTO idempotency_records (client_id, idempotency_key, request_hash,"
    " payment_id, status_code, response_body) SELECT 'runner', 'k-refused', repeat('0', 64), id,"
    " 201, '{}' FROM p)"
    " INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
    " event_type, schema_version, payload, occurred_at)"
    f" SELECT '{REFUSED_EVENT}', 'payment', id, 1, 'PaymentCreated', 1,"
    f" jsonb_build_object('EventId', '{REFUSED_EVENT}', 'PaymentId', id, 'Amount', '7.07',"
    " 'Currency', 'EUR', 'AggregateVersion', 1, 'OccurredAtUtc', '2026-01-01T00:00:00Z',"
    " 'Memo', repeat('z', 6000)), now() FROM p")

RELAY = {"kind": "relay",
         "args": {"lease-ms": 2000, "idle-ms": 100, "batch": 10, "max-attempts": 3,
                  "backoff-base-ms": 50, "backoff-cap-ms": 200}}


def rewrite_lines(path, edit):
    """Rewrites a JSON-lines file through edit(list of records) -> records."""
    with open(path, encoding="utf-8") as f:
        recs = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(x) + "\n" for x in edit(recs)))


def check(out, pg):
    return crashwindow("check", str(out), "--pg", pg, timeout=120)


def doctored(tmp_path, out, name):
    """A copy of the run directory out, to doctor."""
    copy = tmp_path / name
    shutil.copytree(out, copy)
    return copy


@pytest.fixture(scope="module")
def refused_run(tmp_path_factory, pg_cluster):
    """The run, once for the module: its directory and its scenario's result."""
    tmp = tmp_path_factory.mktemp("refused")
    refused = scenario(tmp, "refused", [
        {"do": "sql", "sql": REFUSED_SQL, "expect_rows": 1},
        {"do": "payments", "count": 2, "key_prefix": "k-beside"},
        {"do": "wait", "until": "dead_lettered", "count": 1, "timeout_ms": 15000},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
    ], invariants=["dead_letter_at_limit", "effect_once"],
        processes={"api": {"kind": "api"}, "relay-1": RELAY,
                   "accounting": {"kind": "consumer", "args": {"name": "accounting"}}},
        broker={"max_payload_bytes": 4096},
        expect=[{"check": "dead_lettered", "equals": 1}, {"check": "effects", "equals": 2}])
    out = tmp / "out"
    r = crashwindow("run", refused, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sc = by_name(load_result(out))["refused"]
    assert sc["verdict"] == "pass", sc
    assert inv(sc, "dead_letter_at_limit")["checked"] > 0
    assert sc["counts"]["publishes_refused"] >= 3, sc["counts"]
    same = check(out, pg_cluster)
    assert same.returncode == 0 and "1 scenario with the same verdicts, 0 different" in \
        same.stdout, same.stdout + same.stderr
    return out, sc


def test_a_dead_letter_needs_a_cause_the_harness_saw(tmp_path, pg_cluster, refused_run):
    out, sc = refused_run
    # The broker's refusals of the row are its dead letter's cause: without
    # them in the log nothing the harness saw explains it.
    uncaused = doctored(tmp_path, out, "uncaused")
    rewrite_lines(uncaused / sc["dir"] / "broker.events.jsonl", lambda recs: [
        x for x in recs
        if not (x.get("event") == "publish" and x.get("message_id") == REFUSED_EVENT)])
    got = check(uncaused, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "refused: invariant dead_letter_at_limit was pass, is fail" in got.stdout, got.stdout
    assert f"event {REFUSED_EVENT} was dead-lettered after 3 attempts without cause" in \
        got.stdout, got.stdout

    # Planted poison named by the scenario is a cause of its own.
    spec_path = uncaused / sc["dir"] / "scenario.json"
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    spec["poison_events"] = [REFUSED_EVENT]
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    got = check(uncaused, pg_cluster)
    assert got.returncode == 0, got.stdout + got.stderr


def test_an_effect_records_its_events_figures(tmp_path, pg_cluster, refused_run):
    out, sc = refused_run
    # An effect with another amount, currency, payment or version than its
    # event fails effect_once, each naming the event and the field.
    with open(out / sc["dir"] / "history" / "ledger_entries.jsonl", encoding="utf-8") as f:
        ledger = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    assert len(ledger) == 2, ledger
    first = ledger[0]["message_id"]
    for field, value, says in [
            ("amount", float(ledger[0]["amount"]) + 1, "with amount"),
            ("currency", "USD", "with currency USD"),
            ("payment_id", ledger[1]["payment_id"], "with payment " + ledger[1]["payment_id"]),
            ("aggregate_version", 2, "with version 2")]:
        wrong = doctored(tmp_path, out, "wrong-" + field)

        def change(recs, field=field, value=value):
            for x in recs:
                if x["message_id"] == first:
                    x[field] = value
            return recs

        rewrite_lines(wrong / sc["dir"] / "history" / "ledger_entries.jsonl", change)
        got = check(wrong, pg_cluster)
        assert got.returncode == 1, (field, got.stdout + got.stderr)
        assert "refused: invariant effect_once was pass, is fail" in got.stdout, got.stdout
        assert f"accounting applied event {first} {says}" in got.stdout, (field, got.stdout)


def test_a_relay_publish_carries_its_claim_token(tmp_path, pg_cluster, refused_run):
    out, sc = refused_run
    log = "broker.events.jsonl"
    with open(out / sc["dir"] / log, encoding="utf-8") as f:
        recs = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    stored = [x for x in recs if x.get("event") == "publish" and x.get("status") == "stored"]
    assert stored and all(x.get("claim_token") for x in stored), stored
    victim = stored[0]["message_id"]

    # A relay's publish without its token is no longer skipped: nobody could
    # hold it to a lease.
    tokenless = doctored(tmp_path, out, "tokenless")

    def drop(recs):
        for x in recs:
            if x.get("event") == "publish" and x.get("message_id") == victim:
                x.pop("claim_token", None)
        return recs
    rewrite_lines(tokenless / sc["dir"] / log, drop)
    got = check(tokenless, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "invariant publish_within_lease was pass, is fail" in got.stdout, got.stdout
    assert f"message {victim} was stored (from relay-1) without the claim token" in got.stdout

    # A line the bridge wrote late keeps its token and is held to its claim
    # only: an hour late, it still passes; under a token no claim holds, not.
    late = doctored(tmp_path, out, "late")

    def delay(recs):
        for x in recs:
            if x.get("event") == "publish" and x.get("message_id") == victim:
                x.pop("stored_us", None)
                x["ts_us"] += 3600 * 1000000
                x["ts_late"] = True
        return recs
    rewrite_lines(late / sc["dir"] / log, delay)
    got = check(late, pg_cluster)
    assert got.returncode == 0, got.stdout + got.stderr

    def forge(recs):
        for x in delay(recs):
            if x.get("event") == "publish" and x.get("message_id") == victim:
                x["claim_token"] = "00000000-0000-4000-8000-00000000f00d"
        return recs
    forged = doctored(tmp_path, out, "forged")
    rewrite_lines(forged / sc["dir"] / log, forge)
    got = check(forged, pg_cluster)
    assert got.returncode == 1 and "which no committed claim of that row holds" in got.stdout, \
        got.stdout + got.stderr


def test_every_running_relay_and_consumer_holds_a_broker_connection(tmp_path, pg_cluster,
                                                                    refused_run):
    """The heal records, per relay and consumer still running, whether its
    broker link held an open connection (the fault proxy's count, not the
    process's word); one that held none fails relay_recovers_after_heal,
    although another process may have drained everything."""
    out, sc = refused_run
    claims = out / sc["dir"] / "history" / "crashwindow_claims.jsonl"
    with open(claims, encoding="utf-8") as f:
        recs = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    seen = {(x["proc"], x["connected"]) for x in recs if x["kind"] == "broker_session"}
    assert seen == {("relay-1", True), ("accounting", True)}, seen

    lost = doctored(tmp_path, out, "lost-broker")

    def drop(recs):
        for x in recs:
            if x["kind"] == "broker_session" and x["proc"] == "relay-1":
                x["connected"] = False
        return recs
    rewrite_lines(lost / sc["dir"] / "history" / "crashwindow_claims.jsonl", drop)
    got = check(lost, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "invariant relay_recovers_after_heal was pass, is fail" in got.stdout, got.stdout
    assert "relay-1 was still running when the heal ended" in got.stdout
    assert "held no connection to the broker" in got.stdout


def test_later_versions_and_transitions_are_judged(tmp_path, pg_cluster, refused_run):
    out, sc = refused_run
    history = out / sc["dir"] / "history"
    with open(history / "http.jsonl", encoding="utf-8") as f:
        http = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    made = next(x for x in http if x["creation"] and x["status"] == 201)
    pay = made["payment_id"]

    # A change committed without its event: the payment is a version ahead.
    ahead = doctored(tmp_path, out, "ahead")

    def bump(recs):
        for x in recs:
            if x["id"] == pay:
                x["version"] = 2
        return recs
    rewrite_lines(ahead / sc["dir"] / "history" / "payments.jsonl", bump)
    got = check(ahead, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "invariant payment_one_creation_event was pass, is fail" in got.stdout, got.stdout
    assert f"payment {pay} is at version 2 but its highest event is version 1" in got.stdout

    # A capture the client was told succeeded, of a payment still created.
    told = doctored(tmp_path, out, "told")
    capture = dict(made, creation=False, status=200, name="", key=made["key"] + "-capture",
                   path=f"/payments/{pay}/capture", t0_us=made["t1_us"] + 1000,
                   t1_us=made["t1_us"] + 2000)
    rewrite_lines(told / sc["dir"] / "history" / "http.jsonl", lambda recs: recs + [capture])
    got = check(told, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "invariant nothing_lost was pass, is fail" in got.stdout, got.stdout
    assert f"HTTP 200 on capture of payment {pay} (key {capture['key']}), but the payment is " \
        "created" in got.stdout, got.stdout

    # A 503 on a capture whose key's record that very request created.
    stored = doctored(tmp_path, out, "stored")
    failed = dict(capture, status=503, key=made["key"], t0_us=made["t0_us"],
                  t1_us=made["t1_us"], payment_id="")
    rewrite_lines(stored / sc["dir"] / "history" / "http.jsonl", lambda recs: recs + [failed])
    got = check(stored, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "invariant one_payment_per_key was pass, is fail" in got.stdout, got.stdout
    assert f"key {made['key']} of client {made['client']} was answered HTTP 503 (nothing " \
        "stored) on capture" in got.stdout, got.stdout


SCENARIO_20 = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios",
                           "20-failover-asynchronous-loss.json")


def test_a_hazard_excuses_only_what_it_explains(tmp_path, pg_cluster):
    out = tmp_path / "out"
    r = crashwindow("run", SCENARIO_20, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sc = load_result(out)["scenarios"][0]
    hz = sc["hazard"]
    assert hz["caught"] is True and hz["explains"] == "replication_stall", hz
    # The five payments acknowledged after the stall, and their five events:
    # each caught violation is one of them, and the count is stated.
    assert hz["explained_events"] == 5 and hz["explained_payments"] == 5, hz
    for x in hz["caught_by"]:
        assert x["violations"] > 0 and x["explained"] == x["violations"], x
        assert inv(sc, x["invariant"])["verdict"] == "hazard caught", inv(sc, x["invariant"])

    # The consumer kept every inbox marker but dropped the effect of every
    # other event: the events the database holds are judged as anywhere.
    history = out / sc["dir"] / "history"
    with open(history / "ledger_entries.jsonl", encoding="utf-8") as f:
        ledger = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    with open(history / "outbox_messages.jsonl", encoding="utf-8") as f:
        held = {json.loads(x)["id"] for x in f.read().splitlines() if x.strip()}
    dropped = [x["message_id"] for x in ledger[::2] if x["message_id"] in held]
    assert dropped, ledger
    lossy = doctored(tmp_path, out, "lossy")
    rewrite_lines(lossy / sc["dir"] / "history" / "ledger_entries.jsonl",
                  lambda recs: recs[1::2])
    got = check(lossy, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    for name in ("nothing_lost", "effect_once"):
        assert f"invariant {name} was hazard caught, is fail" in got.stdout, got.stdout
    assert f"event {dropped[0]}" in got.stdout, (dropped, got.stdout)
    assert "expectation applied_payments was pass, is fail" in got.stdout, got.stdout


def test_a_mark_the_relay_reports_is_held_to_the_committed_one(tmp_path, pg_cluster,
                                                                 refused_run):
    """What a relay says it marked is judged against the claim history: the
    same history passes, and a mark reported under a claim no committed
    mark was made under (as a relay that believed an unconfirmed COMMIT
    would log it) fails marks_committed, naming the relay, the event and the
    claim."""
    out, sc = refused_run
    assert inv(sc, "marks_committed")["checked"] >= 2, inv(sc, "marks_committed")
    believed = doctored(tmp_path, out, "believed")
    ghost = "00000000-0000-4000-8000-00000000c1a1"
    seen = []

    def misreport(recs):
        for x in recs:
            if x.get("event") == "mark" and not seen:
                seen.append(x["ids"][0])
                x["token"] = ghost
        return recs

    rewrite_lines(believed / sc["dir"] / "relay-1.events.jsonl", misreport)
    assert seen
    got = check(believed, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "refused: invariant marks_committed was pass, is fail" in got.stdout, got.stdout
    assert (f"relay-1 reported event {seen[0]} marked published under claim {ghost}"
            in got.stdout), got.stdout
