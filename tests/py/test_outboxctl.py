"""outboxctl, the runbook: status and metrics on a known database state, dead
letters listed, shown and requeued (keeping their ids), batched cleanup of
published rows and of inbox markers, and clear exit codes."""
# needs: pg
import json
import os
import re
import subprocess
import uuid

import psycopg

import promparse
from cwtest import binary, query, scalar, wait_for, wait_value
from test_consumer import assert_once_each, start_consumer
from test_relay import broker_connect, insert_rows, start_relay, stored, wait_published


def ctl(db, *args, env=None):
    e = dict(os.environ)
    e.pop("CW_DB", None)
    e.update(env or {})
    cmd = [binary("outboxctl")] + (["--db", db] if db is not None else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=e)


def row(db, **cols):
    """Inserts one outbox row; cols override the defaults (SQL expressions)."""
    base = {"id": "gen_random_uuid()", "aggregate_type": "'payment'",
            "aggregate_id": "gen_random_uuid()", "aggregate_version": "1",
            "event_type": "'PaymentCreated'", "schema_version": "1",
            "payload": "'{\"amount\": \"1.00\", \"card\": \"4111111111111111\"}'",
            "occurred_at": "now() - interval '1 hour'"}
    base.update(cols)
    names = ", ".join(base)
    # Test-only SQL built from the constants above; the product never does this.
    return scalar(db, f"INSERT INTO outbox_messages ({names}) VALUES ({', '.join(base.values())})"
                      " RETURNING id::text")


def known_state(db):
    """2 ready, 1 in backoff, 1 leased, 1 expired lease, 3 published, 2 dead."""
    ids = {}
    ids["ready"] = [row(db, occurred_at="now() - interval '10 minutes'"), row(db)]
    ids["backoff"] = [row(db, attempts="3", next_attempt_at="now() + interval '1 hour'")]
    ids["leased"] = [row(db, attempts="1", lock_id="gen_random_uuid()",
                         locked_until="now() + interval '1 hour'")]
    ids["expired"] = [row(db, attempts="1", lock_id="gen_random_uuid()",
                          locked_until="now() - interval '1 minute'")]
    ids["published"] = [row(db, attempts="1", published_at=f"now() - interval '1 hour' + interval '{s} seconds'")
                        for s in (1, 2, 3)]
    ids["dead"] = [row(db, attempts="12", dead_lettered_at="now()",
                       last_error=f"'broker refused publish: payload too large ({n} > 300 bytes):"
                                  f" [payload]'")
                   for n in (5000, 6000)]
    with psycopg.connect(db, autocommit=True) as conn:
        for mid in ids["published"]:
            conn.execute("INSERT INTO inbox_messages VALUES ('accounting', %s, now())", (mid,))
        conn.execute("INSERT INTO consumer_anomalies (consumer_name, message_id, kind)"
                     " VALUES ('accounting', %s, 'duplicate'), ('accounting', %s, 'duplicate'),"
                     " ('notifications', %s, 'gap_parked')",
                     (ids["published"][0], ids["published"][1], ids["published"][2]))
        conn.execute("INSERT INTO consumer_dead_letters (consumer_name, message_id, reason,"
                     " deliveries) VALUES ('notifications', 'not-a-uuid', 'poison', 5)")
        conn.execute("INSERT INTO pipeline_counters VALUES ('expired_leases_recovered', 7),"
                     " ('leases_lost', 2)")
    return ids


def test_status_json_and_human_match_the_database(db):
    known_state(db)
    out = ctl(db, "status", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    o = s["outbox"]
    assert (o["pending"], o["ready"], o["in_backoff"], o["live_leases"]) == (5, 3, 1, 1)
    assert (o["expired_leases"], o["published"], o["dead_letters"]) == (1, 3, 2)
    assert (o["expired_leases_recovered"], o["leases_lost"], o["requeues"]) == (7, 2, 0)
    assert 3590 < o["oldest_pending_age_s"] < 3700
    assert o["publish_latency_s"]["p50"] == 2.0
    assert 2.9 < o["publish_latency_s"]["p99"] <= 3.0
    assert o["attempts_histogram"] == {"0": 2, "1": 5, "3": 1, "12": 2}
    cons = {c["name"]: c for c in s["consumers"]}
    assert cons["accounting"]["processed"] == 3
    assert cons["accounting"]["duplicates_ignored"] == 2
    assert cons["notifications"]["gaps_parked"] == 1
    assert cons["notifications"]["dead_letters"] == 1
    assert cons["accounting"]["processing_latency_s"]["p50"] >= 0

    human = ctl(db, "status")
    assert human.returncode == 0, human.stderr
    assert re.search(r"pending\s+5\s+\(ready 3, in backoff 1, leased 1\)", human.stdout)
    assert re.search(r"dead letters\s+2", human.stdout)
    assert re.search(r"oldest pending age\s+1h", human.stdout)
    assert re.search(r"accounting\s+3\s+2\s+0\s+0\s+0", human.stdout)
    assert re.search(r"notifications\s+0\s+0\s+0\s+1\s+1", human.stdout)


def test_metrics_are_prometheus_text_with_the_runbook_list(db):
    known_state(db)
    out = ctl(db, "metrics")
    assert out.returncode == 0, out.stderr
    page = promparse.parse(out.stdout)
    samples = {n + ("{" + ",".join(f'{k}="{v}"' for k, v in lab.items()) + "}" if lab else ""): v
               for fam in page.values() for n, lab, v in fam["samples"]}
    assert list(page)[0] == "outbox_oldest_pending_age_seconds", "the source article's (README) first signal"
    assert samples["outbox_pending_messages"] == 5
    assert samples["outbox_oldest_pending_age_seconds"] > 3590
    assert samples["outbox_published_total"] == 3
    assert samples["outbox_dead_letters"] == 2
    assert samples["outbox_expired_leases_recovered_total"] == 7
    assert samples['outbox_attempts_bucket{le="1"}'] == 7
    assert samples['outbox_attempts_bucket{le="12"}'] == 10
    assert samples['outbox_attempts_bucket{le="+Inf"}'] == 10
    assert samples["outbox_attempts_count"] == 10
    assert samples['inbox_duplicates_ignored_total{consumer="accounting"}'] == 2
    assert samples['consumer_gaps_parked_total{consumer="notifications"}'] == 1
    assert samples['outbox_publish_latency_seconds{quantile="0.5"}'] == 2
    assert 'inbox_processing_latency_seconds{consumer="accounting",quantile="0.99"}' in samples


def test_dead_letters_are_grouped_and_shown_redacted(db):
    ids = known_state(db)
    other = row(db, attempts="12", dead_lettered_at="now()", last_error="'broker outage'")
    out = ctl(db, "dead-letters", "list", "--json")
    assert out.returncode == 0, out.stderr
    groups = json.loads(out.stdout)
    assert [g["count"] for g in groups] == [2, 1], "digits fold into one fingerprint"
    assert set(groups[0]["sample_ids"]) == set(ids["dead"])
    assert groups[1]["sample_ids"] == [other]
    human = ctl(db, "dead-letters", "list")
    assert groups[0]["fingerprint"] in human.stdout and "broker outage" in human.stdout

    shown = ctl(db, "dead-letters", "show", ids["dead"][0])
    assert shown.returncode == 0, shown.stderr
    assert "4111" not in shown.stdout, "payload values are redacted by default"
    assert '"card": "[redacted]"' in shown.stdout
    assert "after 12 attempts" in shown.stdout
    full = ctl(db, "dead-letters", "show", ids["dead"][0], "--show-payload")
    assert "4111111111111111" in full.stdout

    missing = ctl(db, "dead-letters", "show", str(uuid.uuid4()))
    assert missing.returncode == 1 and "no outbox row" in missing.stderr
    alive = ctl(db, "dead-letters", "show", ids["published"][0])
    assert alive.returncode == 1 and "not a dead letter (it is published)" in alive.stderr
    bad = ctl(db, "dead-letters", "show", "42")
    assert bad.returncode == 2 and "'42'" in bad.stderr


def test_requeue_by_fingerprint_records_each_requeue_and_refuses_what_is_not_dead(db):
    ids = known_state(db)
    fp = json.loads(ctl(db, "dead-letters", "list", "--json").stdout)[0]["fingerprint"]
    out = ctl(db, "requeue", "--fingerprint", fp)
    assert out.returncode == 0, out.stderr
    rows = query(db, "SELECT id::text, attempts, dead_lettered_at, last_error,"
                     " next_attempt_at <= now() FROM outbox_messages WHERE id = ANY(%s::uuid[])",
                 (ids["dead"],))
    assert all(r[1] == 0 and r[2] is None and r[3] is None and r[4] for r in rows)
    rec = query(db, "SELECT message_id::text, attempts_before, last_error_before"
                    " FROM outbox_requeues ORDER BY id")
    assert sorted(r[0] for r in rec) == sorted(ids["dead"])
    assert all(r[1] == 12 and "payload too large" in r[2] for r in rec)
    # Again: nothing left with that fingerprint.
    again = ctl(db, "requeue", "--fingerprint", fp)
    assert again.returncode == 1 and "no dead letters" in again.stderr
    # A published id and an unknown id are refused with the reason; nothing changes.
    unknown = str(uuid.uuid4())
    mixed = ctl(db, "requeue", ids["published"][0], unknown)
    assert mixed.returncode == 1
    assert "not a dead letter (published)" in mixed.stderr and "no such outbox row" in mixed.stderr
    assert scalar(db, "SELECT count(*) FROM outbox_requeues") == 2
    for args in (["requeue"], ["requeue", "nope"], ["requeue", "--fingerprint", "XYZ"],
                 ["requeue", ids["dead"][0], "--fingerprint", fp]):
        bad = ctl(db, *args)
        assert bad.returncode == 2, (args, bad.stderr)


def test_requeue_all_takes_every_dead_letter_and_records_each(db):
    ids = known_state(db)
    other = row(db, attempts="12", dead_lettered_at="now()", last_error="'broker outage'")
    out = ctl(db, "requeue", "--all")
    assert out.returncode == 0, out.stderr
    assert "requeued 3 dead letters" in out.stdout
    assert sorted(r[0] for r in query(db, "SELECT message_id::text FROM outbox_requeues")) == \
        sorted(ids["dead"] + [other])
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE dead_lettered_at IS NOT NULL") == 0
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE published_at IS NOT NULL") == \
        len(ids["published"]), "published rows are not dead letters: untouched"
    again = ctl(db, "requeue", "--all")
    assert again.returncode == 0 and "requeued 0 dead letters" in again.stdout
    assert scalar(db, "SELECT count(*) FROM outbox_requeues") == 3
    for args in (["requeue", "--all", ids["dead"][0]], ["requeue", "--all", "--fingerprint",
                                                        "0123456789ab"]):
        bad = ctl(db, *args)
        assert bad.returncode == 2 and "one of them" in bad.stderr, (args, bad.stderr)


def test_requeue_with_a_repeated_id_requeues_it_once_and_exits_0(db):
    ids = known_state(db)
    dead, other = ids["dead"]
    out = ctl(db, "requeue", dead, dead.upper(), dead)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(f"requeued {dead}") == 1
    assert query(db, "SELECT message_id::text, attempts_before FROM outbox_requeues") == \
        [(dead, 12)]
    assert scalar(db, "SELECT dead_lettered_at IS NULL AND attempts = 0 FROM outbox_messages"
                      " WHERE id = %s", (dead,))
    assert scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages WHERE id = %s",
                  (other,))
    # A repeated id that cannot be requeued is explained once.
    again = ctl(db, "requeue", dead, dead)
    assert again.returncode == 1
    assert again.stderr.count(f"{dead}: not a dead letter (pending)") == 1


def test_requeued_dead_letter_is_published_again_under_its_id(db, procs, broker):
    _, sock = broker
    with broker_connect(sock) as b:
        b.control(max_payload_bytes=200)
    poison = insert_rows(db, 1, payload=json.dumps({"blob": "y" * 400}))[0]
    relay = start_relay(procs, db, sock, max_attempts=2)
    wait_for(lambda: scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages"
                                " WHERE id = %s", (poison,)), 20, "the row dead-lettered")
    with broker_connect(sock) as b:
        b.control(max_payload_bytes=0)
    out = ctl(db, "requeue", poison.upper())
    assert out.returncode == 0, out.stderr
    assert f"requeued {poison}" in out.stdout
    wait_published(db, [poison])
    assert relay.stop() == 0
    assert [e["message_id"] for e in stored(sock)] == [poison], "same id, published once"
    assert query(db, "SELECT message_id::text, attempts_before FROM outbox_requeues") == \
        [(poison, 2)]
    assert scalar(db, "SELECT attempts FROM outbox_messages WHERE id = %s", (poison,)) == 1
    assert scalar(db, "SELECT count(*) FROM outbox_messages") == 1


def test_cleanup_deletes_only_published_rows_older_than_the_cutoff(db):
    old = [row(db, published_at="now() - interval '2 days'") for _ in range(7)]
    recent = row(db, published_at="now() - interval '1 hour'")
    old_pending = row(db, occurred_at="now() - interval '3 days'")
    old_dead = row(db, occurred_at="now() - interval '3 days'", dead_lettered_at="now() - interval '2 days'")
    out = ctl(db, "cleanup", "--published-older-than", "1d", "--batch", "2")
    assert out.returncode == 0, out.stderr
    assert re.search(r"deleted 7 published outbox rows older than 1d .* in 4 batches of at most 2",
                     out.stdout), out.stdout
    left = {r[0] for r in query(db, "SELECT id::text FROM outbox_messages")}
    assert left == {recent, old_pending, old_dead}
    assert not left & set(old)
    assert scalar(db, "SELECT value FROM pipeline_counters WHERE counter = 'published_rows_deleted'") == 7
    # outbox_published_total stays monotonic across cleanups.
    metrics = ctl(db, "metrics").stdout
    assert "outbox_published_total 8" in metrics
    again = ctl(db, "cleanup", "--published-older-than", "1d")
    assert again.returncode == 0 and "deleted 0 " in again.stdout
    for args in (["cleanup"], ["cleanup", "--published-older-than", "1y"],
                 ["cleanup", "--published-older-than", "1d", "--batch", "0"],
                 ["cleanup", "--published-older-than"], ["cleanup", "--older-than", "1d"]):
        bad = ctl(db, *args)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)


def test_cleanup_inbox_refuses_a_retention_inside_the_redelivery_horizon(db):
    published = row(db, published_at="now() - interval '3 hours'")
    pending = row(db)
    with psycopg.connect(db, autocommit=True) as conn:
        for name in ("accounting", "notifications"):
            conn.execute("INSERT INTO inbox_messages VALUES (%s, %s, now() - interval '2 hours')",
                         (name, published))
        conn.execute("INSERT INTO inbox_messages VALUES ('accounting', %s,"
                     " now() - interval '2 hours')", (pending,))
        conn.execute("INSERT INTO inbox_messages SELECT 'accounting', gen_random_uuid(),"
                     " now() - interval '2 hours' FROM generate_series(1, 5)")
        conn.execute("INSERT INTO inbox_messages SELECT 'accounting', gen_random_uuid(),"
                     " now() - interval '10 minutes' FROM generate_series(1, 3)")
    before = scalar(db, "SELECT count(*) FROM inbox_messages")

    refused = ctl(db, "cleanup-inbox", "--older-than", "10m")
    assert refused.returncode == 1
    assert "refusing" in refused.stderr and "29m30s" in refused.stderr
    assert scalar(db, "SELECT count(*) FROM inbox_messages") == before
    # The horizon follows the relay settings given.
    longer = ctl(db, "cleanup-inbox", "--older-than", "1h", "--max-attempts", "20")
    assert longer.returncode == 1 and "20 attempts" in longer.stderr
    assert scalar(db, "SELECT count(*) FROM inbox_messages") == before

    out = ctl(db, "cleanup-inbox", "--older-than", "1h", "--batch", "2")
    assert out.returncode == 0, out.stderr
    assert "deleted 7 inbox markers" in out.stdout, out.stdout
    assert "kept 1 older markers" in out.stdout
    left = query(db, "SELECT message_id::text, processed_at > now() - interval '1 hour'"
                     " FROM inbox_messages")
    assert len(left) == 4
    assert all(recent or mid == pending for mid, recent in left), \
        "deleted a marker inside the retention, or one of an unpublished message"

    # A configured window replaces the computed horizon.
    assert ctl(db, "cleanup-inbox", "--older-than", "5m", "--horizon", "10m").returncode == 1
    ok = ctl(db, "cleanup-inbox", "--older-than", "5m", "--horizon", "5m")
    assert ok.returncode == 0 and "deleted 3 inbox markers" in ok.stdout
    for args in (["cleanup-inbox"], ["cleanup-inbox", "--older-than", "soon"],
                 ["cleanup-inbox", "--older-than", "1d", "--lease-ms", "5"],
                 ["cleanup-inbox", "--older-than", "1d", "--backoff-base-ms", "10",
                  "--backoff-cap-ms", "5"]):
        bad = ctl(db, *args)
        assert bad.returncode == 2, (args, bad.stderr)


def test_exit_codes_and_no_secret_in_connection_errors(db, tmp_path):
    bad_db = f"host={tmp_path} port=1 user=app password=hunter2 dbname=x connect_timeout=2"
    for cmd in (["status"], ["metrics"], ["dead-letters", "list"], ["migrate"],
                ["cleanup", "--published-older-than", "1d"]):
        out = ctl(bad_db, *cmd)
        assert out.returncode == 1, (cmd, out.stderr)
        assert "could not connect" in out.stderr
        assert "hunter2" not in out.stderr + out.stdout
    # Usage errors are found before connecting.
    assert ctl(bad_db, "requeue", "nope").returncode == 2
    assert ctl(db, "frobnicate").returncode == 2
    assert ctl(db, "--verbose", "status").returncode == 2
    assert ctl(None, "status").returncode == 2
    assert ctl(None, "status", env={"CW_DB": db}).returncode == 0
    assert ctl(db, "status", "--yaml").returncode == 2
    assert ctl(db, "metrics", "extra").returncode == 2
    assert ctl(db, "dead-letters").returncode == 2
    assert ctl(db, "dead-letters", "purge").returncode == 2
    helped = ctl(None, "--help")
    assert helped.returncode == 0 and "resets" in helped.stdout and "attempts" in helped.stdout
    assert ctl(db, "migrate").stdout.startswith("schema already")


def test_parked_events_are_listed_shown_redacted_and_replayed(db):
    """A consumer's parked gap is listed, shown with its amount redacted, and
    replayed: its dead letter and that group's inbox marker go, another
    group's marker stays, the outbox row is pending again under its id, and
    the replay is recorded.  A poison frame without an outbox row is refused."""
    pub = row(db, attempts="1", aggregate_version="2", event_type="'PaymentAuthorized'",
              published_at="now() - interval '1 minute'")
    poison = str(uuid.uuid4())
    agg = scalar(db, "SELECT aggregate_id::text FROM outbox_messages WHERE id = %s", (pub,))
    with psycopg.connect(db, autocommit=True) as conn:
        for group in ("accounting", "notifications"):
            conn.execute("INSERT INTO inbox_messages VALUES (%s, %s, now())", (group, pub))
        conn.execute("INSERT INTO consumer_dead_letters (consumer_name, message_id, reason,"
                     " deliveries, aggregate_id, aggregate_version, event_type, amount, currency)"
                     " VALUES ('accounting', %s, 'version gap never closed', 3, %s, 2,"
                     " 'PaymentAuthorized', '4242.42', 'EUR')", (pub, agg))
        conn.execute("INSERT INTO consumer_dead_letters (consumer_name, message_id, reason,"
                     " deliveries) VALUES ('accounting', %s, 'poison: not JSON', 5)", (poison,))

    listed = ctl(db, "parked", "list")
    assert listed.returncode == 0 and pub in listed.stdout and poison in listed.stdout
    js = json.loads(ctl(db, "parked", "list", "--json", "--consumer", "accounting").stdout)
    assert {x["message_id"]: (x["kind"], x["version"]) for x in js} == \
        {pub: ("gap", 2), poison: ("poison", None)}
    assert json.loads(ctl(db, "parked", "list", "--json", "--consumer", "notifications").stdout) == []

    shown = ctl(db, "parked", "show", "accounting", pub)
    assert shown.returncode == 0, shown.stderr
    assert "4242.42" not in shown.stdout and "[redacted]" in shown.stdout
    assert "outbox row        published" in shown.stdout
    assert "4242.42 EUR" in ctl(db, "parked", "show", "accounting", pub, "--show-payload").stdout
    assert ctl(db, "parked", "show", "accounting", str(uuid.uuid4())).returncode == 1
    assert ctl(db, "parked", "replay", "accounting", "not-a-uuid").returncode == 2
    assert ctl(db, "parked", "replay", "no such name!", pub).returncode == 2
    assert ctl(db, "parked", "frobnicate").returncode == 2

    r = ctl(db, "parked", "replay", "accounting", pub, poison)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"replayed {pub} to accounting" in r.stdout
    assert f"{poison}: not replayed" in r.stderr
    assert query(db, "SELECT message_id FROM consumer_dead_letters") == [(poison,)]
    assert query(db, "SELECT consumer_name FROM inbox_messages WHERE message_id = %s",
                 (pub,)) == [("notifications",)]
    assert query(db, "SELECT published_at IS NULL, attempts, lock_id IS NULL FROM outbox_messages"
                     " WHERE id = %s", (pub,)) == [(True, 0, True)]
    # its full retry budget again, the old count on record
    assert query(db, "SELECT message_id::text, attempts_before FROM outbox_requeues") == [(pub, 1)]
    assert query(db, "SELECT consumer_name, message_id::text, reason_before, deliveries_before"
                     " FROM consumer_replays") == \
        [("accounting", pub, "version gap never closed", 3)]
    # Replayed once: a second replay finds nothing parked.
    assert ctl(db, "parked", "replay", "accounting", pub).returncode == 1


def test_parked_replay_on_a_live_pipeline_applies_the_event_once(db, broker, procs):
    """A running relay and consumer: the ledger refuses an event (a rule it
    enforces that the event breaks), the consumer parks it after its
    deliveries; the operator lifts the rule and replays it with outboxctl.
    The relay publishes the same outbox row again under its id, and the
    consumer applies it exactly once, as it does the event beside it."""
    _, sock = broker
    query(db, "ALTER TABLE ledger_entries ADD CONSTRAINT no_xts CHECK (currency <> 'XTS')")

    def creation_event(currency):
        eid, pid = str(uuid.uuid4()), str(uuid.uuid4())
        body = {"EventId": eid, "PaymentId": pid, "Amount": "7.00", "Currency": currency,
                "AggregateVersion": 1, "OccurredAtUtc": "2026-11-29T21:00:00.000000Z"}
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("INSERT INTO outbox_messages (id, aggregate_type, aggregate_id,"
                         " aggregate_version, event_type, schema_version, payload, occurred_at)"
                         " VALUES (%s, 'payment', %s, 1, 'PaymentCreated', 1, %s::jsonb, now())",
                         (eid, pid, json.dumps(body)))
        return eid

    eid = creation_event("XTS")
    beside = [creation_event("EUR")]
    relay = start_relay(procs, db, sock)
    start_consumer(procs, db, sock, args=("--poison-max-deliveries", "2"))
    wait_value(lambda: query(db, "SELECT message_id FROM consumer_dead_letters"), [(eid,)], 20,
               "the refused event to be parked")
    assert scalar(db, "SELECT count(*) FROM ledger_entries WHERE message_id = %s", (eid,)) == 0

    query(db, "ALTER TABLE ledger_entries DROP CONSTRAINT no_xts")
    r = ctl(db, "parked", "replay", "accounting", eid)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"replayed {eid} to accounting" in r.stdout
    wait_value(lambda: scalar(db, "SELECT count(*) FROM ledger_entries WHERE message_id = %s",
                              (eid,)), 1, 20, "the replayed event to be applied")
    wait_published(db, [eid])
    assert relay.stop() == 0
    assert_once_each(db, [eid] + beside)
    assert [e["message_id"] for e in stored(sock, [eid])] == [eid, eid], \
        "published again under its own id, once"
    assert query(db, "SELECT count(*) FROM consumer_dead_letters") == [(0,)]
    replays = query(db, "SELECT consumer_name, message_id::text, deliveries_before"
                        " FROM consumer_replays")
    assert replays == [("accounting", eid, 2)]


def test_migrate_upgrades_a_version_1_database(db):
    # Version 1's claim index held every pending row, rows in backoff too.
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DROP INDEX ix_outbox_claim_order")
        conn.execute("DROP INDEX ix_outbox_retry_order")
        conn.execute("CREATE INDEX ix_outbox_claim_order ON outbox_messages (occurred_at, id)"
                     " WHERE published_at IS NULL AND dead_lettered_at IS NULL")
        conn.execute("ALTER TABLE outbox_messages DROP COLUMN locked_by")
        conn.execute("DELETE FROM schema_migrations")
        conn.execute("INSERT INTO schema_migrations (version) VALUES (1)")
    pending = row(db)
    out = ctl(db, "migrate")
    assert out.returncode == 0 and out.stdout == "schema version 6 applied\n", out
    assert out.stderr == "", "no notices about what already exists"
    defs = dict(query(db, "SELECT indexname, indexdef FROM pg_indexes"
                          " WHERE indexname IN ('ix_outbox_claim_order', 'ix_outbox_retry_order')"))
    assert "last_error IS NULL" in defs["ix_outbox_claim_order"]
    assert "last_error IS NOT NULL" in defs["ix_outbox_retry_order"]
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE id = %s", (pending,)) == 1
    assert scalar(db, "SELECT count(*) FROM information_schema.columns"
                      " WHERE table_name = 'outbox_messages' AND column_name = 'locked_by'") == 1
    assert ctl(db, "migrate").stdout == "schema already at version 6\n"
