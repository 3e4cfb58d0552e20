"""A small client of the fake broker's protocol (sim/fakebroker/fakebroker.h), for tests.

    from brokerclient import connect
    b = connect(sock, client="test")
    b.publish(message_id=..., payload="{...}", partition_key=..., headers={...})
        -> {"op": "confirm", "status": "stored", "offset": 1, ...}
    b.control(outage="refuse"); b.control(reset=True)
    b.stats()["groups"]["accounting"]["acked"]
    b.dump_log() -> list of log entries (dicts)

    c = connect(sock); c.subscribe("payments", "accounting", prefetch=10)
    d = c.next_delivery(timeout=5)     # dict, or None when nothing came
    c.ack(d["tag"]); c.nack(d["tag"], requeue=True, delay_ms=100)

Deliveries that arrive while waiting for another reply are queued and
returned first by next_delivery; error frames that answer nothing we wait
for (an ack of an unknown tag) are kept in .errors.  Every wait is bounded:
a reply that does not come within the timeout raises BrokerTimeout.
"""
import json
import socket
import time
import uuid


class BrokerError(Exception):
    """The broker answered with an error frame, or closed the connection."""


class BrokerTimeout(BrokerError):
    """No answer within the timeout."""


class BrokerClient:
    def __init__(self, path, client="pytest", timeout=10.0):
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.deliveries = []
        self.errors = []
        self.seq = 0
        self.closed = False
        if client is not None:
            self.send({"op": "hello", "client": client})
            self.wait_for("hello_ok")

    # -- low level --------------------------------------------------------
    def send(self, frame):
        self.send_raw((json.dumps(frame) + "\n").encode())

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_frame(self, timeout):
        """The next frame as a dict; None when nothing complete came in time."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                return None
            if not chunk:
                self.closed = True
                raise BrokerError("connection closed by the broker")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def wait_for(self, *ops, timeout=None, request=None):
        """Reads until a frame whose op is in ops; queues deliveries.  An error
        frame for `request` (or with no request named) raises BrokerError."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            f = self.read_frame(max(left, 0))
            if f is None:
                raise BrokerTimeout(f"no {'/'.join(ops)} within {timeout}s")
            op = f.get("op")
            if op in ops:
                return f
            if op == "deliver":
                self.deliveries.append(f)
            elif op == "error":
                if request is not None and f.get("request") in (request, None):
                    raise BrokerError(f["error"])
                self.errors.append(f)
            # anything else (a stray log frame) is ignored

    # -- publisher --------------------------------------------------------
    def publish_send(self, topic="payments", message_id=None, type="PaymentCreated",
                     payload="{}", partition_key=None, headers=None, **extra):
        self.seq += 1
        frame = {"op": "publish", "seq": self.seq, "topic": topic,
                 "message_id": message_id or str(uuid.uuid4()), "type": type,
                 "headers": headers or {}, "payload": payload}
        if partition_key is not None:
            frame["partition_key"] = partition_key
        frame.update(extra)
        self.send(frame)
        return frame

    def publish_confirm(self, timeout=None):
        return self.wait_for("confirm", timeout=timeout)

    def publish(self, timeout=None, **kw):
        """Publishes one message; returns its confirm frame (status stored or
        refused).  Raises BrokerTimeout when no confirm comes."""
        self.publish_send(**kw)
        return self.publish_confirm(timeout=timeout)

    # -- subscriber -------------------------------------------------------
    def subscribe(self, topic="payments", group="accounting", prefetch=1, ordered=None):
        frame = {"op": "subscribe", "topic": topic, "group": group, "prefetch": prefetch}
        if ordered is not None:
            frame["ordered"] = ordered
        self.send(frame)
        return self.wait_for("subscribed", request="subscribe")

    def next_delivery(self, timeout=5.0):
        """The next delivery frame, or None when none came within timeout."""
        if self.deliveries:
            return self.deliveries.pop(0)
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(deadline - time.monotonic(), 0))
            if f is None:
                return None
            if f.get("op") == "deliver":
                return f
            if f.get("op") == "error":
                self.errors.append(f)

    def ack(self, tag):
        self.send({"op": "ack", "tag": tag})

    def nack(self, tag, requeue=True, delay_ms=0):
        self.send({"op": "nack", "tag": tag, "requeue": requeue, "delay_ms": delay_ms})

    # -- control and inspection -------------------------------------------
    def control(self, **switches):
        self.send(dict(op="control", **switches))
        return self.wait_for("control_ok", request="control")

    def stats(self):
        self.send({"op": "stats"})
        return self.wait_for("stats", request="stats")

    def dump_log(self, timeout=None):
        """Every log entry so far, as dicts (without the "op" key)."""
        self.send({"op": "dump_log"})
        out = []
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            f = self.wait_for("log", "log_end", timeout=max(deadline - time.monotonic(), 0),
                              request="dump_log")
            if f["op"] == "log_end":
                if f["count"] != len(out):
                    raise BrokerError(f"log_end says {f['count']}, got {len(out)}")
                return out
            f.pop("op")
            out.append(f)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(path, client="pytest", timeout=10.0):
    return BrokerClient(path, client=client, timeout=timeout)
