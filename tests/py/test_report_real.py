"""The HTML report built from real runs of the scenario runner.

One passing run (scenario 04: the relay crashes right after the broker
confirmed a message) and one run whose accounting consumer is a mutant
(inbox marker committed in its own transaction) that the harness must catch
(scenario 06).  The mutant consumer is built here, in its own build tree, with
-DCW_MUTANT=inbox_separate_tx; the other binaries come from the build under
test.  The reports are checked against the run's own files: result.json,
timeline.jsonl and the broker's event log.
"""
# needs: pg chromium
import json
import os
import re
import subprocess

import pytest

from cwtest import SOURCE_DIR, binary, crashwindow, load_result
from test_report import (by_id, chromium_dom, chromium_screenshot, dom_summary, has_class,
                         keep_screenshot, parse_strict, render, text_of)

MUTANT = "inbox_separate_tx"


def run_scenario(pg, name, out, bin_dir=None):
    args = ["run", os.path.join(SOURCE_DIR, "scenarios", name), "--pg", pg, "--out", out,
            "--brief"]
    if bin_dir is not None:
        args += ["--bin", bin_dir]
    return crashwindow(*args, timeout=600)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def scenario_files(run_dir, sc):
    d = os.path.join(run_dir, sc["dir"])
    return read_jsonl(os.path.join(d, "timeline.jsonl")), os.path.join(d, "broker.events.jsonl")


def titles_of(section):
    return "\n".join(text_of(el.find("title")) for el in section.iter()
                     if has_class(el, "mk") and el.find("title") is not None)


def early_events(section):
    """Events left out before the focused time axis (from the page's note)."""
    m = re.search(r"the (\d+) events of process start-up", text_of(section))
    return int(m.group(1)) if m else 0


@pytest.fixture(scope="module")
def mutant_bin(tmp_path_factory):
    """A --bin tree: the mutant accounting-consumer, every other binary from
    the build under test."""
    root = tmp_path_factory.mktemp("mutant")
    build = root / "build"
    subprocess.run(["cmake", "-S", SOURCE_DIR, "-B", str(build), f"-DCW_MUTANT={MUTANT}"],
                   check=True, capture_output=True, timeout=300)
    r = subprocess.run(["cmake", "--build", str(build), "--target", "accounting-consumer",
                        "-j2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    bindir = root / "bin"
    (bindir / "src").mkdir(parents=True)
    (bindir / "sim").mkdir()
    for name in ("payments-api", "outbox-relay", "outboxctl"):
        os.symlink(binary(name), bindir / "src" / name)
    os.symlink(build / "src" / "accounting-consumer", bindir / "src" / "accounting-consumer")
    os.symlink(binary("fakebroker"), bindir / "sim" / "fakebroker")
    return bindir


def test_report_of_a_passing_run(pg_cluster, tmp_path):
    run = tmp_path / "run"
    r = run_scenario(pg_cluster, "04-crash-after-publish.json", run)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = load_result(run)
    assert result["verdict"] == "pass"
    sc = result["scenarios"][0]

    out = tmp_path / "report.html"
    render(run, out)
    assert os.path.getsize(out) < 2 * 1024 * 1024
    root = parse_strict(out)
    banner = by_id(root, "verdict")
    assert has_class(banner, "pass") and text_of(banner).startswith("PASS")
    assert result["commit"] in text_of(root)
    rows = by_id(root, "summary").find("tbody").findall("tr")
    assert len(rows) == 1 and sc["name"] in text_of(rows[0])
    assert str(sc["counts"]["duplicates_absorbed"]) == text_of(rows[0].findall("td")[7])

    s0 = by_id(root, "s0")
    timelines = [el for el in s0.iter("svg") if has_class(el, "timeline")]
    assert len(timelines) == 1
    events, broker_log = scenario_files(run, sc)
    labels = {text_of(t) for t in timelines[0].iter("text") if has_class(t, "lanelabel")}
    assert labels == {e["proc"] for e in events}
    markers = [el for el in timelines[0].iter() if has_class(el, "mk")]
    assert len(markers) + early_events(s0) == len(events), "one marker per event"

    # each invariant states what it asserts: the checker's table, as
    # `crashwindow invariants` prints it, in result.json and in the report
    table = crashwindow("invariants", timeout=30)
    assert table.returncode == 0, table.stderr
    stated = {cells[1].strip("`"): cells[2] for cells in
              ([c.strip() for c in line.strip().strip("|").split("|")]
               for line in table.stdout.splitlines()) if len(cells) == 5 and cells[0].isdigit()}
    assert [i["name"] for i in sc["invariants"]] == list(stated)
    shown = {text_of(el) for el in s0.iter() if has_class(el, "asserts")}
    for inv in sc["invariants"]:
        assert inv["asserts"] == stated[inv["name"]], inv["name"]
        assert inv["asserts"] in shown, inv["name"]

    # the crash of scenario 04: its fault window, then the relay down until
    # the runner restarts it
    wins = [(el.get("class"), text_of(el)) for el in s0.iter("rect")
            if (el.get("class") or "").startswith("win-")]
    assert [t for c, t in wins if c == "win-fault"] == [
        next(t for c, t in wins if c == "win-fault" and "relay/after_publish (crash)" in t)]
    assert any(c == "win-down" and "killed" in t and " in relay-1:" in t for c, t in wins)

    # every message the broker stored can be traced in the hover titles
    titles = titles_of(timelines[0])
    stored = {e["message_id"] for e in read_jsonl(broker_log)
              if e.get("event") == "publish" and e.get("message_id")}
    assert len(stored) == sc["counts"]["outbox_rows"]
    assert all(mid in titles for mid in stored)
    assert len([el for el in s0.iter("svg") if has_class(el, "chart")]) == 8

    dom = dom_summary(chromium_dom(out, tmp_path / "profile"))
    assert dom.summary_rows == 1 and dom.timelines == {"s0": 1}
    png = tmp_path / "report-pass.png"
    took = chromium_screenshot(out, png, tmp_path / "profile")
    print(f"chromium screenshot of a passing run's report: {took:.2f} s")
    keep_screenshot(png, "report-pass.png")


def test_report_of_a_caught_mutant(pg_cluster, mutant_bin, tmp_path):
    run = tmp_path / "run"
    r = run_scenario(pg_cluster, "06-crash-before-ack.json", run, bin_dir=mutant_bin)
    assert r.returncode == 1, "the harness must fail on the mutant:\n" + r.stdout[-3000:]
    result = load_result(run)
    assert result["verdict"] == "fail"
    sc = result["scenarios"][0]
    broken = [i for i in sc["invariants"] if i["verdict"] == "fail"]
    assert broken, "the mutant must break an invariant"
    witness = broken[0]["witnesses"][0]

    out = tmp_path / "report.html"
    render(run, out)
    root = parse_strict(out)
    banner = by_id(root, "verdict")
    assert has_class(banner, "fail") and text_of(banner).startswith("FAIL")
    assert broken[0]["name"] in text_of(banner) and witness in text_of(banner)
    s0 = by_id(root, "s0")
    assert has_class(s0, "fail")
    # the first cell is the invariant's name, then a block saying what it asserts
    failing = {tr.find("td").text for tr in s0.iter("tr") if has_class(tr, "fail")}
    assert {i["name"] for i in broken} <= failing

    # the messages the witnesses name are drawn across lanes
    events, broker_log = scenario_files(run, sc)
    ids = {e.get("id") or e.get("message_id") for e in events} - {None}
    named = {m for m in ids for inv in broken for w in inv["witnesses"] if m in w}
    assert named, "the witnesses name messages of the timeline"
    wlines = [el for el in s0.iter("polyline") if has_class(el, "wline")]
    assert len(wlines) == min(len(named), 24)
    titles = titles_of(s0)
    assert all(m in titles for m in named)
    stored = {e["message_id"] for e in read_jsonl(broker_log)
              if e.get("event") == "publish" and e.get("message_id")}
    assert stored and all(mid in titles for mid in stored)

    dom = dom_summary(chromium_dom(out, tmp_path / "profile"))
    assert dom.summary_rows == 1 and dom.timelines == {"s0": 1}
    assert witness in dom.text
    png = tmp_path / "report-mutant.png"
    chromium_screenshot(out, png, tmp_path / "profile")
    keep_screenshot(png, "report-mutant.png")
