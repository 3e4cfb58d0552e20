"""`crashwindow mutants --target`: the black-box matrix.

Our pipeline, described as a target, meets a mutant build through its profile:
the profile names the programs as ${bin:PROGRAM}, so the mutant's rebuilt
payments-api runs, and the relay and consumer the mutant did not touch come
from the unmutated build, as they do for a white-box run.  The mutant seen
from outside (dual_write: the API publishes straight to the broker and
writes no outbox row) is killed by a black-box scenario, judged only from the
profile's mapping and the broker log.  One mutant and one scenario: the whole
black-box matrix is `crashwindow mutants --target PROFILE` (docs/mutants.md).
Bad usage is refused before anything starts, naming what is wrong.
"""
# needs: pg rabbitmq
import json
import os

from cwtest import BUILD_DIR, SOURCE_DIR, crashwindow, load_result, pg_args

PROFILE = os.path.join(SOURCE_DIR, "targets", "crashwindow", "profile.json")
BB01 = os.path.join(SOURCE_DIR, "scenarios", "blackbox", "bb01-baseline-under-load.json")
WHITE_BOX = os.path.join(SOURCE_DIR, "scenarios", "02-crash-after-commit.json")
# What a target's mapping cannot show: never a kill (docs/targets.md).
INSIDES = {"no_two_live_leases", "publish_within_lease", "ack_after_commit",
           "retry_respects_backoff", "relay_recovers_after_heal"}


def started_as(log):
    """The mutant each start of a program's log names (None: unmutated).  A
    target's log is its output as is: its JSON event lines among others."""
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("{") and '"event":"start"' in line:
            found.append(json.loads(line).get("mutant"))
    return found


def test_a_mutant_seen_from_outside_is_killed(tmp_path, pg_cluster):
    name = "dual_write"
    out = tmp_path / "mut"
    # A RabbitMQ node, the mutant's build and two runs: a few minutes at most.
    r = crashwindow("mutants", "--target", PROFILE, "--only", name, BB01, "--out", out,
                    *pg_args(pg_cluster), timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert "1/1 mutants killed" in r.stdout

    res = load_result(out)
    assert res["kind"] == "mutants" and res["baseline_verdict"] == "pass"
    assert res["target"]["name"] == "crashwindow" and res["broker"] == "rabbitmq"
    assert [s["name"] for s in res["scenarios"]] == ["bb01-baseline-under-load"]
    (m,) = res["mutants"]
    assert m["name"] == name and m["killed"] is True and m["rebuilt"] == ["payments-api"]
    (cell,) = m["scenarios"]
    assert cell["name"] == "bb01-baseline-under-load" and cell["outcome"] == "killed"
    # Caught from outside: acknowledged payments with no outbox message, and
    # messages the broker stored that no outbox row is.
    assert {"nothing_lost", "broker_log_matches_outbox"} <= set(cell["killed_by"]), cell
    assert not INSIDES & set(cell["killed_by"]), cell

    # The profile's ${bin:PROGRAM} picked the mutant's payments-api from its
    # own tree, and the relay and consumer it did not rebuild from the
    # unmutated build: each program says which build it is at its start.
    build_mut = os.path.join(os.path.dirname(os.path.abspath(BUILD_DIR)), f"build-mutant-{name}")
    mres = load_result(out / m["dir"])
    assert mres["mutant"] == name and mres["bin"] == build_mut
    assert mres["target"]["name"] == "crashwindow"
    run = out / m["dir"] / mres["scenarios"][0]["dir"]
    assert set(started_as(run / "api.log")) == {name}
    assert set(started_as(run / "relay-1.log")) == {None}
    assert set(started_as(run / "accounting.log")) == {None}
    # The unmutated build, run through the same profile, passed the same scenario.
    assert res["scenarios"][0]["verdict"] == "pass"
    assert set(started_as(out / res["scenarios"][0]["dir"] / "api.log")) == {None}


def test_bad_usage_is_refused_before_anything_starts(tmp_path):
    missing = tmp_path / "no-such-profile.json"
    r = crashwindow("mutants", "--target", missing, "--only", "dual_write", timeout=60)
    assert r.returncode == 2
    assert str(missing) in r.stderr and "No such file" in r.stderr, r.stderr

    # A white-box scenario reaches into our programs (fault points): no
    # target can run it, and the file and the field are named.
    r = crashwindow("mutants", "--target", PROFILE, "--only", "dual_write", WHITE_BOX,
                    "--out", tmp_path / "wb", timeout=60)
    assert r.returncode == 2
    assert "02-crash-after-commit.json" in r.stderr and "cannot run against target crashwindow" \
        in r.stderr, r.stderr
    assert not (tmp_path / "wb" / "result.json").exists()

    # A scenario file named for the white-box matrix is checked as well,
    # before any build starts.
    r = crashwindow("mutants", "--only", "dual_write", missing, "--out", tmp_path / "nf",
                    timeout=60)
    assert r.returncode == 2 and str(missing) in r.stderr, r.stderr
    assert "baseline" not in r.stdout and not (tmp_path / "nf" / "result.json").exists()
    r = crashwindow("mutants", "--target", PROFILE, "--broker", "fake", timeout=60)
    assert r.returncode == 2 and "--target runs on RabbitMQ" in r.stderr, r.stderr
