"""Every failure scenario through `crashwindow run`, one test per file.

Each test runs the real runner against the session's throwaway cluster and
judges it by the run's result.json: the scenario's verdict, every invariant
(the ones the scenario lists must have checked something), every
expectation, the Jepsen-style classification, and the run directory the
report is built from.  The runner's exit status must agree with the verdict.
"""
# needs: pg net
import glob
import json
import os

import pytest

from cwtest import SOURCE_DIR, crashwindow, load_result, pg_args, read_events

SCENARIOS = sorted(glob.glob(os.path.join(SOURCE_DIR, "scenarios", "*.json")))


def run_one(path, pg, out, *extra):
    proc = crashwindow("run", path, *pg_args(pg), "--out", out, "--brief", *extra, timeout=600)
    assert (out / "result.json").exists(), \
        f"no result.json; runner said:\n{proc.stdout}\n{proc.stderr}"
    return proc, load_result(out)


def failures(sc):
    """Plain-words list of what went wrong in one scenario's result (the
    invariants a hazard scenario expects to fail are its verdict's own)."""
    out = []
    if sc["error"]:
        out.append(f"error: {sc['error']}")
    hazard = {x["invariant"] for x in sc.get("hazard", {}).get("caught_by", [])}
    for inv in sc["invariants"]:
        if inv["verdict"] != "pass" and inv["name"] not in hazard:
            out.append(f"invariant {inv['name']}: {inv['violations']} violations, "
                       f"checked {inv['checked']}: {inv['witnesses'][:3]}")
    for x in sc["expect"]:
        if x["verdict"] != "pass":
            out.append(f"expect {x['check']}: {x['detail']}")
    return out


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: os.path.basename(p)[:-5])
def test_scenario(path, pg_cluster, tmp_path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    out = tmp_path / "run"
    proc, result = run_one(path, pg_cluster, out)
    if result.get("skipped"):
        # A scenario only a real broker can take (a kernel partition of a
        # broker link): skipped here with its reason, judged on RabbitMQ.
        assert "needs RabbitMQ" in result["skipped"][0]["reason"], result["skipped"]
        out = tmp_path / "run-rabbitmq"
        proc, result = run_one(path, pg_cluster, out, "--broker", "rabbitmq")
        assert result["broker"] == "rabbitmq" and not result.get("skipped"), result
    assert len(result["scenarios"]) == 1
    sc = result["scenarios"][0]
    why = failures(sc)
    assert sc["verdict"] == "pass" and not why, \
        "\n".join(why) + f"\n--- runner output ---\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0 and result["verdict"] == "pass"

    # The stored history alone gives the same verdicts.
    check = crashwindow("check", out, "--pg", pg_cluster, timeout=120)
    assert check.returncode == 0 and "same verdicts in" in check.stdout, \
        check.stdout + check.stderr

    # Every invariant ran; the ones the scenario names checked something.
    names = {inv["name"]: inv for inv in sc["invariants"]}
    assert len(names) == 15
    for name in spec["invariants"]:
        assert names[name]["checked"] > 0, f"{name} is listed but checked nothing"
    # One expectation result per expect entry, at least.
    assert len(sc["expect"]) >= len(spec.get("expect", []))
    cls = sc["classification"]
    if "hazard" in spec:
        # A hazard scenario loses data on purpose: it passes only because
        # each invariant it names reported the loss, every violation one
        # the hazard explains, within its bound.
        assert sc["hazard"]["caught"] is True, sc["hazard"]
        for x in sc["hazard"]["caught_by"]:
            assert x["violations"] > 0 and x["witness"], x
            assert x["explained"] == x["violations"], x
        assert 0 < sc["hazard"]["explained_events"] <= spec["hazard"]["at_most"], sc["hazard"]
        assert sc["faults_not_hit"] == [], sc["faults_not_hit"]
        return
    # Jepsen-style: nothing lost, nothing twice, nothing out of thin air.
    assert cls["lost"] == 0 and cls["duplicated"] == 0 and cls["unexpected"] == 0, cls
    # Nothing parked and left there; every event in exactly one class.
    assert cls["parked_unresolved"] == 0, cls
    assert cls["ok"] + cls["recovered"] + cls["dead_lettered"] == sc["counts"]["outbox_rows"], \
        (cls, sc["counts"])
    # Every fault the scenario armed did fire: it really exercised its window.
    assert sc["faults_not_hit"] == [], sc["faults_not_hit"]
    assert sc["crash_window"] == spec["crash_window"]

    # The run directory the report reads.
    d = out / sc["dir"]
    for name in ("scenario.json", "timeline.jsonl", "metrics.jsonl", "broker.events.jsonl"):
        assert (d / name).exists(), f"{name} missing from {d}"
    timeline = read_events(str(d / "timeline.jsonl"))
    stamps = [e["ts_us"] for e in timeline]
    assert stamps == sorted(stamps), "timeline is not sorted by ts_us"
    procs = {e["proc"] for e in timeline}
    assert {"runner", "broker"} <= procs
    assert set(spec["processes"]) <= procs, f"processes missing from the timeline: {procs}"
    assert sc["events"] == len(timeline)
    assert len(read_events(str(d / "metrics.jsonl"))) >= 1
