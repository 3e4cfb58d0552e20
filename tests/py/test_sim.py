"""crashwindow sim: deterministic generation, replay of a failing seed on a
mutant build, and shrinking.

The simulator runs real processes against the session's PostgreSQL cluster
(--pg), so its verdicts come from the runner's checker over the database;
these tests check them against the broker's log, which the system under test
cannot influence.

A mutant build (-DCW_MUTANT=ack_before_commit: the consumer ACKs before its
COMMIT) is made next to the build directory, as build-sim-mut-<name>, with
every binary a run needs (`crashwindow run --bin` takes them all from there).

KNOWN_FAILING is run 179 of seed 31 (as the tests run it, with --pg: a run
on a cluster of its own also draws database crashes, so its schedule
differs).  Its only accounting consumer takes one delivery at a time, every
event is a creation (version 1: no gap can hold one back), and nothing
publishes an event twice (no broker duplication, no relay fault, no network
fault).  The consumer crashes at consumer/before_commit in its first
transaction that gets that far; the mutant has already acknowledged the
event, so it is lost whatever the timing.  (A run with duplicates, reordering
or two consumers fails only when the faulted event happens to have no second
copy: seed 7's runs 1 and 22 did so one time in a few under load.)  The run
depends on the generator: if the generator changes, find a new one of the
same kind among `crashwindow sim --seed S --runs 200 --pg <conninfo>
--dry-run` and replay it ten times under load before choosing it.
"""
# needs: pg net
import json
import os
import subprocess

import pytest

from cwtest import BUILD_DIR, SOURCE_DIR, crashwindow, load_result, read_events

MUTANT = "ack_before_commit"
KNOWN_FAILING = "31:179"


def sim(args, timeout=300):
    return crashwindow("sim", *args, timeout=timeout)


def scenarios_in(text):
    """The JSON objects printed one after the other by --dry-run."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


def failing_lines(out_dir):
    return read_events(os.path.join(out_dir, "failing.jsonl"))


def acked_ids(broker_log, group):
    return {e["message_id"] for e in broker_log if e.get("event") == "ack" and e.get("group") == group}


def stored_ids(broker_log):
    return {e["message_id"] for e in broker_log
            if e.get("event") == "publish" and e.get("status", "stored") == "stored"}


def build_mutant(name, targets):
    """build-sim-mut-NAME next to the build directory (configured once,
    rebuilt incrementally), with the given targets; `--bin` takes every
    other binary from the simulator's own build."""
    path = os.path.join(os.path.dirname(os.path.abspath(BUILD_DIR)), f"build-sim-mut-{name}")
    if not os.path.exists(os.path.join(path, "CMakeCache.txt")):
        subprocess.run(["cmake", "-S", SOURCE_DIR, "-B", path, f"-DCW_MUTANT={name}"],
                       check=True, capture_output=True, text=True, timeout=300)
    r = subprocess.run(["cmake", "--build", path, "--target"] + targets + ["-j2"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return path


@pytest.fixture(scope="session")
def mutant_build():
    return build_mutant(MUTANT, ["payments-api", "outbox-relay", "accounting-consumer",
                                 "outboxctl", "fakebroker"])


def test_same_seed_and_run_give_the_same_scenario():
    a = sim(["--replay", "11:3", "--dry-run"])
    b = sim(["--replay", "11:3", "--dry-run"])
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    sc = json.loads(a.stdout)
    assert sc["name"] == "sim-11-3"
    # Run 3 of a three-run seed is the very same schedule as its replay.
    runs = sim(["--seed", "11", "--runs", "3", "--dry-run"])
    scs = scenarios_in(runs.stdout)
    assert [s["name"] for s in scs] == ["sim-11-1", "sim-11-2", "sim-11-3"]
    assert scs[2] == sc
    # Other runs and other seeds are other schedules.
    assert scs[0] != sc and scs[1] != sc
    other = sim(["--replay", "12:3", "--dry-run"])
    assert json.loads(other.stdout)["steps"] != sc["steps"] or \
        json.loads(other.stdout)["processes"] != sc["processes"]
    # The layout the simulator promises.
    kinds = [p["kind"] for p in sc["processes"].values()]
    assert kinds.count("api") == 1 and 1 <= kinds.count("relay") <= 3
    groups = [p["args"]["name"] for p in sc["processes"].values() if p["kind"] == "consumer"]
    assert 1 <= groups.count("accounting") <= 2 and groups.count("notifications") <= 2


def test_schedules_draw_refusals_of_every_kind_and_none_is_required_to_fire():
    """Now and then a schedule has PostgreSQL refuse one of the pipeline's
    statements or COMMITs (a db refuse step), one to three times; across a
    seed every entry of the simulator's catalogue is drawn.  A schedule is
    drawn blind, so none may fail a run by refusing nothing (must_fire
    false); and no refusal is a data error (class 22 or 23), which would
    park an event as poison."""
    scs = scenarios_in(sim(["--seed", "7", "--runs", "200", "--dry-run"]).stdout)
    refusals = [st for sc in scs for st in sc["steps"]
                if st["do"] == "db" and st["action"] == "refuse"]
    assert 10 <= len(refusals) <= 60, len(refusals)
    kinds = {(st["table"], st["on"], st["at"], st["sqlstate"]) for st in refusals}
    assert len(kinds) == 9, sorted(kinds)
    for st in refusals:
        assert st["must_fire"] is False and 1 <= st["times"] <= 3, st
        assert st["sqlstate"][:2] not in ("22", "23"), st
        assert "proc" not in st, st


def peers_of(sc, name):
    """The processes that share name's work, itself included: those of its
    kind (for a consumer, of its group)."""
    x = sc["processes"][name]
    group = x.get("args", {}).get("name")
    return [y for y in sc["processes"].values()
            if y["kind"] == x["kind"] and y.get("args", {}).get("name") == group]


def test_schedules_anchor_park_follow_ups_and_run_the_runbook():
    """Across a seed's schedules: every resume or kill that follows a park
    fault comes right after a wait for that very park, which goes on if the
    park never comes; a poison window closes, and requeue --all runs, only
    after a wait for the first dead letter (a close also after a wait until
    nothing is pending; a requeue, where consumers park gaps, also after a
    wait for every later version of a dead letter to be parked); a poison
    window opens only after a wait until nothing is pending; some poison
    windows refuse creations only; a relay's broker link slower than its
    lease slows only after a wait for that relay's connection; the silent
    consumer links ending restarts every consumer with no fault and waits
    for its start, cuts every consumer's broker link, and after its batch
    waits until the pipeline caught up, however old the events look; the
    retention cleanup, requeue --all where relays dead-letter, and an inbox
    retention inside the redelivery horizon, which must be refused, appear
    among the schedule's actions."""
    scs = scenarios_in(sim(["--seed", "3001", "--runs", "80", "--dry-run"]).stdout)
    assert len(scs) == 80
    anchors = cleanups = requeues = refused = closes = slow = park_anchors = creations_only = 0
    opens = silent = caught_up = held = revived = first_parks = gap_parks = releases = 0
    for sc in scs:
        steps = sc["steps"]
        # A relay or consumer that shares its work parks on its first pass.
        for name, x in sc["processes"].items():
            specs = [x.get("faults", "")] + [st.get("faults", "") for st in steps
                                            if st.get("proc") == name]
            for spec in ";".join(specs).split(";"):
                if "=park@" in spec and x["kind"] in ("relay", "consumer") and \
                        len(peers_of(sc, name)) > 1:
                    assert spec.endswith("=park@1"), (sc["name"], name, spec)
                    first_parks += 1
        # Every autostarted relay beside one that parks on its first pass
        # starts only after that park (the release checked below).
        parkers = [n for n, x in sc["processes"].items() if x["kind"] == "relay"
                   and x.get("autostart", True) and "=park@1" in x.get("faults", "")]
        if parkers and any(len(peers_of(sc, n)) > 1 for n in parkers):
            assert not [n for n, x in sc["processes"].items() if x["kind"] == "relay"
                        and n != parkers[0] and x.get("autostart", True)], sc["name"]
        # A consumer parks a gap well before a held predecessor's lease
        # runs out, or well after: never at about the same moment.
        leases = {x["args"]["lease-ms"] for x in sc["processes"].values() if x["kind"] == "relay"}
        for name, x in sc["processes"].items():
            park = x.get("args", {}).get("gap-park-after-ms")
            if park is not None:
                assert all(park <= lease - 500 or park >= lease + 500 for lease in leases), \
                    (sc["name"], name, park, leases)
                gap_parks += 1
        # One poison window at a time (a second bound would override a
        # creations-only one), and a creations-only window's first batch
        # authorizes, so that a later version can wait on a creation.
        window = first_batch = 0
        for i, st in enumerate(steps):
            if st["do"] == "broker" and "max_payload_bytes" in st["control"]:
                bound = st["control"]["max_payload_bytes"]
                assert window == 0 or bound == 0, (sc["name"], "a window inside another", i)
                window, first_batch = bound, bound == 200
            if st["do"] == "payments" and first_batch:
                assert st.get("authorize"), (sc["name"], st)
                first_batch = 0
        for i, st in enumerate(steps):
            if st["do"] == "wait" and st.get("until") == "dead_lettered":
                assert st["on_timeout"] == "continue", st
                nxt = steps[i + 1]
                if nxt["do"] == "wait" and "consumer_dead_letters" not in nxt.get("sql", ""):
                    # Then nothing pending (each refused event dead-lettered),
                    # then the poison window closes.
                    assert nxt["until"] == "sql" and nxt["on_timeout"] == "continue", nxt
                    assert "published_at IS NULL AND dead_lettered_at IS NULL" in nxt["sql"]
                    nxt = steps[i + 2]
                    assert nxt["do"] == "broker", nxt
                if nxt["do"] == "broker":
                    assert nxt["control"] == {"max_payload_bytes": 0}, nxt
                    closes += 1
                else:
                    if nxt["do"] == "wait":
                        # Every later version of a dead letter parked
                        # first, within the consumers' gap park and a
                        # margin; then the requeue.
                        assert nxt["until"] == "sql" and nxt["on_timeout"] == "continue", nxt
                        assert "consumer_dead_letters" in nxt["sql"], nxt
                        parks = [p["args"]["gap-park-after-ms"] for p in sc["processes"].values()
                                 if p["kind"] == "consumer"]
                        assert nxt["timeout_ms"] == max(parks) + 1500, nxt
                        park_anchors += 1
                        nxt = steps[i + 2]
                    assert nxt["args"] == ["requeue", "--all"], nxt
                continue
            if st["do"] == "broker" and st["control"].get("max_payload_bytes", 0) > 0:
                # A poison window refuses every event, or creations only
                # (a PaymentCreated payload is the only one over 200 bytes).
                limit = st["control"]["max_payload_bytes"]
                assert limit in (64, 200), st
                creations_only += limit == 200
                continue
            if st["do"] == "wait" and st.get("until") == "event" and st["event"] == "start":
                # The silent consumer links ending: each consumer restarted
                # with no fault, and awaited until subscribed.
                assert st["on_timeout"] == "continue", st
                prev = steps[i - 1]
                assert prev["do"] == "restart" and prev["proc"] == st["proc"], prev
                assert "faults" not in prev, prev
                assert sc["processes"][st["proc"]]["kind"] == "consumer"
                assert sc["processes"][st["proc"]]["args"]["bus-timeout-ms"] == 2000
                silent += 1
                continue
            if st["do"] == "wait" and st.get("until") == "event":
                assert st["on_timeout"] == "continue", st
                assert st["event"] == "connect" and st["where"] == {"target": "broker"}, st
                nxt = steps[i + 1]
                assert nxt["do"] == "net" and nxt["link"] == st["proc"] + "->broker", nxt
                relay = sc["processes"][st["proc"]]
                assert relay["kind"] == "relay"
                assert nxt["fault"] == "latency"
                assert nxt["latency_ms"] >= relay["args"]["lease-ms"], nxt
                slow += 1
                continue
            if st["do"] == "wait" and st.get("until") == "sql" and "on_timeout" in st:
                if st["why"].startswith("until the pipeline caught up"):
                    # After the silent links' batch, bounded by the wait's
                    # own timeout, never by the events' age (a clock
                    # behind makes a new event look old).
                    assert steps[i - 1]["do"] == "payments", steps[i - 1]
                    assert "occurred_at" not in st["sql"] and st["timeout_ms"] == 5000, st
                    cuts = [x for x in steps if x["do"] == "net" and x.get("fault") == "cut"
                            and x["link"].endswith("->broker") and x["then"] == "blackhole"
                            and sc["processes"][x["link"][:-8]]["kind"] == "consumer"]
                    consumers = [n for n, x in sc["processes"].items() if x["kind"] == "consumer"]
                    assert sorted(x["link"][:-8] for x in cuts[-len(consumers):]) == \
                        sorted(consumers), (sc["name"], cuts)
                    caught_up += 1
                    continue
                nxt = steps[i + 1]
                if nxt["do"] == "broker" and nxt["control"].get("max_payload_bytes", 0) > 0:
                    # A poison window opens once every earlier event is
                    # published: it refuses its own batch, in every replay.
                    assert "published_at IS NULL AND dead_lettered_at IS NULL" in st["sql"], st
                    opens += 1
                    continue
                if steps[i - 1]["do"] == "sleep":
                    continue  # a held relay's rows taken over: checked with its park
                assert steps[i - 1].get("until") == "dead_lettered", "checked with what follows"
                continue
            if st["do"] == "wait" and st.get("until") == "exited":
                # A crash fault on the only relay, or on the only consumer
                # of its group: its restart waits for the crash first.
                assert st["on_timeout"] == "continue", st
                nxt = steps[i + 1]
                assert nxt["do"] == "restart" and nxt["proc"] == st["proc"], nxt
                proc = sc["processes"][st["proc"]]
                assert "=crash@" in proc.get("faults", ""), (sc["name"], proc)
                assert len(peers_of(sc, st["proc"])) == 1, (sc["name"], st)
                revived += 1
                continue
            if st["do"] == "wait" and "on_timeout" in st:
                anchors += 1
                assert st["until"] == "parked" and st["on_timeout"] == "continue", st
                proc = sc["processes"][st["proc"]]
                faults = proc.get("faults", "") + "".join(
                    x.get("faults", "") for x in steps[:i] if x.get("proc") == st["proc"])
                assert f'{st["point"]}=park' in faults, (sc["name"], st)
                follow = steps[i + 1]
                if follow["do"] == "net":
                    # A partition of the parked consumer's link, before
                    # its resume (test_a_drawn_partition_under_a_parked_commit).
                    assert follow["fault"] == "partition", follow
                    assert follow["link"] == st["proc"] + "->pg", follow
                    continue
                if follow["do"] == "restart" and follow["proc"] != st["proc"]:
                    # A relay parked on its first pass, beside peers that
                    # would start with it: they start only once it parked,
                    # right after the first payments, so that it holds the
                    # run's first event in every replay.
                    assert st["point"].startswith("relay/"), (sc["name"], st)
                    assert [x["do"] for x in steps[:i]] == ["payments"], (sc["name"], i)
                    k = i + 1
                    while k < len(steps) and steps[k]["do"] == "restart" and \
                            steps[k]["proc"] != st["proc"]:
                        peer = sc["processes"][steps[k]["proc"]]
                        assert peer["kind"] == "relay" and peer.get("autostart") is False, \
                            (sc["name"], steps[k])
                        assert "faults" not in peer, (sc["name"], steps[k])
                        k += 1
                    releases += 1
                    continue
                if follow["do"] == "sleep":
                    # A relay parked in its loop holds a claim: it stays
                    # parked past that claim's lease, then is resumed.
                    assert st["point"].startswith("relay/"), (sc["name"], st)
                    assert follow["ms"] == proc["args"]["lease-ms"] + 500, follow
                    # Then until the others published and marked its rows.
                    took = steps[i + 2]
                    assert took["until"] == "sql" and took["on_timeout"] == "continue", took
                    assert "published_at IS NULL AND dead_lettered_at IS NULL" in took["sql"]
                    follow = steps[i + 3]
                    assert follow["do"] == "resume", follow
                    held += 1
                elif st["point"].startswith("relay/") and follow["do"] == "resume":
                    raise AssertionError(f"{sc['name']}: a parked relay resumed at once: {follow}")
                assert follow["do"] in ("resume", "kill") and follow["proc"] == st["proc"], follow
            if st["do"] == "outboxctl":
                assert i > 0, "after the first payments, never before"
                if st["args"][0] == "cleanup-inbox":
                    # Refused before any connection, so under any fault.
                    refused += 1
                    assert st["args"][1] == "--older-than" and st["args"][2].endswith("ms")
                    assert int(st["args"][2][:-2]) <= 500
                    assert st["expect_exit"] == 1 and st["expect_output"] == "refusing", st
                    continue
                assert "expect_exit" not in st, "a database fault may be on: judged by history"
                if st["args"][0] == "cleanup":
                    cleanups += 1
                    assert st["args"][1] == "--published-older-than"
                else:
                    requeues += 1
                    assert st["args"] == ["requeue", "--all"]
                    assert steps[i - 1]["until"] == "dead_lettered" or \
                        steps[i - 2]["until"] == "dead_lettered", "anchored"
                    relays = [p for p in sc["processes"].values() if p["kind"] == "relay"]
                    assert relays[0]["args"]["max-attempts"] <= 3
    assert anchors >= 10 and cleanups >= 5 and requeues >= 2, (anchors, cleanups, requeues)
    assert held >= 1, "no parked relay held past its lease in 80 schedules"
    assert releases >= 1, "no relay parked on its first pass with its peers held back"
    assert refused >= 10 and closes >= 5 and slow >= 3, (refused, closes, slow)
    assert opens >= closes, (opens, closes)
    assert park_anchors >= 2 and creations_only >= 2, (park_anchors, creations_only)
    assert revived >= 3 and first_parks >= 5 and gap_parks >= 5, (revived, first_parks, gap_parks)
    assert caught_up >= 5 and silent >= 2 * caught_up, (caught_up, silent)


def aimed_partition(sc):
    """The index of a partition step between a wait for a consumer's park
    inside its transaction and that consumer's resume (whose own wait for
    the park ends at once), or None."""
    steps = sc["steps"]
    for i, st in enumerate(steps):
        if st["do"] == "net" and st.get("fault") == "partition" and 0 < i < len(steps) - 2 \
                and steps[i - 1].get("until") == "parked" \
                and steps[i + 1].get("until") == "parked" and steps[i + 2]["do"] == "resume":
            return i
    return None


def test_partitions_are_drawn_only_in_a_namespace_of_the_runs_own():
    """A kernel partition needs the runs in a network namespace of their
    own, which only a cluster the simulator starts itself can live in: with
    --pg none is drawn.  Without it, about one run in ten aims a partition
    at a consumer parked before its COMMIT (its inbox row locked), longer
    than that consumer's database deadline, then resumes it into the cut."""
    own = scenarios_in(sim(["--seed", "5", "--runs", "100", "--dry-run"]).stdout)
    given = scenarios_in(sim(["--seed", "5", "--runs", "100", "--dry-run",
                              "--pg", "host=/nonexistent dbname=postgres"]).stdout)
    def partitions(scs):
        return [st for sc in scs for st in sc["steps"]
                if st["do"] == "net" and st.get("fault") == "partition"]
    assert partitions(given) == []
    assert all(st["link"].endswith("->pg") for st in partitions(own))
    aimed = [sc for sc in own if aimed_partition(sc) is not None]
    assert len(aimed) >= 6, len(aimed)
    for sc in aimed:
        i = aimed_partition(sc)
        steps = sc["steps"]
        proc = steps[i - 1]["proc"]
        assert steps[i]["link"] == proc + "->pg" and steps[i + 2]["proc"] == proc
        p = sc["processes"][proc]
        assert p["kind"] == "consumer" and p["faults"] == "consumer/before_commit=park@1"
        assert steps[i]["ms"] > p["db_deadline_ms"], (sc["name"], steps[i])


def test_clocks_and_broker_closes_are_drawn():
    """Skewed and drifting clocks (libfaketime) are drawn for the API and,
    from a stream of their own, for relays and consumers; no link is drawn
    to the broker from the API, which has none."""
    scs = scenarios_in(sim(["--seed", "3001", "--runs", "120", "--dry-run"]).stdout)
    clocked = {}
    for sc in scs:
        for p in sc["processes"].values():
            if "clock" in p:
                clocked.setdefault(p["kind"], []).append(p["clock"])
        for st in sc["steps"]:
            if st["do"] == "net":
                assert not st["link"].startswith("api->broker"), (sc["name"], st)
    assert set(clocked) == {"api", "relay", "consumer"}, sorted(clocked)
    assert all(0.5 <= c.get("rate", 1) <= 2 for k in clocked for c in clocked[k])
    # The broker now and then drops every connection (RabbitMQ's
    # close_all_connections), a step both brokers take.
    closes = [sc["name"] for sc in scs for st in sc["steps"]
              if st["do"] == "broker" and st.get("control") == {"close_connections": True}]
    assert 5 <= len(closes) <= 30, closes
    assert all(-120 <= c["offset_s"] <= 120 for k in clocked for c in clocked[k])
    # Every database fault is drawn, commits held on a standby that never
    # answers and refused statements among them, each with its length.
    db = [st for sc in scs for st in sc["steps"] if st["do"] == "db"]
    assert {st["action"] for st in db} == {"crash", "restart", "terminate", "freeze",
                                           "hold_commits", "lock", "refuse", "sever"}, db
    # A severed session at each of the statements and COMMITs the catalogue
    # names, drawn blind; the relay's mark is told from its claim by "of".
    severs = [st for st in db if st["action"] == "sever"]
    assert all(st["must_fire"] is False and "sqlstate" not in st for st in severs), severs
    kinds = {(st["table"], st["on"], st["at"], tuple(st.get("of", ()))) for st in severs}
    assert kinds <= {
        ("payments", "insert", "commit", ()), ("outbox_messages", "insert", "statement", ()),
        ("outbox_messages", "update", "statement", ("published_at",)),
        ("outbox_messages", "update", "commit", ("published_at",)),
        ("outbox_messages", "update", "commit", ("lock_id",)),
        ("inbox_messages", "insert", "statement", ()),
        ("ledger_entries", "insert", "commit", ())}, severs
    assert len(kinds) >= 5 and all(1 <= st["times"] <= 2 for st in severs), severs
    assert all(300 <= st["ms"] <= 2000 for st in db if st["action"] == "hold_commits"), db
    # A migration's lock on each table the pipeline writes, up to four
    # seconds: longer than the API's lock timeout and a deadline's quarter.
    locks = [st for st in db if st["action"] == "lock"]
    assert {st["table"] for st in locks} == {"outbox_messages", "payments", "ledger_entries",
                                             "inbox_messages"}, locks
    assert all(500 <= st["ms"] <= 4000 for st in locks), locks


def test_a_drawn_partition_under_a_parked_commit(tmp_path):
    """The first such run of seed 5, on a cluster and a namespace of the
    simulator's own: the unmodified build converges (every stored event
    acknowledged by every group), and a build whose sessions have no
    idle-in-transaction bound loses the event whose inbox row the
    abandoned session still locks."""
    scs = scenarios_in(sim(["--seed", "5", "--runs", "40", "--dry-run"]).stdout)
    sc = next(sc for sc in scs if aimed_partition(sc) is not None)
    run = "5:" + sc["name"].rsplit("-", 1)[1]
    out = str(tmp_path / "good")
    r = sim(["--replay", run, "--out", out, "--keep-passing"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    (res,) = load_result(out)["scenarios"]
    log = read_events(os.path.join(out, res["dir"], "broker.events.jsonl"))
    stored = stored_ids(log)
    assert stored
    groups = {p["args"]["name"] for p in sc["processes"].values() if p["kind"] == "consumer"}
    for g in groups:
        assert stored <= acked_ids(log, g), g

    mutant = build_mutant("sessions_without_idle_timeout", ["accounting-consumer"])
    out = str(tmp_path / "mutant")
    r = sim(["--replay", run, "--bin", mutant, "--out", out])
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    (line,) = failing_lines(out)
    assert line["invariant"] in ("nothing_lost", "idle_transactions_bounded"), line


def test_bad_usage_is_refused():
    for args, needle in [(["--replay", "7:0"], "--replay"),
                         (["--replay", "7"], "--replay"),
                         (["--seed", "-3"], "--seed"),
                         (["--runs", "0"], "--runs"),
                         (["--replay", "1:2", "--runs", "3"], "--replay"),
                         (["--fidelity", "0"], "--fidelity"),
                         (["--seed", "1", "--shard", "1/2", "--fidelity", "2"], "--fidelity"),
                         (["--frobnicate", "1"], "frobnicate")]:
        r = sim(args + ["--dry-run"])
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert needle in r.stderr, (args, r.stderr)


def test_unmutated_runs_pass_and_every_event_is_applied(pg_cluster, tmp_path):
    out = str(tmp_path / "sim")
    r = sim(["--seed", "3", "--runs", "2", "--pg", pg_cluster, "--out", out, "--keep-passing"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    res = load_result(out)
    st = res["simulator"]
    assert st["seed"] == 3 and st["runs"] == 2 and st["failures"] == 0
    assert st["invariant_checks"] == 2 * 15 and st["runs_per_minute"] > 0
    assert [s["verdict"] for s in res["scenarios"]] == ["pass", "pass"]
    assert failing_lines(out) == []
    for sc in res["scenarios"]:
        run_dir = os.path.join(out, sc["dir"])
        log = read_events(os.path.join(run_dir, "broker.events.jsonl"))
        stored = stored_ids(log)
        assert stored, f"{sc['name']}: nothing was published"
        # Converged: every stored event was acked by the accounting group.
        assert stored <= acked_ids(log, "accounting"), sc["name"]
        assert sc["counts"]["payments"] > 0


def test_known_failing_seed_fails_again_on_replay(pg_cluster, mutant_build, tmp_path):
    verdicts = []
    for attempt in ("a", "b"):
        out = str(tmp_path / attempt)
        # The second time, --fidelity replays the failing run twice more.
        r = sim(["--replay", KNOWN_FAILING, "--bin", mutant_build, "--pg", pg_cluster,
                 "--out", out] + (["--fidelity", "2"] if attempt == "b" else []))
        assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
        assert f"crashwindow sim --replay {KNOWN_FAILING} --bin {mutant_build}" in r.stdout
        (line,) = failing_lines(out)
        assert line["run"] == KNOWN_FAILING and line["invariant"] == "nothing_lost"
        run_dir = os.path.join(out, line["dir"])
        with open(os.path.join(run_dir, "scenario.json"), encoding="utf-8") as f:
            verdicts.append(json.load(f))
        # The broker's log shows the mutant's mistake: a stored event that
        # the accounting group acknowledged, which the checker found never
        # applied.
        event = line["witness"].split()[1]
        log = read_events(os.path.join(run_dir, "broker.events.jsonl"))
        assert event in stored_ids(log)
        assert event in acked_ids(log, "accounting")
        res = load_result(out)
        assert res["simulator"]["failing"][0]["replay"] == line["replay"]
    assert "fidelity" not in load_result(str(tmp_path / "a"))["simulator"]
    fid = res["simulator"]["fidelity"]
    assert fid == {"run": KNOWN_FAILING, "invariant": "nothing_lost", "replays": 2,
                   "failed_again": 2, "same_failure": 2}, fid
    assert f"fidelity {KNOWN_FAILING}: failed again in 2 of 2 replays (2 on nothing_lost)" \
        in r.stdout
    assert len(os.listdir(os.path.join(out, "fidelity"))) >= 2, "failing replays keep files"
    html = str(tmp_path / "fidelity.html")
    rr = crashwindow("report", out, "-o", html, timeout=60)
    assert rr.returncode == 0, rr.stderr
    with open(html, encoding="utf-8") as f:
        assert "replayed 2 times with the same schedule: it failed again 2 times (100%)" in \
            f.read()
    # The replay ran the very same schedule.
    assert verdicts[0] == verdicts[1]
    # And the unmutated build survives that schedule.
    out = str(tmp_path / "good")
    r = sim(["--replay", KNOWN_FAILING, "--pg", pg_cluster, "--out", out])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def scenario_size(sc):
    procs = sc["processes"]
    faults = sum(len(p.get("faults", "").split(";")) for p in procs.values() if p.get("faults"))
    faults += sum(len(s["faults"].split(";")) for s in sc["steps"] if s.get("faults"))
    payments = sum(s["count"] for s in sc["steps"] if s["do"] == "payments")
    return len(procs), faults, len(sc["steps"]), payments


def test_shrinking_keeps_the_failure_and_is_no_larger(pg_cluster, mutant_build, tmp_path):
    out = str(tmp_path / "sim")
    r = sim(["--replay", KNOWN_FAILING, "--bin", mutant_build, "--pg", pg_cluster, "--out", out,
             "--shrink", "--shrink-budget", "45"], timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    res = load_result(out)
    (shrunk,) = res["simulator"]["shrunk"]
    assert shrunk["size_after"] <= shrunk["size_before"]
    assert shrunk["invariant"] == "nothing_lost"
    path = os.path.join(out, shrunk["file"])
    with open(path, encoding="utf-8") as f:
        small = json.load(f)
    name = "sim-" + KNOWN_FAILING.replace(":", "-")
    with open(os.path.join(out, "runs", name, "scenario.json"), encoding="utf-8") as f:
        original = json.load(f)
    for a, b in zip(scenario_size(small), scenario_size(original)):
        assert a <= b, (scenario_size(small), scenario_size(original))
    assert "nothing_lost" in small["invariants"]

    # The file is an ordinary scenario: `crashwindow run` fails it on the
    # mutant, on the same invariant, with the evidence in the broker log...
    run_out = str(tmp_path / "run")
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", run_out, "--bin", mutant_build,
                    "--brief", timeout=300)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    run_res = load_result(run_out)
    (sc,) = run_res["scenarios"]
    failed = {i["name"] for i in sc["invariants"] if i["verdict"] == "fail"}
    assert "nothing_lost" in failed
    log = read_events(os.path.join(run_out, sc["dir"], "broker.events.jsonl"))
    lost = [w.split()[1] for i in sc["invariants"] if i["name"] == "nothing_lost"
            for w in i["witnesses"] if w.startswith("event ")]
    assert lost and all(e in acked_ids(log, "accounting") for e in lost)
