"""crashwindow run --target: a pipeline described only by a profile, run end
to end on a throwaway RabbitMQ node.  This repository's own pipeline as a
target (targets/crashwindow) passes a black-box scenario, judged from its
mapping and the broker log alone, with every invariant that reads our
insides shown as not examined; a mapping that lacks a column, a process
that never gets ready and one that exits at start each fail with a message
naming what is wrong, and leave nothing running; a scenario database that
a logical replication slot holds is dropped all the same."""
# needs: pg rabbitmq
import copy
import json
import os
import subprocess

import psycopg

from cwtest import SOURCE_DIR, crashwindow, pg_args, read_events

PROFILE = os.path.join(SOURCE_DIR, "targets", "crashwindow", "profile.json")
SCENARIO = {
    "name": "t-small-burst", "title": "a small burst", "crash_window": "blackbox/test",
    "processes": {"api": {"kind": "api"}, "relay-1": {"kind": "relay"},
                  "accounting": {"kind": "consumer"}},
    "steps": [{"do": "payments", "count": 8, "concurrency": 2, "key_prefix": "t"},
              {"do": "wait", "until": "consumed", "count": 8, "timeout_ms": 20000}],
    "heal": {"timeout_ms": 15000},
    "invariants": ["nothing_lost", "effect_once", "broker_log_matches_outbox"],
    "expect": [{"check": "effects", "equals": 8}],
}


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def profile_copy(tmp_path, change):
    """The crashwindow profile, changed, written elsewhere (its programs are
    ${bin:PROGRAM}, the harness's build, wherever the profile lies)."""
    with open(PROFILE, encoding="utf-8") as f:
        p = json.load(f)
    change(p)
    p["requires"] = []
    return write(tmp_path, "profile.json", p)


def hides_effects(where, why, scenario="t-small-burst",
                  witness="the target left it published"):
    """A profile change: the effects mapping hides the rows WHERE selects
    not, standing for a target that loses them, and the loss is declared as
    a known finding whose witness text is witness."""
    def change(p):
        p["mapping"]["effects"] += " WHERE " + where
        p["findings"] = [{"scenario": scenario, "invariant": "nothing_lost",
                          "witness": witness, "why": why, "source": "test"}]
    return change


def pids_started(run_dir):
    events = read_events(str(run_dir / "runner.events.jsonl"))
    return [e["target_pid"] for e in events if e["event"] in ("start", "restart")
            and "target_pid" in e]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_our_pipeline_as_a_target_passes_judged_from_outside(tmp_path, pg_cluster):
    out = tmp_path / "run"
    # A scenario the profile says does not apply is skipped with its reason,
    # never run and never counted as passed.
    why = "its relay publishes nothing of its own"
    profile = profile_copy(tmp_path, lambda p: p.update(
        not_applicable=[{"scenario": "t-not-here", "why": why}]))
    r = crashwindow("run", "--target", profile, write(tmp_path, "s.json", SCENARIO),
                    write(tmp_path, "n.json", dict(SCENARIO, name="t-not-here")), "--brief",
                    "--out", out, "--junit", tmp_path / "j.xml", *pg_args(pg_cluster),
                    timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "against target crashwindow" in r.stdout
    assert f"skip t-not-here: not applicable to crashwindow: {why}" in r.stdout
    res = json.loads((out / "result.json").read_text())
    assert res["skipped"] == [{"name": "t-not-here",
                               "reason": f"not applicable to crashwindow: {why}"}]
    assert [s["name"] for s in res["scenarios"]] == ["t-small-burst"]
    assert res["target"]["name"] == "crashwindow" and res["broker"] == "rabbitmq"
    sc = res["scenarios"][0]
    assert sc["verdict"] == "pass", sc
    invs = {i["name"]: i for i in sc["invariants"]}
    for name in ("nothing_lost", "effect_once", "broker_log_matches_outbox",
                 "versions_in_order", "one_payment_per_key"):
        assert invs[name]["verdict"] == "pass" and invs[name]["checked"] > 0, invs[name]
    for name in ("no_two_live_leases", "publish_within_lease", "ack_after_commit"):
        assert invs[name]["verdict"] == "not examined", invs[name]
    assert sc["counts"]["outbox_rows"] == 8 and sc["counts"]["effects"] == 8
    # The broker log is RabbitMQ's firehose: every message the outbox held
    # was stored once by the broker and delivered to the target's queue.
    events = read_events(str(out / "t-small-burst" / "broker.events.jsonl"))
    stored = {e["message_id"] for e in events if e["event"] == "publish"
              and e["status"] == "stored"}
    delivered = {e["message_id"] for e in events if e["event"] == "deliver"
                 and e["group"] == "accounting"}
    assert len(stored) == 8 and stored == delivered
    assert 'name="target" value="crashwindow"' in (tmp_path / "j.xml").read_text()


def test_a_mapping_without_its_column_is_named(tmp_path, pg_cluster):
    def change(p):
        p["mapping"]["outbox"] = "SELECT id, aggregate_id, aggregate_version AS version" \
                                 " FROM outbox_messages"
    out = tmp_path / "run"
    r = crashwindow("run", "--target", profile_copy(tmp_path, change),
                    write(tmp_path, "s.json", SCENARIO), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert "mapping.outbox" in sc["error"] and "state" in sc["error"], sc["error"]
    assert not pids_started(out / "t-small-burst")


def test_readiness_that_never_comes_and_an_exit_at_start(tmp_path, pg_cluster):
    def never_ready(p):
        p["processes"]["consumer"]["ready"] = {"log_line": "a line it never prints",
                                               "timeout_ms": 1500}
    out = tmp_path / "never"
    r = crashwindow("run", "--target", profile_copy(tmp_path, never_ready),
                    write(tmp_path, "s.json", SCENARIO), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert ("accounting was not ready within 1500 ms (ready when it prints 'a line it never "
            "prints'); its last log line:") in sc["error"], sc["error"]
    pids = pids_started(out / "t-small-burst")
    assert pids and not any(alive(p) for p in pids)

    def exits(p):
        p["processes"]["producer"]["argv"] = ["/bin/sh", "-c", "echo no config; exit 3"]
    out = tmp_path / "exits"
    r = crashwindow("run", "--target", profile_copy(tmp_path, exits),
                    write(tmp_path, "s.json", SCENARIO), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert "api exited while starting (exit status 3): no config" in sc["error"], sc["error"]


def test_a_known_finding_passes_only_when_it_explains_every_violation(tmp_path, pg_cluster):
    """A profile whose effects mapping hides every other ledger row stands for a
    target that loses half its events: nothing_lost fails with a witness per
    hidden event.  Declared as a finding whose text every witness carries, the
    loss is reported as the finding reproduced and the run passes; declared
    with a text the witnesses do not carry, the same run fails."""
    def lossy(p):
        p["mapping"]["effects"] += " WHERE id % 2 = 1"
        p["findings"] = [{"scenario": "t-small-burst", "invariant": "nothing_lost",
                          "witness": "was never applied by accounting: the target left it "
                                     "published",
                          "why": "the mapping hides every other effect", "source": "test"}]
    scenario = dict(SCENARIO, steps=SCENARIO["steps"][:1] + [
        {"do": "wait", "until": "consumed", "count": 4, "timeout_ms": 20000}], expect=[])
    s = write(tmp_path, "s.json", scenario)
    out = tmp_path / "explained"
    r = crashwindow("run", "--target", profile_copy(tmp_path, lossy), s, "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    inv = {i["name"]: i for i in res["scenarios"][0]["invariants"]}["nothing_lost"]
    assert inv["verdict"] == "finding reproduced", inv
    assert inv["violations"] == 4 and inv["explained"] == 4
    assert res["target"]["findings"][0]["why"] == "the mapping hides every other effect"

    def unexplained(p):
        lossy(p)
        p["findings"][0]["witness"] = "the target left it given_up"
    out = tmp_path / "unexplained"
    r = crashwindow("run", "--target", profile_copy(tmp_path, unexplained), s, "--brief",
                    "--out", out, *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1
    inv = {i["name"]: i for i in json.loads((out / "result.json").read_text())
           ["scenarios"][0]["invariants"]}["nothing_lost"]
    assert inv["verdict"] == "fail" and inv["explained"] == 0 and inv["violations"] == 4


def test_a_finding_also_explains_the_waits_and_counts_its_losses_cut_short(tmp_path, pg_cluster):
    """A target that loses events never reaches the counts a scenario waits
    for or expects.  On a target, a wait for consumed events that times out
    lets the run go on to the checker, and an expectation of the effects
    that falls short by exactly the messages a reproduced finding names is
    that finding, not a failure; short by one more, it fails."""
    lossy = hides_effects("id % 2 = 1", "the mapping hides every other effect")
    scenario = dict(SCENARIO, steps=SCENARIO["steps"][:1] + [
        {"do": "wait", "until": "consumed", "count": 8, "timeout_ms": 3000}])
    out = tmp_path / "explained"
    r = crashwindow("run", "--target", profile_copy(tmp_path, lossy),
                    write(tmp_path, "s.json", scenario), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert sc["verdict"] == "pass" and sc["error"] is None, sc
    assert sc["expect"][0]["verdict"] == "finding reproduced", sc["expect"]
    assert "the 4 messages of nothing_lost's known finding" in sc["expect"][0]["detail"]
    events = read_events(str(out / "t-small-burst" / "runner.events.jsonl"))
    assert [e["until"] for e in events if e["event"] == "wait_timeout"] == ["consumed"]

    scenario["expect"] = [{"check": "effects", "equals": 9}]
    out = tmp_path / "short"
    r = crashwindow("run", "--target", profile_copy(tmp_path, lossy),
                    write(tmp_path, "s.json", scenario), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert sc["expect"][0]["verdict"] == "fail", sc["expect"]

def test_a_finding_explains_a_recovery_it_lost(tmp_path, pg_cluster):
    """bb08's shape: the producer dies at its payment's COMMIT answer, and the
    scenario expects that payment recovered (stored and applied though its
    client heard nothing).  A target that leaves that payment's message
    unapplied (here: the mapping hides its effect) loses it; declared as a
    finding, the recovered count short by exactly that message is the
    finding reproduced, and the run passes."""
    hides_the_lost_answer = hides_effects(
        "payment_id NOT IN (SELECT payment_id FROM idempotency_records"
        " WHERE idempotency_key LIKE 'lost-%')", "the mapping hides the lost answer's effect",
        scenario="t-lost-answer")
    scenario = dict(SCENARIO, name="t-lost-answer", steps=[
        {"do": "payments", "count": 2, "key_prefix": "t"},
        {"do": "net", "link": "api->pg", "fault": "window", "frame": "commit_complete",
         "action": "kill", "transaction_with": "INSERT INTO payments"},
        {"do": "payments", "count": 1, "key_prefix": "lost", "timeout_ms": 5000},
        {"do": "wait", "until": "exited", "proc": "api", "timeout_ms": 5000},
        {"do": "restart", "proc": "api"},
        {"do": "payments", "count": 2, "key_prefix": "u"},
        {"do": "wait", "until": "consumed", "count": 4, "timeout_ms": 20000}],
        expect=[{"check": "recovered", "equals": 1}, {"check": "effects", "equals": 5}])
    out = tmp_path / "run"
    r = crashwindow("run", "--target", profile_copy(tmp_path, hides_the_lost_answer),
                    write(tmp_path, "s.json", scenario), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    assert sc["counts"]["payments"] == 5 and sc["kills"] == 1, sc["counts"]
    inv = {i["name"]: i for i in sc["invariants"]}["nothing_lost"]
    assert inv["verdict"] == "finding reproduced" and inv["violations"] == 1, inv
    assert [(x["check"], x["verdict"]) for x in sc["expect"]] == [
        ("recovered", "finding reproduced"), ("effects", "finding reproduced")], sc["expect"]


def test_a_finding_of_every_message_leaves_the_effects_unjudged_not_vacuous(tmp_path,
                                                                            pg_cluster):
    """When a reproduced finding holds every message and no effect exists at
    all (Wolverine's bb11: every delivery in flight was stored, acked and
    left to the dead node), effect_once has nothing to judge because of that
    finding: it is shown not examined, with the reason, instead of failing
    as vacuous; the run passes."""
    loses_all = hides_effects("false", "the mapping hides every effect")
    scenario = dict(SCENARIO, steps=SCENARIO["steps"][:1] + [
        {"do": "wait", "until": "consumed", "count": 8, "timeout_ms": 2000}],
        expect=[{"check": "effects", "equals": 8}])
    out = tmp_path / "run"
    r = crashwindow("run", "--target", profile_copy(tmp_path, loses_all),
                    write(tmp_path, "s.json", scenario), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    inv = {i["name"]: i for i in json.loads((out / "result.json").read_text())
           ["scenarios"][0]["invariants"]}
    assert inv["nothing_lost"]["verdict"] == "finding reproduced", inv["nothing_lost"]
    assert inv["effect_once"]["verdict"] == "not examined", inv["effect_once"]
    assert "every message is in nothing_lost's known finding" in \
        inv["effect_once"]["witnesses"][0]


def test_a_target_that_stops_making_progress_ends_its_waits(tmp_path, pg_cluster):
    """With progress_timeout_ms, a wait for consumed events and the heal end
    once the mapping has not changed for that long, well before their own
    timeouts; the checker then names what is missing."""
    def lossy(p):
        p["mapping"]["effects"] += " WHERE id % 2 = 1"
        p["progress_timeout_ms"] = 2000
    scenario = dict(SCENARIO, steps=SCENARIO["steps"][:1] + [
        {"do": "wait", "until": "consumed", "count": 8, "timeout_ms": 120000}],
        heal={"timeout_ms": 120000}, expect=[])
    out = tmp_path / "run"
    r = crashwindow("run", "--target", profile_copy(tmp_path, lossy),
                    write(tmp_path, "s.json", scenario), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    sc = json.loads((out / "result.json").read_text())["scenarios"][0]
    inv = {i["name"]: i for i in sc["invariants"]}["nothing_lost"]
    assert inv["verdict"] == "fail" and inv["violations"] == 4, inv
    events = read_events(str(out / "t-small-burst" / "runner.events.jsonl"))
    (stop,) = [e for e in events if e["event"] == "wait_timeout"]
    assert stop["no_progress_ms"] == 2000 and stop["waited_ms"] < 120000, stop
    assert [e for e in events if e["event"] == "heal_incomplete"], "the heal ended early too"
    assert sc["duration_ms"] < 120000, sc["duration_ms"]


def test_the_simulator_gives_a_target_its_server_settings(tmp_path):
    """crashwindow sim --target starts its cluster with the profile's
    database.settings, as run --target does; and a run whose set-up fails
    is reported by that error, not by the invariants it left nothing to
    check."""
    (tmp_path / "check.sql").write_text(
        "DO $$ BEGIN IF current_setting('wal_level') <> 'logical' THEN"
        " RAISE EXCEPTION 'wal_level is %', current_setting('wal_level'); END IF; END $$;")

    def logical(p):
        p["database"] = {"settings": {"wal_level": "logical"}}
        p["setup"].insert(0, {"sql_file": "check.sql"})
    profile = profile_copy(tmp_path, logical)
    out = tmp_path / "sim"
    r = crashwindow("sim", "--target", profile, "--seed", "7", "--runs", "1", "--out", out,
                    timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr

    (tmp_path / "check.sql").write_text("DO $$ BEGIN RAISE EXCEPTION 'refused on purpose'; END $$;")
    out = tmp_path / "refused"
    r = crashwindow("sim", "--target", profile, "--seed", "7", "--runs", "1", "--out", out,
                    timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if " FAIL in " in ln]
    assert ": error: " in line and "refused on purpose" in line and "vacuous" not in line, line


def test_a_database_held_by_a_replication_slot_is_dropped_after_its_scenario(tmp_path):
    """A logical-replication listener's slot belongs to the scenario's
    database, and DROP DATABASE refuses while it exists: the runner drops
    the database's slots first, so neither the database nor its slot (and
    the WAL it holds) outlives the scenario.  On a cluster of the test's own
    with wal_level = logical, as a profile's database.settings asks."""
    script = os.path.join(SOURCE_DIR, "scripts", "pg-cluster")
    conninfo = subprocess.run([script, "start"], check=True, capture_output=True, text=True,
                              env=dict(os.environ, CW_PG_SETTINGS="wal_level=logical")
                              ).stdout.strip()
    cluster_dir = dict(kv.split("=", 1) for kv in conninfo.split())["host"]
    try:
        (tmp_path / "slot.sql").write_text(
            "SELECT pg_create_logical_replication_slot('t_slot_' || current_database(),"
            " 'pgoutput')")

        def held(p):
            p["setup"].append({"sql_file": "slot.sql"})
        with psycopg.connect(conninfo, autocommit=True) as conn:
            before = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        out = tmp_path / "run"
        r = crashwindow("run", "--target", profile_copy(tmp_path, held),
                        write(tmp_path, "s.json", SCENARIO), "--brief", "--out", out,
                        *pg_args(conninfo), timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        with psycopg.connect(conninfo, autocommit=True) as conn:
            after = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
            slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
        assert slots == [] and after == before, (slots, after - before)
    finally:
        subprocess.run([script, "stop", cluster_dir], check=False)
