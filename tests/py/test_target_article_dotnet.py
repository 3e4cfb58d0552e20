"""The article's own service in .NET (targets/article-dotnet): its API keeps
the Idempotency-Key contract the article asks for, judged on the database;
and as a target it passes the black-box crash windows hit from the wire (the
producer killed at its COMMIT's answer, the consumer killed at its ack),
judged from its tables and RabbitMQ's log.  Skipped, with the reason, where
dotnet or the target's Release build (scripts/setup makes it) is absent."""
# needs: pg rabbitmq
import http.client
import json
import os
import shutil
import socket
import uuid

import psycopg
import pytest

from cwtest import SOURCE_DIR, Proc, conninfo_with_db, crashwindow, pg_args, query, read_events, wait_for

TARGET_DIR = os.path.join(SOURCE_DIR, "targets", "article-dotnet")
PROFILE = os.path.join(TARGET_DIR, "profile.json")
BUILD = os.path.join(TARGET_DIR, "bin", "Release", "net10.0", "ArticlePayments.dll")


def missing():
    if shutil.which("dotnet") is None:
        return "dotnet is not installed: targets/article-dotnet cannot be built or run"
    if not os.path.isfile(BUILD):
        return "targets/article-dotnet is not built (scripts/setup builds it with dotnet build -c Release)"
    return None


pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture
def target_db(pg_cluster):
    """A fresh database with the target's schema; yields its key=value conninfo."""
    name = "article_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    conninfo = conninfo_with_db(pg_cluster, name)
    with open(os.path.join(TARGET_DIR, "schema.sql"), encoding="utf-8") as f:
        schema = f.read()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(schema)
    yield conninfo
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def npgsql(conninfo):
    """The Npgsql connection string for a libpq key=value conninfo."""
    kv = dict(part.split("=", 1) for part in conninfo.split())
    return f"Host={kv['host']};Port={kv.get('port', '5432')};Username={kv['user']};Database={kv['dbname']}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = json.dumps(body) if body is not None else None
        h = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    except OSError:
        return None, {}, b""
    finally:
        conn.close()


@pytest.fixture
def api(tmp_path, target_db):
    """The target's API on a free port; yields (port, conninfo)."""
    port = free_port()
    p = Proc("article-api", ["dotnet", BUILD, "api"], str(tmp_path / "api"),
             env={"ConnectionStrings__Payments": npgsql(target_db),
                  "ASPNETCORE_URLS": f"http://127.0.0.1:{port}"}, cwd=TARGET_DIR)
    try:
        wait_for(lambda: not p.alive() or request(port, "GET", "/health")[0] == 200, 60,
                 "the API answering GET /health")
        assert p.alive(), p.stderr_text()
        yield port, target_db
    finally:
        p.stop()
        p.stderr.close()


def test_the_idempotency_key_contract_is_kept_in_the_database(api):
    port, db = api
    pay = {"amount": "12.50", "currency": "EUR"}
    status, headers, first = request(port, "POST", "/payments", pay, {"Idempotency-Key": "k-1"})
    assert status == 201, first
    payment_id = json.loads(first)["id"]
    # One transaction wrote the payment, its event and the key's record.
    rows = query(db, "SELECT r.payment_id::text, r.event_id = o.id, o.aggregate_id::text, o.event_type,"
                     " o.published_at IS NULL, o.payload->>'EventId' = o.id::text"
                     " FROM idempotency_records r JOIN outbox_messages o ON o.id = r.event_id"
                     " WHERE r.idempotency_key = 'k-1'")
    assert rows == [(payment_id, True, payment_id, "PaymentCreated", True, True)]

    # The same key and the same request (12.5 is 12.50): the stored answer, byte for byte.
    status, headers, again = request(port, "POST", "/payments", {"amount": 12.5, "currency": "eur"},
                                     {"Idempotency-Key": "k-1"})
    assert status == 201 and again == first and headers.get("Idempotent-Replayed") == "true"
    # The same key with another request: refused.
    status, _, _ = request(port, "POST", "/payments", {"amount": "13.00", "currency": "EUR"},
                           {"Idempotency-Key": "k-1"})
    assert status == 422
    # Another client may use the same key for its own payment.
    status, _, other = request(port, "POST", "/payments", pay,
                               {"Idempotency-Key": "k-1", "X-Client-Id": "shop-2"})
    assert status == 201 and json.loads(other)["id"] != payment_id
    # No key, a bad amount: nothing stored.
    assert request(port, "POST", "/payments", pay)[0] == 400
    assert request(port, "POST", "/payments", {"amount": "-1", "currency": "EUR"},
                   {"Idempotency-Key": "k-bad"})[0] == 400
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM payments") == [(2, 2)]
    assert query(db, "SELECT count(*) FROM outbox_messages") == [(2,)]

    # A request whose key another transaction holds is told to come back
    # (409, Retry-After), never given a second payment.  This connection plays
    # that other request: it holds the key's transaction lock, as the API's
    # own transaction does while it writes.
    with psycopg.connect(db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('anonymous' || E'\\n' || 'k-2', 0))")
        status, headers, _ = request(port, "POST", "/payments", pay, {"Idempotency-Key": "k-2"})
        assert status == 409 and headers.get("Retry-After") == "1"
        holder.execute("SELECT pg_advisory_unlock_all()")
    status, _, _ = request(port, "POST", "/payments", pay, {"Idempotency-Key": "k-2"})
    assert status == 201
    assert query(db, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'k-2'") == [(1,)]


def test_the_wire_crash_windows_on_the_article_service(tmp_path, pg_cluster):
    """bb08 kills the API when PostgreSQL's answer to its COMMIT passes; bb10
    kills the consumer when its basic.ack leaves.  Both must fire, and the
    target must come through them with every event applied once."""
    out = tmp_path / "run"
    scenarios = [os.path.join(SOURCE_DIR, "scenarios", "blackbox", n)
                 for n in ("bb08-wire-producer-killed-after-commit.json",
                           "bb10-wire-consumer-killed-before-ack.json")]
    r = crashwindow("run", "--target", PROFILE, *scenarios, "--brief", "--out", out,
                    "--junit", tmp_path / "j.xml", *pg_args(pg_cluster), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["name"] == "article-dotnet" and res["broker"] == "rabbitmq"
    by_name = {sc["name"]: sc for sc in res["scenarios"]}
    for name, sc in by_name.items():
        assert sc["verdict"] == "pass", sc
        invs = {i["name"]: i for i in sc["invariants"]}
        for inv in ("nothing_lost", "effect_once", "broker_log_matches_outbox"):
            assert invs[inv]["verdict"] == "pass" and invs[inv]["checked"] > 0, (name, invs[inv])

    # bb08: seven payments acknowledged or recovered, seven events stored
    # by the broker once each and delivered to accounting.
    sc = by_name["bb08-wire-producer-killed-after-commit"]
    assert sc["counts"]["effects"] == 7 and sc["counts"]["outbox_rows"] == 7, sc["counts"]
    # bb10: the message whose ack was held came again, and was applied once.
    events = read_events(str(out / "bb10-wire-consumer-killed-before-ack" / "broker.events.jsonl"))
    deliveries = {}
    for e in events:
        if e["event"] == "deliver" and e["group"] == "accounting":
            deliveries.setdefault(e["message_id"], []).append(e)
    assert len(deliveries) == 5
    assert any(len(d) > 1 for d in deliveries.values()), "no message was delivered again"
    assert by_name["bb10-wire-consumer-killed-before-ack"]["counts"]["effects"] == 5
    # Each window fired once, at the frame it names, killing the process it names.
    fired = {name: [(f["point"], f["proc"], f["action"]) for f in sc["faults_fired"]]
             for name, sc in by_name.items()}
    assert fired == {"bb08-wire-producer-killed-after-commit": [("api->pg/commit_complete", "api", "kill")],
                     "bb10-wire-consumer-killed-before-ack": [("accounting->broker/ack", "accounting",
                                                               "kill")]}, fired
    assert 'name="target" value="article-dotnet"' in (tmp_path / "j.xml").read_text()
