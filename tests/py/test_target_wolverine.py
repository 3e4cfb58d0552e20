"""The Wolverine target (targets/wolverine): a payments service on
WolverineFx 6.64.2 with its EF Core outbox on PostgreSQL, the RabbitMQ
transport and a durable inbox, run from its profile on a throwaway RabbitMQ
node.  A small burst is delivered and applied once, judged from the
mapping (the payments and ledger tables beside Wolverine's envelope tables)
and the broker log, where the AMQP message_id Wolverine sends is the
envelope id the payment row names.  Where dotnet or the Release build is
missing, the test is skipped with that reason, and a run of the profile
skips its scenarios with the profile's own reason, never passing them."""
# needs: pg rabbitmq
import json
import os
import shutil

import pytest

from cwtest import SOURCE_DIR, crashwindow, pg_args, read_events

TARGET_DIR = os.path.join(SOURCE_DIR, "targets", "wolverine")
PROFILE = os.path.join(TARGET_DIR, "profile.json")
BUILD = os.path.join(TARGET_DIR, "bin", "Release", "net10.0", "PaymentsWolverine.dll")
SCENARIO = {
    "name": "t-wolverine-burst", "title": "a small burst", "crash_window": "blackbox/test",
    "processes": {"api": {"kind": "api"}, "relay-1": {"kind": "relay"},
                  "accounting": {"kind": "consumer"}},
    "steps": [{"do": "payments", "count": 8, "concurrency": 2, "key_prefix": "t"},
              {"do": "wait", "until": "consumed", "count": 8, "timeout_ms": 30000}],
    "heal": {"timeout_ms": 20000},
    "invariants": ["nothing_lost", "effect_once", "broker_log_matches_outbox",
                   "one_payment_per_key"],
    "expect": [{"check": "effects", "equals": 8}],
}


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def built():
    """Why the target cannot run here, or None."""
    if shutil.which("dotnet") is None:
        return "dotnet is not installed"
    if not os.path.isfile(BUILD):
        return "targets/wolverine is not built (scripts/setup builds it)"
    return None


@pytest.mark.skipif(built() is not None, reason=built() or "")
def test_a_burst_through_wolverines_outbox_and_inbox_is_applied_once(tmp_path, pg_cluster):
    out = tmp_path / "run"
    r = crashwindow("run", "--target", PROFILE, write(tmp_path, "s.json", SCENARIO), "--brief",
                    "--out", out, "--junit", tmp_path / "j.xml", *pg_args(pg_cluster),
                    timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "against target wolverine" in r.stdout
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["name"] == "wolverine" and res["broker"] == "rabbitmq"
    sc = res["scenarios"][0]
    assert sc["verdict"] == "pass", sc
    invs = {i["name"]: i for i in sc["invariants"]}
    for name in SCENARIO["invariants"]:
        assert invs[name]["verdict"] == "pass" and invs[name]["checked"] > 0, invs[name]
    counts = sc["counts"]
    assert counts["payments"] == 8 and counts["outbox_rows"] == 8
    assert counts["published"] == 8 and counts["effects"] == 8
    # Every envelope the broker stored was delivered to the accounting queue
    # under the same message_id: Wolverine's envelope id, which the outbox
    # view takes from the payment row (broker_log_matches_outbox compared the
    # two sets; here they are also eight distinct ids).
    events = read_events(str(out / "t-wolverine-burst" / "broker.events.jsonl"))
    stored = {e["message_id"] for e in events if e["event"] == "publish"
              and e["status"] == "stored"}
    delivered = {e["message_id"] for e in events if e["event"] == "deliver"
                 and e["group"] == "accounting"}
    assert len(stored) == 8 and stored == delivered
    assert 'name="target" value="wolverine"' in (tmp_path / "j.xml").read_text()


def test_without_its_build_the_scenarios_are_skipped_with_the_reason(tmp_path, pg_cluster):
    # The profile alone, away from its build: its requirement fails, so the
    # scenario is skipped with the profile's reason, never counted as passed.
    shutil.copy(PROFILE, tmp_path / "profile.json")
    out = tmp_path / "run"
    r = crashwindow("run", "--target", tmp_path / "profile.json",
                    write(tmp_path, "s.json", SCENARIO), "--brief", "--out", out,
                    *pg_args(pg_cluster), timeout=300)
    res = json.loads((out / "result.json").read_text())
    skipped = res.get("skipped", [])
    assert [s["name"] for s in skipped] == ["t-wolverine-burst"], r.stdout + r.stderr
    reason = skipped[0]["reason"]
    assert ("scripts/setup" in reason) if shutil.which("dotnet") else ("dotnet" in reason)
    assert not res.get("scenarios"), res


def test_each_control_profile_changes_only_what_it_says():
    """A control run is worth its comparison only if nothing else differs:
    profile-confirms.json turns publisher confirms on for the producer and
    the node, profile-agent-on-node.json keeps the durability agent off the
    producer's nodes; name, title and findings aside, each is profile.json."""
    def load(name):
        with open(os.path.join(TARGET_DIR, name), encoding="utf-8") as f:
            p = json.load(f)
        for key in ("target", "title", "findings"):
            p.pop(key, None)
        return p
    base = load("profile.json")
    for name, changes in (
            ("profile-confirms.json", {("producer", "WOLVERINE_PUBLISHER_CONFIRMS"): "1",
                                       ("relay", "WOLVERINE_PUBLISHER_CONFIRMS"): "1"}),
            ("profile-agent-on-node.json", {("producer", "WOLVERINE_DURABILITY_AGENT"): "0"})):
        control = load(name)
        for (role, var), value in changes.items():
            assert var not in base["processes"][role]["env"]
            assert control["processes"][role]["env"].pop(var) == value, (name, role, var)
        assert control == base, name
