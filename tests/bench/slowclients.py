"""Slow HTTP clients for scripts/bench-slowclients: N connections that each
send one byte per interval, half of them trickling a request's header lines
(slow loris), half a declared body (slow POST).  A connection the server
closes is opened again at once, as an attacker would, so N are held all the
time the server lets them.  Connections are spread over source addresses
127.0.0.2 ... so that no address passes the server's per-client limit: the
point is to measure clients that are *held*, not refused.

    slowclients.py PORT N INTERVAL_S LOG_FILE

Runs until SIGTERM; every second appends a JSON line to LOG_FILE: t (seconds
since the epoch), held (connections open and trickling now), and the running
totals opened, closed_by_server and bytes_sent.
"""
import json
import selectors
import signal
import socket
import sys
import time

PER_ADDRESS = 20


def request_bytes(i):
    if i % 2 == 0:
        # Headers that never end.
        return (b"POST /payments HTTP/1.1\r\nHost: bench\r\nIdempotency-Key: slow-%d\r\n" % i
                + b"X-Slow: " + b"z" * 100000)
    # Complete headers, then a body that never completes.
    return (b"POST /payments HTTP/1.1\r\nHost: bench\r\nIdempotency-Key: slow-%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n" % i
            + b'{"amount":"' + b"1" * 100000)


class Conn:
    def __init__(self, i, port):
        self.i = i
        self.port = port
        self.data = request_bytes(i)
        self.sock = None
        self.sent = 0
        self.next_at = 0.0

    def open(self, sel):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.0.{2 + self.i // PER_ADDRESS}", 0))
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        self.sock = s
        self.sent = 0
        self.next_at = time.monotonic()
        sel.register(s, selectors.EVENT_READ, self)

    def close(self, sel):
        sel.unregister(self.sock)
        self.sock.close()
        self.sock = None


def main():
    port, n, interval, log_path = int(sys.argv[1]), int(sys.argv[2]), \
        float(sys.argv[3]), sys.argv[4]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sel = selectors.DefaultSelector()
    conns = [Conn(i, port) for i in range(n)]
    stats = {"t": 0, "held": 0, "opened": 0, "closed_by_server": 0, "bytes_sent": 0}
    log = open(log_path, "a", encoding="utf-8")
    for c in conns:
        c.open(sel)
        stats["opened"] += 1
    next_status = time.monotonic() + 1
    while not stop:
        now = time.monotonic()
        for c in conns:
            if c.sock is None:
                c.open(sel)
                stats["opened"] += 1
            elif now >= c.next_at and c.sent < len(c.data):
                try:
                    c.sent += c.sock.send(c.data[c.sent:c.sent + 1])
                    stats["bytes_sent"] += 1
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    c.close(sel)
                    stats["closed_by_server"] += 1
                    continue
                c.next_at = now + interval
        for key, _ in sel.select(timeout=0.05):
            c = key.data
            try:
                got = c.sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                got = b""
            if got == b"" or got.startswith(b"HTTP/"):
                c.close(sel)
                stats["closed_by_server"] += 1
        if time.monotonic() >= next_status:
            stats["t"] = round(time.time(), 3)
            stats["held"] = sum(1 for c in conns if c.sock is not None and c.sent > 0)
            log.write(json.dumps(stats) + "\n")
            log.flush()
            next_status += 1
    for c in conns:
        if c.sock is not None:
            c.sock.close()


if __name__ == "__main__":
    main()
