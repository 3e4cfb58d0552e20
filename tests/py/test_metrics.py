"""The /metrics endpoints of outbox-relay, accounting-consumer and
payments-api: scraped over HTTP from the real programs, each page parsed
strictly (promparse), its figures held against the database and the broker,
its counters never going down from one scrape to the next; and
--metrics-listen refused at start (exit 2, nothing started) for a bad
address or a port in use.
"""
# needs: pg
import http.client
import os
import socket
import subprocess
import uuid
import urllib.request

import pytest

import promparse
from apiclient import start_api
from cwtest import (PIPELINE, binary, crashwindow, load_result, query, scalar, scenario,
                    wait_for)
from test_consumer import start_consumer
from test_relay import insert_rows, start_relay, stored

# The source article's (README) nine figures, in the order it gives them after the one it
# calls the most useful (the oldest pending age).
ARTICLE = ["outbox_oldest_pending_age_seconds", "outbox_pending_messages",
           "outbox_published_total", "outbox_attempts", "outbox_dead_letters",
           "outbox_expired_leases_recovered_total", "inbox_duplicates_ignored_total",
           "outbox_publish_latency_seconds", "inbox_processing_latency_seconds"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=15) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return promparse.parse(r.read().decode("utf-8"))


def listening_at(proc):
    """The address a relay or consumer reports for its endpoint."""
    wait_for(lambda: proc.events("metrics_listening") or not proc.alive(), 15,
             f"{proc.name} to serve its metrics")
    assert proc.alive(), proc.stderr_text()
    return proc.events("metrics_listening")[0]["address"]


def v(page, name, **labels):
    return promparse.value(page, name, **labels)


def assert_pipeline_figures(page, db):
    names = list(page)
    at = [names.index(n) for n in ARTICLE]
    assert at == sorted(at), f"the article's figures out of order: {names}"
    assert v(page, "outbox_stats_up") == 1
    assert v(page, "outbox_published_total") == scalar(
        db, "SELECT count(*) FROM outbox_messages WHERE published_at IS NOT NULL")
    assert v(page, "outbox_pending_messages") == 0
    assert v(page, "outbox_oldest_pending_age_seconds") == 0
    assert v(page, "outbox_attempts_bucket", le="1") == v(page, "outbox_attempts_count")


def test_each_program_serves_its_counts_and_the_relay_the_pipeline_figures(db, procs, broker):
    """Each program its own counts; the pipeline's figures (the same from
    whoever reads them) from the relay alone by default, so that a sum()
    over the scraped jobs counts each once."""
    _, sock = broker
    api_at = f"127.0.0.1:{free_port()}"
    api = start_api(procs, db, extra=("--metrics-listen", api_at))
    relay = start_relay(procs, db, sock, metrics_listen="127.0.0.1:0")
    consumer = start_consumer(procs, db, sock, args=("--metrics-listen", "127.0.0.1:0"))
    relay_at, consumer_at = listening_at(relay), listening_at(consumer)
    pages = [(at, scrape(at)) for at in (api_at, relay_at, consumer_at)]
    assert v(pages[1][1], "outbox_relay_published_total") == 0
    assert v(pages[2][1], "inbox_consumer_applied_total", consumer="accounting") == 0

    keys = [str(uuid.uuid4()) for _ in range(20)]
    for k in keys:
        assert api.post_payment(k).status == 201
    replay = api.post_payment(keys[0])
    assert replay.status == 201 and replay.header("idempotent-replayed") == "true"
    wait_for(lambda: scalar(db, "SELECT count(*) FROM ledger_entries") == 20, 30,
             "20 ledger entries")
    wait_for(lambda: scalar(db, "SELECT count(*) FROM outbox_messages"
                                " WHERE published_at IS NULL") == 0, 30, "every row marked")
    wait_for(lambda: v(scrape(consumer_at), "inbox_consumer_acks_total",
                       consumer="accounting") == 20, 15, "20 acks counted")

    api_page, relay_page, consumer_page = (scrape(at) for at in (api_at, relay_at, consumer_at))
    assert v(api_page, "payments_api_commands_total", command="create", status="201") == 21
    assert v(api_page, "payments_api_commands_total", command="create", status="422") == 0
    assert v(api_page, "payments_api_replays_total", command="create") == 1
    # The relay's counts are what the database and the broker hold.
    assert len(stored(sock)) == 20
    assert v(relay_page, "outbox_relay_published_total") == 20
    assert v(relay_page, "outbox_relay_marked_total") == 20
    assert v(relay_page, "outbox_relay_claimed_messages_total") == 20
    assert v(relay_page, "outbox_relay_retries_total") == 0
    worker = [lab["worker"] for n, lab, _ in relay_page["outbox_relay_info"]["samples"]]
    assert worker == [scalar(db, "SELECT DISTINCT locked_by::text FROM outbox_messages")]
    assert v(consumer_page, "inbox_consumer_applied_total", consumer="accounting") == 20
    assert v(consumer_page, "inbox_consumer_duplicates_total", consumer="accounting") == 0
    assert v(consumer_page, "inbox_consumer_deliveries_total", consumer="accounting") == 20
    assert_pipeline_figures(relay_page, db)
    assert v(relay_page, "inbox_processing_latency_seconds_count", consumer="accounting") == 20
    for page in (api_page, consumer_page):
        assert not set(ARTICLE + ["outbox_stats_up"]) & set(page), sorted(page)
    # Counters never go down: from the first scrape, and again a scrape later.
    for (at, before), after in zip(pages, (api_page, relay_page, consumer_page)):
        assert promparse.counters_never_went_down(before, after) == [], at
        assert promparse.counters_never_went_down(after, scrape(at)) == [], at


def test_a_duplicate_delivery_is_counted_where_the_inbox_absorbs_it(db, procs, broker):
    _, sock = broker
    ids = [r[0] for r in query(
        db, "INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, aggregate_version,"
            " event_type, schema_version, payload, occurred_at)"
            " SELECT id, 'payment', agg, 1, 'PaymentCreated', 1,"
            " jsonb_build_object('EventId', id, 'PaymentId', agg, 'Amount', '5.00',"
            "  'Currency', 'EUR', 'AggregateVersion', 1,"
            "  'OccurredAtUtc', '2026-11-29T21:00:00.000000Z'),"
            " now() - interval '1 minute'"
            " FROM (SELECT gen_random_uuid() AS id, gen_random_uuid() AS agg"
            "       FROM generate_series(1, 3)) AS g"
            " RETURNING id::text")]
    consumer = start_consumer(procs, db, sock, args=("--metrics-listen", "127.0.0.1:0",
                                                     "--pipeline-metrics", "on"))
    at = listening_at(consumer)
    # The first relay publishes and stops before marking (parked at the
    # mark, then killed): the second publishes the same rows again.
    relay = start_relay(procs, db, sock, faults="relay/before_mark=park", lease_ms=500)
    wait_for(lambda: scalar(db, "SELECT count(*) FROM inbox_messages") == 3, 30,
             "three events applied")
    relay.kill()
    start_relay(procs, db, sock, name="relay-2", lease_ms=500)
    wait_for(lambda: scalar(db, "SELECT count(*) FROM outbox_messages"
                                " WHERE published_at IS NOT NULL") == 3, 30, "rows marked")
    assert len(stored(sock, set(ids))) == 6
    page = wait_for(lambda: (lambda p: p if v(p, "inbox_consumer_duplicates_total",
                                                 consumer="accounting") == 3 else None)(
        scrape(at)), 15, "three duplicates counted")
    assert v(page, "inbox_consumer_applied_total", consumer="accounting") == 3
    assert v(page, "inbox_duplicates_ignored_total", consumer="accounting") == 3
    assert scalar(db, "SELECT count(*) FROM ledger_entries") == 3


def test_the_endpoint_answers_while_the_database_cannot_be_read(procs, broker, tmp_path):
    _, sock = broker
    bad = f"host={tmp_path} port=1 user=app dbname=nowhere connect_timeout=2"
    relay = start_relay(procs, bad, sock, metrics_listen="127.0.0.1:0")
    at = listening_at(relay)
    page = wait_for(lambda: (lambda p: p if v(p, "outbox_relay_reconnects_total",
                                                 target="db") >= 2 else None)(scrape(at)),
                    20, "two failed connections counted")
    assert v(page, "outbox_stats_up") == 0
    assert "outbox_pending_messages" not in page, "no figure without the database"
    host, port = at.rsplit(":", 1)
    for method, path, status in (("GET", "/", 404), ("GET", "/metrics/x", 404),
                                 ("POST", "/metrics", 405), ("HEAD", "/metrics", 200)):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request(method, path)
        r = conn.getresponse()
        body = r.read()
        assert r.status == status, (method, path, r.status)
        if status == 405:
            assert r.getheader("Allow") == "GET, HEAD"
        if method == "HEAD":
            assert body == b""
        conn.close()
    assert relay.alive()
    assert relay.stop() == 0


def test_a_relay_told_not_to_serves_no_pipeline_figures(db, procs, broker):
    _, sock = broker
    insert_rows(db, 2)
    relay = start_relay(procs, db, sock, metrics_listen="127.0.0.1:0", pipeline_metrics="off")
    at = listening_at(relay)
    page = wait_for(lambda: (lambda p: p if v(p, "outbox_relay_published_total") == 2
                             else None)(scrape(at)), 15, "two publishes counted")
    assert not set(ARTICLE + ["outbox_stats_up"]) & set(page), sorted(page)
    assert relay.stop() == 0


@pytest.mark.parametrize("program", ["outbox-relay", "accounting-consumer", "payments-api"])
def test_pipeline_metrics_takes_on_or_off(program, db, tmp_path):
    events = str(tmp_path / "events.jsonl")
    out = subprocess.run([binary(program), "--db", db, "--pipeline-metrics", "yes",
                          "--events", events], capture_output=True, text=True, timeout=20)
    assert out.returncode == 2, out
    assert "--pipeline-metrics: 'yes' is not on or off" in out.stderr, out.stderr
    assert not os.path.exists(events), "nothing started"


def run_program(program, db, tmp_path, address):
    """Runs one program with --metrics-listen address; returns (result,
    events path).  Its broker does not exist and its API port is free: were
    it to start, it would log that it did."""
    events = str(tmp_path / f"{program}-{uuid.uuid4().hex[:6]}.jsonl")
    sock = str(tmp_path / "no-broker.sock")
    args = {"outbox-relay": ["--broker", sock],
            "accounting-consumer": ["--broker", sock],
            "payments-api": ["--listen", "127.0.0.1:0"]}[program]
    env = dict(os.environ)
    env.pop("CW_DB", None)
    out = subprocess.run([binary(program), "--db", db, *args, "--events", events,
                          "--metrics-listen", address],
                         capture_output=True, text=True, timeout=20, env=env)
    return out, events


@pytest.mark.parametrize("program", ["outbox-relay", "accounting-consumer", "payments-api"])
def test_a_bad_metrics_address_or_a_port_in_use_stops_the_program_at_start(
        program, db, tmp_path):
    for address, says in (("localhost", "is not HOST:PORT"),
                          ("127.0.0.1:99999", "the port must be"),
                          ("127.0.0.1:", "the port must be"),
                          ("300.1.2.3:9100", "not an IPv4"), ("example.com:9100", "not an IPv4"),
                          (":9100", "is not HOST:PORT"), ("[::1:9100", "brackets"),
                          ("[zz]:9100", "not an IPv6")):
        out, events = run_program(program, db, tmp_path, address)
        assert out.returncode == 2, (program, address, out)
        assert "--metrics-listen" in out.stderr and says in out.stderr, (address, out.stderr)
        assert not os.path.exists(events), "nothing started"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        out, events = run_program(program, db, tmp_path, address)
    assert out.returncode == 2, out
    assert address in out.stderr and "in use" in out.stderr, out.stderr
    assert not os.path.exists(events) and "listening" not in out.stdout, "nothing started"


GOOD = ("# HELP a_total A.\n# TYPE a_total counter\na_total{k=\"v\"} 1\n"
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
        "h_sum 3\nh_count 2\n")


@pytest.mark.parametrize("page, says", [
    (GOOD.replace("a_total{", "a_total{k=\"v\",k=\"w\",", 1), "repeated"),
    (GOOD.replace("# TYPE a_total counter\n", ""), "outside"),
    (GOOD.replace("# HELP a_total A.\n", ""), "TYPE without its HELP"),
    (GOOD.replace("counter", "gauge"), "_total"),
    (GOOD.replace("a_total", "a"), "_total"),
    (GOOD.replace("h_bucket{le=\"+Inf\"} 2", "h_bucket{le=\"+Inf\"} 0"), "cumulative"),
    (GOOD.replace("h_count 2", "h_count 5"), "_count"),
    (GOOD + "a_total{k=\"x\"} 1\n", "outside"),
    (GOOD.replace("{k=\"v\"}", "{k=\"v\\q\"}"), "labels"),
    (GOOD.replace(" 1\n", " one\n", 1), "value"),
    (GOOD.replace("a_total{k=\"v\"} 1", "a_total{k=\"v\"} -1"), "counter"),
    (GOOD + "\n", "unexpected"),
    (GOOD.rstrip("\n"), "newline"),
])
def test_the_strict_reader_refuses_a_malformed_page(page, says):
    assert promparse.parse(GOOD)["h"]["type"] == "histogram"
    with pytest.raises(promparse.PageError, match=says):
        promparse.parse(page)


def test_the_api_says_where_its_metrics_listen(db, procs):
    """Port 0 picks a free port: the API logs which, as the relay and the
    consumer do, and the page is served there."""
    api = start_api(procs, db, extra=("--metrics-listen", "127.0.0.1:0",
                                      "--pipeline-metrics", "on"))
    at = listening_at(api.proc)
    host, port = at.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0, at
    assert v(scrape(at), "outbox_pending_messages") == 0


SERVING = dict(PIPELINE, accounting={"kind": "consumer",
                                     "args": {"name": "accounting",
                                              "metrics-listen": "127.0.0.1:0"}})


@pytest.mark.parametrize("step,message", [
    ({"do": "scrape", "proc": "relay-1", "expect_output": "x"},
     "steps[0].proc: 'relay-1' serves no /metrics: give it \"metrics-listen\""),
    ({"do": "scrape", "proc": "accounting"}, "steps[0].expect_output: missing"),
    ({"do": "scrape", "expect_output": "x"}, "steps[0].proc: missing"),
    ({"do": "scrape", "proc": "relay-9", "expect_output": "x"},
     "steps[0].proc: unknown process 'relay-9'"),
    ({"do": "scrape", "proc": "accounting", "expect_output": "x", "port": 9},
     "steps[0]: unknown field 'port'"),
    ({"do": "scrape", "proc": "accounting", "series": "a_total"},
     "steps[0].series: a series needs \"min\" or \"max\""),
    ({"do": "scrape", "proc": "accounting", "expect_output": "x", "min": 1},
     "steps[0].series: \"min\" and \"max\" bound a series: name it"),
    ({"do": "scrape", "proc": "accounting", "series": "a_total", "min": 3, "max": 2},
     "steps[0].series: min 3 is over max 2"),
    ({"do": "scrape", "proc": "accounting", "series": "a_total 1", "min": 1},
     "steps[0].series: 'a_total 1' is not a series name with its labels"),
    ({"do": "scrape", "proc": "accounting", "series": "a_total", "min": -1},
     "steps[0].min"),
])
def test_a_bad_scrape_step_is_refused_before_anything_starts(tmp_path, step, message):
    path = scenario(tmp_path, "badscrape", [step], processes=SERVING)
    r = crashwindow("run", path, "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: {message}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_scrape_step_judges_what_the_scraper_sees(tmp_path):
    """A scenario's scrape reads the running consumer's own /metrics: a
    figure it shows passes, one it lacks fails the scenario as an
    expectation naming the text, and the page is kept; a series is judged by
    its value within bounds (a count a busy machine may push past one), and
    a series the page lacks fails."""
    path = scenario(tmp_path, "scrape", [
        {"do": "payments", "count": 2, "key_prefix": "sc"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 15000},
        {"do": "scrape", "proc": "accounting",
         "expect_output": 'inbox_consumer_applied_total{consumer="accounting"} 2\n'},
        {"do": "scrape", "proc": "accounting",
         "expect_output": 'inbox_consumer_duplicates_total{consumer="accounting"} 7\n'},
        {"do": "scrape", "proc": "accounting",
         "series": 'inbox_consumer_applied_total{consumer="accounting"}', "min": 1, "max": 2},
        {"do": "scrape", "proc": "accounting",
         "series": 'inbox_consumer_applied_total{consumer="accounting"}', "min": 3},
        {"do": "scrape", "proc": "accounting",
         "series": 'inbox_consumer_applied_total{consumer="nobody"}', "max": 5},
    ], processes=SERVING, heal={"timeout_ms": 10000})
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    sc = load_result(out)["scenarios"][0]
    expects = {e["check"]: e for e in sc["expect"]}
    assert expects["steps[2].expect_output"]["verdict"] == "pass", expects
    assert expects["steps[3].expect_output"]["verdict"] == "fail", expects
    assert "lacks" in expects["steps[3].expect_output"]["detail"], expects
    page = (out / sc["dir"] / "accounting.scrape.step4.txt").read_text()
    assert 'inbox_consumer_duplicates_total{consumer="accounting"} 0' in page
    # a series is judged by its value within the step's bounds
    assert expects["steps[4].series"]["verdict"] == "pass", expects
    assert expects["steps[5].series"]["verdict"] == "fail", expects
    assert expects["steps[5].series"]["detail"] == (
        "accounting's /metrics has inbox_consumer_applied_total{consumer=\"accounting\"} 2"
        " (want at least 3)"), expects
    assert expects["steps[6].series"]["verdict"] == "fail", expects
    assert "lacks the series" in expects["steps[6].series"]["detail"], expects
