"""bus.h against a real RabbitMQ node: runs test_bus_rabbitmq's broker cases
(confirms, returns, broker nacks, delayed requeue, redelivery, refused
login, missing exchange and queue) against a throwaway node, and checks
the node script's own contract (start prints a URL, crash and up keep the
data, stop removes everything)."""
# needs: rabbitmq
import os
import subprocess

from cwtest import BUILD_DIR, SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "scripts", "rabbit-node")


def proc_identity(pid):
    """(start time, state) of a live process from /proc/PID/stat, or None
    when it is gone.  The start time tells it from a later process that got
    the same pid (pid_max is 32768 here, and a busy machine wraps it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19], fields[0]


def still_running(pid, identity):
    now = proc_identity(pid)
    return now is not None and now[0] == identity[0] and now[1] not in ("Z", "X")


def test_bus_cases_against_rabbitmq(rabbit_node):
    url, _ = rabbit_node
    exe = os.path.join(BUILD_DIR, "tests", "test_bus_rabbitmq")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CW_TEST_AMQP_URL": url})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout
    assert "not run" not in r.stdout


def test_node_crash_keeps_confirmed_queue(rabbit_node):
    """kill -9 and up: the node comes back on the same port with the durable
    queues it had (the scenario suite's broker_crash relies on it)."""
    url, node_dir = rabbit_node
    exe = os.path.join(BUILD_DIR, "tests", "test_bus_rabbitmq")
    r = subprocess.run([SCRIPT, "ctl", node_dir, "add_vhost", "crashcheck"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pid = open(os.path.join(node_dir, "node.pid")).read().strip()
    identity = proc_identity(pid)
    assert identity is not None
    assert subprocess.run([SCRIPT, "crash", node_dir], timeout=60).returncode == 0
    assert not still_running(pid, identity), "the node survived kill -9"
    r = subprocess.run([SCRIPT, "up", node_dir], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([SCRIPT, "url", node_dir], capture_output=True, text=True,
                          timeout=10).stdout.strip() == url
    r = subprocess.run([SCRIPT, "ctl", node_dir, "list_vhosts"], capture_output=True, text=True,
                       timeout=60)
    assert "crashcheck" in r.stdout
    # and it serves: the broker cases pass again after the restart
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CW_TEST_AMQP_URL": url})
    assert r.returncode == 0, r.stdout + r.stderr


def test_node_stop_removes_everything(tmp_path):
    d = tmp_path / "node"
    r = subprocess.run([SCRIPT, "start", str(d)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("amqp://guest:guest@127.0.0.1:")
    pids = [open(d / f).read().strip() for f in ("node.pid", "epmd.pid")]
    identities = [proc_identity(pid) for pid in pids]
    assert None not in identities, identities
    assert subprocess.run([SCRIPT, "stop", str(d)], timeout=120).returncode == 0
    assert not d.exists()
    for pid, identity in zip(pids, identities):
        assert not still_running(pid, identity), f"process {pid} left running"
