"""An interrupted run is not a verdict.  SIGINT or SIGTERM to `crashwindow
run` tears the scenario down as after any run -- every process it started
gone, its database dropped -- then says "interrupted", judges nothing,
writes no failure bundle, and exits 130.

Scenarios here are written into tmp_path: they test the runner.
"""
# needs: pg
import glob
import json
import os
import signal
import subprocess

import pytest

from cwtest import PIPELINE, binary, conninfo_with_db, load_result, proc_state, read_events, scalar, scenario, \
    wait_for


def runner_events(out):
    paths = glob.glob(os.path.join(out, "*", "runner.events.jsonl"))
    return read_events(paths[0]) if paths else []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_judges_nothing_and_exits_130(tmp_path, pg_cluster, sig):
    steps = [{"do": "payments", "count": 3, "key_prefix": "t-int"},
             {"do": "sleep", "ms": 120000, "why": "the run is interrupted here"}]
    path = scenario(tmp_path, "interrupted", steps, processes=PIPELINE)
    out = str(tmp_path / "out")
    run = subprocess.Popen([binary("crashwindow"), "run", path, "--pg", pg_cluster,
                            "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        wait_for(lambda: any(e.get("event") == "step" and e.get("do") == "sleep"
                             for e in runner_events(out)), 60, "the run to reach its sleep step")
        pids = [e["target_pid"] for e in runner_events(out)
                if e.get("event") in ("start", "restart") and "target_pid" in e]
        assert len(pids) >= len(PIPELINE) + 1, pids  # the processes and the broker
        run.send_signal(sig)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130, stdout + stderr
    assert "interrupted" in stdout, stdout
    assert "invariant" not in stdout and "FAIL" not in stdout and "PASS" not in stdout, stdout
    for pid in pids:
        assert proc_state(pid) is None, f"pid {pid} outlived the interrupted run"
    result = load_result(out)
    assert result["verdict"] == "interrupted"
    assert [sc["verdict"] for sc in result["scenarios"]] == ["interrupted"]
    assert result["scenarios"][0]["invariants"] == []
    assert result["totals"]["scenarios"] == 0
    bundles = os.path.join(out, "bundles")
    assert not os.path.exists(bundles) or not os.listdir(bundles), os.listdir(bundles)
    # The scenario's database is dropped as after any run.
    left = scalar(conninfo_with_db(pg_cluster, "postgres"), "SELECT count(*) FROM pg_database WHERE datname LIKE %s",
                  ("%interrupted%",))
    assert left == 0


def test_an_interrupted_sim_is_neither_a_pass_nor_a_failure(tmp_path, pg_cluster):
    """The run cut off by the interrupt is not counted: not done, not failed."""
    out = str(tmp_path / "sim")
    log = open(tmp_path / "sim.log", "w", encoding="utf-8")
    run = subprocess.Popen([binary("crashwindow"), "sim", "--seed", "7", "--runs", "5", "--pg",
                            pg_cluster, "--out", out], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: any(e.get("event") == "step"
                             for p in glob.glob(os.path.join(out, "runs", "*",
                                                             "runner.events.jsonl"))
                             for e in read_events(p)), 60, "the first run to reach a step")
        run.send_signal(signal.SIGINT)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        log.close()
    text = (tmp_path / "sim.log").read_text(encoding="utf-8")
    assert run.returncode == 130, text
    res = load_result(out)
    assert res["verdict"] == "interrupted"
    assert res["simulator"]["stopped_by"] == "interrupt"
    assert res["simulator"]["failures"] == 0 and res["simulator"]["runs_asked"] == 5
    assert "INTERRUPTED: " in text and "FAIL" not in text, text


def test_an_interrupt_during_a_lock_frees_the_table_at_once(tmp_path, pg_cluster):
    """A lock step's session sleeps on the server holding its table; an
    interrupt cancels it rather than leave the table locked for the rest
    of the hold.  With --keep nothing else would end it: the database is
    kept (without --keep its DROP ... WITH (FORCE) ends every session)."""
    steps = [{"do": "db", "action": "lock", "table": "payments", "ms": 120000},
             {"do": "sleep", "ms": 120000, "why": "the run is interrupted here"}]
    path = scenario(tmp_path, "lockint", steps, processes=PIPELINE)
    out = str(tmp_path / "out")
    run = subprocess.Popen([binary("crashwindow"), "run", path, "--pg", pg_cluster,
                            "--out", out, "--keep"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    lock_sessions = ("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                     ("crashwindow lock granted %",))
    pids = []
    try:
        wait_for(lambda: any(e.get("event") == "step" and e.get("do") == "sleep"
                             for e in runner_events(out)), 60, "the run to reach its sleep step")
        pids = [e["target_pid"] for e in runner_events(out)
                if e.get("event") in ("start", "restart") and "target_pid" in e]
        pids += [e["netproxy_pid"] for e in runner_events(out)
                 if e.get("event") == "netproxy_start"]
        assert scalar(conninfo_with_db(pg_cluster, "postgres"), *lock_sessions) == 1
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in pids:  # --keep leaves them up: ours to stop
            if proc_state(pid) is not None:
                os.kill(pid, signal.SIGKILL)
    assert run.returncode == 130, stdout + stderr
    wait_for(lambda: scalar(conninfo_with_db(pg_cluster, "postgres"), *lock_sessions) == 0, 5,
             "the lock's session to end after the interrupt")
