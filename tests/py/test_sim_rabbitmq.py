"""crashwindow sim --broker rabbitmq: generated schedules against a real
RabbitMQ node (the runner's throwaway node), with what a real broker cannot
take left out of each schedule by the runner's own rule.

Seed 7's first runs draw fake-broker switches (an outage switched on and
off, duplicates or a delay at start, and always a visibility timeout), so
the fitted scenarios must differ from the fake broker's and still run: the
dry run compares the two renderings, and the real runs check the broker log
RabbitMQ's firehose gave, which the system under test cannot influence."""
# needs: pg rabbitmq
import json
import os

from cwtest import load_result, pg_args, read_events
from test_sim import scenarios_in, sim


def broker_steps(scenario):
    return [s for s in scenario["steps"] if s.get("do") == "broker"]


def closes_connections(step):
    """The one broker step both brokers take (RabbitMQ: close_all_connections)."""
    return step.get("do") == "broker" and step.get("control") == {"close_connections": True}


def fake_switches(scenario):
    return {k for k in scenario["broker"] if k != "durable"}


def real_broker_takes(step, scenario):
    """The runner's rule for one step, as its skip reasons state it: no
    fake-broker switch, no protocol cut on a broker link, no relay's broker
    link slower than its lease, no crash of an in-memory broker.  A reset or
    a link down reaches RabbitMQ through the proxy like any TCP link, and the
    broker dropping every connection is close_all_connections there."""
    if step.get("do") == "broker":
        return closes_connections(step)
    link = step.get("link", "")
    if step.get("do") == "net" and link.endswith("->broker"):
        if step.get("fault") == "cut":
            return False
        proc = scenario["processes"][link.split("->")[0]]
        if step.get("fault") == "latency" and proc["kind"] == "relay" and \
                step["latency_ms"] + step["jitter_ms"] >= proc["args"]["lease-ms"]:
            return False
    return step.get("do") != "broker_crash" or scenario["broker"].get("durable", False)


def test_dry_run_leaves_out_what_rabbitmq_cannot_take():
    fake = sim(["--seed", "7", "--runs", "3", "--dry-run"])
    rabbit = sim(["--seed", "7", "--runs", "3", "--dry-run", "--broker", "rabbitmq"])
    assert fake.returncode == 0 and rabbit.returncode == 0, fake.stderr + rabbit.stderr
    fake_scs, rabbit_scs = scenarios_in(fake.stdout), scenarios_in(rabbit.stdout)
    assert [s["name"] for s in fake_scs] == [s["name"] for s in rabbit_scs]
    # Not vacuous: the fake broker's schedules do use its switches.
    assert any(broker_steps(s) for s in fake_scs)
    assert all(fake_switches(s) for s in fake_scs)
    for f, r in zip(fake_scs, rabbit_scs):
        assert all(closes_connections(s) for s in broker_steps(r)), r["name"]
        assert fake_switches(r) == set(), r["name"]
        # Only the refused steps went: the rest of the schedule is kept, in order.
        assert r["steps"] == [s for s in f["steps"] if real_broker_takes(s, f)], r["name"]
        assert r["broker"].get("durable") == f["broker"].get("durable"), r["name"]


def test_bad_broker_value_is_refused():
    r = sim(["--seed", "7", "--runs", "1", "--dry-run", "--broker", "kafka"])
    assert r.returncode == 2
    assert "--broker takes fake or rabbitmq, not 'kafka'" in r.stderr


def test_runs_pass_on_rabbitmq_with_its_broker_log(pg_cluster, tmp_path):
    out = str(tmp_path / "sim")
    r = sim(["--seed", "7", "--runs", "2", "--broker", "rabbitmq", *pg_args(pg_cluster),
             "--out", out, "--keep-passing"], timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "rabbitmq: 4 parts left out" in r.stdout, r.stdout[-3000:]
    res = load_result(out)
    assert res["broker"] == "rabbitmq"
    assert res["simulator"]["runs"] == 2 and res["simulator"]["failures"] == 0
    assert [s["verdict"] for s in res["scenarios"]] == ["pass", "pass"]
    left = [e for e in read_events(os.path.join(out, "sim.events.jsonl"))
            if e["event"] == "rabbitmq_left_out"]
    assert {(e["scenario"], e["reason"]) for e in left} >= {
        ("sim-7-1", "a broker step sets a fake-broker switch"),
        ("sim-7-1", "needs the fake broker's visibility timeout (RabbitMQ redelivers on "
                    "connection loss only)")}
    for sc in res["scenarios"]:
        run_dir = os.path.join(out, sc["dir"])
        with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
            ran = json.load(f)
        assert broker_steps(ran) == [] and fake_switches(ran) == set(), sc["name"]
        # The broker log is RabbitMQ's: each publish names its relay (the
        # AMQP app_id), and every stored message reached the accounting group.
        log = read_events(os.path.join(run_dir, "broker.events.jsonl"))
        pubs = [e for e in log if e["event"] == "publish" and "inferred_from" not in e]
        assert pubs, f"{sc['name']}: nothing was published"
        assert all(p["client"].startswith("relay-") for p in pubs), sc["name"]
        stored = {p["message_id"] for p in pubs if p["status"] == "stored"}
        delivered = {e["message_id"] for e in log
                     if e["event"] == "deliver" and e.get("group") == "accounting"}
        assert stored and stored <= delivered, sc["name"]
