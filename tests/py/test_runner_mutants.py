"""`crashwindow mutants`: the harness fails when the code is wrong.

One real mutant end to end (the API replaying an old response for a reused
key with another body): the baseline passes, the mutant is built into
build-mutant-<name>/ next to the build tree, its scenario fails, and the
matrix in result.json names what caught it.  The full matrix (every mutant)
is what CI runs with `crashwindow mutants`; it takes minutes, so the test
suite proves the mechanism with one.
"""
# needs: pg net
import os
import re

from cwtest import BUILD_DIR, SOURCE_DIR, crashwindow, load_result, pg_args, read_events

HOOK = re.compile(r"CW_MUTANT\(\s*(\w+)\s*\)")


def test_list_and_usage():
    r = crashwindow("mutants", "--list")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
    assert len(names) >= 15
    for n in ("dual_write", "ack_before_commit", "claim_ignores_lease", "new_id_per_attempt",
              "idempotency_without_hash", "blind_version_apply"):
        assert n in names
    assert r.stdout.count("scenarios:") == len(names)
    r = crashwindow("mutants", "--only", "not_a_mutant")
    assert r.returncode == 2 and "unknown mutant 'not_a_mutant'" in r.stderr
    assert crashwindow("mutants", "--frobnicate").returncode == 2


def mutant_hooks():
    """Every CW_MUTANT(name) hook in src/: name -> files, and the hooks that
    sit in a preprocessor conditional instead of in the code."""
    hooks, in_cpp = {}, []
    for top, _, names in sorted(os.walk(os.path.join(SOURCE_DIR, "src"))):
        for name in sorted(names):
            if not name.endswith((".c", ".h")) or name == "mutant.h":
                continue
            path = os.path.join(top, name)
            rel = os.path.relpath(path, SOURCE_DIR)
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    for m in HOOK.finditer(line):
                        hooks.setdefault(m.group(1), set()).add(rel)
                        if re.match(r"\s*#\s*(if|elif)", line):
                            in_cpp.append(f"{rel}:{n}")
    return hooks, in_cpp


def test_hooks_match_the_catalogue():
    """Each mutant of the catalogue bends the code somewhere, each hook names
    a mutant of the catalogue, and no hook is an #if block: a variant reads
    as one program with the real one (mutant.h says why)."""
    r = crashwindow("mutants", "--list")
    assert r.returncode == 0
    listed = {line.split()[0] for line in r.stdout.splitlines() if line and not line[0].isspace()}
    hooks, in_cpp = mutant_hooks()
    assert set(hooks) - listed == set(), "hooks of no catalogued mutant"
    assert listed - set(hooks) == set(), "catalogued mutants with no hook in src/"
    assert in_cpp == [], "mutant hooks in #if lines"


def test_one_mutant_is_killed(tmp_path, pg_cluster):
    name = "idempotency_without_hash"
    out = tmp_path / "mut"
    # The mutant's build and the baseline's run take minutes.
    r = crashwindow("mutants", "--only", name, "--out", str(out), *pg_args(pg_cluster),
                    timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert "1/1 mutants killed" in r.stdout
    assert f"{name}: killed by 11-http-retry-after-crash" in r.stdout

    res = load_result(out)
    assert res["kind"] == "mutants" and res["verdict"] == "pass"
    assert res["baseline_verdict"] == "pass"
    assert len(res["scenarios"]) >= 15 and all(s["verdict"] == "pass" for s in res["scenarios"])
    (m,) = res["mutants"]
    assert m["name"] == name and m["killed"] is True
    assert m["rebuilt"] == ["payments-api"]
    (cell,) = m["scenarios"]
    # Quick form: the aimed scenario comes first, and the first kill ends it.
    assert cell["name"] == "11-http-retry-after-crash" and cell["verdict"] == "fail"
    assert cell["outcome"] == "killed" and m["outcome"] == "killed"
    assert any(k.startswith("expect:") for k in cell["killed_by"])
    assert "got 201 (want 422)" in cell["witness"]

    # The mutated binary really ran: its start event names the mutant.
    build_mut = os.path.join(os.path.dirname(os.path.abspath(BUILD_DIR)), f"build-mutant-{name}")
    assert os.path.exists(os.path.join(build_mut, "src", "payments-api"))
    mres = load_result(out / m["dir"])
    assert mres["mutant"] == name and mres["bin"] == build_mut
    api = read_events(str(out / m["dir"] / mres["scenarios"][0]["dir"] / "api.events.jsonl"))
    starts = [e for e in api if e["event"] == "start"]
    assert starts and all(e.get("mutant") == name for e in starts)


def test_a_decided_mutant_run_stops_waiting(tmp_path, pg_cluster):
    """A mutant is killed only by a failed invariant or expectation.  Once
    one that no later event can undo has failed (here effect_once: an inbox
    marker committed without its effect), the heal stops waiting for a
    pipeline that cannot converge; the kill is the same, and the baseline's
    run waits its heal out as always."""
    name = "inbox_separate_tx"
    out = tmp_path / "mut"
    r = crashwindow("mutants", "--only", name, "--full", "--out", str(out),
                    *pg_args(pg_cluster), os.path.join(SOURCE_DIR, "scenarios",
                                                       "06-crash-before-ack.json"), timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    res = load_result(out)
    (m,) = res["mutants"]
    (cell,) = m["scenarios"]
    assert cell["outcome"] == "killed" and "effect_once" in cell["killed_by"], cell
    mres = load_result(out / m["dir"])
    (sc,) = mres["scenarios"]
    assert sc["error"].startswith("heal: stopped after"), sc["error"]
    assert "with the verdict decided: effect_once:" in sc["error"], sc["error"]
    runner = read_events(str(out / m["dir"] / sc["dir"] / "runner.events.jsonl"))
    assert not [e for e in runner if e["event"] == "heal_done"]
    (base,) = res["scenarios"]
    assert base["verdict"] == "pass"
    base_events = read_events(str(out / base["dir"] / "runner.events.jsonl"))
    assert [e for e in base_events if e["event"] == "heal_done"], base_events[-3:]


def test_full_matrix_skips_the_scenarios_that_never_reach_a_hook(tmp_path):
    """--full first runs the scenarios against the reach build (the real code
    whose hooks note their names) into OUT.reach; a scenario that evaluated
    none of a mutant's hooks there runs as the real code under that mutant,
    so its cell is "unreached" and not run.  The shares of --jobs read the
    one reach run their parent made.  A directory that is not a reach run
    is refused rather than read as "nothing reached"."""
    name = "idempotency_without_hash"
    rollback = os.path.join(SOURCE_DIR, "scenarios", "01-command-rollback.json")
    retry = os.path.join(SOURCE_DIR, "scenarios", "11-http-retry-after-crash.json")
    out = tmp_path / "mut"
    r = crashwindow("mutants", "--only", name, "--full", "--jobs", "2", "--out", str(out),
                    rollback, retry, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    reach = tmp_path / "mut.reach"
    base = load_result(reach)
    assert base["verdict"] == "pass" and base["bin"].endswith("build-reach")
    logs = {}
    for sc in base["scenarios"]:
        with open(reach / sc["dir"] / "mutant-reach.log", encoding="utf-8") as f:
            logs[sc["name"]] = set(f.read().split())
    # Only a reused key is asked whether its body's hash matches.
    assert name in logs["11-http-retry-after-crash"]
    assert name not in logs["01-command-rollback"] and "dual_write" in logs["01-command-rollback"]

    res = load_result(out)
    assert res["verdict"] == "pass" and res["baseline_verdict"] == "pass"
    (m,) = res["mutants"]
    cells = {c["name"]: c for c in m["scenarios"]}
    assert cells["11-http-retry-after-crash"]["outcome"] == "killed"
    assert cells["01-command-rollback"]["outcome"] == "unreached"
    assert cells["01-command-rollback"]["killed_by"] == [] and m["unreached"] == 1
    # The unreached scenario never ran under the mutant.
    mres = load_result(out / m["dir"])
    assert [s["name"] for s in mres["scenarios"]] == ["11-http-retry-after-crash"]

    # A reach run already made is read again, in one process, without a build.
    again = tmp_path / "again"
    r = crashwindow("mutants", "--only", name, "--full", "--reach", str(reach),
                    "--out", str(again), rollback, retry, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert "the reach build" not in r.stdout
    (m,) = load_result(again)["mutants"]
    assert {c["name"]: c["outcome"] for c in m["scenarios"]} == {
        "11-http-retry-after-crash": "killed", "01-command-rollback": "unreached"}

    # --reach must name a reach run: the baseline's own run is not one.
    r = crashwindow("mutants", "--only", name, "--full", "--reach", str(out),
                    "--out", str(tmp_path / "refused"), rollback, timeout=900)
    assert r.returncode == 2
    assert "not a run against a build made with -DCW_MUTANT_REACH=ON" in r.stderr
