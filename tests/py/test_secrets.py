"""No planted secret survives anywhere the pipeline shows text.

The corpus (tests/data/secrets.json) holds 25+ credential formats, each with a
realistic message and three contexts (libpq, broker, HTTP).  They are
planted through the real processes, the way secrets really arrive:

  - as a broker's refusal: the fake broker refuses publishes with the
    planted text as its error (control "refuse_error"), so it reaches the
    relay, last_error, the dead letters, their requeue records, outboxctl;
  - in a connection string: every program gets a --db whose host address
    or password holds the form, and libpq quotes what it could not use;
  - in a request path: the API logs the paths it is asked for;
  - through the runner: a scenario plants them all, and its console, its
    run directory and its HTML report are searched too.

Then every surface is searched for every secret (runs of 6+ letters and
digits of it, in windows of 12 characters, so a partial leak counts too).
A surface is a function returning (label, text) pairs; SURFACES lists them,
/metrics of the API, the relay and the consumer among them.
"""
# needs: pg
import glob
import json
import os
import re
import stat
import subprocess
import urllib.parse

import urllib.request

from apiclient import start_api
from cwtest import SOURCE_DIR, binary, crashwindow, query, scalar, scenario, wait_for
from test_consumer import start_consumer
from test_metrics import free_port, listening_at
from test_relay import broker_connect, start_relay

CORPUS_PATH = os.path.join(SOURCE_DIR, "tests", "data", "secrets.json")
with open(CORPUS_PATH, encoding="utf-8") as _f:
    CORPUS = json.load(_f)
FORMATS = CORPUS["secrets"]
WINDOW = 12     # 62^12: no false alarm from ids and hashes in the logs
MIN_RUN = 6


def planted(contexts=True):
    """(format, where, text): each format in its own message and, with
    contexts, planted into the libpq, broker and HTTP context too."""
    for f in FORMATS:
        yield f, "text", f["text"]
        if contexts:
            for name, ctx in CORPUS["contexts"].items():
                yield f, name, ctx.replace("%s", f["form"], 1)


def windows(fmt):
    """The windows of fmt's secrets that must appear nowhere."""
    out = set()
    for needle in fmt["secret"]:
        for run in re.findall(r"[A-Za-z0-9]+", needle):
            if len(run) < MIN_RUN:
                continue
            w = min(WINDOW, len(run))
            out.update(run[i:i + w] for i in range(len(run) - w + 1))
    return out


WINDOWS = {f["name"]: windows(f) for f in FORMATS}


def find_leaks(pairs):
    """Every (format, surface label, window, excerpt) found in pairs."""
    leaks = []
    for label, text in pairs:
        for name, ws in WINDOWS.items():
            for w in ws:
                at = text.find(w)
                if at >= 0:
                    leaks.append((name, label, w, text[max(0, at - 60):at + 60]))
                    break
    return leaks


def assert_no_leaks(pairs):
    pairs = list(pairs)
    assert sum(len(text) for _, text in pairs) > 0, "every surface was empty: nothing checked"
    leaks = find_leaks(pairs)
    assert not leaks, "\n".join(f"{n} survives in {label}: {w!r} in ...{ex!r}..."
                                for n, label, w, ex in leaks[:20])


# -- surfaces -------------------------------------------------------------------

def files_under(root):
    """Every regular file under root (events, logs, results, reports)."""
    for path in glob.glob(os.path.join(str(root), "**"), recursive=True):
        if stat.S_ISREG(os.lstat(path).st_mode):
            with open(path, encoding="utf-8", errors="replace") as f:
                yield path, f.read()


def outboxctl(db, *args):
    r = subprocess.run([binary("outboxctl"), "--db", db, *args], capture_output=True,
                       text=True, timeout=60)
    return r.stdout + r.stderr


def surface_database(ctx):
    """Every column that holds an error or a reason."""
    db = ctx["db"]
    for sql in ("SELECT coalesce(string_agg(last_error, E'\\n'), '') FROM outbox_messages",
                "SELECT coalesce(string_agg(last_error_before, E'\\n'), '') FROM outbox_requeues",
                "SELECT coalesce(string_agg(detail, E'\\n'), '') FROM consumer_anomalies",
                "SELECT coalesce(string_agg(reason, E'\\n'), '') FROM consumer_dead_letters"):
        yield f"database: {sql}", scalar(db, sql) or "(none)"


def surface_process_logs(ctx):
    """Every process's events and stderr (all files the test's processes wrote)."""
    yield from files_under(ctx["tmp_path"])


def surface_outboxctl(ctx):
    """What an operator sees: status, metrics, dead letters, requeues."""
    yield from ctx["outboxctl"]


def surface_metrics(ctx):
    """What a Prometheus server scrapes from each program's /metrics."""
    yield from ctx.get("metrics", [])


SURFACES = [
    surface_database,
    surface_process_logs,
    surface_outboxctl,
    surface_metrics,
]


def metrics_page(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=15) as r:
        return r.read().decode("utf-8")


# -- the tests --------------------------------------------------------------------

def dead_ids(db):
    return [r[0] for r in query(db, "SELECT id::text FROM outbox_messages"
                                    " WHERE dead_lettered_at IS NOT NULL ORDER BY id")]


def test_secrets_refused_by_the_broker_survive_nowhere(db, procs, broker, tmp_path):
    _, sock = broker
    api_at = f"127.0.0.1:{free_port()}"
    # Every page with the pipeline's figures, where a secret could surface.
    api = start_api(procs, db, extra=("--metrics-listen", api_at, "--pipeline-metrics", "on"))
    relay = start_relay(procs, db, sock, max_attempts=1, metrics_listen="127.0.0.1:0")
    consumer = start_consumer(procs, db, sock, args=("--metrics-listen", "127.0.0.1:0",
                                                     "--pipeline-metrics", "on"))
    endpoints = {"api": api_at, "relay": listening_at(relay), "consumer": listening_at(consumer)}
    n = 0
    with broker_connect(sock) as b:
        b.control(outage="refuse")
        for f, where, text in planted():
            b.control(refuse_error=text)
            r = api.post_payment(f"secret-{n}")
            assert r.status == 201, r
            pid = r.json()["id"]
            wait_for(lambda: scalar(db, "SELECT dead_lettered_at IS NOT NULL FROM outbox_messages"
                                        " WHERE aggregate_id = %s", (pid,)),
                     15, f"the event refused with {f['name']} ({where}) to be dead-lettered")
            n += 1
        # The HTTP side: the API logs every path it is asked for (decoded).
        for f in FORMATS:
            assert api.get("/payments/" + urllib.parse.quote(f["form"], safe="")).status == 404
    assert n >= 4 * 25 and len(FORMATS) >= 25

    seen = [outboxctl(db, *a) for a in (["status"], ["status", "--json"], ["metrics"],
                                        ["dead-letters", "list"],
                                        ["dead-letters", "list", "--json"])]
    ids = dead_ids(db)
    assert len(ids) == n
    seen += [outboxctl(db, "dead-letters", "show", i) for i in ids]
    # The operator fixes the cause and requeues every group: the requeue
    # records keep the old errors (a surface too), the events flow on.
    with broker_connect(sock) as b:
        b.control(outage="off", refuse_error="")
    groups = json.loads(seen[4])
    for g in groups:
        seen.append(outboxctl(db, "requeue", "--fingerprint", g["fingerprint"]))
    wait_for(lambda: scalar(db, "SELECT count(*) FROM outbox_messages"
                                " WHERE published_at IS NOT NULL") == n, 60, "every row published")
    wait_for(lambda: scalar(db, "SELECT count(*) FROM ledger_entries") == n, 60,
             "every event applied")
    assert scalar(db, "SELECT count(*) FROM outbox_requeues") == n
    seen += [outboxctl(db, "status"), outboxctl(db, "metrics")]
    pages = [(f"/metrics of the {who}", metrics_page(at)) for who, at in endpoints.items()]
    assert all("outbox_pending_messages" in page for _, page in pages)
    for p in (api, relay, consumer):
        p.stop()

    # Checked is what was shown: the refusals reached every surface (in
    # sanitized form), so finding no secret there means something.
    assert len(relay.events("dead_letter")) >= n
    assert "ACCESS_REFUSED" in scalar(db, "SELECT string_agg(last_error_before, ' ')"
                                          " FROM outbox_requeues")
    ctx = {"db": db, "tmp_path": tmp_path, "metrics": pages,
           "outboxctl": [(f"outboxctl output {i}", s) for i, s in enumerate(seen)]}
    assert_no_leaks(pair for surface in SURFACES for pair in surface(ctx))


def conninfo_quote(value):
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_secrets_in_connection_strings_survive_nowhere(procs, broker, tmp_path):
    """libpq quotes what it cannot use (a host address, a fragment of the
    string); every program must pass on only the sanitized form."""
    _, sock = broker
    seen = []
    for i, f in enumerate(FORMATS):
        for variant, conninfo in (
                ("hostaddr", f"hostaddr={conninfo_quote(f['form'])} port=1 dbname=payments"),
                ("password", f"host=127.0.0.1 port=1 dbname=payments password={f['form']}")):
            for prog in ("outboxctl", "payments-api"):
                args = [binary(prog), "--db", conninfo]
                args += ["status"] if prog == "outboxctl" else \
                    ["--listen", "127.0.0.1:0", "--events", str(tmp_path / f"api-{i}.jsonl"),
                     "--db-wait-ms", "150"]  # its db_wait events are a surface too
                r = subprocess.run(args, capture_output=True, text=True, timeout=30)
                assert r.returncode != 0
                seen.append((f"{prog} ({f['name']}, {variant})", r.stdout + r.stderr))
            relay = start_relay(procs, conninfo, sock, name=f"relay-{i}-{variant}")
            consumer = start_consumer_unready(procs, conninfo, sock, f"acct-{i}-{variant}")
            for p in (relay, consumer):
                wait_for(lambda p=p: p.events("reconnect") or not p.alive(), 15,
                         f"{p.name} to report its failed connection")
                p.kill()
    ctx = {"db": None, "tmp_path": tmp_path, "outboxctl": seen}
    # No database here: the processes' own words and outboxctl's are it.
    assert_no_leaks(pair for surface in (surface_process_logs, surface_outboxctl)
                    for pair in surface(ctx))
    # libpq did quote them: the sanitized messages are in the logs.
    logs = "".join(text for _, text in files_under(tmp_path))
    assert "could not parse network address" in logs


def start_consumer_unready(procs, db, sock, name):
    """A consumer that cannot reach its database (start_consumer waits for
    a start that never comes)."""
    argv = [binary("accounting-consumer"), "--db", db, "--broker", sock, "--name", name,
            "--proc-name", name]
    return procs.start(name, argv)


def test_secrets_through_the_runner_survive_nowhere(tmp_path, pg_cluster):
    """A scenario plants every format (cycling through the contexts) as the
    broker's refusal; the console, every file of the run directory and the
    HTML report are searched."""
    contexts = list(CORPUS["contexts"].values())
    steps = []
    for i, f in enumerate(FORMATS):
        text = contexts[i % len(contexts)].replace("%s", f["form"], 1)
        steps += [{"do": "broker", "control": {"refuse_error": text}},
                  {"do": "payments", "count": 1, "key_prefix": f"s{i}"},
                  {"do": "wait", "until": "dead_lettered", "count": i + 1, "timeout_ms": 15000}]
    steps += [{"do": "outboxctl", "args": ["dead-letters", "list"], "expect_exit": 0},
              {"do": "outboxctl", "args": ["status"], "expect_exit": 0},
              # The broker recovers: the rest of the pipeline is checked too.
              {"do": "broker", "control": {"outage": "off", "refuse_error": ""}},
              {"do": "payments", "count": 3, "key_prefix": "after"},
              {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 15000}]
    path = scenario(
        tmp_path, "secrets-everywhere", steps,
        ("dead_letter_at_limit", "nothing_lost", "effect_once", "broker_log_matches_outbox"),
        title="every planted secret is refused and stays hidden",
        crash_window="relay/dead_letter",
        processes={"api": {"kind": "api"},
                   "relay-1": {"kind": "relay",
                               "args": {"lease-ms": 2000, "idle-ms": 50, "batch": 10,
                                        "max-attempts": 1, "backoff-base-ms": 50,
                                        "backoff-cap-ms": 100}},
                   "accounting": {"kind": "consumer", "args": {"name": "accounting"}}},
        broker={"outage": "refuse"},
        heal={"timeout_ms": 15000},
        expect=[{"check": "dead_lettered", "equals": len(FORMATS)},
                {"check": "published", "equals": 3}])
    out = tmp_path / "run"
    report = tmp_path / "report.html"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", out, "--report", report,
                    timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(report, encoding="utf-8") as fh:
        html = fh.read()
    # The run keeps a copy of its scenario, which is the input that planted
    # them: that file alone is not a surface.
    pairs = [("console", r.stdout + r.stderr), ("HTML report", html),
             *((p, t) for p, t in files_under(out) if os.path.basename(p) != "scenario.json")]
    assert any(os.path.basename(p) == "timeline.jsonl" for p, _ in pairs)
    # The refusals did reach the run's record, sanitized.
    assert any("ACCESS_REFUSED" in text for _, text in pairs)
    assert_no_leaks(pairs)
