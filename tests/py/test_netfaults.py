"""Network faults: the net step's validation, and the fault proxy on a live
PostgreSQL link (pass-through, latency, a COMMIT cut after it reached the
server, a blackhole that only a client-side deadline ends, --keep's hint,
windows that kill or pause the link's client, or drop the frame and close
the link, at a named frame).
"""
# needs: pg
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest

from cwtest import PIPELINE, binary, crashwindow, scenario, wait_for



@pytest.mark.parametrize("steps,procs,message", [
    ([{"do": "net", "link": "relay-9->pg", "fault": "blackhole"}], None,
     "steps[0].link: unknown link 'relay-9->pg': no process 'relay-9'"),
    ([{"do": "net", "link": "relay-1=>pg", "fault": "blackhole"}], None,
     "steps[0].link: 'relay-1=>pg' is not a link"),
    ([{"do": "net", "link": "relay-1->pg", "fault": "latncy", "latency_ms": 5}], None,
     "steps[0]: fault: 'latncy' is not a network fault"),
    ([{"do": "net", "link": "relay-1->pg", "fault": "latency", "latency_ms": -5}], None,
     "steps[0]: latency_ms: -5 is out of range 0..60000"),
    ([{"do": "net", "link": "relay-1->pg", "fault": "latency", "latency_ms": 10**9}], None,
     "steps[0]: latency_ms: 1000000000 is out of range 0..60000"),
    ([{"do": "net", "link": "api->pg", "fault": "blackhole", "ms": 10**8}], None,
     "steps[0]: ms: 100000000 is out of range"),
    ([{"do": "net", "link": "relay-1->pg", "fault": "blackhole", "rate_kbps": 3}], None,
     "steps[0]: rate_kbps: fault blackhole takes no such field"),
    ([{"do": "net", "link": "relay-1->broker", "fault": "cut", "cut_after": "commit"}], None,
     "steps[0]: cut_after: commit is for pg links, not a broker link"),
    ([{"do": "net", "link": "api->pg", "fault": "cut", "cut_after": "confirm"}], None,
     "steps[0]: cut_after: confirm is for broker links, not a pg link"),
    ([{"do": "net", "link": "relay-1->broker", "fault": "cut", "cut_after": "ack"}], None,
     "steps[0]: cut_after: ack is for a consumer's broker link, and relay-1 is a relay"),
    ([{"do": "net", "link": "api->broker", "fault": "blackhole"}], None,
     "steps[0].link: our API does not talk to the broker: 'api->broker' carries nothing"),
    ([{"do": "net", "link": "api->pg", "fault": "window", "frame": "commit_complete",
       "action": "kill", "pid": 4242}], None,
     "steps[0]: pid: a fault names no process id"),
    ([{"do": "net", "link": "api->pg", "fault": "window", "frame": "publish", "action": "kill"}],
     None, "steps[0]: frame: publish is an AMQP frame, and this is a pg link"),
    ([{"do": "net", "link": "relay-1->broker", "fault": "window", "frame": "commit",
       "action": "kill"}], None,
     "steps[0]: frame: commit is a PostgreSQL frame, and this is an AMQP (RabbitMQ) link"),
    ([{"do": "net", "link": "relay-1->broker", "fault": "window", "frame": "ack",
       "action": "pause"}], None,
     "steps[0]: frame: ack passes on a consumer's broker link, and relay-1 is a relay"),
    ([{"do": "net", "link": "api->pg", "fault": "window", "frame": "commit"}], None,
     "steps[0]: action: required by fault window (kill, pause or drop)"),
    ([{"do": "net", "link": "api->pg", "fault": "window", "frame": "commit", "action": "kill",
       "times": 0}], None, "steps[0]: times: 0 is out of range 1..1000"),
    ([{"do": "net", "link": "api->pg", "clear": False}], None,
     "steps[0]: clear: must be true"),
    ([{"do": "net", "link": "api->pg", "fault": "latency", "latency_ms": 5,
       "reconnect_within_ms": 0}], None, "steps[0].reconnect_within_ms"),
    ([], {"api": {"kind": "api", "clock": {"rate": 7}}},
     "processes.api.clock: rate: must be a number from 0.5 to 2"),
    ([], {"api": {"kind": "api", "clock": {"offset_s": 10**7}}},
     "processes.api.clock.offset_s"),
    ([], {"api": {"kind": "api", "db_deadline_ms": 5}}, "processes.api.db_deadline_ms"),
])
def test_bad_net_step_names_file_field_and_reason(tmp_path, steps, procs, message):
    extra = {"processes": procs} if procs else {}
    path = scenario(tmp_path, "badnet", steps, **extra)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: {message}" in r.stderr, r.stderr
    assert not out.exists(), "a bad net step must stop the run before anything starts"


def test_broker_partition_is_skipped_on_the_fake_broker(tmp_path):
    """A kernel partition needs a TCP link: the fake broker's links are Unix
    sockets, so the scenario is skipped there, with its reason, never run
    with the fault left out (scenario 37 runs it on RabbitMQ)."""
    path = scenario(tmp_path, "brokerpart", [
        {"do": "net", "link": "relay-1->broker", "fault": "partition", "ms": 1000}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skip brokerpart: a kernel partition of a broker link needs RabbitMQ" in r.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["scenarios"] == []
    assert [s["name"] for s in result["skipped"]] == ["brokerpart"]
    assert "Unix sockets" in result["skipped"][0]["reason"]


def test_dry_run_describes_net_steps(tmp_path):
    path = scenario(tmp_path, "netdry", [
        {"do": "net", "link": "relay-1->pg", "fault": "latency", "latency_ms": 200,
         "jitter_ms": 50, "direction": "up", "ms": 3000},
        {"do": "net", "link": "api->pg", "fault": "cut", "cut_after": "commit", "then": "reset"},
        {"do": "net", "link": "relay-1->pg", "fault": "blackhole", "reconnect_within_ms": 4000},
        {"do": "net", "link": "relay-1->pg", "clear": True},
        {"do": "net", "link": "api->pg", "fault": "window", "frame": "commit", "action": "pause",
         "times": 2, "skip": 1}])
    r = crashwindow("run", path, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "net api->pg: window at commit: pause the client (x2, after 1 passed)" in r.stdout
    assert "net relay-1->pg: latency 200+-50 ms up for 3000 ms" in r.stdout
    assert "net api->pg: cut after commit, then reset (x1)" in r.stdout
    assert "relay-1 must reconnect within 4000 ms" in r.stdout
    assert "net relay-1->pg: clear its faults" in r.stdout


class Proxy:
    """The netproxy daemon with one pg link to the test cluster."""

    def __init__(self, tmp_path, pg_port):
        self.sock = str(tmp_path / "np.sock")
        self.proc = subprocess.Popen(
            [binary("netproxy"), "--control", self.sock,
             "--link", f"t->pg=pg,tcp:127.0.0.1:0,tcp:127.0.0.1:{pg_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        links = wait_for(lambda: os.path.exists(self.sock) and self.send({"op": "links"}),
                         10, "the proxy's control socket")
        self.port = int(links["links"][0]["bound"].rsplit(":", 1)[1])

    def send(self, frame):
        r = subprocess.run([binary("netproxy"), "--control", self.sock, "--send",
                            json.dumps(frame)], capture_output=True, text=True, timeout=10)
        return json.loads(r.stdout) if r.stdout.strip() else None

    def stats(self):
        return self.send({"op": "stats"})["links"]["t->pg"]

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def proxied(tmp_path, pg_cluster):
    kv = dict(p.split("=", 1) for p in pg_cluster.split())
    proxy = Proxy(tmp_path, int(kv["port"]))
    table = "np_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_cluster, autocommit=True) as direct:
        direct.execute(f"CREATE TABLE {table} (k text PRIMARY KEY)")
        yield proxy, pg_cluster, table, (
            f"host=127.0.0.1 port={proxy.port} user=postgres dbname={kv.get('dbname', 'postgres')}"
            " sslmode=disable gssencmode=disable connect_timeout=5")
        direct.execute(f"DROP TABLE {table}")
    proxy.close()


def test_proxied_link_passes_and_delays(proxied):
    proxy, _, table, via = proxied
    with psycopg.connect(via, autocommit=True) as c:
        assert c.execute("SELECT 41 + 1").fetchone()[0] == 42
        assert proxy.send({"op": "set", "link": "t->pg", "fault": "latency",
                           "latency_ms": 300, "direction": "down"})["op"] == "ok"
        t0 = time.monotonic()
        c.execute("SELECT 1").fetchone()
        assert time.monotonic() - t0 >= 0.3
        assert proxy.send({"op": "clear", "link": "t->pg"})["op"] == "ok"
    st = proxy.stats()
    assert st["accepted"] == 1 and st["bytes_up"] > 0 and st["bytes_down"] > 0


def test_bad_control_frames_are_refused(proxied):
    proxy = proxied[0]
    assert proxy.send({"op": "set", "link": "nope->pg", "fault": "blackhole"})["error"] == \
        "link: no such link"
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "cut", "cut_after": "ack"})
    assert bad["op"] == "error" and "cut_after: ack is for broker links" in bad["error"]
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "partition"})
    assert bad["op"] == "error" and "host's network namespace" in bad["error"]


@pytest.mark.parametrize("then", ["reset", "blackhole"])
def test_commit_cut_reaches_the_server_and_loses_the_answer(proxied, then):
    """psycopg commits with the simple protocol ('Q' COMMIT): the COMMIT
    reaches PostgreSQL, the client gets no answer, the row is there."""
    proxy, direct_ci, table, via = proxied
    key = f"k-{then}"
    c = psycopg.connect(via + " options='-c statement_timeout=2000'")
    c.execute(f"INSERT INTO {table} VALUES (%s)", (key,))
    assert proxy.send({"op": "set", "link": "t->pg", "fault": "cut", "cut_after": "commit",
                       "then": then})["op"] == "ok"
    if then == "blackhole":
        # Nothing comes back and the connection stays open: only a deadline
        # of the client's own ends the wait.
        c.pgconn.send_query(b"COMMIT")
        while c.pgconn.flush() != 0:
            pass
        readable, _, _ = select.select([c.pgconn.socket], [], [], 1.5)
        assert not readable, "a blackholed COMMIT must get no answer"
        c.pgconn.finish()
    else:
        with pytest.raises(psycopg.OperationalError):
            c.commit()
        c.close()
    with psycopg.connect(direct_ci) as d:
        assert d.execute(f"SELECT count(*) FROM {table} WHERE k = %s", (key,)).fetchone()[0] == 1
    assert proxy.stats()["cuts"] == 1
    # the cut is spent: the next connection through the link works
    with psycopg.connect(via, autocommit=True) as c2:
        assert c2.execute("SELECT 1").fetchone()[0] == 1


def test_keep_prints_how_to_set_a_fault_on_a_live_link(tmp_path, pg_cluster):
    path = scenario(tmp_path, "keep-net", [
        {"do": "payments", "count": 2, "key_prefix": "t-keepnet"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out), "--keep")
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    sock = None
    runner = [json.loads(line) for line in
              (out / sc["dir"] / "runner.events.jsonl").read_text().splitlines()]
    alive = [e["target_pid"] for e in runner if e["event"] == "start" and "target_pid" in e]
    alive += [e["netproxy_pid"] for e in runner if e["event"] == "netproxy_start"]
    try:
        assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout + r.stderr
        hint = next(line for line in r.stdout.splitlines() if "--send" in line)
        args = hint.split(": ", 1)[1].split()
        exe, sock = args[0], args[args.index("--control") + 1]
        frame = {"op": "set", "link": "relay-1->pg", "fault": "latency", "latency_ms": 100}
        done = subprocess.run([exe, "--control", sock, "--send", json.dumps(frame)],
                              capture_output=True, text=True, timeout=10)
        assert done.returncode == 0 and json.loads(done.stdout)["op"] == "ok", done.stderr
        links = subprocess.run([exe, "--control", sock, "--send", '{"op":"links"}'],
                               capture_output=True, text=True, timeout=10)
        names = {l["name"] for l in json.loads(links.stdout)["links"]}
        assert {"api->pg", "relay-1->pg", "relay-1->broker", "accounting->broker"} <= names
    finally:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in alive:
        wait_for(lambda p=pid: not os.path.exists(f"/proc/{p}"), 10, f"kept process {pid} to go")
    run_tmp = os.path.dirname(sock) if sock else None
    if run_tmp and os.path.isdir(run_tmp):
        for name in os.listdir(run_tmp):
            os.unlink(os.path.join(run_tmp, name))
        os.rmdir(run_tmp)


def test_slow_clocked_api_restarted_into_a_blackhole_gets_its_time(tmp_path, pg_cluster):
    """Found by the simulator (seed 9026, run 100): an API whose wall clock
    runs at half speed is restarted while its database link swallows
    everything.  libpq times its connect on that clock, so the first
    attempt takes twice its 5 s, and the API listens only after it; the
    runner waits for a slow clock in proportion instead of failing the run
    for a harness bound of 10 s."""
    procs = dict(PIPELINE, api={"kind": "api", "clock": {"offset_s": -80, "rate": 0.5}})
    path = scenario(tmp_path, "slowclock", [
        {"do": "payments", "count": 2, "key_prefix": "t-slow-a"},
        {"do": "net", "link": "api->pg", "fault": "blackhole", "ms": 1500},
        {"do": "restart", "proc": "api"},
        {"do": "payments", "count": 2, "key_prefix": "t-slow-b"},
        {"do": "wait", "until": "consumed", "count": 4, "timeout_ms": 15000}],
        processes=procs)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    runner = [json.loads(line) for line in
              (out / sc["dir"] / "runner.events.jsonl").read_text().splitlines()]
    restart = next(e for e in runner if e["event"] == "restart" and e["target"] == "api")
    after = next(e for e in runner if e["event"] == "step" and e["ts_us"] > restart["ts_us"])
    assert after["ts_us"] - restart["ts_us"] > 5_000_000, "the blackhole did hold the start up"


def test_amqp_window_is_skipped_on_the_fake_broker(tmp_path):
    path = scenario(tmp_path, "amqpwindow", [
        {"do": "net", "link": "relay-1->broker", "fault": "window", "frame": "confirm",
         "action": "kill"}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["scenarios"] == []
    assert "a window at an AMQP frame needs RabbitMQ" in result["skipped"][0]["reason"]


def test_window_that_never_fires_fails_the_scenario(tmp_path, pg_cluster):
    """The relay commits in implicit transactions (a pipeline's Sync): no
    CommandComplete COMMIT ever passes its link, so a window there never
    fires, and the run never reached the window it is about."""
    path = scenario(tmp_path, "deadwindow", [
        {"do": "net", "link": "relay-1->pg", "fault": "window", "frame": "commit_complete",
         "action": "kill"},
        {"do": "payments", "count": 2, "key_prefix": "t-deadwin"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert r.returncode == 1 and sc["verdict"] == "fail", r.stdout + r.stderr
    assert "net window on relay-1->pg at commit_complete never fired" in sc["error"]
    assert sc["faults_fired"] == []


def test_window_kill_is_counted_where_a_fault_is(tmp_path, pg_cluster):
    """A window's firing is a fault fired (result.json and the totals) and a
    kill of the link's process on the runner's timeline, at the time the
    proxy fired it, with the pid the runner gave."""
    path = scenario(tmp_path, "killwindow", [
        {"do": "net", "link": "api->pg", "fault": "window", "frame": "commit_complete",
         "action": "kill"},
        {"do": "http", "name": "lost", "method": "POST", "path": "/payments", "key": "t-kw",
         "body": {"amount": "5.00", "currency": "EUR"}},
        {"do": "wait", "until": "exited", "proc": "api", "timeout_ms": 5000},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    result = json.loads((out / "result.json").read_text())
    sc = result["scenarios"][0]
    assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout[-3000:] + r.stderr[-2000:]
    fired = sc["faults_fired"]
    assert [(f["point"], f["proc"], f["action"]) for f in fired] == \
        [("api->pg/commit_complete", "api", "kill")]
    assert result["totals"]["faults_fired"] == 1
    runner = [json.loads(line) for line in
              (out / sc["dir"] / "runner.events.jsonl").read_text().splitlines()]
    start = next(e for e in runner if e["event"] == "start" and e["target"] == "api")
    kill = next(e for e in runner if e["event"] == "kill" and e.get("why") == "window")
    assert kill["target"] == "api" and kill["target_pid"] == start["target_pid"]
    assert kill["ts_us"] == fired[0]["ts_us"]
    exits = [e for e in runner if e["event"] == "exit" and e["target"] == "api"]
    assert exits and exits[0]["how"] == "killed by KILL" and exits[0]["ts_us"] > kill["ts_us"]
    stats = next(e for e in runner if e["event"] == "net_stats" and e["link"] == "api->pg")
    assert stats["windows"] == 1


@pytest.mark.parametrize("form", ["times", "steps"])
def test_window_follows_its_process_across_a_restart(tmp_path, pg_cluster, form):
    """times 2, or a second window step after the restart (which once
    crashed the runner as it read the firings back): the runner gives the
    proxy the restarted API's pid, so the second firing kills the new
    incarnation, not a pid that is gone."""
    lost = lambda key: {"do": "http", "name": key, "method": "POST", "path": "/payments",
                        "key": key, "body": {"amount": "7.00", "currency": "EUR"}}
    window = {"do": "net", "link": "api->pg", "fault": "window", "frame": "commit_complete",
              "action": "kill"}
    path = scenario(tmp_path, "twicewindow", [
        dict(window, times=2) if form == "times" else window,
        lost("t-tw-1"),
        {"do": "wait", "until": "exited", "proc": "api", "timeout_ms": 5000},
        {"do": "restart", "proc": "api"},
        *([] if form == "times" else [window]),
        lost("t-tw-2"),
        {"do": "wait", "until": "exited", "proc": "api", "timeout_ms": 5000},
        {"do": "restart", "proc": "api"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000}],
        expect=[{"check": "http_status", "request": "t-tw-1", "equals": 0},
                {"check": "http_status", "request": "t-tw-2", "equals": 0},
                {"check": "payments", "equals": 2}])
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert r.returncode == 0 and sc["verdict"] == "pass", r.stdout[-3000:] + r.stderr[-2000:]
    runner = [json.loads(line) for line in
              (out / sc["dir"] / "runner.events.jsonl").read_text().splitlines()]
    starts = [e["target_pid"] for e in runner
              if e["event"] in ("start", "restart") and e["target"] == "api"]
    kills = [e["target_pid"] for e in runner if e["event"] == "kill" and e.get("why") == "window"]
    assert kills == starts[:2], (starts, kills)
    assert len(sc["faults_fired"]) == 2


# A client of its own: BEGIN, INSERT, COMMIT through the link, then a line.
CLIENT = """
import sys, psycopg
with psycopg.connect(sys.argv[1]) as c:
    c.execute("INSERT INTO %s VALUES ('w')" % sys.argv[2])
    c.commit()
    print("committed", flush=True)
"""


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def window_client(proxied, frame, action):
    """Starts the client through the link with sslmode=prefer (libpq's
    default: an SSLRequest, answered 'N'), and sets a window for it."""
    proxy, _, table, via = proxied
    prefer = via.replace("sslmode=disable", "sslmode=prefer")
    child = subprocess.Popen([sys.executable, "-c", CLIENT, prefer, table],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proxy.send({"op": "set", "link": "t->pg", "fault": "window", "frame": frame,
                       "action": action, "pid": child.pid})["op"] == "ok"
    return child


def rows(direct_ci, table):
    with psycopg.connect(direct_ci) as d:
        return d.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_window_kills_the_client_after_the_server_committed(proxied):
    proxy, direct_ci, table, _ = proxied
    child = window_client(proxied, "commit_complete", "kill")
    out, err = child.communicate(timeout=20)
    assert child.returncode == -signal.SIGKILL, (out, err)
    assert "committed" not in out, "the client must never learn of its commit"
    assert rows(direct_ci, table) == 1
    st = proxy.stats()
    assert st["windows"] == 1 and st["fired"][0]["frame"] == "commit_complete"
    assert st["fired"][0]["pid"] == child.pid and "signal_error" not in st["fired"][0]


def test_window_kills_the_client_before_the_server_sees_its_commit(proxied):
    proxy, direct_ci, table, _ = proxied
    child = window_client(proxied, "commit", "kill")
    out, err = child.communicate(timeout=20)
    assert child.returncode == -signal.SIGKILL, (out, err)
    # the server saw the client vanish inside its transaction: rolled back
    assert rows(direct_ci, table) == 0
    assert proxy.stats()["fired"][0]["frame"] == "commit"


def test_window_pause_holds_the_commit_until_the_client_runs(proxied):
    """A paused client's COMMIT is held: the server has not seen it while
    the client is stopped, and gets it once it runs again."""
    proxy, direct_ci, table, _ = proxied
    child = window_client(proxied, "commit", "pause")
    try:
        wait_for(lambda: proc_state(child.pid) == "T", 20, "the client stopped at its COMMIT")
        assert proxy.stats()["windows"] == 1
        assert rows(direct_ci, table) == 0, "the held COMMIT reached the server"
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0 and "committed" in out, (out, err)
    assert rows(direct_ci, table) == 1


def test_window_drop_loses_the_frame_and_the_link_while_the_client_lives(proxied):
    """A drop signals nothing: the client's COMMIT never reaches the server,
    the connection closes, and the client lives to see its error."""
    proxy, direct_ci, table, _ = proxied
    child = window_client(proxied, "commit", "drop")
    out, err = child.communicate(timeout=20)
    assert child.returncode == 1, (out, err)  # an exception, not a signal
    assert "committed" not in out and "psycopg" in err, (out, err)
    assert rows(direct_ci, table) == 0
    fired = proxy.stats()["fired"]
    assert [(f["frame"], f["action"]) for f in fired] == [("commit", "drop")]
    assert "signal_error" not in fired[0]


# Two transactions on one connection: an agent's first, then the business one.
TWO_TRANSACTIONS = """
import sys, psycopg
with psycopg.connect(sys.argv[1]) as c:
    sys.stdin.readline()  # connected: the window is set now
    c.execute("INSERT INTO %s VALUES ('agent')" % sys.argv[2])
    c.commit()
    print("agent committed", flush=True)
    c.execute("INSERT INTO %s VALUES ('payment')" % sys.argv[2])
    c.commit()
    print("payment committed", flush=True)
"""


def test_window_keyed_to_a_statement_passes_other_transactions(proxied):
    """transaction_with: the COMMIT of a transaction without the text passes,
    the next one's, whose statement holds it (in another case), is hit.  A
    second window on the link that marks by other text is refused."""
    proxy, direct_ci, table, via = proxied
    child = subprocess.Popen([sys.executable, "-c", TWO_TRANSACTIONS, via, table],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    wait_for(lambda: proxy.stats()["accepted"] == 1, 20, "the client connected")
    assert proxy.send({"op": "set", "link": "t->pg", "fault": "window",
                       "frame": "commit_complete", "action": "kill", "pid": child.pid,
                       "transaction_with": "VALUES ('PAYMENT')"})["op"] == "ok"
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "window", "frame": "commit",
                      "action": "kill", "pid": child.pid, "transaction_with": "agent"})
    assert bad["op"] == "error" and "marks them by one text at a time" in bad["error"], bad
    out, err = child.communicate("go\n", timeout=20)
    assert child.returncode == -signal.SIGKILL, (out, err)
    assert out == "agent committed\n", (out, err)
    assert rows(direct_ci, table) == 2  # both committed; the second's answer never came
    fired = proxy.stats()["fired"]
    assert [(f["frame"], f["pid"]) for f in fired] == [("commit_complete", child.pid)]


def test_window_refuses_a_frame_without_a_pid_or_of_another_protocol(proxied):
    proxy = proxied[0]
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "window", "frame": "commit",
                      "action": "kill"})
    assert bad["op"] == "error" and "pid: required by fault window" in bad["error"]
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "window", "frame": "publish",
                      "action": "kill", "pid": os.getpid()})
    assert bad["op"] == "error" and "publish is an AMQP frame" in bad["error"]
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "latency", "latency_ms": 5,
                      "pid": os.getpid()})
    assert bad["op"] == "error" and "pid: fault latency takes no such field" in bad["error"]
    bad = proxy.send({"op": "set", "link": "t->pg", "fault": "window", "frame": "commit",
                      "action": "kill", "pid": -1})
    assert bad["op"] == "error" and "pid: must be a process id" in bad["error"]
