"""outbox-relay against a real PostgreSQL cluster and the fake broker.

What each test proves is asserted on database rows and on the broker's own
log (what it stored, from whom, when), not on the relay's words alone; the
relay's events are used where they are the subject (claims and their leases,
the retry schedule it decided).  The helpers here are shared with
test_relay_faults.py and test_outboxctl.py.
"""
# needs: pg
import hashlib
import json
import os
import signal
import subprocess
import time
import uuid
from datetime import datetime, timezone

import psycopg

import brokerclient
from cwtest import binary, query, scalar, wait_for

# Short timings so the suite runs fast; tests override what they are about.
FAST = {"idle-ms": 50, "lease-ms": 2000, "backoff-base-ms": 50, "backoff-cap-ms": 400}


# -- helpers shared by the relay and outboxctl tests ---------------------------

def start_relay(procs, db, sock, name="relay-1", faults=None, env_fifo=None, **flags):
    """Starts outbox-relay with FAST timings overridden by flags (snake_case);
    env_fifo, when given, is its CW_FIU_FIFO ("" for none)."""
    args = [binary("outbox-relay"), "--db", db, "--broker", sock, "--name", name]
    opts = dict(FAST)
    opts.update({k.replace("_", "-"): v for k, v in flags.items()})
    for k, v in opts.items():
        args += [f"--{k}", str(v)]
    env = {"CW_FAULTS": faults} if faults else {}
    if env_fifo is not None:
        env["CW_FIU_FIFO"] = env_fifo
    return procs.start(name, args, env=env or None)


def insert_rows(db, n, payload=None, aggregate_ids=None, versions=None, age_s=60,
                traceparent=True):
    """Inserts n pending outbox rows, occurred_at strictly increasing (oldest
    first, age_s seconds ago); returns their ids in that order."""
    rows = []
    with psycopg.connect(db, autocommit=True) as conn:
        for i in range(n):
            body = payload if payload is not None else json.dumps(
                {"amount": f"{i + 1}.00", "currency": "EUR", "n": i})
            agg = aggregate_ids[i] if aggregate_ids else None
            ver = versions[i] if versions else 1
            tp = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01" if traceparent else None
            rid = conn.execute(
                "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id,"
                " aggregate_version, event_type, schema_version, payload, trace_parent,"
                " occurred_at)"
                " VALUES (gen_random_uuid(), 'payment', coalesce(%s::uuid, gen_random_uuid()),"
                " %s, 'PaymentCreated', 1, %s::jsonb, %s,"
                " now() - make_interval(secs => %s) + %s * interval '1 millisecond')"
                " RETURNING id::text",
                (agg, ver, body, tp, age_s, i)).fetchone()[0]
            rows.append(rid)
    return rows


def broker_connect(sock, client="pytest"):
    """A broker client; waits until the broker accepts connections (its socket
    file appears at bind, a moment before it listens)."""
    def attempt():
        try:
            return brokerclient.connect(sock, client=client)
        except (ConnectionRefusedError, FileNotFoundError):
            return None
    return wait_for(attempt, 10, f"the broker at {sock} to accept connections")


def broker_log(sock):
    with broker_connect(sock, client="pytest-log") as b:
        return b.dump_log()


def stored(sock, ids=None):
    """The broker's stored publishes (log entries), optionally only of ids."""
    return [e for e in broker_log(sock)
            if e.get("event") == "publish" and e.get("status") == "stored"
            and (ids is None or e["message_id"] in ids)]


def ts_us(iso):
    """Microseconds since the epoch of the relay's UTC timestamps."""
    dt = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def wait_published(db, ids, timeout=20):
    wait_for(lambda: scalar(db, "SELECT count(*) FROM outbox_messages WHERE id = ANY(%s::uuid[])"
                                " AND published_at IS NOT NULL", (ids,)) == len(ids),
             timeout, f"{len(ids)} rows marked published")


def overlapping_leases(claims):
    """Pairs of claims of one id by different workers where the second came
    while the first worker's lease was live and it had not settled the row.
    claims: relay claim events (with the retry/dead_letter/mark events of the
    same relays given separately as settles)."""
    by_id = {}
    for c in claims:
        for mid in c["ids"]:
            by_id.setdefault(mid, []).append(c)
    bad = []
    for mid, cs in by_id.items():
        cs.sort(key=lambda c: c["ts_us"])
        for a, b in zip(cs, cs[1:]):
            if a["worker"] != b["worker"] and b["ts_us"] < ts_us(a["lease_until"]):
                bad.append((mid, a["worker"], b["worker"]))
    return bad


# -- tests ---------------------------------------------------------------------

def test_publishes_each_row_with_its_id_headers_and_exact_payload(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 30)
    relay = start_relay(procs, db, sock)
    wait_published(db, ids)

    rows = {r[0]: r for r in query(
        db, "SELECT id::text, aggregate_id::text, aggregate_version, event_type, schema_version,"
            " payload::text, trace_parent, attempts, locked_by::text, locked_until, lock_id::text,"
            " to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            " FROM outbox_messages")}
    start = relay.events("start")[0]
    for r in rows.values():
        assert r[7] == 1, "one claim per row when nothing fails"
        assert r[8] == start["worker"], "locked_by keeps the worker that published"
        assert r[9] is None, "the lease is released when marked"
    # lock_id fences one claim, not one worker: as many tokens as claims.
    claim_tokens = {c["token"] for c in relay.events("claim")}
    assert len(claim_tokens) == len(relay.events("claim")) and start["worker"] not in claim_tokens
    assert {r[10] for r in rows.values()} <= claim_tokens

    # Every row arrives once, byte for byte, with its headers, in claim order.
    with broker_connect(sock, client="pytest-sub") as sub:
        sub.subscribe("payments", "check", prefetch=100, ordered=False)
        got = []
        for _ in ids:
            d = sub.next_delivery(timeout=5)
            assert d is not None, f"only {len(got)} of {len(ids)} deliveries came"
            got.append(d)
            sub.ack(d["tag"])
    assert [d["message_id"] for d in got] == ids, "published in (occurred_at, id) order"
    for d in got:
        r = rows[d["message_id"]]
        assert d["type"] == r[3]
        assert d["partition_key"] == r[1]
        assert d["payload"] == r[5], "payload is jsonb::text exactly"
        assert d["headers"]["traceparent"] == r[6]
        assert d["headers"]["aggregate_version"] == r[2]
        assert d["headers"]["schema_version"] == r[4]
        assert d["headers"]["occurred_at"] == r[11]
    assert all(e["client"] == "relay-1" for e in stored(sock))

    claims = relay.events("claim")
    assert sum(c["n"] for c in claims) == 30
    assert all(c["worker"] == start["worker"] and c["lease_until"] for c in claims)
    assert relay.stop() == 0


def test_two_relays_on_1000_messages_never_hold_one_message_under_two_live_leases(
        db, procs, broker):
    _, sock = broker
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at)"
            " SELECT gen_random_uuid(), 'payment', gen_random_uuid(), 1, 'PaymentCreated', 1,"
            " jsonb_build_object('amount', i), now() - interval '1 minute' + i * interval '1 ms'"
            " FROM generate_series(1, 1000) AS i")
    ids = [r[0] for r in query(db, "SELECT id::text FROM outbox_messages")]
    r1 = start_relay(procs, db, sock, "relay-1", batch=20, lease_ms=1500)
    r2 = start_relay(procs, db, sock, "relay-2", batch=20, lease_ms=1500)
    wait_published(db, ids, timeout=60)

    published = {e["message_id"] for e in stored(sock)}
    assert published == set(ids), "every message published at least once, nothing else"
    claims = r1.events("claim") + r2.events("claim")
    assert {m for c in claims for m in c["ids"]} == set(ids)
    assert overlapping_leases(claims) == [], "a message was claimed under a live lease"
    workers = {c["worker"] for c in claims}
    assert len(workers) == 2, "both relays took part"
    # The database agrees: every row was last held by one of the two workers.
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE locked_by::text <> ALL(%s)",
                  (list(workers),)) == 0
    assert r1.stop() == 0 and r2.stop() == 0


def test_overlap_check_can_fail():
    """The live-lease check used above flags an overlapping claim."""
    a = {"ids": ["m"], "worker": "w1", "ts_us": ts_us("2026-01-01T00:00:00.000000Z"),
         "lease_until": "2026-01-01T00:00:30.000000Z"}
    b = {"ids": ["m"], "worker": "w2", "ts_us": ts_us("2026-01-01T00:00:10.000000Z"),
         "lease_until": "2026-01-01T00:00:40.000000Z"}
    assert overlapping_leases([a, b]) == [("m", "w1", "w2")]
    b["ts_us"] = ts_us("2026-01-01T00:00:30.000001Z")
    assert overlapping_leases([a, b]) == []


def relay_backend_idle(db):
    """True when some backend's last statement was the claim and it is idle:
    the relay is waiting for work."""
    return scalar(db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                      " AND state = 'idle' AND query LIKE 'WITH candidates AS%%'") > 0


def test_notify_wakes_an_idle_relay_long_before_its_poll(db, procs, broker):
    _, sock = broker
    relay = start_relay(procs, db, sock, idle_ms=60000)
    wait_for(lambda: relay_backend_idle(db), 10, "the relay idle after an empty claim")
    t0 = time.monotonic()
    ids = insert_rows(db, 1)
    wait_published(db, ids, timeout=10)
    assert time.monotonic() - t0 < 10, "published only by polling"
    assert relay.stop() == 0


def test_sigterm_finishes_the_message_in_flight_and_leaves_the_rest(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 5)
    # The first message is sent, then the relay stalls before the second:
    # SIGTERM arrives while the first is in flight.
    relay = start_relay(procs, db, sock, batch=5, lease_ms=30000,
                        faults="relay/before_publish=stall:1500@2")
    wait_for(lambda: relay.events("fault_hit"), 10, "the stall before the second publish")
    relay.signal(signal.SIGTERM)
    assert relay.wait_exit(15) == 0

    state = dict(query(db, "SELECT id::text, published_at IS NOT NULL FROM outbox_messages"))
    assert state[ids[0]] is True, "the message in flight was published and marked"
    assert not any(state[i] for i in ids[1:]), "the rest of the batch was not marked"
    assert [e["message_id"] for e in stored(sock)] == [ids[0]], "nor published"
    # Their leases stand; they expire and another relay takes the rows.
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE published_at IS NULL"
                      " AND locked_until > now()") == 4
    assert relay.events("stop")


def test_database_connection_loss_is_survived(db, procs, broker):
    _, sock = broker
    relay = start_relay(procs, db, sock)
    wait_for(lambda: relay_backend_idle(db), 10, "the relay idle")
    killed = scalar(db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        " AND backend_type = 'client backend'")
    assert killed >= 1
    ids = insert_rows(db, 3)
    wait_published(db, ids)
    assert [e for e in relay.events("reconnect") if e["target"] == "db"]
    assert len(relay.events("connect")) >= 3, "connected to the database again"
    assert relay.stop() == 0


def test_broker_restart_is_survived(db, procs, tmp_path):
    sock = str(tmp_path / "b.sock")
    b1 = procs.start("fakebroker", [binary("fakebroker"), "--socket", sock])
    wait_for(lambda: os.path.exists(sock), 10, "broker socket")
    first = insert_rows(db, 2)
    relay = start_relay(procs, db, sock)
    wait_published(db, first)
    b1.kill()
    second = insert_rows(db, 2)
    wait_for(lambda: [e for e in relay.events("reconnect") if e["target"] == "broker"]
             or [e for e in relay.events("publish") if not e["ok"]], 10,
             "the relay to notice the broker is gone")
    procs.start("fakebroker", [binary("fakebroker"), "--socket", sock])
    wait_published(db, second, timeout=20)
    assert {e["message_id"] for e in stored(sock)} >= set(second)
    assert relay.stop() == 0


def test_per_aggregate_order_holds_successors_behind_a_dead_letter(db, procs, broker):
    _, sock = broker
    with broker_connect(sock) as b:
        b.control(max_payload_bytes=300)
    agg = "6f1c2b7e-0000-4000-8000-000000000001"
    poison = json.dumps({"note": "x" * 400})
    v1 = insert_rows(db, 1, payload=poison, aggregate_ids=[agg], versions=[1], age_s=30)[0]
    v2, v3 = insert_rows(db, 2, aggregate_ids=[agg, agg], versions=[2, 3], age_s=20)
    other = insert_rows(db, 1, age_s=10)[0]
    relay = start_relay(procs, db, sock, order="per-aggregate", max_attempts=2)
    wait_for(lambda: scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages"
                                " WHERE id = %s", (v1,)), 20, "v1 dead-lettered")
    wait_published(db, [other])
    # Give the relay a few more claims, then check v2 and v3 were never taken.
    n = len(relay.events("claim"))
    wait_for(lambda: relay_backend_idle(db), 10, "the relay idle")
    claimed = {m for c in relay.events("claim") for m in c["ids"]}
    assert v2 not in claimed and v3 not in claimed, "a successor overtook its predecessor"
    assert scalar(db, "SELECT count(*) FROM outbox_messages WHERE id IN (%s, %s)"
                      " AND attempts = 0", (v2, v3)) == 2
    assert n >= 2

    # Lift the limit and requeue v1: then v1, v2, v3 go out in version order.
    with broker_connect(sock) as b:
        b.control(max_payload_bytes=0)
    out = subprocess.run([binary("outboxctl"), "--db", db, "requeue", v1],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    wait_published(db, [v1, v2, v3])
    offsets = {e["message_id"]: e["offset"] for e in stored(sock, {v1, v2, v3})}
    assert offsets[v1] < offsets[v2] < offsets[v3]
    assert relay.stop() == 0


def plan_of_claim(db, order="fifo"):
    sql = subprocess.run([binary("outbox-relay"), "--print-sql", "claim", "--order", order],
                         check=True, capture_output=True, text=True).stdout
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DEALLOCATE ALL")
        conn.execute(f"PREPARE claim_plan(uuid, int, bigint, uuid) AS {sql}")
        conn.execute("BEGIN")
        plan = conn.execute("EXPLAIN (FORMAT JSON) EXECUTE claim_plan"
                            "(gen_random_uuid(), 100, 30000, gen_random_uuid())").fetchone()[0]
        conn.execute("ROLLBACK")
    return plan


def nodes(plan):
    """Every node of an EXPLAIN (FORMAT JSON) plan, depth first."""
    out = []
    stack = [plan[0]["Plan"]]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.get("Plans", []))
    return out


def claim_walks_index_in_order(plan):
    ns = nodes(plan)
    scans = [n for n in ns if n.get("Index Name") == "ix_outbox_claim_order"]
    sorts = [n for n in ns if n["Node Type"] in ("Sort", "Incremental Sort")]
    return bool(scans) and not sorts


def test_claim_walks_the_claim_order_index_without_sorting(db):
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at)"
            " SELECT gen_random_uuid(), 'payment', gen_random_uuid(), 1, 'PaymentCreated', 1,"
            " '{}'::jsonb, now() - interval '1 day' + i * interval '1 ms'"
            " FROM generate_series(1, 50000) AS i")
        conn.execute("ANALYZE outbox_messages")
    plan = plan_of_claim(db)
    assert claim_walks_index_in_order(plan), json.dumps(plan, indent=1)
    assert claim_walks_index_in_order(plan_of_claim(db, "per-aggregate"))
    # The check can fail: with the source article's (README) index alone the claim sorts.
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DROP INDEX ix_outbox_claim_order")
    assert not claim_walks_index_in_order(plan_of_claim(db))


def rows_read(plan):
    """Rows the claim's candidate scans read (returned or removed by a
    filter): the scans under the candidates CTE, whatever their kind."""
    cte = [n for n in nodes(plan) if n.get("Subplan Name") == "CTE candidates"]
    assert len(cte) == 1, json.dumps(plan, indent=1)
    stack, total = [cte[0]], 0
    while stack:
        n = stack.pop()
        stack.extend(n.get("Plans", []))
        if n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Seq Scan"):
            total += n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)
    return total


def analyze_claim(db, order="fifo", walk=False):
    """EXPLAIN ANALYZE of the relay's claim, rolled back.  walk: steer the
    planner to walk an index in order (no bitmap scan, no sort), the plan a
    large backlog gets."""
    sql = subprocess.run([binary("outbox-relay"), "--print-sql", "claim", "--order", order],
                         check=True, capture_output=True, text=True).stdout
    with psycopg.connect(db, autocommit=True) as conn:
        if walk:
            conn.execute("SET enable_bitmapscan = off")
            conn.execute("SET enable_sort = off")
        conn.execute(f"PREPARE claim_plan(uuid, int, bigint, uuid) AS {sql}")
        conn.execute("BEGIN")
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_plan"
                            "(gen_random_uuid(), 100, 30000, gen_random_uuid())").fetchone()[0]
        conn.execute("ROLLBACK")
    return plan


def test_claim_does_not_walk_the_rows_backing_off(db):
    # 20,000 rows a failed publish sent into backoff, at the head of the claim
    # order (the oldest), then 300 fresh rows and 20 retried rows now due.
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at, attempts, next_attempt_at,"
            " last_error)"
            " SELECT gen_random_uuid(), 'payment', gen_random_uuid(), 1, 'PaymentCreated', 1,"
            " '{}'::jsonb, now() - interval '2 hours' + i * interval '1 ms', 3,"
            " now() + interval '1 hour', 'broker refused'"
            " FROM generate_series(1, 20000) AS i")
        conn.execute(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at)"
            " SELECT gen_random_uuid(), 'payment', gen_random_uuid(), 1, 'PaymentCreated', 1,"
            " '{}'::jsonb, now() - interval '1 hour' + i * interval '1 ms'"
            " FROM generate_series(1, 300) AS i")
        due = [r[0] for r in conn.execute(
            "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at, attempts, next_attempt_at,"
            " last_error)"
            " SELECT gen_random_uuid(), 'payment', gen_random_uuid(), 1, 'PaymentCreated', 1,"
            " '{}'::jsonb, now() - interval '30 minutes' + i * interval '1 ms', 2,"
            " now() - interval '1 second', 'broker refused'"
            " FROM generate_series(1, 20) AS i RETURNING id::text").fetchall()]
        conn.execute("ANALYZE outbox_messages")
    # Whichever plan the planner picks for this mix, none reads the rows in
    # backoff: it walks the fresh rows in claim order, or reads the due ones.
    for order in ("fifo", "per-aggregate"):
        for walk in (False, True):
            plan = analyze_claim(db, order, walk)
            assert rows_read(plan) <= 1000, (order, walk, json.dumps(plan, indent=1))
    # The retried rows that are due go first, then fresh ones in claim order.
    relay_sql = subprocess.run([binary("outbox-relay"), "--print-sql", "claim"], check=True,
                               capture_output=True, text=True).stdout
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("BEGIN")
        got = [str(r[0]) for r in conn.execute(
            relay_sql.replace("$1::uuid", "gen_random_uuid()").replace("$2::int", "100")
            .replace("$3::bigint", "30000").replace("$4::uuid", "gen_random_uuid()")).fetchall()]
        conn.execute("ROLLBACK")
    assert len(got) == 100 and set(due) <= set(got)
    # The check can fail: with one index over every pending row (schema
    # version 1) a claim that walks it reads all 20,000 rows in backoff.
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("DROP INDEX ix_outbox_claim_order")
        conn.execute("CREATE INDEX ix_outbox_claim_order ON outbox_messages (occurred_at, id)"
                     " WHERE published_at IS NULL AND dead_lettered_at IS NULL")
        conn.execute("ANALYZE outbox_messages")
    assert rows_read(analyze_claim(db, walk=True)) > 20000


def relay_statement(which):
    return subprocess.run([binary("outbox-relay"), "--print-sql", which], check=True,
                          capture_output=True, text=True).stdout


def test_a_settle_of_an_old_claim_cannot_touch_the_same_workers_newer_claim(db):
    """The fence is the claim, not the worker: a relay whose lease on a row
    expired and that claimed the row again must not be able to retry, dead
    letter or mark it under its old claim (with one token per worker, the old
    claim's retry cleared the new claim's lease)."""
    [mid] = insert_rows(db, 1)
    worker, old, new = (str(uuid.uuid4()) for _ in range(3))
    # EXECUTE takes no bound parameters: the client cursor inlines them.
    with psycopg.connect(db, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute("PREPARE claim(uuid, int, bigint, uuid) AS " + relay_statement("claim"))
        conn.execute("PREPARE mark(uuid[], uuid) AS " + relay_statement("mark"))
        conn.execute("PREPARE retry(uuid, uuid, bigint, text) AS " + relay_statement("retry"))
        conn.execute("PREPARE dead(uuid, uuid, text) AS " + relay_statement("dead_letter"))
        # A lease of 0 ms has expired by the next statement.
        assert len(conn.execute("EXECUTE claim(%s::uuid, 1, 0, %s::uuid)", (old, worker)).fetchall()) == 1
        assert len(conn.execute("EXECUTE claim(%s::uuid, 1, 60000, %s::uuid)",
                                (new, worker)).fetchall()) == 1
        assert conn.execute("EXECUTE retry(%s::uuid, %s::uuid, 1000, 'refused')", (mid, old)).rowcount == 0
        assert conn.execute("EXECUTE dead(%s::uuid, %s::uuid, 'refused')", (mid, old)).rowcount == 0
        assert conn.execute("EXECUTE mark(%s::uuid[], %s::uuid)", ([mid], old)).rowcount == 0
        assert conn.execute("EXECUTE mark(%s::uuid[], %s::uuid)", ([mid], new)).rowcount == 1
        # Published once: a second mark, even under the live token, is refused.
        assert conn.execute("EXECUTE mark(%s::uuid[], %s::uuid)", ([mid], new)).rowcount == 0
    assert query(db, "SELECT lock_id::text, locked_by::text, attempts, last_error,"
                     " published_at IS NOT NULL FROM outbox_messages")[0] == \
        (new, worker, 2, None, True)


def test_a_backlog_costs_one_commit_per_batch(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 400)
    relay = start_relay(procs, db, sock, batch=50, lease_ms=60000)
    wait_published(db, ids)
    assert relay.stop() == 0
    # Every batch but the last was marked in the transaction that claimed a
    # batch ahead (batch k is marked while k+1 is at the broker, with the
    # claim of k+2): the database stamped both with one transaction time, so
    # the rows' published_at is that claim's locked_until minus the lease.
    published = {r[0]: r[1] for r in query(
        db, "SELECT id::text, to_char(published_at AT TIME ZONE 'UTC',"
            " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM outbox_messages")}
    claims = relay.events("claim")
    marks = relay.events("mark")
    assert len(claims) == 8 and len(marks) == 8
    # The last batch too: its mark carried the claim that found nothing.
    assert [m["with_claim"] for m in marks] == [True] * 8
    for mark, claim in zip(marks, claims[2:]):
        stamps = {published[i] for i in mark["ids"]}
        assert len(stamps) == 1, "one mark statement, one transaction time"
        assert ts_us(stamps.pop()) == ts_us(claim["lease_until"]) - 60000 * 1000
    assert scalar(db, "SELECT max(attempts) FROM outbox_messages") == 1
    assert len(stored(sock, set(ids))) == 400


def test_a_claim_failing_beside_a_mark_does_not_take_the_mark_with_it(db, procs, broker):
    _, sock = broker
    ids = insert_rows(db, 200)
    # Refuse the claim of row 120 once.  Batches of 50: the first is claimed
    # alone, the second alone while the first is at the broker, the third
    # with the first's mark; so that claim fails and rolls the mark back.
    with psycopg.connect(db, autocommit=True) as conn:
        # A sequence, because nextval is not rolled back with the claim.
        conn.execute("CREATE SEQUENCE refusals")
        conn.execute(f"""
            CREATE FUNCTION refuse_claim() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.id = '{ids[120]}' AND NEW.attempts > OLD.attempts
                   AND nextval('refusals') = 1 THEN
                    RAISE EXCEPTION 'claim refused by the test';
                END IF;
                RETURN NEW;
            END $$""")
        conn.execute("CREATE TRIGGER refuse_claim BEFORE UPDATE ON outbox_messages"
                     " FOR EACH ROW EXECUTE FUNCTION refuse_claim()")
    relay = start_relay(procs, db, sock, batch=50, lease_ms=60000)
    # With a 60 s lease, a first batch whose mark was lost would stay pending
    # for a minute: published within 20 s means it was marked again at once.
    wait_published(db, ids, timeout=20)
    assert relay.stop() == 0
    failed = relay.events("claim_failed")
    assert len(failed) == 1 and failed[0]["sqlstate"] == "P0001"
    first = relay.events("claim")[0]["ids"]
    mark = next(m for m in relay.events("mark") if set(first) <= set(m["ids"]))
    assert mark["with_claim"] is False
    assert scalar(db, "SELECT max(attempts) FROM outbox_messages") == 1
    assert len(stored(sock, set(ids))) == 200


def test_bad_flags_exit_2_with_a_message(db, tmp_path):
    relay = binary("outbox-relay")
    cases = [
        ([relay, "--db", db, "--broker", "x", "--batch", "0"], "--batch"),
        ([relay, "--broker", "x"], "--db"),
        ([relay, "--db", db], "--broker"),
        ([relay, "--db", db, "--broker", "x", "--lease-ms", "soon"], "'soon'"),
        ([relay, "--db", db, "--broker", "x", "--order", "random"], "random"),
        ([relay, "--db", db, "--broker", "x", "--backoff-base-ms", "9",
          "--backoff-cap-ms", "5"], "cap"),
        ([relay, "--nonsense", "1"], "--nonsense"),
        ([relay, "--db", db, "--broker", "amqp://"], "--broker: broker URL names no host"),
        ([relay, "--db", db, "--broker", "amqp://u:s3cret@h:70000/"], "malformed broker URL"),
        ([relay, "--db", db, "--broker", "amqp://h/?exchange=amq.direct"], "exchange"),
        ([relay, "--db", db, "--broker", "amqp://h/?route=x"], "unknown broker URL parameter"),
        ([relay, "--db", db, "--broker", "amqps://h/"], "TLS"),
        ([relay, "--db", db, "--broker", "http://h/"], "neither an amqp:// URL"),
        ([relay, "--db", db, "--broker", "/tmp/" + "s" * 120], "socket path is longer"),
    ]
    env = dict(os.environ)
    env.pop("CW_DB", None)
    for args, word in cases:
        out = subprocess.run(args, capture_output=True, text=True, timeout=10, env=env)
        assert out.returncode == 2, (args, out.stderr)
        assert word in out.stderr, (args, out.stderr)
        assert "s3cret" not in out.stderr
    out = subprocess.run([relay, "--db", db, "--broker", "x"], capture_output=True, text=True,
                         timeout=10, env=dict(env, CW_FAULTS="relay/after_claim=explode"))
    assert out.returncode == 2 and "explode" in out.stderr


def test_unreachable_database_is_retried_and_never_logged_with_its_secret(procs, broker, tmp_path):
    _, sock = broker
    bad = f"host={tmp_path} port=1 user=app password=hunter2 dbname=nowhere connect_timeout=2"
    relay = start_relay(procs, bad, sock)
    wait_for(lambda: len(relay.events("reconnect")) >= 2, 15, "two reconnect attempts")
    assert relay.alive()
    text = open(relay.events_path, encoding="utf-8").read() + relay.stderr_text()
    assert "hunter2" not in text and "password" not in text
    r = relay.events("reconnect")
    assert r[0]["target"] == "db" and r[1]["backoff_ms"] > 0
    assert relay.stop() == 0
