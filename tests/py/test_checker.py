"""The checker can fail, and refuses evidence it cannot read.

Each test runs real scenarios through `crashwindow run`, then judges the
run's result.json, or doctors the stored history of a passing run and has
`crashwindow check` judge it again:
  - an event line that does not parse, or lacks a field the checker reads,
    is an error naming the file and the line (and the field), not a skip;
  - a 5xx answer to a creation whose payment was stored anyway fails
    one_payment_per_key;
  - a parked event passes nothing_lost only when the scenario names it as
    planted poison ("poison_events");
  - inbox markers the runbook removed (outboxctl cleanup-inbox) are recorded
    in inbox_removed and are history to effect_once, not a lost marker.

Scenarios here are written into tmp_path: they test the checker, they are
not part of the suite in scenarios/.
"""
# needs: pg
import json
import shutil

from cwtest import by_name, crashwindow, inv, load_result, read_events, scenario


def rewrite_lines(path, edit):
    """Rewrites a JSON-lines file through edit(list of lines) -> lines."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(edit(lines)) + "\n")


def check(out, pg):
    return crashwindow("check", str(out), "--pg", pg, timeout=120)


# A planted poison: a payment and its creation event under fixed ids, with a
# payload that is no event the consumer can read, so it parks it.
POISON_EVENT = "00000000-0000-4000-8000-0000000c0e01"
POISON_SQL = (
    "WITH p AS (INSERT INTO payments (id, client_id, amount, currency, status, version)"
    " VALUES ('00000000-0000-4000-8000-0000000c0a01', 'runner', 9.99, 'EUR', 'created', 1)"
    " RETURNING id),"
    " i AS (INSERT INTO idempotency_records (client_id, idempotency_key, request_hash,"
    " payment_id, status_code, response_body) SELECT 'runner', 'k-poison', repeat('0', 64), id,"
    " 201, '{}' FROM p)"
    " INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
    " event_type, schema_version, payload, occurred_at)"
    f" SELECT '{POISON_EVENT}', 'payment', id, 1, 'PaymentCreated', 1,"
    " jsonb_build_object('Memo', 'no event at all'), now() FROM p")


def test_history_checks_and_what_the_checker_refuses(tmp_path, pg_cluster):
    body = {"amount": "12.00", "currency": "EUR"}
    plain = scenario(tmp_path, "plain", [
        {"do": "http", "name": "create", "key": "k-plain", "body": body, "expect_status": 201},
        {"do": "payments", "count": 2, "key_prefix": "k-more"},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 10000},
    ], invariants=["one_payment_per_key", "nothing_lost", "retry_respects_backoff"])
    poison_steps = [
        {"do": "payments", "count": 1, "key_prefix": "k-beside"},
        {"do": "sql", "sql": POISON_SQL, "expect_rows": 1},
        {"do": "wait", "until": "event", "proc": "accounting", "event": "park",
         "timeout_ms": 15000, "why": "the consumer parks what it cannot read"},
    ]
    named = scenario(tmp_path, "poison-named", poison_steps, invariants=["nothing_lost"],
                     poison_events=[POISON_EVENT])
    unnamed = scenario(tmp_path, "poison-unnamed", poison_steps, invariants=["nothing_lost"])
    cleaned = scenario(tmp_path, "inbox-cleaned", [
        {"do": "payments", "count": 3, "key_prefix": "k-clean"},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 10000},
        {"do": "outboxctl", "expect_exit": 0, "expect_output": "deleted 3 inbox markers",
         "args": ["cleanup-inbox", "--older-than", "1ms", "--horizon", "1ms"]},
    ], invariants=["effect_once", "nothing_lost"],
        expect=[{"check": "inbox_removed", "equals": 3}, {"check": "effects", "equals": 3},
                {"check": "sql", "sql": "SELECT count(*) FROM inbox_messages", "equals": 0}])
    out = tmp_path / "out"
    r = crashwindow("run", plain, named, unnamed, cleaned, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr  # poison-unnamed fails, on purpose
    res = load_result(out)
    scs = by_name(res)

    p = scs["plain"]
    assert p["verdict"] == "pass", p
    assert inv(p, "retry_respects_backoff")["checked"] > 0

    # poison_events: the named event may stay parked; the same run without
    # the name fails nothing_lost on it.
    n = scs["poison-named"]
    assert n["verdict"] == "pass" and inv(n, "nothing_lost")["verdict"] == "pass", n
    u = scs["poison-unnamed"]
    nl = inv(u, "nothing_lost")
    assert u["verdict"] == "fail" and nl["verdict"] == "fail"
    assert any(POISON_EVENT in w and "parked-and-unresolved" in w for w in nl["witnesses"]), \
        nl["witnesses"]

    # Markers the runbook removed are recorded, and effect_once examined
    # the effects whose markers are gone without calling them unmarked.
    c = scs["inbox-cleaned"]
    assert c["verdict"] == "pass", c
    assert c["counts"]["inbox_removed"] == 3
    assert inv(c, "effect_once")["checked"] >= 3

    # The stored histories give the same verdicts...
    same = check(out, pg_cluster)
    assert same.returncode == 0 and "4 scenarios with the same verdicts, 0 different" in \
        same.stdout, same.stdout + same.stderr

    # ...and the checker judges what is stored: a creation answered 500 whose
    # payment was stored by that very request fails one_payment_per_key.
    run = out / p["dir"]
    doctored = tmp_path / "doctored"
    shutil.copytree(out, doctored)

    def answered_500(lines):
        recs = [json.loads(x) for x in lines]
        hit = [x for x in recs if x["key"] == "k-plain"]
        assert len(hit) == 1 and hit[0]["status"] == 201
        hit[0].update(status=500, problem="internal", payment_id="")
        return [json.dumps(x) for x in recs]

    rewrite_lines(doctored / p["dir"] / "history" / "http.jsonl", answered_500)
    got = check(doctored, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "plain: invariant one_payment_per_key was pass, is fail" in got.stdout, got.stdout
    assert "key k-plain of client crashwindow was answered HTTP 500 (nothing stored)" in \
        got.stdout, got.stdout

    # A relay line that does not parse is an error naming its file and line.
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    relay_log = broken / p["dir"] / "relay-1.events.jsonl"
    nlines = len(read_events(str(run / "relay-1.events.jsonl")))
    rewrite_lines(relay_log, lambda lines: lines + ['{"ts_us": 1, "event": "cla'])
    got = check(broken, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert f"{relay_log}:{nlines + 1}: the line is not a JSON object" in got.stdout, got.stdout

    # A claim that names its lease end otherwise than the relay does is no
    # claim the checker may skip: an error naming file, line and field.
    renamed = tmp_path / "renamed"
    shutil.copytree(out, renamed)
    relay_log = renamed / p["dir"] / "relay-1.events.jsonl"
    at = []

    def rename_lease(lines):
        recs = [json.loads(x) for x in lines]
        for i, x in enumerate(recs):
            if x.get("event") == "claim" and not at:
                x["locked_until"] = x.pop("lease_until")
                at.append(i + 1)
        return [json.dumps(x) for x in recs]

    rewrite_lines(relay_log, rename_lease)
    got = check(renamed, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert f'{relay_log}:{at[0]}: the claim event lacks field "lease_until"' in got.stdout, \
        got.stdout

    # The claim history is the evidence for the lease invariants: a row
    # marked published a second time (only a stale worker's settle does
    # that), and a retry recorded at the relays' attempt limit (12 here),
    # each fail on re-check, with no relay line involved.
    settled = tmp_path / "settled"
    shutil.copytree(out, settled)

    def stale_mark_and_late_retry(lines):
        recs = [json.loads(x) for x in lines]
        claim = next(x for x in recs if x["kind"] == "claim")
        seq = max(x["seq"] for x in recs)
        remark = dict(claim, seq=seq + 1, kind="remark")
        retry = dict(claim, seq=seq + 2, kind="release", release_kind="retry", attempts=12,
                     next_attempt_at=claim["locked_until"])
        return lines + [json.dumps(remark), json.dumps(retry)]

    rewrite_lines(settled / p["dir"] / "history" / "crashwindow_claims.jsonl",
                  stale_mark_and_late_retry)
    got = check(settled, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "plain: invariant no_two_live_leases was pass, is fail" in got.stdout, got.stdout
    assert "already published, was marked published again" in got.stdout, got.stdout
    assert "plain: invariant dead_letter_at_limit was pass, is fail" in got.stdout, got.stdout
    assert "at attempt 12 although the relays' attempt limit is 12" in got.stdout, got.stdout

    # A retry's stored error is checked too, not only a dead letter's: the
    # row keeps only the latest last_error, the claim history keeps each.
    # A retry (below the limit) whose error quotes the message's payload
    # fails dead_letter_at_limit on re-check.
    leaky = tmp_path / "leaky"
    shutil.copytree(out, leaky)
    with open(leaky / p["dir"] / "history" / "outbox_messages.jsonl", encoding="utf-8") as f:
        rows = {r["id"]: r for r in map(json.loads, f.read().splitlines())}

    def retry_quoting_the_payload(lines):
        recs = [json.loads(x) for x in lines]
        claim = next(x for x in recs if x["kind"] == "claim")
        payload = json.dumps(rows[claim["message_id"]]["payload"])
        retry = dict(claim, seq=max(x["seq"] for x in recs) + 1, kind="release",
                     release_kind="retry", next_attempt_at=claim["locked_until"],
                     last_error="broker refused the publish: " + payload)
        return lines + [json.dumps(retry)]

    rewrite_lines(leaky / p["dir"] / "history" / "crashwindow_claims.jsonl",
                  retry_quoting_the_payload)
    got = check(leaky, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "plain: invariant dead_letter_at_limit was pass, is fail" in got.stdout, got.stdout
    assert "the error its retry at attempt 1 stored is not sanitized: it quotes the payload" \
        in got.stdout, got.stdout


    # After the heal's faults_off record, a relay worker whose two claims
    # in a row both end in a failed publish kept a dead broker connection:
    # relay_recovers_after_heal fails.  Another worker that fails once,
    # publishes, then fails once more recovered each time and is not named.
    stuck = tmp_path / "stuck"
    shutil.copytree(out, stuck)
    nil = "00000000-0000-0000-0000-000000000000"
    stuck_worker = "00000000-0000-4000-8000-00000000aa01"
    healthy_worker = "00000000-0000-4000-8000-00000000aa02"

    def failing_after_heal(lines):
        recs = [json.loads(x) for x in lines]
        claim = next(x for x in recs if x["kind"] == "claim")
        seq = max(x["seq"] for x in recs)
        out_recs = [dict(claim, seq=seq + 1, kind="faults_off", message_id=nil, lock_id=None,
                         locked_by=None, attempts=0, locked_until=None,
                         claimed_at="2030-01-01T00:00:00+00:00")]
        plan = [(stuck_worker, "retry"), (healthy_worker, "retry"), (stuck_worker, "retry"),
                (healthy_worker, "mark"), (healthy_worker, "retry")]
        for i, (worker, outcome) in enumerate(plan):
            token = f"00000000-0000-4000-8000-0000000bb{i:03d}"
            at = f"2030-01-01T00:00:{10 * i + 1:02d}+00:00"
            until = f"2030-01-01T00:00:{10 * i + 2:02d}+00:00"
            base = dict(claim, lock_id=token, locked_by=worker, attempts=1,
                        locked_until=until, claimed_at=at, release_kind=None,
                        next_attempt_at=None, last_error=None)
            out_recs.append(dict(base, seq=seq + 2 + 2 * i, kind="claim"))
            out_recs.append(dict(base, seq=seq + 3 + 2 * i, kind="release",
                                 release_kind=outcome, claimed_at=until,
                                 next_attempt_at=until if outcome == "retry" else None,
                                 last_error="broker connection lost" if outcome == "retry"
                                 else None))
        return lines + [json.dumps(x) for x in out_recs]

    rewrite_lines(stuck / p["dir"] / "history" / "crashwindow_claims.jsonl", failing_after_heal)
    got = check(stuck, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "plain: invariant relay_recovers_after_heal was" in got.stdout, got.stdout
    assert f"relay worker {stuck_worker} failed the publishes of two claims in a row" in \
        got.stdout, got.stdout
    assert healthy_worker not in got.stdout, got.stdout

    # The heal recorded, from pg_stat_activity, a session of each relay
    # still running; one the database had no session of kept a connection
    # it lost, whatever the other relays drained: relay_recovers_after_heal
    # fails and names it.
    with open(run / "history" / "crashwindow_claims.jsonl", encoding="utf-8") as f:
        sessions = [x for x in map(json.loads, f.read().splitlines()) if x["kind"] == "session"]
    assert [(x["proc"], x["connected"]) for x in sessions] == [("relay-1", True)], sessions
    assert inv(p, "relay_recovers_after_heal")["checked"] >= 1
    def recheck_with_claims(name, edit):
        """Re-checks a copy of the run whose claim history edit() changed in
        place; the verdict must turn to a failure."""
        copy = tmp_path / name
        shutil.copytree(out, copy)

        def rewrite(lines):
            recs = [json.loads(x) for x in lines]
            edit(recs)
            return [json.dumps(x) for x in recs]

        rewrite_lines(copy / p["dir"] / "history" / "crashwindow_claims.jsonl", rewrite)
        got = check(copy, pg_cluster)
        assert got.returncode == 1, got.stdout + got.stderr
        return got.stdout

    def no_session(recs):
        for x in recs:
            if x["kind"] == "session":
                x["connected"] = False

    got = recheck_with_claims("lost-session", no_session)
    assert "plain: invariant relay_recovers_after_heal was pass, is fail" in got, got
    assert "relay-1 was still running when the heal ended" in got, got

    # A lease is held to time, not taken from the record: a claim that wrote
    # a lease ending at its own moment (a unit mistake would) fails
    # no_two_live_leases even though no other claim overlapped it.
    def lease_ends_at_claim(recs):
        first = next(x for x in recs if x["kind"] == "claim")
        first["locked_until"] = first["claimed_at"]

    got = recheck_with_claims("short-lease", lease_ends_at_claim)
    assert "plain: invariant no_two_live_leases was pass, is fail" in got, got
    assert "with a lease of 0.000 ms, shorter than the" in got, got

    # A claim's lease exists for others from its commit on: every record the
    # run kept carries its transaction's commit time, and a claim whose
    # commit came after a publish made under it (a relay publishing inside
    # the claim's transaction would do that) fails publish_within_lease.
    with open(run / "history" / "crashwindow_claims.jsonl", encoding="utf-8") as f:
        claims = [x for x in map(json.loads, f.read().splitlines()) if x["kind"] == "claim"]
    assert claims and all(x["committed_at"] is not None for x in claims), claims
    assert all(x["committed_at"] >= x["claimed_at"] for x in claims), claims

    def commit_after_lease(recs):
        for x in recs:
            if x["kind"] == "claim":
                x["committed_at"] = x["locked_until"]

    got = recheck_with_claims("late-commit", commit_after_lease)
    assert "plain: invariant publish_within_lease was pass, is fail" in got, got
    assert "before its claim" in got and "committed: published under a lease no other" in got, got

    # The consumers' records carry their commit times too, and every ACK the
    # broker logged came after the group's first record of its message
    # committed; records that committed only after the ACKs (a consumer
    # acknowledging before its COMMIT) fail ack_after_commit.
    assert inv(p, "ack_after_commit")["checked"] >= 3, inv(p, "ack_after_commit")
    records = run / "history" / "crashwindow_consumer_records.jsonl"
    with open(records, encoding="utf-8") as f:
        recs = [json.loads(x) for x in f.read().splitlines()]
    assert {x["source"] for x in recs} >= {"inbox_messages"}, recs
    assert all(x["committed_at"] is not None for x in recs), recs
    late = tmp_path / "late-records"
    shutil.copytree(out, late)
    rewrite_lines(late / p["dir"] / "history" / "crashwindow_consumer_records.jsonl",
                  lambda lines: [json.dumps(dict(json.loads(x),
                                                 committed_at="2030-01-01T00:00:00+00:00"))
                                 for x in lines])
    got = check(late, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "plain: invariant ack_after_commit was pass, is fail" in got.stdout, got.stdout
    assert "before the group's first record of it committed" in got.stdout, got.stdout


def test_a_version_held_behind_a_dead_letter_is_not_lost(tmp_path, pg_cluster):
    """A relay in per-aggregate order holds a version back while an older
    one of its payment is unpublished, a dead-lettered one included, until
    an operator requeues it.  Such a version is part of that dead letter
    (classified dead-lettered), not lost; but only because every relay of
    the scenario holds that order: the same stored history with a FIFO
    relay, which would have published it, fails nothing_lost on re-check."""
    relay = {"kind": "relay",
             "args": {"lease-ms": 1500, "idle-ms": 50, "batch": 10, "order": "per-aggregate",
                      "max-attempts": 2, "backoff-base-ms": 20, "backoff-cap-ms": 50},
             "faults": "relay/before_publish=fail@1+"}
    held = scenario(tmp_path, "held", [
        {"do": "payments", "count": 2, "key_prefix": "k-held", "authorize": True},
        {"do": "wait", "until": "dead_lettered", "count": 2, "timeout_ms": 10000},
    ], invariants=["nothing_lost", "dead_letter_at_limit"],
        processes={"api": {"kind": "api"}, "relay-1": relay,
                   "accounting": {"kind": "consumer", "args": {"name": "accounting"}}},
        heal={"timeout_ms": 2000},
        expect=[{"check": "sql", "equals": 2,
                 "sql": "SELECT count(*) FROM outbox_messages"
                        " WHERE published_at IS NULL AND dead_lettered_at IS NULL"}])
    out = tmp_path / "out"
    r = crashwindow("run", held, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sc = by_name(load_result(out))["held"]
    assert sc["verdict"] == "pass", sc
    assert inv(sc, "nothing_lost")["verdict"] == "pass"
    cls = sc["classification"]
    assert cls["dead_lettered"] == 4 and cls["lost"] == 0, cls

    fifo = tmp_path / "fifo"
    shutil.copytree(out, fifo)
    spec_path = fifo / sc["dir"] / "scenario.json"
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    del spec["processes"]["relay-1"]["args"]["order"]
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    got = check(fifo, pg_cluster)
    assert got.returncode == 1, got.stdout + got.stderr
    assert "held: invariant nothing_lost was pass, is fail" in got.stdout, got.stdout
    assert "ready but never published" in got.stdout, got.stdout
