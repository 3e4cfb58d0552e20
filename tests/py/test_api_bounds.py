"""payments-api against slow, greedy and malformed clients.

Every case ends the same way: a 4xx problem or a closed connection within
the request timeout, nothing stored, and the server still serving the next
client.  The API runs with a short --request-timeout-ms so the deadline is
measurable here; the benchmark scripts/bench-slowclients shows the cost of
200 slow clients to everyone else.  Requests are written on raw sockets:
the point is to send what well-behaved clients never do.
"""
# needs: pg
import json
import socket
import time

import psycopg
import pytest

from apiclient import counts, start_api
from cwtest import scalar, wait_for

TIMEOUT_MS = 1500
SLACK_S = 1.5          # the guard checks every 100 ms; a loaded machine is slower
NOTHING = {"payments": 0, "outbox_messages": 0, "idempotency_records": 0}
POST_HEAD = (b"POST /payments HTTP/1.1\r\nHost: t\r\nX-Client-Id: t\r\nIdempotency-Key: k-1\r\n"
             b"Content-Type: application/json\r\n")


@pytest.fixture
def api(procs, db):
    return start_api(procs, db, extra=["--request-timeout-ms", str(TIMEOUT_MS),
                                       "--max-conns-per-client", "8"])


def connect(api, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", api.port))
    return s


def outcome(s, timeout):
    """What the server did within timeout: ("response", status, headers,
    body) once a whole response arrived, ("closed",) when it closed first,
    ("nothing",) when neither happened."""
    deadline = time.monotonic() + timeout
    data = b""
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if chunk == b"":
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:])}
            if len(body) >= int(headers.get("content-length", "0")):
                return ("response", int(lines[0].split()[1]), headers, body)
    if time.monotonic() >= deadline and data == b"":
        return ("nothing",)
    return ("closed",)


def still_serving(api, db, key):
    r = api.post_payment(key)
    assert r.status == 201, r
    assert counts(db)["payments"] >= 1


def problem(out, status, slug):
    assert out[0] == "response", out
    _, code, headers, body = out
    assert code == status, out
    assert headers["content-type"] == "application/problem+json", headers
    p = json.loads(body)
    assert p["type"] == "urn:crashwindow:problem:" + slug and p["status"] == status, p
    return p


def test_oversized_body_by_content_length_is_refused_before_it_is_read(api, db):
    s = connect(api)
    s.sendall(POST_HEAD + b"Content-Length: 10000000\r\n\r\n" + b"x" * 1000)
    p = problem(outcome(s, 5), 413, "body-too-large")
    assert "10000000" in p["detail"]
    s.close()
    assert counts(db) == NOTHING
    still_serving(api, db, "after-413")


def test_too_many_header_fields_get_431_with_a_problem_body(api, db):
    pads = b"".join(b"X-Pad-%d: v\r\n" % i for i in range(100))
    s = connect(api)
    s.sendall(POST_HEAD + pads + b"Content-Length: 2\r\n\r\n{}")
    p = problem(outcome(s, 5), 431, "headers-too-large")
    assert "at most 64 fields" in p["detail"]
    s.close()
    # One field too large, under libmicrohttpd's own limit: ours answers.
    s = connect(api)
    s.sendall(POST_HEAD + b"X-Big: " + b"a" * 12000 + b"\r\nContent-Length: 2\r\n\r\n{}")
    problem(outcome(s, 5), 431, "headers-too-large")
    s.close()
    # Past libmicrohttpd's per-connection memory it answers 431 itself.
    s = connect(api)
    s.sendall(POST_HEAD + b"X-Huge: " + b"a" * 100000 + b"\r\nContent-Length: 2\r\n\r\n{}")
    out = outcome(s, 5)
    assert out == ("closed",) or out[1] == 431, out
    s.close()
    assert counts(db) == NOTHING
    still_serving(api, db, "after-431")


def test_a_long_url_gets_414(api, db):
    s = connect(api)
    s.sendall(b"GET /payments/" + b"a" * 3000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    problem(outcome(s, 5), 414, "uri-too-long")
    s.close()
    still_serving(api, db, "after-414")


def test_a_body_that_never_finishes_is_cut_at_the_deadline(api, db):
    s = connect(api)
    t0 = time.monotonic()
    s.sendall(POST_HEAD + b"Content-Length: 100\r\n\r\n" + b'{"amount":')
    out = outcome(s, TIMEOUT_MS / 1000 + SLACK_S + 3)
    took = time.monotonic() - t0
    assert out == ("closed",), out
    assert TIMEOUT_MS / 1000 - 0.2 <= took <= TIMEOUT_MS / 1000 + SLACK_S, took
    s.close()
    assert counts(db) == NOTHING
    wait_for(lambda: api.proc.events("http_timeout"), 5, "an http_timeout event")
    ev = api.proc.events("http_timeout")[0]
    assert ev["client_addr"] == "127.0.0.1" and ev["waiting_for"] == "a complete request"
    assert ev["connections"] == 1
    still_serving(api, db, "after-stalled-body")


def test_a_slow_loris_cannot_stretch_the_deadline_by_trickling(api, db):
    """One byte every 100 ms keeps any idle timeout from firing; the
    whole-request deadline still closes the connection."""
    s = connect(api)
    head = POST_HEAD + b"X-Slow: " + b"z" * 200
    t0 = time.monotonic()
    closed_at = None
    for i in range(len(head)):
        try:
            s.sendall(head[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            closed_at = time.monotonic()
            break
        s.settimeout(0.1)
        try:
            if s.recv(1) == b"":
                closed_at = time.monotonic()
                break
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed_at = time.monotonic()
            break
        if time.monotonic() - t0 > TIMEOUT_MS / 1000 + SLACK_S + 3:
            break
    assert closed_at is not None, "the trickling client kept its connection"
    assert closed_at - t0 <= TIMEOUT_MS / 1000 + SLACK_S, closed_at - t0
    s.close()
    assert counts(db) == NOTHING
    still_serving(api, db, "after-loris")


@pytest.mark.parametrize("chunks", [
    b"zz\r\n{}\r\n0\r\n\r\n",                       # not hex
    b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",     # size overflows
    b"2\r\n{}XX0\r\n\r\n",                          # no CRLF after the data
    b"5\r\n{}",                                     # never finishes
])
def test_malformed_chunked_encoding_is_refused_or_closed(api, db, chunks):
    s = connect(api)
    t0 = time.monotonic()
    s.sendall(POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    out = outcome(s, TIMEOUT_MS / 1000 + SLACK_S + 3)
    assert out == ("closed",) or 400 <= out[1] < 500, out
    assert time.monotonic() - t0 <= TIMEOUT_MS / 1000 + SLACK_S
    s.close()
    assert counts(db) == NOTHING
    still_serving(api, db, "after-bad-chunks")


def test_keep_alive_works_and_an_idle_connection_is_closed_at_the_deadline(api, db):
    s = connect(api)
    for i in range(3):
        body = b'{"amount":"1.00","currency":"EUR"}'
        s.sendall(b"POST /payments HTTP/1.1\r\nHost: t\r\nX-Client-Id: t\r\n"
                  b"Idempotency-Key: ka-%d\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (i, len(body), body))
        out = outcome(s, 10)
        assert out[0] == "response" and out[1] == 201, out
    t0 = time.monotonic()
    assert outcome(s, TIMEOUT_MS / 1000 + SLACK_S + 3) == ("closed",)
    assert time.monotonic() - t0 <= TIMEOUT_MS / 1000 + SLACK_S
    s.close()
    assert counts(db)["payments"] == 3


def test_the_deadline_does_not_cut_a_request_the_server_is_working_on(procs, db):
    """The clock stops while the API handles a complete request: a stall
    in the transaction longer than the timeout still gets its answer."""
    api = start_api(procs, db, env={"CW_FAULTS": f"api/before_commit=stall:{TIMEOUT_MS + 1000}"},
                    extra=["--request-timeout-ms", str(TIMEOUT_MS)])
    r = api.post_payment("slow-server")
    assert r.status == 201, r
    assert counts(db)["payments"] == 1


def test_connections_per_client_address_are_limited(procs, db):
    api = start_api(procs, db, extra=["--max-conns-per-client", "8"])
    held = [connect(api) for _ in range(8)]
    try:
        # Each is accepted, counted and held: it got an answer and stays
        # open (keep-alive).
        for s in held:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            out = outcome(s, 5)
            assert out[0] == "response" and out[1] == 200, out
        extra = connect(api)
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        out = outcome(extra, 3)
        assert out == ("closed",), out
        extra.close()
        # Another address is not affected.
        other = connect(api, source="127.0.0.2")
        other.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        out = outcome(other, 5)
        assert out[0] == "response" and out[1] == 200, out
        other.close()
    finally:
        for s in held:
            s.close()

    # Their connections gone, the first address is served again.
    def served():
        try:
            return api.get("/healthz").status == 200
        except OSError:
            return False
    wait_for(served, 5, "127.0.0.1 served again")


def test_a_request_stuck_in_the_database_holds_up_no_other_connection(procs, db):
    """A request waiting on the database (here a row lock; in production a
    slow COMMIT or a silent link until its timeout) must not hold up the
    requests of other connections.  libmicrohttpd gives a connection to
    whichever of its threads accepts it first, so of eight keep-alive
    connections on two threads the stuck one shares its thread with others
    in all but 1 run in 128; each of them must still be answered while it
    waits."""
    api = start_api(procs, db, extra=["--threads", "2", "--lock-timeout-ms", "30000",
                                      "--statement-timeout-ms", "30000"])
    r = api.post_payment("held-payment")
    assert r.status == 201, r
    payment = r.json()["id"]
    conns = [connect(api) for _ in range(8)]
    try:
        for s in conns:  # each accepted and owned by a thread before anything waits
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            out = outcome(s, 10)
            assert out[0] == "response" and out[1] == 200, out
        waiting = ("SELECT count(*) FROM pg_stat_activity"
                   " WHERE application_name = 'payments-api' AND wait_event_type = 'Lock'")
        with psycopg.connect(db) as holder:
            holder.execute("SELECT 1 FROM payments WHERE id = %s FOR UPDATE", (payment,))
            conns[0].sendall(f"POST /payments/{payment}/authorize HTTP/1.1\r\nHost: t\r\n"
                             "X-Client-Id: t\r\nIdempotency-Key: stuck\r\n"
                             "Content-Length: 0\r\n\r\n".encode())
            wait_for(lambda: scalar(db, waiting) == 1, 10, "the authorize to wait for the lock")
            for i, s in enumerate(conns[1:]):
                body = b'{"amount":"1.00","currency":"EUR"}'
                s.sendall(b"POST /payments HTTP/1.1\r\nHost: t\r\nX-Client-Id: t\r\n"
                          b"Idempotency-Key: other-%d\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (i, len(body), body))
            for s in conns[1:]:
                out = outcome(s, 10)
                assert out[0] == "response" and out[1] == 201, out
            assert scalar(db, waiting) == 1, "the authorize stopped waiting before its lock freed"
            holder.rollback()
        out = outcome(conns[0], 10)
        assert out[0] == "response" and out[1] == 200, out
    finally:
        for s in conns:
            s.close()
    assert counts(db)["payments"] == 8
    assert scalar(db, "SELECT status FROM payments WHERE id = %s", (payment,)) == "authorized"
