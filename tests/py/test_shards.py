"""Sharded runs and `crashwindow merge`, end to end on the real scenarios.

The flow CI runs: `crashwindow run FILES --shard K/3` three times, each an
ordinary run with its own throwaway cluster, then `crashwindow merge` of the
three run directories.  The merged verdict, counts and scenarios must equal
those of one unsharded run of the same files.  The files are a fixed share
of the suite (the whole of it runs in test_scenarios and again in CI): what
a shard does with a scenario does not depend on which one it is, and two
that the fake broker skips are among them.  Then every kind of bad
input, each on copies of those real shard directories: a clear error naming
the shard and the problem, exit status 2, and nothing merged (the output
directory does not exist afterwards, and no half-built one is left beside
it).  Last, a failing scenario split over two shards: its failure bundle,
its JUnit failure and the merged FAIL.
"""
# needs: pg net
import json
import os
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET

import pytest

from cwtest import (SHARD_ENV, SOURCE_DIR, binary, crashwindow, essence, load_result, scenario,
                    wait_for)

N = 3


def scenario_names():
    return sorted(f[:-5] for f in os.listdir(os.path.join(SOURCE_DIR, "scenarios"))
                  if f.endswith(".json"))


# What the fake broker cannot take (a kernel partition of a broker link, a
# window at an AMQP frame):
# a shard that owns it skips it, with its reason.
FAKE_SKIPPED = {"37-relay-broker-partition", "43-wire-relay-killed-before-confirm"}


# The scenarios the sharded runs share out: quick ones of every kind of
# fault, and the two the fake broker skips.
SHARED = ["01-command-rollback", "02-crash-after-commit", "03-two-relays",
          "05-concurrent-duplicate", "12-ambiguous-commit", "23-parked-gap-applied",
          "29-ack-lost", "37-relay-broker-partition", "38-idle-relay-session-terminated",
          "42-wire-crash-after-commit", "43-wire-relay-killed-before-confirm"]


def shared_files():
    return [os.path.join(SOURCE_DIR, "scenarios", n + ".json") for n in SHARED]


def skipped_of(res):
    return {s["name"] for s in res.get("skipped", [])}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three real shards and one unsharded run of the shared scenarios."""
    root = tmp_path_factory.mktemp("shards")
    shards = []
    for k in range(1, N + 1):
        out = root / f"shard-{k}"
        r = crashwindow("run", *shared_files(), "--brief", "--shard", f"{k}/{N}", "--out", out,
                        "--junit", root / f"shard-{k}.xml", timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr
        assert f"(shard {k}/{N})" in r.stdout
        shards.append(out)
    single = root / "single"
    r = crashwindow("run", *shared_files(), "--brief", "--out", single, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    return {"root": root, "shards": shards, "single": single}


def test_each_shard_runs_its_share_and_no_more(runs):
    names = SHARED
    seen = []
    for k, d in enumerate(runs["shards"], start=1):
        res = load_result(d)
        assert res["shard"]["index"] == k and res["shard"]["count"] == N
        assert res["shard"]["work"] == names
        mine = [s["name"] for s in res["scenarios"]]
        share = [n for i, n in enumerate(names) if i % N == k - 1]
        assert skipped_of(res) == FAKE_SKIPPED & set(share)
        assert mine == [n for n in share if n not in FAKE_SKIPPED]
        seen += mine + sorted(skipped_of(res))
        # The shard's JUnit file: one test case per scenario it ran.
        cases = ET.parse(runs["root"] / f"shard-{k}.xml").findall(".//testcase")
        assert [c.get("name") for c in cases] == mine
        assert all(c.find("failure") is None for c in cases)
    assert sorted(seen) == names
    # The digest of the scenario files is the same in every shard.
    assert len({load_result(d)["shard"]["digest"] for d in runs["shards"]}) == 1
    # An unsharded run says nothing about shards.
    assert "shard" not in load_result(runs["single"])


def test_merge_of_three_shards_equals_one_run(runs, tmp_path):
    out = tmp_path / "merged"
    # Given in another order: the merge orders by the work, not the command line.
    r = crashwindow("merge", *reversed(runs["shards"]), "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"PASS: {N} shards of a run" in r.stdout
    merged, single = load_result(out), load_result(runs["single"])
    assert merged["verdict"] == single["verdict"] == "pass"
    assert merged["kind"] == "run" and merged["commit"] == single["commit"]
    for key in ("scenarios", "passed", "invariants_checked"):
        assert merged["totals"][key] == single["totals"][key], key
    assert [essence(s) for s in merged["scenarios"]] == [essence(s) for s in single["scenarios"]]
    # Totals are the sums of the shards'.
    for key in merged["totals"]:
        assert merged["totals"][key] == sum(load_result(d)["totals"][key] for d in runs["shards"])
    assert merged["merged"]["count"] == N
    assert [s["index"] for s in merged["merged"]["shards"]] == [1, 2, 3]
    assert merged["duration_ms"] == max(load_result(d)["duration_ms"] for d in runs["shards"])

    # Every scenario's files came along, where its "dir" says.
    for sc in merged["scenarios"]:
        assert sc["dir"] == f"shards/{sc['shard']}/{sc['name']}"
        assert os.path.getsize(out / sc["dir"] / "timeline.jsonl") > 0
    # One report (every scenario with its timeline), one JUnit file, no bundles.
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count('<section class="scenario pass"') == len(SHARED) - len(FAKE_SKIPPED)
    assert "timeline unavailable" not in html and "no usable scenario directory" not in html
    assert "<dt>shards</dt><dd>3 merged: 1 on " in html
    cases = ET.parse(out / "junit.xml").findall(".//testcase")
    assert [c.get("name") for c in cases] == [s["name"] for s in single["scenarios"]]
    assert not (out / "bundles").exists()
    # The merged directory is an ordinary run directory for `crashwindow report`.
    r = crashwindow("report", out, "-o", tmp_path / "again.html")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("arg, message", [
    ("0/3", "--shard 0/3: K counts from 1; the shards of 3 are 1/3 to 3/3"),
    ("4/3", "--shard 4/3: K is past N"),
    ("a/b", "--shard 'a/b' is not K/N"),
    ("3/0", "--shard 3/0: N must be from 1"),
    ("2", "--shard '2' is not K/N"),
    ("N+1", "--shard {n1}/{n1}: only {n} scenarios to share, so at most {n} shards"),
])
def test_bad_shard_arguments(arg, message, tmp_path):
    if arg == "N+1":
        n = len(scenario_names())
        arg = f"{n + 1}/{n + 1}"
        message = message.format(n=n, n1=n + 1)
    for cmd in (["run", "--all"], ["mutants"], ["sim", "--seed", "1", "--runs", "20"]):
        if message.startswith(f"--shard {arg}: only") and cmd[0] != "run":
            continue
        out = tmp_path / cmd[0]
        r = crashwindow(*cmd, "--shard", arg, "--out", out)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert message in r.stderr, (cmd, r.stderr)
        assert not out.exists() or not os.listdir(out)


def test_shard_from_the_environment(tmp_path):
    """--shard env: a Kubernetes Indexed Job counts from 0, GitLab from 1."""
    names = scenario_names()
    want = [n for i, n in enumerate(names) if i % 3 == 0]
    for env in ({"JOB_COMPLETION_INDEX": "0", "CW_SHARD_COUNT": "3"},
                {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "3"},
                {"CW_SHARD": "1/3"}):
        r = crashwindow("run", "--all", "--shard", "env", "--dry-run", env=env)
        assert r.returncode == 0, (env, r.stderr)
        shown = [line.split()[1].rstrip(":") for line in r.stdout.splitlines()
                 if line.startswith("scenario ")]
        assert shown == want, (env, r.stdout[:2000])
    for env, message in (
            ({}, "none of CW_SHARD, JOB_COMPLETION_INDEX"),
            ({"JOB_COMPLETION_INDEX": "3", "CW_SHARD_COUNT": "3"}, "K is past N"),
            ({"JOB_COMPLETION_INDEX": "1"}, "CW_SHARD_COUNT is not"),
            ({"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "3"}, "K counts from 1"),
            ({"CW_SHARD": "x/3"}, "CW_SHARD 'x/3' is not K/N")):
        r = crashwindow("run", "--all", "--shard", "env", "--dry-run", env=env)
        assert r.returncode == 2 and message in r.stderr, (env, r.stderr)


def lpt(durations, n):
    """The weighted split, computed here independently: longest first, each
    to the least loaded share (ties: the lower index, the lower share)."""
    order = sorted(range(len(durations)), key=lambda i: (-durations[i], i))
    load, plan = [0.0] * n, [0] * len(durations)
    for i in order:
        to = min(range(n), key=lambda k: (load[k], k))
        load[to] += durations[i]
        plan[i] = to + 1
    return plan


def test_weighted_split_follows_an_earlier_runs_durations(runs, copies, tmp_path):
    single = load_result(runs["single"])
    # A scenario the earlier run did not run (it skipped it) weighs the
    # mean of the others.
    dur = {s["name"]: s["duration_ms"] for s in single["scenarios"]}
    mean = sum(dur.values()) / len(dur)
    names = SHARED
    plan = lpt([dur.get(n, mean) for n in names], 2)
    got = {}
    for k in (1, 2):
        r = crashwindow("run", *shared_files(), "--shard", f"{k}/2",
                        "--shard-weights", runs["single"],
                        "--dry-run")
        assert r.returncode == 0, r.stderr
        got[k] = [line.split()[1].rstrip(":") for line in r.stdout.splitlines()
                  if line.startswith("scenario ")]
        assert got[k] == [n for n, p in zip(names, plan) if p == k]
    assert sorted(got[1] + got[2]) == sorted(names)
    r = crashwindow("run", "--all", "--shard-weights", runs["single"], "--dry-run")
    assert r.returncode == 2 and "--shard-weights weighs a --shard K/N split" in r.stderr
    r = crashwindow("run", "--all", "--shard", "1/2", "--shard-weights", tmp_path / "none",
                    "--dry-run")
    assert r.returncode == 2 and "--shard-weights:" in r.stderr and "missing" in r.stderr
    # Shards split by different plans do not merge.
    s1, s2, s3 = copies
    res = load_result(s2)
    res["shard"]["plan"] = [1] * len(names)
    (s2 / "result.json").write_text(json.dumps(res), encoding="utf-8")
    refused(tmp_path, copies, f"shard 2/3 ({s2}) split the scenarios differently")


def test_sim_shard_needs_a_seed():
    r = crashwindow("sim", "--runs", "4", "--shard", "1/2", "--dry-run")
    assert r.returncode == 2 and "--shard needs --seed" in r.stderr
    r = crashwindow("sim", "--replay", "7:1", "--shard", "1/2")
    assert r.returncode == 2 and "--shard needs --seed" in r.stderr
    r = crashwindow("sim", "--seed", "7", "--runs", "3", "--shard", "4/3")
    assert r.returncode == 2 and "K is past N" in r.stderr


# ---- --jobs N: the shards side by side on this machine, then their merge ----

JOB_SCENARIOS = ["01-command-rollback", "02-crash-after-commit", "05-concurrent-duplicate"]


def test_jobs_run_shards_side_by_side_and_merge_like_one_run(runs, tmp_path):
    out = tmp_path / "jobs"
    files = [os.path.join(SOURCE_DIR, "scenarios", n + ".json") for n in JOB_SCENARIOS]
    # Three shares through two slots: the third starts when a slot frees.
    r = crashwindow("run", *files, "--brief", "--jobs", "2", "--shares", "3", "--out", out,
                    "--junit", tmp_path / "jobs.xml", "--report", tmp_path / "jobs.html",
                    timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    for k in (1, 2, 3):
        assert f"shard {k}/3 ended with exit status 0" in r.stdout
    assert "3 of 3 ended" in r.stdout
    merged = load_result(out)
    assert merged["kind"] == "run" and merged["verdict"] == "pass"
    assert merged["merged"]["count"] == 3
    assert [(s["name"], s["shard"]) for s in merged["scenarios"]] == [
        ("01-command-rollback", 1), ("02-crash-after-commit", 2),
        ("05-concurrent-duplicate", 3)]
    # The same verdicts as the same scenarios in one ordinary run.
    single = {s["name"]: s for s in load_result(runs["single"])["scenarios"]}
    assert [essence(s) for s in merged["scenarios"]] == [essence(single[n])
                                                         for n in JOB_SCENARIOS]
    # Each child's console beside its share; the children's directories gone.
    for k in (1, 2, 3):
        log = (out / "shards" / str(k) / "console.log").read_text(encoding="utf-8")
        assert f"(shard {k}/3)" in log
    assert not (tmp_path / "jobs.jobs").exists()
    cases = ET.parse(tmp_path / "jobs.xml").findall(".//testcase")
    assert [c.get("name") for c in cases] == JOB_SCENARIOS
    assert (tmp_path / "jobs.html").read_text(encoding="utf-8") == \
        (out / "report.html").read_text(encoding="utf-8")


def test_jobs_beyond_the_scenarios_run_one_share_each(tmp_path):
    """--jobs 2 on one scenario file: one share, not a second with nothing
    to run (which a child would refuse).  The shards record the commit the
    parent pinned at its start (CW_SOURCE_COMMIT, here given from outside),
    not HEAD as each finds it: a commit made while a long matrix runs must
    not keep its shards from merging."""
    out = tmp_path / "one"
    pinned = "ab" * 20
    r = crashwindow("run", os.path.join(SOURCE_DIR, "scenarios", "01-command-rollback.json"),
                    "--brief", "--jobs", "2", "--out", out, timeout=300,
                    env={"CW_SOURCE_COMMIT": pinned})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "shard 1/1 ended with exit status 0" in r.stdout
    merged = load_result(out)
    assert merged["merged"]["count"] == 1
    assert [s["name"] for s in merged["scenarios"]] == ["01-command-rollback"]
    assert merged["commit"] == pinned


@pytest.mark.parametrize("args, message", [
    (["run", "--all", "--jobs", "0"], "--jobs takes a number from 1 to 16, not '0'"),
    (["run", "--all", "--jobs", "2x"], "--jobs takes a number from 1 to 16, not '2x'"),
    (["run", "--all", "--jobs"], "--jobs needs a number"),
    (["run", "--all", "--jobs", "2", "--shares", "300"],
     "--shares takes a number from 1 to 256, not '300'"),
    (["run", "--all", "--jobs", "2", "--shard", "1/2"], "--shard cannot go with --jobs"),
    (["mutants", "--jobs", "2", "--pg", "host=/nowhere"],
     "--pg cannot go with --jobs (each job starts a cluster of its own"),
    (["sim", "--seed", "3", "--jobs", "2", "--replay", "3:1"], "--replay cannot go with --jobs"),
    (["run", "--all", "--jobs", "2", "--keep"], "--keep cannot go with --jobs"),
])
def test_jobs_refuses_what_cannot_split(args, message, tmp_path):
    out = tmp_path / "out"
    r = crashwindow(args[0], "--out", out, *args[1:])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert not out.exists() and not (tmp_path / "out.jobs").exists()


def test_jobs_child_that_cannot_run_stops_the_merge(tmp_path):
    """A child's own usage error: its console is shown, nothing merged."""
    out = tmp_path / "out"
    r = crashwindow("run", "--all", "--jobs", "2", "--repeat", "0", "--out", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "shard 1/2 did not finish (exit status 2 or more); nothing merged" in r.stderr
    assert "--repeat takes a number from 1 to 10000" in r.stderr
    assert not out.exists()
    assert (tmp_path / "out.jobs" / "1.log").exists()
    r = crashwindow("run", "--all", "--jobs", "2", "--out", out)
    assert r.returncode == 2 and "out.jobs exists" in r.stderr


def test_jobs_stopped_by_a_signal_merge_nothing(tmp_path):
    """SIGTERM to the parent reaches every child; nothing is merged."""
    out = tmp_path / "out"
    full = {k: v for k, v in os.environ.items() if k not in SHARD_ENV}
    p = subprocess.Popen([binary("crashwindow"), "run", "--all", "--brief", "--jobs", "2",
                          "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=full)
    logs = [tmp_path / "out.jobs" / f"{k}.log" for k in (1, 2)]
    # Both children have begun their first scenario.
    wait_for(lambda: p.poll() is not None or all(
        lg.exists() and "[1/" in lg.read_text(encoding="utf-8") for lg in logs),
        60, "both children to begin their first scenario", interval=0.1)
    assert p.poll() is None, "the parent exited before its children started"
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 2, (stdout, stderr)
    assert "stopped by signal 15; nothing merged" in stderr
    assert not out.exists()
    assert all(lg.exists() for lg in logs)


# ---- bad input to merge: each on copies of the real shards -----------------

@pytest.fixture
def copies(runs, tmp_path):
    """Fresh copies of the three real shard directories, to break."""
    out = []
    for k, d in enumerate(runs["shards"], start=1):
        dst = tmp_path / f"s{k}"
        shutil.copytree(d, dst)
        out.append(dst)
    return out


def edit(d, change):
    res = load_result(d)
    change(res)
    (d / "result.json").write_text(json.dumps(res, indent=1), encoding="utf-8")


def refused(tmp_path, dirs, *needles):
    out = tmp_path / "merged"
    r = crashwindow("merge", *dirs, "--out", out)
    assert r.returncode == 2, r.stdout + r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert "nothing merged" in r.stderr
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if ".merging." in f]
    return r.stderr


def test_missing_shard_is_named_with_its_work(copies, tmp_path):
    s1, s2, s3 = copies
    work = [n for i, n in enumerate(SHARED) if i % N == 1]
    err = refused(tmp_path, [s1, s3], "shard 2/3 is missing: its scenarios")
    # the first eight by name, then how many more
    assert all(n in err for n in work[:8])
    if len(work) > 8:
        assert f"and {len(work) - 8} more" in err
    refused(tmp_path, [s2], "shard 1/3 is missing", "shard 3/3 is missing")
    # A shard directory whose result never arrived.
    (s2 / "result.json").unlink()
    refused(tmp_path, [s1, s2, s3], f"shard {s2}: {s2}/result.json: missing")
    shutil.rmtree(s2)
    refused(tmp_path, [s1, s2, s3], f"{s2}: no such directory")


def test_corrupt_or_truncated_result(copies, tmp_path):
    s1, s2, s3 = copies
    text = (s2 / "result.json").read_text(encoding="utf-8")
    (s2 / "result.json").write_text(text[: len(text) // 2], encoding="utf-8")
    refused(tmp_path, copies, f"shard {s2}: {s2}/result.json is not valid JSON",
            "the file is cut short")
    (s2 / "result.json").write_text(text.replace('"verdict"', '"verdict" "x"', 1),
                                    encoding="utf-8")
    refused(tmp_path, copies, f"{s2}/result.json is not valid JSON", "corrupt")
    (s2 / "result.json").write_text("", encoding="utf-8")
    refused(tmp_path, copies, f"{s2}/result.json is empty")
    (s2 / "result.json").write_text('{"tool": "other"}', encoding="utf-8")
    refused(tmp_path, copies, f"{s2}/result.json is not a crashwindow result")
    (s2 / "result.json").write_text(text, encoding="utf-8")
    edit(s2, lambda r: r.pop("shard"))
    refused(tmp_path, copies, f"{s2}: not a shard", "run it with --shard K/N")
    (s2 / "result.json").write_text(text, encoding="utf-8")
    edit(s2, lambda r: r["shard"].update(index=5))
    refused(tmp_path, copies, f"{s2}: its result.json has a bad \"shard\"")


def test_mismatched_shards(copies, tmp_path):
    s1, s2, s3 = copies
    text = (s3 / "result.json").read_text(encoding="utf-8")
    edit(s3, lambda r: r.update(commit="0" * 40))
    refused(tmp_path, copies, f"shard 3/3 ({s3}) ran commit {'0' * 40}",
            "shards of different commits do not merge")
    (s3 / "result.json").write_text(text, encoding="utf-8")
    edit(s3, lambda r: r["shard"]["work"].append("99-not-in-the-others"))
    refused(tmp_path, copies, f"shard 3/3 ({s3}) split different scenario sets",
            "99-not-in-the-others only in the second")
    (s3 / "result.json").write_text(text, encoding="utf-8")
    edit(s3, lambda r: r["shard"].update(digest="0123456789abcdef"))
    refused(tmp_path, copies, "same names but different contents")
    (s3 / "result.json").write_text(text, encoding="utf-8")
    edit(s3, lambda r: r["shard"].update(count=4))
    refused(tmp_path, copies, f"shard 3/4 ({s3}) are shards of different splits")
    (s3 / "result.json").write_text(text, encoding="utf-8")
    edit(s3, lambda r: r.update(kind="sim"))
    refused(tmp_path, copies, f"shard 3/3 ({s3}) is a sim result but")


def test_overlapping_shards(copies, runs, tmp_path):
    s1, s2, s3 = copies
    refused(tmp_path, [s1, s2, runs["shards"][1], s3],
            "shards overlap", f"{s2}", "are both shard 2/3")
    refused(tmp_path, [s1, s2, s3, s2], f"shard 2/3 ({s2}) is given twice")
    # A shard that holds a scenario of another's share.
    other = load_result(s1)["scenarios"][0]
    edit(s2, lambda r: r["scenarios"].append(other))
    shutil.copytree(s1 / other["dir"], s2 / other["dir"])
    refused(tmp_path, copies, f"shard 2/3 ({s2}): its result.json holds scenario "
            f"{other['name']} 1 times where its share has it 0 times: it overlaps")


def test_cut_short_or_incomplete_shard(copies, tmp_path):
    s1, s2, s3 = copies
    text = (s2 / "result.json").read_text(encoding="utf-8")
    gone = load_result(s2)["scenarios"][-1]["name"]
    edit(s2, lambda r: r["scenarios"].pop())
    refused(tmp_path, copies, f"shard 2/3 ({s2}): its result.json lacks scenario {gone}",
            "cut short")
    (s2 / "result.json").write_text(text, encoding="utf-8")
    first = load_result(s2)["scenarios"][0]
    shutil.rmtree(s2 / first["dir"])
    refused(tmp_path, copies, f"shard 2/3 ({s2}): the files of scenario {first['name']}",
            "are missing")


def test_output_must_be_new_and_apart(copies, tmp_path):
    s1, s2, s3 = copies
    out = tmp_path / "taken"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    r = crashwindow("merge", *copies, "--out", out)
    assert r.returncode == 2 and "exists and is not an empty directory" in r.stderr
    assert os.listdir(out) == ["old.txt"]
    r = crashwindow("merge", *copies, "--out", s1 / "merged")
    assert r.returncode == 2 and "lie one inside the other" in r.stderr
    assert not (s1 / "merged").exists()
    r = crashwindow("merge", *copies)
    assert r.returncode == 2 and "--out DIR" in r.stderr
    # An existing empty directory is fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    r = crashwindow("merge", *copies, "--out", empty)
    assert r.returncode == 0, r.stderr
    assert (empty / "result.json").exists()


# ---- a failure, split over shards ------------------------------------------

LEDGER_COPY = (
    "INSERT INTO ledger_entries (consumer_name, message_id, payment_id, event_type,"
    " aggregate_version, amount, currency)"
    " SELECT consumer_name, message_id, payment_id, event_type, aggregate_version, amount,"
    " currency FROM ledger_entries ORDER BY id LIMIT 1")


def double_effect(tmp_path):
    """A scenario the checker must fail: a second ledger entry for one event."""
    steps = [
        {"do": "payments", "count": 2, "key_prefix": "t-dbl"},
        {"do": "wait", "until": "consumed", "count": 2, "timeout_ms": 10000},
        {"do": "sql", "sql": LEDGER_COPY, "expect_rows": 1},
    ]
    return scenario(tmp_path, "double-effect", steps, ("effect_once", "nothing_lost"),
                    title="a copied ledger row", processes={
                        "api": {"kind": "api"},
                        "relay-1": {"kind": "relay", "args": {"lease-ms": 1500, "idle-ms": 100}},
                        "accounting": {"kind": "consumer", "args": {"name": "accounting"}},
                    })


def test_a_failure_gets_a_bundle_and_fails_the_merge(tmp_path, pg_cluster):
    bad = double_effect(tmp_path)
    files = [os.path.join(SOURCE_DIR, "scenarios", "01-command-rollback.json"), bad,
             os.path.join(SOURCE_DIR, "scenarios", "12-ambiguous-commit.json")]
    dirs = []
    for k in (1, 2):
        out = tmp_path / f"s{k}"
        r = crashwindow("run", *files, "--pg", pg_cluster, "--brief", "--shard", f"{k}/2",
                        "--out", out, "--junit", tmp_path / f"s{k}.xml", timeout=600)
        assert r.returncode == (1 if k == 2 else 0), r.stdout + r.stderr
        dirs.append(out)
    # Shard 2 holds the failure: its bundle and its JUnit failure.
    assert "bundles: " in r.stdout and "(1 failure," in r.stdout
    (case,) = ET.parse(tmp_path / "s2.xml").findall(".//testcase")
    fail = case.find("failure")
    res = load_result(dirs[1])
    witness = next(i for i in res["scenarios"][0]["invariants"]
                   if i["name"] == "effect_once")["witnesses"][0]
    assert fail.get("message") == f"effect_once: {witness}"
    assert fail.get("type") == "effect_once"
    assert not (dirs[0] / "bundles").exists()

    out = tmp_path / "merged"
    r = crashwindow("merge", *dirs, "--out", out, "--junit", tmp_path / "all.xml")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL: 2 shards of a run" in r.stdout and "2/3 scenarios passed" in r.stdout
    merged = load_result(out)
    assert merged["verdict"] == "fail"
    assert [s["name"] for s in merged["scenarios"]] == [
        "01-command-rollback", "double-effect", "12-ambiguous-commit"]
    suites = ET.parse(tmp_path / "all.xml").getroot()
    assert suites.get("tests") == "3" and suites.get("failures") == "1"

    b = out / "bundles" / "double-effect"
    summary = (b / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# double-effect: FAIL")
    assert f"**First witness:** `effect_once: {witness}`" in summary
    assert merged["commit"] in summary and "| merged | from 2 shards |" in summary
    assert json.loads((b / "scenario.json").read_text())["name"] == "double-effect"
    assert json.loads((b / "verdict.json").read_text())["verdict"] == "fail"
    for f in ("timeline.jsonl", "accounting.events.jsonl", "broker.events.jsonl",
              "runner.events.jsonl", "metrics.jsonl"):
        assert os.path.getsize(b / "logs" / f) > 0, f
    script = (b / "replay.sh").read_text(encoding="utf-8")
    assert os.access(b / "replay.sh", os.X_OK)
    assert f"git checkout {merged['commit']}" in script
    assert 'exec "$cw" run "$here/scenario.json" "$@"' in script
    # The replay command really replays it: the same invariant fails again.
    again = tmp_path / "again"
    r = subprocess.run(["sh", str(b / "replay.sh"), "--pg", pg_cluster, "--out", str(again),
                        "--brief"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CW_BUILD": os.path.dirname(
                           os.path.dirname(binary("crashwindow")))})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "invariant effect_once failed" in r.stdout


def test_a_bundle_names_only_what_failed(copies, tmp_path):
    """A target's run marks what its mapping cannot show "not examined", and a
    hazard's invariant that caught its hazard "hazard caught": neither failed.
    When only an expectation failed, the bundle's first witness, its list and
    the JUnit failure name that expectation alone."""
    s1, s2, s3 = copies
    name = {}

    def fail_an_expectation(res):
        sc = res["scenarios"][0]
        name["it"] = sc["name"]
        sc["verdict"] = "fail"
        sc["invariants"][0]["verdict"] = "not examined"
        sc["invariants"][0]["witnesses"] = ["not examined: the mapping cannot show it"]
        sc["invariants"][1]["verdict"] = "hazard caught"
        sc["invariants"][1]["witnesses"] = ["explained by the hazard"]
        sc["expect"] = [{"check": "effects", "verdict": "fail",
                         "detail": "effects = 6 (want = 7)"}]
        res["verdict"] = "fail"

    edit(s1, fail_an_expectation)
    out = tmp_path / "merged"
    r = crashwindow("merge", s1, s2, s3, "--out", out, "--junit", tmp_path / "all.xml")
    assert r.returncode == 1, r.stdout + r.stderr
    summary = (out / "bundles" / name["it"] / "summary.md").read_text(encoding="utf-8")
    assert "**First witness:** `expectation effects: effects = 6 (want = 7)`" in summary
    failed = summary.split("## What failed")[1].split("## Replay")[0]
    assert failed.strip() == "- expectation `effects`: effects = 6 (want = 7)", failed
    case = next(c for c in ET.parse(tmp_path / "all.xml").findall(".//testcase")
                if c.get("name") == name["it"])
    text = case.find("failure").text
    assert "expectation effects failed" in text
    assert "invariant" not in text, text


def test_scenarios_a_shard_skipped_are_merged_with_their_reasons(copies, tmp_path):
    """A shard run against a real broker skips, with a reason, the scenarios of
    its share the broker cannot take: they count as its share's, and the
    merged run lists every shard's skips (not only the first shard's)."""
    s1, s2, s3 = copies
    gone = {}

    def skip_first(res):
        sc = res["scenarios"].pop(0)
        gone[sc["name"]] = sc
        res.setdefault("skipped", []).append({"name": sc["name"], "reason": "test: no switch"})

    edit(s2, skip_first)
    edit(s3, skip_first)
    out = tmp_path / "merged"
    r = crashwindow("merge", s1, s2, s3, "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    merged = load_result(out)
    ours = [x for x in merged["skipped"] if x["name"] not in FAKE_SKIPPED]
    assert sorted(x["name"] for x in ours) == sorted(gone)
    assert all(x["reason"] == "test: no switch" for x in ours)
    assert {x["name"] for x in merged["skipped"]} - set(gone) == FAKE_SKIPPED
    assert not set(gone) & {s["name"] for s in merged["scenarios"]}
