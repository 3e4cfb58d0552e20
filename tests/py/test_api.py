"""payments-api against a real PostgreSQL: what one command writes, HTTP
idempotency (replay, conflict, races), authorize/capture, reads, every kind of
bad input, and a graceful stop.  Every test asserts on database rows."""
# needs: pg
import datetime
import json
import re
import signal
import socket
import threading
import time

import pytest

from apiclient import assert_problem, canonical_hash, counts, start_api
from cwtest import binary, proc_state, query, scalar, wait_for

TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
ONE = {"payments": 1, "outbox_messages": 1, "idempotency_records": 1}


@pytest.fixture
def api(procs, db):
    return start_api(procs, db)


def test_create_writes_payment_outbox_row_and_record_in_one_go(api, db):
    r = api.post_payment("key-1", amount="12.5", currency="EUR", client="shop-1")
    assert r.status == 201, r
    body = r.json()
    assert set(body) == {"id", "status"} and body["status"] == "created"
    pid = body["id"]
    assert r.header("location") == f"/payments/{pid}"
    assert r.header("content-type") == "application/json"
    assert r.header("idempotent-replayed") is None

    assert query(db, "SELECT client_id, amount::text, currency, status, version"
                     " FROM payments WHERE id = %s", (pid,)) == \
        [("shop-1", "12.50", "EUR", "created", 1)]

    rows = query(db, "SELECT id::text, aggregate_type, aggregate_id::text, aggregate_version,"
                     " event_type, schema_version, payload::text, trace_parent, occurred_at,"
                     " published_at, attempts FROM outbox_messages")
    assert len(rows) == 1
    (eid, agg_type, agg_id, version, etype, schema, payload_text, trace, occurred_at,
     published_at, attempts) = rows[0]
    assert (agg_type, agg_id, version, etype, schema) == \
        ("payment", pid, 1, "PaymentCreated", 1)
    assert published_at is None and attempts == 0
    assert TRACEPARENT.match(trace), trace
    payload = json.loads(payload_text)
    assert set(payload) == {"EventId", "PaymentId", "Amount", "Currency", "AggregateVersion",
                            "OccurredAtUtc"}
    assert payload["EventId"] == eid and payload["PaymentId"] == pid
    assert payload["Amount"] == "12.50"          # exact decimal text, never a float
    assert '"Amount": "12.50"' in payload_text
    assert payload["Currency"] == "EUR" and payload["AggregateVersion"] == 1
    occurred = datetime.datetime.fromisoformat(payload["OccurredAtUtc"].replace("Z", "+00:00"))
    assert occurred == occurred_at

    # The idempotency record holds the hash of the canonical request and the
    # very bytes that were sent.
    rec = query(db, "SELECT client_id, idempotency_key, request_hash, payment_id::text,"
                    " status_code, response_body FROM idempotency_records")
    assert rec == [("shop-1", "key-1",
                    canonical_hash("POST", "/payments", '{"amount":"12.50","currency":"EUR"}'),
                    pid, 201, r.body.decode())]


def test_traceparent_is_kept_when_valid_and_created_otherwise(api, db):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    a = api.post_payment("t-1", headers={"traceparent": tp})
    b = api.post_payment("t-2", headers={"traceparent": tp.upper()})
    c = api.post_payment("t-3")
    assert [x.status for x in (a, b, c)] == [201, 201, 201]
    traces = dict(query(db, "SELECT aggregate_id::text, trace_parent FROM outbox_messages"))
    assert traces[a.json()["id"]] == tp
    for other in (b, c):
        t = traces[other.json()["id"]]
        assert TRACEPARENT.match(t) and t != tp and t[3:35] != "0" * 32


def test_same_key_same_request_replays_the_stored_response_byte_for_byte(api, db):
    first = api.post_payment("retry-me", amount="99.90", currency="USD")
    assert first.status == 201
    # The same logical request, written differently: same canonical form.
    again = api.post_payment("retry-me", body='{ "currency": "USD", "amount": "099.9" }')
    third = api.post_payment("retry-me", amount="99.90", currency="USD")
    for r in (again, third):
        assert r.status == 201
        assert r.body == first.body
        assert r.header("location") == first.header("location")
        assert r.header("idempotent-replayed") == "true"
    assert counts(db) == ONE
    assert len(api.proc.events("replay")) == 2


def test_same_key_different_request_is_refused(api, db):
    first = api.post_payment("k", amount="10.00")
    assert first.status == 201
    for other in (api.post_payment("k", amount="10.01"),
                  api.post_payment("k", amount="10.00", currency="USD")):
        assert_problem(other, 422, "key-reused")
    assert counts(db) == ONE
    assert scalar(db, "SELECT amount::text FROM payments") == "10.00"


def test_keys_are_scoped_by_client(api, db):
    a = api.post_payment("shared", client="client-a")
    b = api.post_payment("shared", client="client-b")
    assert [x.status for x in (a, b)] == [201, 201]
    assert a.json()["id"] != b.json()["id"]
    assert sorted(r[0] for r in query(db, "SELECT client_id FROM idempotency_records")) == \
        ["client-a", "client-b"]
    assert counts(db)["outbox_messages"] == 2


def test_clients_that_do_not_say_who_they_are_share_nothing(api, db):
    """Without X-Client-Id there is no namespace for the key: two unrelated
    clients sending the same key would replay each other's answers (and see
    each other's payments), so the request is refused and nothing stored."""
    before = counts(db)
    for body in ({"amount": "1.00", "currency": "EUR"}, {"amount": "2.00", "currency": "EUR"}):
        r = api.post_payment("same-key", amount=body["amount"], client=None)
        assert_problem(r, 400, "missing-client-id")
    assert counts(db) == before
    pid = api.post_payment("k-owner", client="owner").json()["id"]
    r = api.command(pid, "authorize", "k-auth", client=None)
    assert_problem(r, 400, "missing-client-id")
    assert counts(db)["outbox_messages"] == before["outbox_messages"] + 1


def test_authorize_then_capture_emit_versions_2_and_3(api, db):
    pid = api.post_payment("c-1", amount="5").json()["id"]
    auth = api.command(pid, "authorize", "a-1")
    assert auth.status == 200 and auth.json() == {"id": pid, "status": "authorized"}
    cap = api.command(pid.upper(), "capture", "p-1")  # ids are case-insensitive
    assert cap.status == 200 and cap.json() == {"id": pid, "status": "captured"}

    rows = query(db, "SELECT aggregate_version, event_type, payload::jsonb->>'AggregateVersion',"
                     " payload::jsonb->>'PaymentId', payload::jsonb ? 'Amount'"
                     " FROM outbox_messages WHERE aggregate_id = %s ORDER BY 1", (pid,))
    assert rows == [(1, "PaymentCreated", "1", pid, True),
                    (2, "PaymentAuthorized", "2", pid, False),
                    (3, "PaymentCaptured", "3", pid, False)]
    assert query(db, "SELECT status, version FROM payments") == [("captured", 3)]

    # Replays answer the stored response; nothing new is written.
    again = api.command(pid, "authorize", "a-1")
    assert again.status == 200 and again.body == auth.body
    assert again.header("idempotent-replayed") == "true"
    # One key, another command: a different request.
    assert_problem(api.command(pid, "capture", "a-1"), 422, "key-reused")
    # Illegal transitions: 409, nothing written.
    assert_problem(api.command(pid, "authorize", "a-2"), 409, "illegal-transition")
    assert_problem(api.command(pid, "capture", "p-2"), 409, "illegal-transition")
    other = api.post_payment("c-2").json()["id"]
    assert_problem(api.command(other, "capture", "p-3"), 409, "illegal-transition")
    # Unknown payment: 404, and its key stays free.
    unknown = "00000000-0000-4000-8000-000000000000"
    assert_problem(api.command(unknown, "authorize", "a-9"), 404, "payment-not-found")
    assert counts(db) == {"payments": 2, "outbox_messages": 4, "idempotency_records": 4}
    assert query(db, "SELECT status, version FROM payments WHERE id = %s", (other,)) == \
        [("created", 1)]


def test_get_payment_and_healthz(api, db):
    pid = api.post_payment("g-1", amount="0.01", currency="JPY").json()["id"]
    r = api.get(f"/payments/{pid}")
    assert r.status == 200
    assert r.json() == {"id": pid, "status": "created", "amount": "0.01", "currency": "JPY",
                        "version": 1}
    assert_problem(api.get("/payments/00000000-0000-4000-8000-000000000000"), 404,
                   "payment-not-found")
    assert_problem(api.get("/payments/not-a-uuid"), 404, "not-found")
    h = api.get("/healthz")
    assert h.status == 200 and h.json()["status"] == "ok"


JSON = {"Content-Type": "application/json"}
VALID = '{"amount":"12.50","currency":"EUR"}'


def bad_requests():
    """(what, method, path, headers, raw_headers, body, status, slug)"""
    k = {"Idempotency-Key": "bad-input", **JSON}
    big = '{"amount":"1","currency":"EUR","pad":"' + "x" * (70 * 1024) + '"}'
    return [
        ("malformed json", "POST", "/payments", k, None, '{"amount":', 400, "malformed-json"),
        ("empty body", "POST", "/payments", k, None, "", 400, "malformed-json"),
        ("not an object", "POST", "/payments", k, None, '["12.50","EUR"]', 400, "invalid-body"),
        ("missing amount", "POST", "/payments", k, None, '{"currency":"EUR"}', 400,
         "invalid-body"),
        ("missing currency", "POST", "/payments", k, None, '{"amount":"1"}', 400,
         "invalid-body"),
        ("amount as number", "POST", "/payments", k, None, '{"amount":12.5,"currency":"EUR"}',
         400, "invalid-body"),
        ("currency as number", "POST", "/payments", k, None, '{"amount":"1","currency":978}',
         400, "invalid-body"),
        ("unknown field", "POST", "/payments", k, None,
         '{"amount":"1","currency":"EUR","extra":true}', 400, "invalid-body"),
        ("repeated field", "POST", "/payments", k, None,
         '{"amount":"1","amount":"2","currency":"EUR"}', 400, "invalid-body"),
        ("zero amount", "POST", "/payments", k, None, '{"amount":"0.00","currency":"EUR"}',
         422, "invalid-amount"),
        ("negative amount", "POST", "/payments", k, None, '{"amount":"-3","currency":"EUR"}',
         422, "invalid-amount"),
        ("three decimals", "POST", "/payments", k, None, '{"amount":"1.005","currency":"EUR"}',
         422, "invalid-amount"),
        ("absurdly large", "POST", "/payments", k, None,
         '{"amount":"1000000000000.01","currency":"EUR"}', 422, "invalid-amount"),
        ("not a decimal", "POST", "/payments", k, None, '{"amount":"1e3","currency":"EUR"}',
         422, "invalid-amount"),
        ("lowercase currency", "POST", "/payments", k, None, '{"amount":"1","currency":"eur"}',
         422, "invalid-currency"),
        ("four-letter currency", "POST", "/payments", k, None,
         '{"amount":"1","currency":"EURO"}', 422, "invalid-currency"),
        ("body over 64 KiB", "POST", "/payments", k, None, big, 413, "body-too-large"),
        ("chunked body over 64 KiB", "POST", "/payments", k,
         [("Transfer-Encoding", "chunked")], big, 413, "body-too-large"),
        ("wrong content type", "POST", "/payments", {"Idempotency-Key": "x",
                                                     "Content-Type": "text/plain"}, None,
         VALID, 415, "unsupported-media-type"),
        ("no content type", "POST", "/payments", {"Idempotency-Key": "x"}, None, VALID, 415,
         "unsupported-media-type"),
        ("missing key", "POST", "/payments", JSON, None, VALID, 400, "missing-idempotency-key"),
        ("oversized key", "POST", "/payments", {"Idempotency-Key": "k" * 256, **JSON}, None,
         VALID, 400, "invalid-idempotency-key"),
        ("non-printable key", "POST", "/payments", {"Idempotency-Key": "a\x7fb", **JSON}, None,
         VALID, 400, "invalid-idempotency-key"),
        ("repeated key", "POST", "/payments", JSON,
         [("Idempotency-Key", "one"), ("Idempotency-Key", "two")], VALID, 400,
         "invalid-idempotency-key"),
        ("bad client id", "POST", "/payments", {"X-Client-Id": "not ok!", **k}, None, VALID,
         400, "invalid-client-id"),
        ("unknown route", "POST", "/refunds", k, None, VALID, 404, "not-found"),
        ("trailing slash", "POST", "/payments/", k, None, VALID, 404, "not-found"),
        ("wrong method", "PUT", "/payments", k, None, VALID, 405, "method-not-allowed"),
        ("get on collection", "GET", "/payments", {}, None, None, 405, "method-not-allowed"),
        ("fields on authorize", "POST",
         "/payments/00000000-0000-4000-8000-000000000000/authorize",
         k, None, '{"amount":"1"}', 400, "invalid-body"),
    ]


def test_every_bad_input_is_a_problem_and_stores_nothing(api, db):
    ok = api.post_payment("the-good-one")
    assert ok.status == 201
    before = counts(db)
    for what, method, path, headers, raw, body, status, slug in bad_requests():
        r = api.request(method, path, body, headers, raw_headers=raw)
        try:
            assert_problem(r, status, slug)
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None
        if status == 405:
            assert r.header("allow") == "POST", what
        assert counts(db) == before, what
    # The refused requests did not burn their keys either.
    assert api.post_payment("bad-input").status == 201
    assert api.post_payment("x").status == 201
    statuses = [e["status"] for e in api.proc.events("request")]
    assert statuses.count(413) == 2 and statuses.count(415) == 2


def test_a_method_that_is_no_method_never_reaches_the_events(api, db):
    """The request line's method is the client's text: a secret or bytes
    that are not UTF-8 put there must not be written to the events."""
    for method in (b"password=hunter2", b"GET\xff"):
        with socket.create_connection(("127.0.0.1", api.port), timeout=5) as s:
            s.sendall(method + b" /payments HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            s.settimeout(5)
            answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 4"), answer
        assert b"hunter2" not in answer
    wait_for(lambda: len(api.proc.events("request")) >= 2, 10, "both requests logged")
    shown = [e["method"] for e in api.proc.events("request")]
    assert shown == ["(not a method)", "(not a method)"], shown
    with open(api.proc.events_path, "rb") as f:
        raw = f.read()
    assert b"hunter2" not in raw and b"\xff" not in raw
    assert scalar(db, "SELECT count(*) FROM payments") == 0


def race(api, n, key, body=VALID):
    """n clients send the same request at the same moment."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def client(i):
        barrier.wait(timeout=10)
        results[i] = api.request("POST", "/payments", body,
                                 {"Idempotency-Key": key, **JSON}, timeout=30)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r is not None for r in results), "a racing client got no answer"
    return results


def check_race(results, db):
    created = [r for r in results if r.status == 201]
    fresh = [r for r in created if r.header("idempotent-replayed") is None]
    assert len(fresh) == 1, results
    assert all(r.status in (201, 409) for r in results), results
    for r in created:
        assert r.body == fresh[0].body
    for r in results:
        if r.status == 409:
            assert_problem(r, 409, "key-in-flight")
            assert r.header("retry-after") == "1"
    assert counts(db) == ONE
    return fresh[0], [r for r in results if r.status == 409]


def test_twenty_way_race_on_one_key_makes_one_payment(procs, db):
    # The first request to reach COMMIT holds its key for 3 s, so the others
    # meet it in flight (409) and later find it stored (replay).  300 ms was
    # once too short: on a loaded machine every other client arrived after
    # the COMMIT and was replayed, and no request met the key in flight.
    api = start_api(procs, db, env={"CW_FAULTS": "api/before_commit=stall:3000@1"})
    fresh, conflicts = check_race(race(api, 20, "race-key"), db)
    assert conflicts, "no request met the first one in flight"
    assert len(api.proc.events("conflict")) == len(conflicts)
    # After the race, a retry gets the stored answer.
    again = api.post_payment("race-key")
    assert again.status == 201 and again.body == fresh.body
    assert again.header("idempotent-replayed") == "true"


def test_twenty_way_race_without_help(api, db):
    check_race(race(api, 20, "plain-race"), db)


def test_sigterm_finishes_the_request_in_flight_and_exits_0(procs, db):
    api = start_api(procs, db, env={"CW_FAULTS": "api/before_commit=stall:1000@1"})
    result = {}
    t = threading.Thread(target=lambda: result.update(r=api.post_payment("in-flight")))
    t.start()
    wait_for(lambda: api.proc.events("fault_hit"), 10, "the request to reach before_commit")
    api.proc.signal(signal.SIGTERM)
    wait_for(lambda: api.proc.events("stopping"), 10, "the stopping event")
    # No new connections once stopping...
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", api.port), timeout=2).close()
    # ...but the request in flight completes.
    assert api.proc.wait_exit(15) == 0
    t.join(timeout=15)
    assert result["r"].status == 201, result
    assert counts(db) == ONE
    assert api.proc.events("stop")[-1]["abandoned_requests"] == 0


def test_bad_command_line_exits_2(procs, db):
    for args in (["--listen", "nowhere"], ["--threads", "0"], ["--bogus", "1"]):
        p = procs.start("api-bad", [binary("payments-api"), "--db", db, *args])
        assert p.wait_exit(10) == 2, args
    p = procs.start("api-faults", [binary("payments-api"), "--db", db],
                    env={"CW_FAULTS": "api/before_commit=explode"})
    assert p.wait_exit(10) == 2
    assert "CW_FAULTS" in p.stderr_text()
    assert proc_state(p.pid) is None


def _db_behind(db, port):
    """db's connection string, reached over loopback TCP at port instead."""
    kv = dict(x.split("=", 1) for x in db.split())
    kv.update(host="'127.0.0.1'", port=f"'{port}'", sslmode="'disable'")
    return " ".join(f"{k}={v}" for k, v in kv.items())


def _pg_socket(db):
    kv = {k: v.strip("'") for k, v in (x.split("=", 1) for x in db.split())}
    return f"{kv['host']}/.s.PGSQL.{kv['port']}"


def test_start_waits_for_an_unreachable_database(procs, db):
    """At start the API retries a database it cannot reach (still starting,
    failing over, behind a silent link) for up to --db-wait-ms, as the relay
    and the consumers do; a database that appears meanwhile is used, one that
    never does ends in exit 1 with the error; a stop ends the wait at once."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: connections are refused

    never = procs.start("api-never", [binary("payments-api"), "--db", _db_behind(db, port),
                                      "--listen", "127.0.0.1:0", "--db-wait-ms", "1500"])
    assert never.wait_exit(15) == 1
    assert len(never.events("db_wait")) >= 2, never.events("db_wait")
    assert "could not connect" in never.stderr_text()

    stopped = procs.start("api-stopped", [binary("payments-api"), "--db",
                                          _db_behind(db, port), "--listen", "127.0.0.1:0"])
    wait_for(lambda: stopped.events("db_wait"), 10, "the API to wait for its database")
    stopped.signal(signal.SIGTERM)
    assert stopped.wait_exit(5) == 0

    # The database appears 1.5 s after the API started: a forwarder opens
    # the port then, to the cluster's socket.
    def forward():
        time.sleep(1.5)
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(16)
        ls.settimeout(20)
        try:
            while True:
                c, _ = ls.accept()
                u = socket.socket(socket.AF_UNIX)
                u.connect(_pg_socket(db))
                for a, b in ((c, u), (u, c)):
                    threading.Thread(target=_pump, args=(a, b), daemon=True).start()
        except OSError:
            pass
        finally:
            ls.close()

    threading.Thread(target=forward, daemon=True).start()
    late = start_api(procs, _db_behind(db, port))
    assert late.proc.events("db_wait"), "the API should have waited"
    assert late.post_payment("after-wait").status == 201
    assert counts(db) == ONE


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
