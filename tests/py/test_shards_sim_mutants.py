"""Sharded simulations and mutant matrices, merged.

A simulation of seed 7 split into two seed ranges merges into the runs, the
verdicts and the statistics of the same simulation run whole.  A mutant
matrix of two mutants split over two shards (each builds and runs only its
own mutant, and half of the baseline) merges into one matrix where both are
killed and the whole baseline passed.  A mutant that survives gets its
failure bundle.  The scenario suite's shards are in test_shards.py.
"""
# needs: pg net
import json
import os
import shutil
import xml.etree.ElementTree as ET

from cwtest import SOURCE_DIR, crashwindow, essence, load_result, pg_args


def test_sim_shards_merge_into_the_whole_simulation(tmp_path, pg_cluster):
    seed, runs = 7, 4
    dirs = []
    for k in (1, 2):
        out = tmp_path / f"s{k}"
        r = crashwindow("sim", "--seed", seed, "--runs", runs, "--shard", f"{k}/2", "--pg",
                        pg_cluster, "--out", out, "--junit", tmp_path / f"s{k}.xml", timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr
        first, last = (1, 2) if k == 1 else (3, 4)
        assert f"(shard {k}/2: runs {first} to {last})" in r.stdout
        res = load_result(out)
        assert res["shard"] == {"index": k, "count": 2, "seed": seed, "runs": runs,
                                "first": first, "last": last}
        assert [s["name"] for s in res["scenarios"]] == [
            f"sim-{seed}-{i}" for i in range(first, last + 1)]
        dirs.append(out)
    whole = tmp_path / "whole"
    r = crashwindow("sim", "--seed", seed, "--runs", runs, "--pg", pg_cluster, "--out", whole,
                    timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr

    out = tmp_path / "merged"
    r = crashwindow("merge", dirs[1], dirs[0], "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"2 shards of a sim" in r.stdout and f"{runs} runs, 0 failed" in r.stdout
    merged, single = load_result(out), load_result(whole)
    assert merged["kind"] == "sim" and merged["verdict"] == single["verdict"] == "pass"
    assert ([essence(s, checks=False) for s in merged["scenarios"]]
            == [essence(s, checks=False) for s in single["scenarios"]])
    for key in ("runs", "failures", "invariant_checks"):
        assert merged["simulator"][key] == single["simulator"][key], key
    assert merged["simulator"]["seed"] == seed and merged["complete"] is True
    for key in ("scenarios", "passed", "invariants_checked"):
        assert merged["totals"][key] == single["totals"][key], key
    cases = ET.parse(out / "junit.xml").findall(".//testcase")
    assert [c.get("name") for c in cases] == [f"sim-{seed}-{i}" for i in range(1, runs + 1)]
    assert (out / "report.html").stat().st_size > 0

    # Shards of another seed, or of another run count, do not merge.
    broken = tmp_path / "other-seed"
    shutil.copytree(dirs[1], broken)
    res = load_result(broken)
    res["shard"]["seed"] = 8
    (broken / "result.json").write_text(json.dumps(res), encoding="utf-8")
    r = crashwindow("merge", dirs[0], broken, "--out", tmp_path / "no")
    assert r.returncode == 2 and f"shard 2/2 ({broken}) ran different seeds" in r.stderr
    r = crashwindow("merge", dirs[0], "--out", tmp_path / "no")
    assert r.returncode == 2 and f"shard 2/2 is missing: its runs {seed}:3 to {seed}:4" in r.stderr
    # A run twice, or a run of another shard's range: overlap.
    dup = tmp_path / "dup"
    shutil.copytree(dirs[0], dup)
    res = load_result(dup)
    res["scenarios"].append(dict(res["scenarios"][0]))
    (dup / "result.json").write_text(json.dumps(res), encoding="utf-8")
    r = crashwindow("merge", dup, dirs[1], "--out", tmp_path / "no")
    assert r.returncode == 2 and f"shard 1/2 ({dup}): its result.json holds sim-{seed}-1 twice" \
        in r.stderr
    res["scenarios"][-1]["name"] = f"sim-{seed}-3"
    (dup / "result.json").write_text(json.dumps(res), encoding="utf-8")
    r = crashwindow("merge", dup, dirs[1], "--out", tmp_path / "no")
    assert r.returncode == 2 and f"holds sim-{seed}-3, which is not one of its runs " \
        f"({seed}:1 to {seed}:2)" in r.stderr
    assert not (tmp_path / "no").exists()


# Mutants no other test file builds: ctest runs test files side by side, and
# two builds of one mutant tree at once would trip over each other.
MUTANTS = ("no_dead_letter_limit", "blind_version_apply")
# The scenarios aimed at them, two quick others, and the two the fake broker
# skips: the matrix's sharding does not depend on how many there are (the
# whole matrix runs in CI).
MATRIX = ["01-command-rollback", "08-poison-message", "10-per-aggregate-order",
          "12-ambiguous-commit", "37-relay-broker-partition",
          "43-wire-relay-killed-before-confirm"]


def test_mutant_matrix_shards_merge_into_one_matrix(tmp_path, pg_cluster):
    only = [a for m in MUTANTS for a in ("--only", m)]
    only += [os.path.join(SOURCE_DIR, "scenarios", n + ".json") for n in MATRIX]
    dirs = []
    for k in (1, 2):
        out = tmp_path / f"m{k}"
        r = crashwindow("mutants", *only, "--shard", f"{k}/2", *pg_args(pg_cluster), "--out", out,
                        timeout=900)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr
        assert "1/1 mutants killed" in r.stdout
        res = load_result(out)
        # Round robin over the chosen mutants, in the matrix's order.
        assert [m["name"] for m in res["mutants"]] == [MUTANTS[k - 1]]
        assert res["shard"]["mutants"] == list(MUTANTS)
        dirs.append(out)
    scenarios = MATRIX

    out = tmp_path / "merged"
    r = crashwindow("merge", *dirs, "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "baseline pass, 2/2 mutants killed" in r.stdout
    merged = load_result(out)
    assert merged["kind"] == "mutants" and merged["verdict"] == "pass"
    assert merged["baseline_verdict"] == "pass"
    # What the fake broker cannot take (a kernel partition of a broker
    # link, a window at an AMQP frame) is skipped with its reason, not run
    # and not dropped.
    skipped = {s["name"]: s["reason"] for s in merged.get("skipped", [])}
    assert set(skipped) == {"37-relay-broker-partition",
                            "43-wire-relay-killed-before-confirm"}, skipped
    assert all("needs RabbitMQ" in why for why in skipped.values()), skipped
    assert [s["name"] for s in merged["scenarios"]] == [s for s in scenarios if s not in skipped]
    assert all(s["verdict"] == "pass" for s in merged["scenarios"])
    assert [m["name"] for m in merged["mutants"]] == list(MUTANTS)
    assert all(m["killed"] for m in merged["mutants"])
    for m in merged["mutants"]:
        assert os.path.isdir(out / m["dir"]), m["dir"]
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot()}
    assert suites["crashwindow.mutants"].get("tests") == "2"
    assert suites["crashwindow.mutants"].get("failures") == "0"
    assert suites["crashwindow.mutants.baseline"].get("tests") == str(len(scenarios) - len(skipped))
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "2 of 2 caught" in html

    # A missing mutant shard is named with its baseline scenarios and mutant.
    r = crashwindow("merge", dirs[0], "--out", tmp_path / "no")
    assert r.returncode == 2
    assert f"shard 2/2 is missing: its scenarios" in r.stderr
    assert f"mutants {MUTANTS[1]}" in r.stderr

    # A survivor fails the merge and gets a bundle with its runs.
    surv = tmp_path / "survivor"
    shutil.copytree(dirs[1], surv)
    res = load_result(surv)
    res["mutants"][0]["killed"] = False
    res["verdict"] = "fail"
    (surv / "result.json").write_text(json.dumps(res), encoding="utf-8")
    out2 = tmp_path / "merged2"
    r = crashwindow("merge", dirs[0], surv, "--out", out2)
    assert r.returncode == 1, r.stdout + r.stderr
    b = out2 / "bundles" / f"mutant-{MUTANTS[1]}"
    summary = (b / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith(f"# mutant {MUTANTS[1]}: SURVIVED")
    # The quick form met its aimed scenario first, and stopped at that kill.
    assert ("no scenario it met failed an invariant or an expectation: "
            "10-per-aggregate-order passed" in summary), summary
    assert f"mutants --only {MUTANTS[1]}" in (b / "replay.sh").read_text(encoding="utf-8")
    assert (b / "logs" / "10-per-aggregate-order" / "timeline.jsonl").stat().st_size > 0
    (case,) = [c for c in ET.parse(out2 / "junit.xml").findall(".//testcase")
               if c.get("name") == MUTANTS[1]]
    assert case.find("failure").get("type") == "survived"

    # More shares than scenarios (one scenario, one share per mutant): the
    # second share runs no baseline scenario, only its mutant, which the
    # scenario meant for it kills.
    aimed = os.path.join(SOURCE_DIR, "scenarios", "10-per-aggregate-order.json")
    out3 = tmp_path / "one-scenario-share-2"
    r = crashwindow("mutants", *[a for m in MUTANTS for a in ("--only", m)], aimed,
                    "--shard", "2/2", *pg_args(pg_cluster), "--out", out3, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert "0 scenarios (shard 2/2)" in r.stdout and "1/1 mutants killed" in r.stdout
    res = load_result(out3)
    assert res["scenarios"] == [] and res["shard"]["plan"] == [1]
    assert [(m["name"], m["killed"]) for m in res["mutants"]] == [(MUTANTS[1], True)]
