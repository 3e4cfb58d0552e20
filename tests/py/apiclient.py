"""Driving the real payments-api binary from the integration tests.

start_api() runs the binary on a free loopback port (--listen 127.0.0.1:0)
and waits for its "listening" event; Api.post()/get() speak plain HTTP/1.1
through http.client, one connection per request, so a test sees exactly the
status, headers and body bytes the server sent.  counts() reads the three
tables a command writes, which is what every test asserts on.
"""
import hashlib
import http.client
import json
import signal

from cwtest import binary, query, wait_for


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # lowercase name -> value (last one wins)
        self.body = body                # bytes, exactly as sent

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return f"Response({self.status}, {self.body[:200]!r})"


class Api:
    def __init__(self, proc, port):
        self.proc = proc
        self.port = port

    def request(self, method, path, body=None, headers=None, timeout=15, raw_headers=None,
                client="pytest"):
        """One request on a new connection.  headers: dict; raw_headers: a
        list of (name, value) pairs sent as given (repeats allowed).  A POST
        says who it is with X-Client-Id: client, unless the headers name one
        or client is None (the API then refuses it)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, str):
                body = body.encode()
            conn.putrequest(method, path, skip_accept_encoding=True)
            sent = set()
            pairs = list((headers or {}).items()) + list(raw_headers or [])
            if method == "POST" and client is not None and \
                    all(n.lower() != "x-client-id" for n, _ in pairs):
                pairs.append(("X-Client-Id", client))
            for name, value in pairs:
                conn.putheader(name, value)
                sent.add(name.lower())
            if body is not None and "content-length" not in sent \
                    and "transfer-encoding" not in sent:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            if body is not None:
                if "transfer-encoding" in sent:
                    # chunked: 16 KiB chunks, then the terminating chunk
                    for i in range(0, len(body), 16384):
                        chunk = body[i:i + 16384]
                        conn.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                    conn.send(b"0\r\n\r\n")
                else:
                    conn.send(body)
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def post_payment(self, key, amount="12.50", currency="EUR", client="pytest", headers=None,
                     body=None):
        h = {"Content-Type": "application/json"}
        if key is not None:
            h["Idempotency-Key"] = key
        h.update(headers or {})
        if body is None:
            body = json.dumps({"amount": amount, "currency": currency})
        return self.request("POST", "/payments", body, h, client=client)

    def command(self, payment_id, action, key, client="pytest"):
        h = {"Idempotency-Key": key}
        return self.request("POST", f"/payments/{payment_id}/{action}", None, h, client=client)

    def get(self, path):
        return self.request("GET", path)

    def stop(self):
        return self.proc.stop()


def start_api(procs, db, name="api", env=None, extra=()):
    """Starts payments-api on a free port; returns an Api once it listens."""
    p = procs.start(name, [binary("payments-api"), "--db", db, "--listen", "127.0.0.1:0",
                           "--name", name, *extra], env=env)
    # The event is written before the line is printed: wait for both.
    wait_for(lambda: (p.events("listening") and "listening 127.0.0.1:" in p.stderr_text())
             or not p.alive(), 15, f"{name} to listen")
    assert p.alive(), f"{name} exited: {p.stderr_text()}"
    port = p.events("listening")[-1]["port"]
    # The port is printed on stdout too, for shells and the demo.
    assert f"listening 127.0.0.1:{port}" in p.stderr_text()
    return Api(p, port)


def counts(db):
    """Rows of the three tables a command writes."""
    return {t: query(db, f"SELECT count(*) FROM {t}")[0][0]
            for t in ("payments", "outbox_messages", "idempotency_records")}


def canonical_hash(method, path, body_json):
    """The request hash the API must store (see api_validate.h)."""
    return hashlib.sha256(f"{method} {path}\n{body_json}".encode()).hexdigest()


def assert_problem(resp, status, slug=None):
    """resp is an RFC 9457 problem with this status (and type slug)."""
    assert resp.status == status, resp
    assert resp.header("content-type") == "application/problem+json", resp.headers
    p = resp.json()
    assert p["status"] == status
    assert p["title"] and p["detail"], p
    assert p["type"].startswith("urn:crashwindow:problem:"), p
    if slug is not None:
        assert p["type"] == "urn:crashwindow:problem:" + slug, p
    return p


def killed_by_sigkill(proc):
    return proc.popen.returncode == -signal.SIGKILL
