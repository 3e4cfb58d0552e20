"""`crashwindow run --target PROFILE`: a profile is checked before anything
starts -- a bad profile, a scenario the target cannot run from outside, and
a broker it cannot speak are each refused with exit status 2 and a message
naming the file and the field -- and --dry-run shows the profile, the
requirement this machine lacks (when it does) and every scenario.
"""
# needs: nothing
import copy
import json

from cwtest import PIPELINE, crashwindow, scenario

PROFILE = {
    "target": "example",
    "title": "an example target",
    "requires": [{"command": ["sh", "-c", "exit 0"], "why": "a shell runs it"}],
    "broker": {"exchange": "payments", "queues": {"accounting": "accounting"}},
    "processes": {
        "producer": {"argv": ["node", "producer.js"], "env": {"PORT": "${http_port}",
                     "DATABASE_URL": "${pg_url}"},
                     "ready": {"http_get": "/health", "timeout_ms": 15000}},
        "relay": {"argv": ["node", "relay.js"], "env": {"AMQP_URL": "${amqp_url}"},
                  "ready": {"log_line": "relay ready", "timeout_ms": 15000}},
        "consumer": {"argv": ["node", "consumer.js"], "env": {"CONSUMER": "${consumer}"},
                     "ready": {"log_line": "consumer ready", "timeout_ms": 15000}},
    },
    "workload": {"create": {"http": {"method": "POST", "path": "/payments",
                                     "headers": {"Idempotency-Key": "${key}"},
                                     "body": {"amount": "${amount}", "currency": "EUR"}},
                            "ack": {"status": [201]}}},
    "mapping": {"outbox": "SELECT id, aggregate_id, version, state FROM outbox",
                "effects": "SELECT consumer, message_id, aggregate_id, version, seq FROM ledger"},
}

BLACK_BOX = [{"do": "payments", "count": 5, "key_prefix": "k"},
             {"do": "kill", "proc": "relay-1"},
             {"do": "restart", "proc": "relay-1"},
             {"do": "wait", "until": "consumed", "count": 5, "timeout_ms": 20000}]
PROCS = {"api": {"kind": "api"}, "relay-1": {"kind": "relay"},
         "accounting": {"kind": "consumer"}}


def write_profile(tmp_path, profile):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    return path


def black_box(tmp_path, name="bb", steps=BLACK_BOX, **extra):
    extra.setdefault("processes", PROCS)
    return scenario(tmp_path, name, steps, ("nothing_lost", "effect_once"), **extra)


def test_dry_run_shows_the_profile_and_the_scenarios(tmp_path):
    r = crashwindow("run", "--dry-run", "--target", write_profile(tmp_path, PROFILE),
                    black_box(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "target example: an example target" in r.stdout
    assert "producer: node producer.js" in r.stdout
    assert "ready when it answers 2xx to GET '/health' within 15000 ms" in r.stdout
    assert "mapping inbox: not mapped" in r.stdout
    assert "relay: none" not in r.stdout
    assert "without a change in the mapping" not in r.stdout
    r = crashwindow("run", "--dry-run", "--target",
                    write_profile(tmp_path, dict(PROFILE, progress_timeout_ms=25000)),
                    black_box(tmp_path))
    assert ("a wait for messages, and the heal, end after 25000 ms without a change in the "
            "mapping") in r.stdout, r.stdout
    assert "bb" in r.stdout and "this machine lacks it" not in r.stdout
    r = crashwindow("run", "--dry-run", "--target",
                    write_profile(tmp_path, dict(PROFILE, not_applicable=[
                        {"scenario": "bb09", "why": "no relay of its own"}])),
                    black_box(tmp_path))
    assert "not applicable: bb09, skipped: no relay of its own" in r.stdout, r.stdout


def test_a_missing_requirement_is_shown_as_a_skip(tmp_path):
    p = copy.deepcopy(PROFILE)
    p["requires"] = [{"command": ["no-such-toolchain-xyz", "--version"],
                      "why": "the toolchain builds it"}]
    r = crashwindow("run", "--dry-run", "--target", write_profile(tmp_path, p),
                    black_box(tmp_path))
    assert r.returncode == 0, r.stderr
    assert ("every scenario would be skipped: the toolchain builds it: "
            "'no-such-toolchain-xyz' not found") in r.stdout


def test_bad_profiles_exit_2_naming_the_field(tmp_path):
    cases = [
        (lambda p: p.update(extra=1), "unknown field 'extra'"),
        (lambda p: p["processes"].update(worker=p["processes"]["relay"]),
         "processes: unknown role 'worker'"),
        (lambda p: p["processes"]["relay"]["env"].update(X="${nope}"),
         "processes.relay.env.X: unknown placeholder '${nope}'"),
        (lambda p: p["processes"]["relay"]["argv"].__setitem__(0, "${bin:relay}"),
         "processes.relay.argv[0]: '${bin:relay}' names no program of the build"),
        (lambda p: p["workload"]["create"]["http"].update(path="/${bin:outboxctl}"),
         "unknown placeholder '${bin:outboxctl}'"),
        (lambda p: p["processes"]["consumer"]["ready"].pop("timeout_ms"),
         "processes.consumer.ready.timeout_ms: missing"),
        (lambda p: p["mapping"].pop("effects"), "needs \"outbox\" and \"effects\""),
        (lambda p: p["mapping"].update(outbox="SELECT 1; DROP TABLE x"),
         "mapping.outbox: one SELECT without ';'"),
        (lambda p: p.update(findings=[{"scenario": "bb", "invariant": "no_two_live_leases",
                                       "witness": "x", "why": "y", "source": "z"}]),
         "findings[0]: invariant 'no_two_live_leases' is not judged on a target"),
        (lambda p: p.update(findings=[{"scenario": "bb", "invariant": "nothing_lost",
                                       "witness": "x", "why": "y"}]),
         "findings[0].source: missing"),
        (lambda p: p.update(findings=[{"scenario": "bb", "invariant": "nothing_lost",
                                       "witness": "left it\npending", "why": "y", "source": "z"}]),
         "findings[0]: witness: one line of at most 150 characters"),
        (lambda p: p.update(findings=2 * [{"scenario": "bb", "invariant": "nothing_lost",
                                           "witness": "x", "why": "y", "source": "z"}]),
         "findings[1]: the same witness text as findings[0]"),
        (lambda p: p.update(not_applicable=[{"scenario": "bb"}]), "not_applicable[0].why: missing"),
        (lambda p: p.update(not_applicable=[{"scenario": "bb", "why": "y", "when": 1}]),
         "not_applicable[0]: unknown field 'when'"),
        (lambda p: p.update(not_applicable=2 * [{"scenario": "bb", "why": "y"}]),
         "not_applicable[1]: 'bb' is named twice"),
        (lambda p: p.update(findings=[{"scenario": "bb", "invariant": "nothing_lost",
                                       "witness": "x", "why": "y", "source": "z"}],
                            not_applicable=[{"scenario": "bb", "why": "y"}]),
         "not_applicable[0]: 'bb' has a finding (findings[0])"),
        (lambda p: p.update(progress_timeout_ms=10), "progress_timeout_ms: 10 is out of range"),
        (lambda p: p.update(progress_timeout_ms="30s"), "progress_timeout_ms: must be"),
    ]
    for change, want in cases:
        p = copy.deepcopy(PROFILE)
        change(p)
        r = crashwindow("run", "--dry-run", "--target", write_profile(tmp_path, p),
                        black_box(tmp_path))
        assert r.returncode == 2, (want, r.stdout)
        assert want in r.stderr and "profile.json" in r.stderr, (want, r.stderr)
    r = crashwindow("run", "--dry-run", "--target", tmp_path / "none.json", black_box(tmp_path))
    assert r.returncode == 2 and "none.json: cannot open" in r.stderr


def test_white_box_scenarios_are_refused_naming_what_needs_our_insides(tmp_path):
    profile = write_profile(tmp_path, PROFILE)
    cases = [
        (dict(processes=PIPELINE), "processes.relay-1: cannot run against target example: "
                                   "\"args\" are our programs' flags"),
        (dict(steps=[{"do": "fault", "proc": "relay-1", "point": "relay/after_publish",
                      "action": "crash"}]), "steps[0]: cannot run against target example: "
                                             "a fault point of our programs"),
        (dict(steps=[{"do": "wait", "until": "lease_expired", "timeout_ms": 1000}]),
         "steps[0]: cannot run against target example: waits on what only our programs"),
        (dict(steps=[{"do": "payments", "count": 2, "authorize": True}]),
         "asks for follow-up operations the profile's workload does not offer"),
        (dict(processes={"api": {"kind": "api"}, "billing": {"kind": "consumer",
                                                             "args": {"name": "billing"}}}),
         "processes.billing"),
    ]
    for extra, want in cases:
        steps = extra.pop("steps", BLACK_BOX if "processes" not in extra else [])
        path = black_box(tmp_path, "wb", steps, **extra)
        r = crashwindow("run", "--dry-run", "--target", profile, path)
        assert r.returncode == 2, (want, r.stdout)
        assert want in r.stderr and "wb.json" in r.stderr, (want, r.stderr)
    path = scenario(tmp_path, "inv", BLACK_BOX, ("nothing_lost", "no_two_live_leases"),
                    processes=PROCS)
    r = crashwindow("run", "--dry-run", "--target", profile, path)
    assert r.returncode == 2 and "invariants[1]: cannot run against target" in r.stderr


def test_a_target_runs_on_rabbitmq_only(tmp_path):
    r = crashwindow("run", "--dry-run", "--broker", "fake", "--target",
                    write_profile(tmp_path, PROFILE), black_box(tmp_path))
    assert r.returncode == 2 and "--target runs on RabbitMQ" in r.stderr


def test_sim_fits_its_schedules_to_the_target(tmp_path):
    """crashwindow sim --target: every generated schedule, without what cannot
    be done from outside, and the same schedule on every replay."""
    profile = write_profile(tmp_path, PROFILE)
    r = crashwindow("sim", "--target", profile, "--seed", "7", "--runs", "4", "--dry-run")
    assert r.returncode == 0, r.stderr
    again = crashwindow("sim", "--target", profile, "--seed", "7", "--runs", "4", "--dry-run")
    assert again.stdout == r.stdout
    # Every drawn database fault that names our tables is left out, in any run.
    many = crashwindow("sim", "--target", profile, "--seed", "7", "--runs", "200", "--dry-run")
    assert many.returncode == 0 and "cannot run" not in many.stderr, many.stderr[-2000:]
    dec = json.JSONDecoder()
    text, scenarios, i = r.stdout, [], 0
    while True:
        j = text.find("{", i)
        if j < 0:
            break
        obj, i = dec.raw_decode(text, j)
        scenarios.append(obj)
    assert len(scenarios) == 4
    judged = {"nothing_lost", "effect_once", "broker_log_matches_outbox", "versions_in_order",
              "one_payment_per_key"}
    for sc in scenarios:
        for proc in sc["processes"].values():
            assert not {"args", "faults", "clock"} & set(proc), proc
        kinds = [p["kind"] for p in sc["processes"].values()]
        assert kinds.count("consumer") == 1
        assert set(sc["invariants"]) <= judged
        for st in sc["steps"]:
            assert st["do"] not in ("fault", "http", "sql", "outboxctl"), st
            assert "faults" not in st, st
            # A lock, a refusal or a sever names a table of our own schema.
            assert st.get("action") not in ("lock", "refuse", "sever", "deadlock"), st
            if st["do"] == "payments":
                assert "authorize" not in st and "capture" not in st  # no follow_up here
        assert "hazard" not in sc and "broker" not in sc
