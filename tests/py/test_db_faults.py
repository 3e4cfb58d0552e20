"""PostgreSQL and the broker as fault targets: the "db" and "broker_crash"
steps, a scenario's own primary with a standby, hazard scenarios, and the
liveness rule heal.restart false.

Bad scenario files are refused before anything starts, naming the file and
the field.  The behaviour tests run small scenarios written here and assert
on what the database and the broker's log say (through result.json's checker
verdicts), never on log lines.
"""
# needs: pg

import pytest

from cwtest import PIPELINE, crashwindow, inv, load_result, read_events, scenario

STANDBY = {"database": {"standby": True, "synchronous": False}}


def run_one(tmp_path, path, *extra):
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out), *extra)
    return r, load_result(out)["scenarios"][0]


def run_passing(tmp_path, path, pg_cluster):
    """Runs path, which must pass: its result, its run directory and the
    sorted details of the database faults the runner logged."""
    r, sc = run_one(tmp_path, path, "--pg", pg_cluster)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sc["verdict"] == "pass", sc
    run_dir = tmp_path / "out" / sc["dir"]
    details = sorted(e["detail"] for e in read_events(run_dir / "timeline.jsonl")
                     if e["event"] == "db_fault")
    return sc, run_dir, details


@pytest.mark.parametrize("steps,extra,message", [
    ([{"do": "db", "action": "failover"}], {},
     "steps[0].action: 'failover' needs a standby"),
    ([{"do": "db", "action": "stall_replication"}], {},
     "steps[0].action: 'stall_replication' needs a standby"),
    ([{"do": "db", "action": "freeze"}], {},
     "steps[0].ms: missing: a freeze needs its duration in milliseconds"),
    ([{"do": "db", "action": "freeze", "ms": 0}], {}, "steps[0].ms: 0 is out of range"),
    ([{"do": "db", "action": "explode"}], {}, "steps[0].action: unknown action 'explode'"),
    ([{"do": "db"}], {}, "steps[0].action: missing"),
    ([{"do": "db", "action": "crash", "ms": 5}], {},
     "steps[0]: ms is only for actions 'freeze', 'hold_commits', 'lock' and 'deadlock'"),
    ([{"do": "db", "action": "deadlock", "ms": 500, "then": "SELECT 1"}], {},
     "steps[0].first: missing"),
    ([{"do": "db", "action": "deadlock", "ms": 500, "first": "SELECT 1"}], {},
     "steps[0].then: missing"),
    ([{"do": "db", "action": "deadlock", "ms": 500, "first": " ; ", "then": "SELECT 1"}], {},
     "steps[0].first: empty: the statements that take the locks a process will wait on"),
    ([{"do": "db", "action": "deadlock", "first": "SELECT 1", "then": "SELECT 1"}], {},
     "steps[0].ms: missing: a deadlock needs its duration in milliseconds"),
    ([{"do": "db", "action": "lock", "table": "payments", "ms": 500, "then": "SELECT 1"}], {},
     "steps[0]: then is only for action 'deadlock'"),
    ([{"do": "db", "action": "lock", "ms": 500}], {}, "steps[0].table: missing"),
    ([{"do": "db", "action": "lock", "table": "ledger_entries"}], {},
     "steps[0].ms: missing: a lock needs its duration in milliseconds"),
    ([{"do": "db", "action": "lock", "table": "ledger_entries; DROP TABLE payments", "ms": 500}],
     {}, "steps[0].table: 'ledger_entries; DROP TABLE payments' is not a table name"),
    ([{"do": "db", "action": "lock", "table": "a.b.c", "ms": 500}], {},
     "steps[0].table: 'a.b.c' is not a table name"),
    ([{"do": "db", "action": "freeze", "ms": 500, "table": "payments"}], {},
     "steps[0]: table is only for actions 'lock', 'refuse' and 'sever'"),
    ([{"do": "db", "action": "hold_commits"}], {},
     "steps[0].ms: missing: a hold_commits needs its duration in milliseconds"),
    ([{"do": "db", "action": "hold_commits", "ms": 500}],
     {"database": {"standby": True, "synchronous": True}},
     "steps[0].action: 'hold_commits' names a synchronous standby that never answers"),
    ([{"do": "db", "action": "restart", "proc": "api"}], {},
     "steps[0]: proc is only for actions 'terminate', 'refuse' and 'sever'"),
    ([{"do": "db", "action": "refuse", "on": "insert", "sqlstate": "40001"}], {},
     "steps[0].table: missing"),
    ([{"do": "db", "action": "refuse", "table": "payments", "sqlstate": "40001"}], {},
     "steps[0].on: missing"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "upsert", "sqlstate": "40001"}],
     {}, "steps[0].on: unknown statement 'upsert' (insert, update, delete)"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert"}], {},
     "steps[0].sqlstate: missing"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "4000"}],
     {}, "steps[0].sqlstate: '4000' is not a SQLSTATE"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert",
       "sqlstate": "4000'"}], {}, "steps[0].sqlstate: '4000'' is not a SQLSTATE"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "01000"}],
     {}, "steps[0].sqlstate: '01000' is a success, warning or no-data code, not an error"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "40001",
       "at": "rollback"}], {}, "steps[0].at: unknown moment 'rollback' (statement, commit)"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "40001",
       "times": 0}], {}, "steps[0].times: 0 is out of range"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "40001",
       "skip": -1}], {}, "steps[0].skip: -1 is out of range"),
    ([{"do": "db", "action": "refuse", "table": "payments x", "on": "insert",
       "sqlstate": "40001"}], {}, "steps[0].table: 'payments x' is not a table name"),
    ([{"do": "db", "action": "lock", "table": "payments", "ms": 500, "sqlstate": "40001"}], {},
     "steps[0]: sqlstate is only for action 'refuse'"),
    ([{"do": "db", "action": "refuse", "table": "payments", "on": "insert", "sqlstate": "40001",
       "ms": 500}], {}, "steps[0]: ms is only for actions"),
    ([{"do": "db", "action": "sever", "table": "payments", "on": "insert", "sqlstate": "57P01"}],
     {}, "steps[0]: sqlstate is only for action 'refuse': a severed session answers nothing"),
    ([{"do": "db", "action": "sever", "on": "insert"}], {}, "steps[0].table: missing"),
    ([{"do": "db", "action": "sever", "table": "payments"}], {}, "steps[0].on: missing"),
    ([{"do": "db", "action": "sever", "table": "payments", "on": "insert", "of": ["status"]}],
     {}, "steps[0].of: only an update sets columns (\"on\": \"update\")"),
    ([{"do": "db", "action": "refuse", "table": "outbox_messages", "on": "update",
       "sqlstate": "40001", "of": "published_at"}], {},
     "steps[0].of: must be an array of 1 to 4 column names"),
    ([{"do": "db", "action": "sever", "table": "outbox_messages", "on": "update",
       "of": ["published_at; DROP TABLE payments"]}], {},
     "steps[0].of: 'published_at; DROP TABLE payments' is not a column name"),
    ([{"do": "db", "action": "sever", "table": "outbox_messages", "on": "update",
       "of": ["Published_At"]}], {}, "steps[0].of: 'Published_At' is not a column name"),
    ([{"do": "db", "action": "lock", "table": "payments", "ms": 500, "of": ["status"]}], {},
     "steps[0]: of is only for actions 'refuse' and 'sever'"),
    ([{"do": "db", "action": "sever", "table": "payments", "on": "insert", "times": 1001}], {},
     "steps[0].times: 1001 is out of range"),
    ([{"do": "db", "action": "terminate", "proc": "relay-9"}], {},
     "steps[0].proc: unknown process 'relay-9'"),
    ([{"do": "db", "action": "crash", "down_ms": -1}], {}, "steps[0].down_ms: -1 is out of range"),
    ([{"do": "broker_crash", "hard": True}], {}, "steps[0]: unknown field 'hard'"),
    ([{"do": "db", "action": "stall_replication"}],
     {"database": {"standby": True, "synchronous": True}},
     "steps[0].action: 'stall_replication' with synchronous replication"),
    ([], {"database": {"standby": True}}, "database.synchronous: missing"),
    ([], {"database": {"standby": False, "synchronous": True}}, "database.standby: must be true"),
    ([], {"database": {"standby": True, "synchronous": "yes"}},
     "database.synchronous: must be true or false"),
    ([], {"database": {"standby": True, "synchronous": True, "replicas": 2}},
     "database: unknown field 'replicas'"),
    ([], {"broker": {"durable": 1}}, "broker.durable: must be true or false"),
    ([], {"heal": {"restart": "no"}}, "heal.restart: must be true or false"),
    ([], {"hazard": {"caught_by": ["effect_once"], "why": "x"}},
     "hazard.caught_by[0]: 'effect_once' must also be listed in \"invariants\""),
    ([], {"hazard": {"caught_by": [], "why": "x"}}, "hazard.caught_by: must be a non-empty array"),
    ([], {"hazard": {"caught_by": ["nothing_lost"]}}, "hazard.why: missing"),
    # A hazard names its bound: which events it can explain, and how many.
    ([{"do": "broker_crash"}], {"hazard": {"caught_by": ["nothing_lost"], "why": "x"}},
     "hazard.explains: missing: a hazard names the events it can explain"),
    ([{"do": "broker_crash"}],
     {"hazard": {"caught_by": ["nothing_lost"], "why": "x", "explains": "broker_memory"}},
     "hazard.at_most: missing: the most events the hazard may explain"),
    ([{"do": "broker_crash"}],
     {"hazard": {"caught_by": ["nothing_lost"], "why": "x", "explains": "anything",
                 "at_most": 5}},
     "hazard.explains: 'anything' is not replication_stall or broker_memory"),
    ([{"do": "broker_crash"}],
     {"hazard": {"caught_by": ["nothing_lost"], "why": "x", "explains": "replication_stall",
                 "at_most": 5}},
     "hazard.explains: replication_stall needs an asynchronous standby"),
    ([], {"hazard": {"caught_by": ["nothing_lost"], "why": "x", "explains": "broker_memory",
                     "at_most": 5}},
     "hazard.explains: broker_memory needs a broker without a durable store and a "
     "broker_crash step"),
    ([{"do": "broker_crash"}],
     {"hazard": {"caught_by": ["nothing_lost"], "why": "x", "explains": "broker_memory",
                 "at_most": 0}},
     "hazard.at_most: 0 is out of range [1, 256]"),
    # A poison entry names an event a step of the scenario plants.
    ([{"do": "payments", "count": 1}],
     {"poison_events": ["00000000-0000-4000-8000-00000000dead"]},
     "poison_events[0]: names no event: no sql or http step of the scenario writes "
     "00000000-0000-4000-8000-00000000dead"),
    ([], {"poison_events": [""]}, "poison_events[0]: must be an event id (a uuid)"),
])
def test_bad_fault_steps_are_refused_before_anything_starts(tmp_path, steps, extra, message):
    path = scenario(tmp_path, "bad", steps, **extra)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: {message}" in r.stderr, r.stderr
    assert not out.exists(), "a bad scenario file must stop the run before anything starts"


def test_dry_run_describes_database_faults(tmp_path):
    path = scenario(tmp_path, "dry", [
        {"do": "db", "action": "stall_replication"},
        {"do": "db", "action": "failover"},
        {"do": "db", "action": "freeze", "ms": 1500},
        {"do": "db", "action": "hold_commits", "ms": 700},
        {"do": "db", "action": "lock", "table": "public.ledger_entries", "ms": 900},
        {"do": "db", "action": "refuse", "table": "payments", "on": "insert", "at": "commit",
         "sqlstate": "40001", "times": 2, "proc": "api"},
        {"do": "db", "action": "sever", "table": "outbox_messages", "on": "update",
         "of": ["published_at"], "skip": 5, "must_fire": False, "proc": "relay-1"},
        {"do": "broker_crash", "down_ms": 100},
    ], hazard={"caught_by": ["nothing_lost"], "why": "loses data", "explains": "broker_memory",
               "at_most": 3},
        heal={"restart": False}, **STANDBY)
    r = crashwindow("run", path, "--dry-run")
    assert r.returncode == 0, r.stderr
    for text in ("own primary + streaming standby, asynchronous replication",
                 "db failover: kill the primary, promote the standby",
                 "db freeze (SIGSTOP the server) for 1500 ms",
                 "db hold commits for 700 ms (a synchronous standby that never answers",
                 "db lock public.ledger_entries ACCESS EXCLUSIVE for 900 ms",
                 "db refuse the COMMIT after insert on payments by api with SQLSTATE 40001, "
                 "2 times after letting 0 pass\n",
                 "db sever the session of each update of published_at on outbox_messages by "
                 "relay-1, 1 time after letting 5 pass (it may sever nothing)",
                 "broker crash (SIGKILL), down 100 ms",
                 "no restarts (every process must have recovered by itself)",
                 "hazard: loses data", "caught by: nothing_lost (each must fail)",
                 "hazard explains: broker_memory, at most 3 events"):
        assert text in r.stdout, r.stdout


def test_db_steps_refuse_a_server_the_runner_does_not_own(tmp_path, pg_cluster):
    path = scenario(tmp_path, "ext", [{"do": "db", "action": "restart"}])
    r, sc = run_one(tmp_path, path, "--pg", pg_cluster)
    assert r.returncode == 1
    assert "run without --pg" in sc["error"]


def test_a_crash_keeps_what_was_committed_and_processes_recover(tmp_path):
    path = scenario(tmp_path, "crash", [
        {"do": "payments", "count": 5, "key_prefix": "c1"},
        {"do": "wait", "until": "consumed", "count": 5, "timeout_ms": 10000},
        {"do": "db", "action": "crash", "down_ms": 300},
        {"do": "payments", "count": 5, "key_prefix": "c2", "retries": 3},
        {"do": "wait", "until": "consumed", "count": 10, "timeout_ms": 15000},
    ], invariants=("nothing_lost", "effect_once", "payment_one_creation_event"),
        heal={"restart": False, "timeout_ms": 15000},
        expect=[{"check": "effects", "equals": 10}, {"check": "payments", "equals": 10}])
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sc["verdict"] == "pass" and sc["restarts"] == 0
    crash = [x for x in sc["recovery"] if x["action"] == "crash"]
    assert len(crash) == 1 and crash[0]["recovery_ms"] >= 300


def test_held_commits_are_durable_and_seen_once_released(tmp_path):
    """While commits are held nothing is applied (the consumer's commits
    wait too), and once they are released every payment made before and
    during the hold is applied once."""
    path = scenario(tmp_path, "hold", [
        {"do": "payments", "count": 12, "concurrency": 3, "key_prefix": "h1",
         "background": True},
        {"do": "db", "action": "hold_commits", "ms": 800},
        {"do": "wait", "until": "consumed", "count": 12, "timeout_ms": 20000},
    ], invariants=("nothing_lost", "effect_once", "payment_one_creation_event"),
        heal={"restart": False, "timeout_ms": 15000},
        expect=[{"check": "effects", "equals": 12}, {"check": "payments", "equals": 12}])
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sc["verdict"] == "pass" and sc["restarts"] == 0
    events = read_events(tmp_path / "out" / sc["dir"] / "timeline.jsonl")
    (fault,) = [e for e in events if e["event"] == "db_fault"]
    # ended_us: when the release began (a commit may return before the
    # runner's reset call comes back and the event is logged)
    begin, end = fault["started_us"], fault["ended_us"]
    assert fault["action"] == "hold_commits" and end - begin >= 800_000
    assert end <= fault["ts_us"]
    # The consumer records an apply once its commit returned: none while
    # commits were held (a commit already on its way when the hold began
    # may still land in its first moments), and every one after it.
    applies = [e["ts_us"] for e in events if e["event"] == "apply"]
    assert len(applies) == 12
    assert not [t for t in applies if begin + 200_000 < t < end], (begin, end, applies)
    # The clients whose payments were in flight waited for the release.
    http = [e for e in events if e["event"] == "http"]
    assert any(e["duration_us"] >= 500_000 for e in http), http


def test_a_process_that_dies_fails_a_no_restart_heal(tmp_path):
    path = scenario(tmp_path, "dies", [
        {"do": "payments", "count": 2},
        {"do": "kill", "proc": "relay-1"},
    ], heal={"restart": False, "timeout_ms": 5000})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1
    assert "relay-1 is not running" in sc["error"] and "heal.restart false" in sc["error"]


def test_a_hazard_that_loses_nothing_fails(tmp_path):
    """A hazard scenario passes only when the loss is caught: a broker that
    dies in memory after every event was consumed loses nothing, so the
    hazard goes uncaught, and its invariant says so."""
    path = scenario(tmp_path, "nohazard", [
        {"do": "payments", "count": 3},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 10000},
        {"do": "broker_crash"},
    ], broker={"duplicate": True},
        hazard={"caught_by": ["nothing_lost"], "why": "a broker crash", "explains": "broker_memory",
                "at_most": 3})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1, r.stdout
    assert sc["hazard"]["caught"] is False and sc["hazard"]["explained_events"] == 0
    assert inv(sc, "nothing_lost")["violations"] == 0
    assert inv(sc, "nothing_lost")["verdict"] == "hazard not caught"


def test_a_hazard_heal_accepts_no_unconsumed_event_it_cannot_explain(tmp_path):
    """The heal of a hazard scenario may end with published events a group
    never applied only when the hazard explains each: here the consumer
    never runs, so the events published after the crash -- which no dead
    broker's memory held -- are left too, and the heal fails naming one."""
    procs = dict(PIPELINE)
    procs["accounting"] = {"kind": "consumer", "args": {"name": "accounting"},
                           "autostart": False, "heal": False}
    path = scenario(tmp_path, "leftover", [
        {"do": "payments", "count": 2, "key_prefix": "k-before"},
        {"do": "wait", "until": "published", "count": 2, "timeout_ms": 10000},
        {"do": "broker_crash", "down_ms": 100},
        {"do": "payments", "count": 2, "key_prefix": "k-after"},
        {"do": "wait", "until": "published", "count": 4, "timeout_ms": 10000},
    ], processes=procs, heal={"timeout_ms": 1500},
        hazard={"caught_by": ["nothing_lost"], "why": "a broker in memory", "explains":
                "broker_memory", "at_most": 2})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1, r.stdout
    assert "heal: the pipeline did not converge" in (sc["error"] or ""), sc["error"]
    assert "accounting never applied it, and the hazard (broker_memory) does not explain it" \
        in sc["error"], sc["error"]


def test_terminate_aims_at_one_process_by_application_name(tmp_path):
    """Only the relay's sessions go: the consumer's transaction survives
    while it is parked before COMMIT, so its commit succeeds."""
    procs = dict(PIPELINE)
    procs["accounting"] = {"kind": "consumer", "args": {"name": "accounting"},
                           "faults": "consumer/before_commit=park@1"}
    path = scenario(tmp_path, "term", [
        {"do": "payments", "count": 1},
        {"do": "wait", "until": "parked", "proc": "accounting",
         "point": "consumer/before_commit", "timeout_ms": 5000},
        {"do": "db", "action": "terminate", "proc": "relay-1"},
        {"do": "resume", "proc": "accounting"},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000},
    ], invariants=("nothing_lost", "effect_once"), processes=procs,
        heal={"restart": False}, expect=[{"check": "redeliveries", "equals": 0}])
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_lock_refuses_the_apis_writes_until_released_and_clients_retry(tmp_path, pg_cluster):
    """A lock step is a client's session: it works on a cluster given with
    --pg too.  While payments is locked the API's inserts wait out their
    lock_timeout (50 ms) and are refused on a live connection; the clients
    are told 503 with Retry-After and retry with their keys, and every
    payment is made once when the lock ends."""
    path = scenario(tmp_path, "lock", [
        {"do": "db", "action": "lock", "table": "payments", "ms": 1200},
        {"do": "payments", "count": 6, "concurrency": 2, "key_prefix": "l1",
         "busy_retries": 20},
        {"do": "wait", "until": "consumed", "count": 6, "timeout_ms": 20000},
    ], invariants=("nothing_lost", "effect_once", "payment_one_creation_event",
                   "one_payment_per_key"),
        heal={"restart": False, "timeout_ms": 15000},
        expect=[{"check": "effects", "equals": 6}, {"check": "payments", "equals": 6}])
    r, sc = run_one(tmp_path, path, "--pg", pg_cluster)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sc["verdict"] == "pass", sc
    events = read_events(tmp_path / "out" / sc["dir"] / "timeline.jsonl")
    (fault,) = [e for e in events if e["event"] == "db_fault"]
    assert fault["action"] == "lock" and fault["ended_us"] - fault["started_us"] == 1_200_000
    # What the clients were told: 503s while the table was locked, 201s
    # only after (the payments step retried each key until it got one).
    http = [e for e in events if e["event"] == "http"]
    busy = [e for e in http if e.get("status") == 503]
    created = [e for e in http if e.get("status") == 201]
    assert busy and len(created) == 6, http
    assert all(e["ts_us"] >= fault["ended_us"] - 100_000 for e in created), (fault, created)


def test_a_lock_on_a_missing_table_fails_the_step_with_the_servers_reason(tmp_path):
    path = scenario(tmp_path, "nolock", [
        {"do": "db", "action": "lock", "table": "no_such_table", "ms": 500},
    ], heal={"restart": False, "timeout_ms": 5000})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1
    assert "db lock no_such_table: the lock was not granted" in sc["error"], sc["error"]
    assert "does not exist" in sc["error"], sc["error"]


def test_a_deadlock_no_process_waits_on_fails_the_scenario(tmp_path):
    """The deadlock step's session waits for a process to wait on it; when
    none does within ms, no deadlock reached a process, and the scenario
    fails saying so rather than passing on a fault that never happened."""
    path = scenario(tmp_path, "nodeadlock", [
        {"do": "db", "action": "deadlock", "ms": 400,
         "first": "SELECT count(*) FROM payments", "then": "SELECT 1"},
    ], heal={"restart": False, "timeout_ms": 5000})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1
    assert "db deadlock: no deadlock reached a process" in sc["error"], sc["error"]
    assert "no other session waited on this one within 400 ms" in sc["error"], sc["error"]
    events = read_events(tmp_path / "out" / sc["dir"] / "timeline.jsonl")
    assert not [e for e in events if e["event"] == "db_fault"], events


def test_a_refusal_is_postgresqls_own_error_in_the_process_transaction(tmp_path, pg_cluster):
    """A refuse step's trigger makes PostgreSQL raise the SQLSTATE in the
    named process's transaction, for as many rows as it says and only
    after those it lets pass; the runner's own statements and the other
    processes' pass.  Here the API's second creation's COMMIT is refused
    with 53100 twice: two clients are told 500 and nothing is stored for
    them, the third try under the same key is created.  A refusal naming no
    process takes any process's insert (the API's first, a 40001 it runs
    again) but never the runner's own.  Each db_fault event says how many
    were refused, and no recovery is measured from them."""
    path = scenario(tmp_path, "refuse", [
        {"do": "db", "action": "refuse", "table": "payments", "on": "insert", "at": "commit",
         "sqlstate": "53100", "times": 2, "skip": 1, "proc": "api"},
        {"do": "db", "action": "refuse", "table": "payments", "on": "insert",
         "sqlstate": "40001"},
        {"do": "sql", "sql": "INSERT INTO payments (id, client_id, amount, currency, status, "
         "version) VALUES ('00000000-0000-4000-8000-00000000aaaa', 'runner', 1, 'EUR', "
         "'created', 1)", "why": "the runner's own insert is never refused"},
        {"do": "sql", "sql": "DELETE FROM payments WHERE client_id = 'runner'",
         "expect_rows": 1},
        {"do": "http", "name": "a", "key": "r-1", "body": {"amount": "1.00", "currency": "EUR"},
         "expect_status": 201},
        {"do": "http", "key": "r-2", "body": {"amount": "2.00", "currency": "EUR"},
         "expect_status": 500},
        {"do": "http", "key": "r-2", "body": {"amount": "2.00", "currency": "EUR"},
         "expect_status": 500},
        {"do": "http", "key": "r-2", "body": {"amount": "2.00", "currency": "EUR"},
         "expect_status": 201},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 15000},
    ], invariants=("nothing_lost", "effect_once", "one_payment_per_key"),
        heal={"restart": False, "timeout_ms": 15000},
        expect=[{"check": "payments", "equals": 2}, {"check": "effects", "equals": 2},
                {"check": "sql", "sql": "SELECT count(*) FROM idempotency_records",
                 "equals": 2}])
    sc, _, details = run_passing(tmp_path, path, pg_cluster)
    assert details == [
        "each insert on payments by any process refused with 40001, 1 of 1",
        "the COMMIT after insert on payments by api refused with 53100, 2 of 2"], details
    assert not [x for x in sc.get("recovery", []) if x.get("action") == "refuse"], sc
    fired = [f for f in sc["faults_fired"] if f["point"] == "postgres/refuse"]
    assert len(fired) == 2 and {f["kind"] for f in fired} == {"database"}, sc["faults_fired"]


def test_a_refusal_that_refuses_nothing_fails_the_scenario(tmp_path):
    """A refusal no process met tested nothing: the heal fails the scenario
    naming it."""
    path = scenario(tmp_path, "norefuse", [
        {"do": "db", "action": "refuse", "table": "ledger_entries", "on": "delete",
         "sqlstate": "40001"},
        {"do": "payments", "count": 1, "key_prefix": "n1"},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 15000},
    ], heal={"restart": False, "timeout_ms": 5000})
    r, sc = run_one(tmp_path, path)
    assert r.returncode == 1
    assert ("db refuse: each delete on ledger_entries by any process refused with 40001: "
            "none was refused (0 matched, 0 let pass first)") in sc["error"], sc["error"]
    # Drawn blind (the simulator's), it may refuse nothing: no fault, no failure.
    path = scenario(tmp_path, "norefuse-blind", [
        {"do": "db", "action": "refuse", "table": "ledger_entries", "on": "delete",
         "sqlstate": "40001", "must_fire": False},
        {"do": "payments", "count": 1, "key_prefix": "n2"},
        {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 15000},
    ], heal={"restart": False, "timeout_ms": 5000})
    out = tmp_path / "blind"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    sc = load_result(out)["scenarios"][0]
    assert not [f for f in sc["faults_fired"] if f["point"] == "postgres/refuse"], sc


def test_a_sever_ends_the_process_session_at_the_statement(tmp_path, pg_cluster):
    """A sever step's trigger makes the process's own backend terminate
    itself at the statement (or at the COMMIT after it): the process meets
    a lost connection there, and nothing of the transaction is stored.
    Here the API's first COMMIT is severed -- an ambiguous COMMIT the
    server rolled back, which the API settles by asking and answers 503,
    the client's retry under the same key creating the payment once -- and
    accounting's first inbox insert: the delivery comes back and is applied
    once.  An update's "of" meets only updates that set those columns: the
    relay's marks set published_at, its claims do not, so a sever of
    claims "of" published_at severs none and, drawn blind, fails nothing."""
    path = scenario(tmp_path, "sever", [
        {"do": "db", "action": "sever", "table": "payments", "on": "insert", "at": "commit",
         "proc": "api"},
        {"do": "db", "action": "sever", "table": "inbox_messages", "on": "insert",
         "proc": "accounting"},
        {"do": "db", "action": "sever", "table": "outbox_messages", "on": "update",
         "of": ["lock_id"], "skip": 100, "must_fire": False, "proc": "relay-1"},
        {"do": "payments", "count": 3, "key_prefix": "sv"},
        {"do": "wait", "until": "consumed", "count": 3, "timeout_ms": 15000},
    ], invariants=("nothing_lost", "effect_once", "one_payment_per_key"),
        heal={"restart": False, "timeout_ms": 15000},
        expect=[{"check": "payments", "equals": 3}, {"check": "effects", "equals": 3},
                {"check": "sql", "sql": "SELECT count(*) FROM idempotency_records",
                 "equals": 3}])
    sc, out, details = run_passing(tmp_path, path, pg_cluster)
    assert details == [
        "the session of each insert on inbox_messages by accounting severed, 1 of 1",
        "the session of the COMMIT after insert on payments by api severed, 1 of 1"], details
    fired = [f for f in sc["faults_fired"] if f["point"] == "postgres/sever"]
    assert len(fired) == 2 and {f["kind"] for f in fired} == {"database"}, sc["faults_fired"]
    # The API asked the server what became of the severed COMMIT.
    amb = [e for e in read_events(out / "api.events.jsonl") if e["event"] == "ambiguous_commit"]
    assert [(e["xact_status"], e["resolution"]) for e in amb] == [("aborted", "aborted")], amb
