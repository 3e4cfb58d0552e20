"""crashwindow run --broker rabbitmq: the runner against a real RabbitMQ
node, end to end (a throwaway node per run).  The whole suite on RabbitMQ
runs in scripts/test-all; here: one scenario passes with the broker log
taken from RabbitMQ's firehose, a fake-broker-only scenario is skipped with
its reason on the console, in result.json and in the report, the report's
header names the broker, and a bad --broker value is refused."""
# needs: pg rabbitmq
import json
import os

from cwtest import SOURCE_DIR, crashwindow, pg_args, read_events


def scen(name):
    return os.path.join(SOURCE_DIR, "scenarios", name)


def test_rabbitmq_run_passes_and_skips_with_reason(tmp_path, pg_cluster):
    out = tmp_path / "run"
    report = tmp_path / "report.html"
    r = crashwindow("run", scen("02-crash-after-commit.json"), scen("05-concurrent-duplicate.json"),
                    "--broker", "rabbitmq", "--brief", "--out", str(out), "--report", str(report),
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skip 05-concurrent-duplicate: needs the fake broker's 'duplicate' switch" in r.stdout
    res = json.loads((out / "result.json").read_text())
    assert res["broker"] == "rabbitmq"
    assert [s["name"] for s in res["scenarios"]] == ["02-crash-after-commit"]
    assert res["skipped"] == [{"name": "05-concurrent-duplicate",
                               "reason": "needs the fake broker's 'duplicate' switch"}]
    sc = res["scenarios"][0]
    assert sc["verdict"] == "pass"
    # The broker log came from RabbitMQ: every publish names its relay (the
    # AMQP app_id), and every stored one was delivered to the group.
    events = read_events(str(out / "02-crash-after-commit" / "broker.events.jsonl"))
    pubs = [e for e in events if e["event"] == "publish"]
    delivered = {e["message_id"] for e in events if e["event"] == "deliver"}
    assert len(pubs) == 3 and all(p["client"] == "relay-1" for p in pubs)
    assert all(p["status"] == "stored" and len(p["payload_sha256"]) == 64 for p in pubs)
    assert {p["message_id"] for p in pubs} == delivered
    html = report.read_text()
    assert "<dt>broker</dt><dd>rabbitmq</dd>" in html
    assert "05-concurrent-duplicate" in html and "id=\"skipped\"" in html


def test_fake_broker_run_says_so(tmp_path, pg_cluster):
    out = tmp_path / "run"
    r = crashwindow("run", scen("01-command-rollback.json"), "--brief", "--out", str(out),
                    *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    assert res["broker"] == "fake" and "skipped" not in res


def test_bad_broker_value_is_usage_error(tmp_path):
    r = crashwindow("run", "--all", "--broker", "kafka", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert "--broker takes fake or rabbitmq, not 'kafka'" in r.stderr


def test_mutants_bad_broker_value_is_usage_error(tmp_path):
    r = crashwindow("mutants", "--broker", "kafka", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert "--broker takes fake or rabbitmq, not 'kafka'" in r.stderr


def test_rabbitmq_subscriber_notices_a_silent_link(tmp_path, pg_cluster):
    """Scenario 36 on RabbitMQ, through an amqp link of the fault proxy: the
    consumer's link swallows every byte for 6 s while three payments are
    delivered into it.  RabbitMQ holds an unacked delivery until the
    connection dies (its consumer timeout is 30 minutes, as the scenario's
    120 s visibility timeout: longer than the run), so the events arrive in
    time only if heartbeats end the silent connection; judged on the
    database and RabbitMQ's own log."""
    out = tmp_path / "run"
    r = crashwindow("run", scen("36-consumer-broker-silent.json"), "--broker", "rabbitmq",
                    "--brief", "--out", str(out), *pg_args(pg_cluster), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    assert "skipped" not in res
    sc = res["scenarios"][0]
    assert sc["verdict"] == "pass" and sc["counts"]["effects"] == 4
    events = read_events(str(out / "36-consumer-broker-silent" / "broker.events.jsonl"))
    assert any(e["event"] == "deliver" and e.get("redelivered") for e in events)
