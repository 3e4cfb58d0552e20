"""Bad input on the fake broker's socket: garbage, half frames, frames over
1 MiB, unknown ops, bad fields, acks of unknown tags.  Each gets an error
frame or that connection closed; meanwhile a healthy publisher and consumer
keep working and nothing stored is lost (asserted on stats and the log).
"""
# needs: nothing
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from brokerclient import connect  # noqa: E402
from cwtest import binary, wait_for  # noqa: E402


def raw(sock_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    return s


def read_until_closed(s, timeout=10):
    """Everything the broker sends until it closes the connection; fails the
    test if it stays open longer than timeout."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def frames(data):
    return [json.loads(x) for x in data.split(b"\n") if x.strip()]


def read_frame(s, timeout=10):
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data and time.monotonic() < deadline:
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = s.recv(65536)
        assert chunk, "connection closed while a frame was expected"
        data += chunk
    assert b"\n" in data, "no frame within the timeout"
    return json.loads(data.split(b"\n", 1)[0])


def test_bad_input_hurts_only_its_connection(procs, tmp_path):
    sock = str(tmp_path / "broker.sock")
    broker = procs.start("fakebroker", [binary("fakebroker"), "--socket", sock])
    wait_for(lambda: os.path.exists(sock) or not broker.alive(), 10, "broker socket")

    # a healthy pair, with one message in flight during the abuse
    pub = connect(sock, "good-publisher")
    for i in range(3):
        assert pub.publish(message_id=f"good-{i}", payload="{}")["status"] == "stored"
    cons = connect(sock, "good-consumer")
    cons.subscribe(group="accounting", prefetch=1)
    held = cons.next_delivery(timeout=5)
    assert held["message_id"] == "good-0"

    # 1. garbage: error frame, then closed
    s = raw(sock)
    s.sendall(b"\x00\xff not json at all\n{\"op\":\"stats\"}\n")
    data, closed = read_until_closed(s)
    assert closed, "garbage must close the connection"
    got = frames(data)
    assert len(got) == 1 and got[0]["op"] == "error", got   # the stats after it is ignored

    # 2. half a frame, then the client goes away
    s = raw(sock)
    s.sendall(b'{"op":"publish","topic":"payments","message_id":"half","type":"T","pay')
    s.close()

    # 3. a frame over 1 MiB (no newline ever comes): error frame, closed
    s = raw(sock)
    big = b'{"op":"publish","topic":"payments","message_id":"big","type":"T","payload":"' + \
        b"x" * (1024 * 1024 + 10)
    try:
        s.sendall(big)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data, closed = read_until_closed(s)
    assert closed
    assert frames(data)[0]["error"] == "frame larger than 1 MiB"

    # 4. well-formed but wrong: error frame, the connection stays usable
    s = raw(sock)
    for bad, request in ((b'{"op":"frobnicate"}', "frobnicate"), (b'{"no_op":1}', None),
                         (b'{"op":"ack"}', "ack"), (b'{"op":"ack","tag":424242}', "ack"),
                         (b'{"op":"nack","tag":5,"delay_ms":-3}', "nack"),
                         (b'{"op":"subscribe","topic":"payments"}', "subscribe"),
                         (b'{"op":"control","duplicat":true}', "control")):
        s.sendall(bad + b"\n")
        f = read_frame(s)
        assert f["op"] == "error" and f.get("request") == request, (bad, f)
    # a bad publish is refused with a confirm, in order, seq echoed
    s.sendall(b'{"op":"publish","seq":9,"topic":"payments","type":"T"}\n')
    f = read_frame(s)
    assert f["op"] == "confirm" and f["status"] == "refused" and f["seq"] == 9
    assert "message_id" in f["error"]
    # so is a version no consumer would take: stored, it would come back to
    # every consumer of the group, each refusing it, for ever
    s.sendall(b'{"op":"publish","seq":10,"topic":"payments","message_id":"neg","type":"T",'
              b'"headers":{"aggregate_version":-1}}\n')
    f = read_frame(s)
    assert f["op"] == "confirm" and f["status"] == "refused" and f["seq"] == 10
    assert "aggregate_version" in f["error"]
    # a tag that belongs to another connection is unknown here
    s.sendall(json.dumps({"op": "ack", "tag": held["tag"]}).encode() + b"\n")
    f = read_frame(s)
    assert f["op"] == "error" and f["tag"] == held["tag"]
    s.sendall(b'{"op":"stats"}\n')
    f = read_frame(s)
    assert f["op"] == "stats" and f["stored"] == 3
    s.close()

    # the healthy pair never noticed; nothing was lost or added
    assert broker.alive()
    assert not cons.errors
    cons.ack(held["tag"])
    for i in (1, 2):
        d = cons.next_delivery(timeout=5)
        assert d["message_id"] == f"good-{i}" and d["delivery_count"] == 1
        cons.ack(d["tag"])
    assert pub.publish(message_id="good-3", payload="{}")["status"] == "stored"
    d = cons.next_delivery(timeout=5)
    assert d["message_id"] == "good-3"
    cons.ack(d["tag"])
    wait_for(lambda: pub.stats()["groups"]["accounting"]["acked"] == 4, 10, "four acks")
    st = pub.stats()
    assert st["stored"] == 4
    log = pub.dump_log()
    stored = [e["message_id"] for e in log if e["event"] == "publish" and e["status"] == "stored"]
    assert stored == ["good-0", "good-1", "good-2", "good-3"]
    bad = [e for e in log if e["event"] == "bad_request"]
    assert sum(1 for e in bad if e["closed"] is True) == 2       # garbage, too large
    assert any(e.get("request") == "ack" and e.get("tag") == 424242 for e in bad)
    disc = {e["reason"] for e in log if e["event"] == "disconnect"}
    assert {"bad_frame", "frame_too_large", "eof"} <= disc
    half = [e for e in log if e["event"] == "disconnect" and e.get("unread_bytes")]
    assert half, "the half frame is seen as unread bytes at disconnect"
    assert broker.stop() == 0
