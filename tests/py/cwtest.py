"""Helpers for the integration tests, imported by name (`from cwtest import
...`); the fixtures built on them are in conftest.py.

Processes are the real binaries from the build directory; every wait is a
bounded poll that fails with a message saying what it waited for.
"""
import json
import os
import signal
import subprocess
import time

import psycopg
import pytest

SOURCE_DIR = os.environ.get(
    "CW_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("CW_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))


def binary(name):
    """The path of a built program (src/, sim/ or the build directory itself)."""
    for sub in ("src", "sim", ""):
        path = os.path.join(BUILD_DIR, sub, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{name} not built in {BUILD_DIR}")


# A small pipeline for scenario files written by tests (not the suite's own).
RELAY = {"kind": "relay", "args": {"lease-ms": 1500, "idle-ms": 100, "batch": 10}}
PIPELINE = {
    "api": {"kind": "api"},
    "relay-1": RELAY,
    "accounting": {"kind": "consumer", "args": {"name": "accounting"}},
}


def scenario(tmp_path, name, steps, invariants=("nothing_lost",), **extra):
    """Writes a scenario file into tmp_path; returns its path."""
    spec = {"name": name, "title": f"test {name}", "crash_window": "test/window",
            "processes": extra.pop("processes", PIPELINE), "steps": steps,
            "invariants": list(invariants)}
    spec.update(extra)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec, indent=1))
    return str(path)


# The variables crashwindow takes a shard from when --shard is not given (CI
# matrices, Kubernetes Indexed Jobs): a test's run is never sharded by the
# environment it happens to run in, only by what the test sets.
SHARD_ENV = ("CW_SHARD", "JOB_COMPLETION_INDEX", "CW_SHARD_COUNT", "CI_NODE_INDEX",
             "CI_NODE_TOTAL")


def crashwindow(*args, timeout=300, env=None):
    """Runs `crashwindow ARGS` (each str()-ed, so paths and numbers may be
    given) and returns the CompletedProcess with stdout and stderr as text.
    env: variables set on top of ours, with SHARD_ENV removed first.  Raises
    TimeoutExpired after timeout seconds: a run of the whole suite, a build
    of a mutant, wants more than the default."""
    full = dict(os.environ)
    for var in SHARD_ENV:
        full.pop(var, None)
    full.update(env or {})
    return subprocess.run([binary("crashwindow"), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=full)


def load_result(out_dir):
    """The result.json of a run directory (run, sim, mutants or merge)."""
    with open(os.path.join(out_dir, "result.json"), encoding="utf-8") as f:
        return json.load(f)


def by_name(result):
    """A run's scenario results by scenario name."""
    return {s["name"]: s for s in result["scenarios"]}


def essence(sc, checks=True):
    """What must not depend on where a scenario ran (which shard, which
    machine): its name, verdict and invariants' verdicts, and with checks
    its error and its expectations' verdicts too (a simulation's runs are
    compared without them)."""
    out = (sc["name"], sc["verdict"], [(i["name"], i["verdict"]) for i in sc["invariants"]])
    if checks:
        out += (sc["error"], [(x["check"], x["verdict"]) for x in sc["expect"]])
    return out


def pg_args(pg_conninfo):
    """--pg for the session's cluster, and --pg-dir with it: the cluster is
    the tests' own, so scenarios' "db" steps may crash and freeze it."""
    host = dict(kv.split("=", 1) for kv in pg_conninfo.split()).get("host", "")
    if os.path.isfile(os.path.join(host, "data", "postmaster.pid")):
        return ["--pg", pg_conninfo, "--pg-dir", host]
    return ["--pg", pg_conninfo]


def inv(sc, name):
    """The named invariant of one scenario's result."""
    return next(i for i in sc["invariants"] if i["name"] == name)


def wait_for(cond, timeout, what, interval=0.02):
    """Polls cond() until it returns a truthy value; fails naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def wait_value(get, expected, timeout, what):
    """Polls get() until it equals expected; fails with the last value."""
    last = []

    def cond():
        last[:] = [get()]
        return last[0] == expected

    try:
        wait_for(cond, timeout, what)
    except pytest.fail.Exception:
        pytest.fail(f"timed out waiting for {what}: expected {expected!r}, last {last[0]!r}")


def read_events(path):
    """Parses a JSON-lines events file; a missing file is no events.

    A last line without its newline is being written: a write that straddles
    a page is visible to a reader one page at a time, so it is left for the
    next read rather than parsed half."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, Z...) or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            data = f.read()
        return data[data.rindex(")") + 2]
    except (OSError, ValueError):
        return None


class Proc:
    """A real process of ours, started with its events file in tmp_path."""

    def __init__(self, name, args, events, env=None, cwd=None):
        self.name = name
        self.args = args
        self.events_path = events
        full_env = dict(os.environ)
        full_env.pop("CW_FAULTS", None)
        full_env.update(env or {})
        self.stderr_path = events + ".stderr"
        self.stderr = open(self.stderr_path, "ab")
        self.popen = subprocess.Popen(args, env=full_env, cwd=cwd,
                                      stdout=self.stderr, stderr=self.stderr)

    @property
    def pid(self):
        return self.popen.pid

    def events(self, kind=None):
        evs = read_events(self.events_path)
        return [e for e in evs if kind is None or e.get("event") == kind]

    def alive(self):
        return self.popen.poll() is None

    def wait_exit(self, timeout=15):
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} (pid {self.pid}) did not exit within {timeout}s")

    def signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout=15):
        """SIGTERM (after SIGCONT, in case it is parked), then wait; SIGKILL if it hangs."""
        if not self.alive():
            return self.popen.returncode
        os.kill(self.pid, signal.SIGCONT)
        os.kill(self.pid, signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def stderr_text(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()


class Procs:
    """Starts processes and makes sure every one of them is gone afterwards."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.all = []
        self.counter = 0

    def start(self, name, args, env=None, events=True):
        """Starts args; with events, appends --events <file in tmp_path>."""
        self.counter += 1
        events_path = str(self.tmp_path / f"{name}.{self.counter}.events.jsonl")
        if events:
            args = list(args) + ["--events", events_path]
        env = dict(env or {})
        env.setdefault("CW_FIU_FIFO", str(self.tmp_path / "fiu"))
        p = Proc(name, args, events_path, env=env)
        self.all.append(p)
        return p

    def cleanup(self):
        for p in self.all:
            if p.alive():
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
            p.stderr.close()


def conninfo_with_db(conninfo, dbname):
    """conninfo (key=value form) with its dbname replaced by dbname."""
    parts = dict(kv.split("=", 1) for kv in conninfo.split())
    parts["dbname"] = dbname
    return " ".join(f"{k}={v}" for k, v in parts.items())


def query(conninfo, sql, params=None):
    """Runs one statement in autocommit; returns all rows (or [] for no result)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def scalar(conninfo, sql, params=None):
    """The first column of query()'s first row, or None for no row."""
    rows = query(conninfo, sql, params)
    return rows[0][0] if rows else None
