"""The HTML reliability report (`crashwindow report DIR -o FILE.html`).

Built from the hand-made run directory in data/report-run (two passing
scenarios, one failing with witnesses, a mutant matrix and simulator
statistics), from variations of it made in tmp_path, and rendered in Debian's
headless Chromium.  Every report is checked for strict well-formedness: it
must parse as XML, and as HTML every non-void element must be closed
explicitly.  Screenshots are kept under the pytest tmp dir and the last one is
copied to reports/.
"""
# needs: chromium
import html.parser
import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from cwtest import SOURCE_DIR, crashwindow

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "report-run")
PAYLOAD = "</script><img src=x onerror=alert(1)>"
CHROMIUM = "/usr/bin/chromium"
WITNESS = "was applied twice by accounting: ledger rows 20 and 21"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}


# ---- helpers shared with test_report_real.py ---------------------------------

def render(run_dir, out, check=True):
    """Runs `crashwindow report run_dir -o out`; returns the CompletedProcess."""
    r = crashwindow("report", run_dir, "-o", out, timeout=120)
    if check:
        assert r.returncode == 0, f"report failed ({r.returncode}): {r.stderr}"
        assert os.path.getsize(out) > 0
    return r


def strip_ns(root):
    for el in root.iter():
        if isinstance(el.tag, str) and "}" in el.tag:
            el.tag = el.tag.split("}", 1)[1]
    return root


class BalanceChecker(html.parser.HTMLParser):
    """HTML-side strictness: every element closed by its own end tag, in order;
    a self-closing tag is only accepted for void elements and inside SVG (where
    the HTML parser honours it)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.errors = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID and "svg" not in self.stack:
            self.errors.append(f"<{tag}/> outside SVG is not closed in HTML")

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> does not close {self.stack[-1:]}")
            return
        self.stack.pop()


def parse_strict(path):
    """Parses the report as XML (after the HTML5 doctype line) and checks the
    tag balance as HTML; returns the XML root with namespaces stripped."""
    with open(path, encoding="utf-8") as f:  # strict UTF-8 decoding too
        text = f.read()
    doctype = "<!DOCTYPE html>\n"
    assert text.startswith(doctype), "report must start with the HTML5 doctype"
    root = strip_ns(ET.fromstring(text[len(doctype):]))
    checker = BalanceChecker()
    checker.feed(text)
    checker.close()
    assert checker.errors == [], checker.errors[:5]
    assert checker.stack == [], f"unclosed elements: {checker.stack}"
    # self-contained: nothing is fetched from anywhere
    for el in root.iter():
        for attr in ("src", "href"):
            v = el.get(attr)
            assert v is None or v.startswith("#"), f"external reference {attr}={v!r}"
        assert el.tag not in ("link", "img", "iframe", "object"), el.tag
    return root


def text_of(el):
    return "".join(el.itertext())


def by_id(root, ident):
    for el in root.iter():
        if el.get("id") == ident:
            return el
    return None


def has_class(el, cls):
    return cls in (el.get("class") or "").split()


def chromium_cmd(profile):
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-quic", f"--user-data-dir={profile}"]


def need_chromium():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (scripts/setup installs it)")


def chromium_dom(report, profile):
    """The DOM Chromium builds from the report file (--dump-dom)."""
    need_chromium()
    r = subprocess.run(chromium_cmd(profile) + ["--dump-dom", f"file://{report}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "<html" in r.stdout, "chromium printed no DOM"
    return r.stdout


def chromium_screenshot(report, png, profile, size="1280,2600"):
    """Screenshots the report; returns the seconds Chromium took (measured,
    not asserted: timing goals live in scripts/bench-report)."""
    need_chromium()
    start = time.monotonic()
    r = subprocess.run(chromium_cmd(profile) + ["--hide-scrollbars", f"--window-size={size}",
                                                f"--screenshot={png}", f"file://{report}"],
                       capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr[-2000:]
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "screenshot is not a PNG"
    assert os.path.getsize(png) > 20000, "screenshot suspiciously small (blank page?)"
    return took


def keep_screenshot(png, name):
    """Copies a screenshot to reports/ (git-ignored) as the latest artifact."""
    dest_dir = os.path.join(SOURCE_DIR, "reports")
    os.makedirs(dest_dir, exist_ok=True)
    shutil.copyfile(png, os.path.join(dest_dir, name))


class DomSummary(html.parser.HTMLParser):
    """What the tests look for in Chromium's DOM: the summary table's rows,
    timeline SVGs per scenario section, images, and the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.summary_rows = 0
        self.timelines = {}
        self.section = None
        self.imgs = 0
        self.scripts = 0
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and "scenario" in classes:
            self.section = a.get("id")
        if tag == "svg" and "timeline" in classes and self.section:
            self.timelines[self.section] = self.timelines.get(self.section, 0) + 1
        if tag == "tr" and "tbody" in self.stack and "#summary" in self.stack:
            self.summary_rows += 1
        if tag == "img":
            self.imgs += 1
        if tag == "script":
            self.scripts += 1
        if tag not in VOID:
            self.stack.append("#summary" if a.get("id") == "summary" else tag)

    def handle_endtag(self, tag):
        # Chromium's serialisation is balanced; pop to the matching element
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] == tag or (tag == "table" and self.stack[i] == "#summary"):
                del self.stack[i:]
                break

    def handle_data(self, data):
        self.text.append(data)


def dom_summary(dom):
    p = DomSummary()
    p.feed(dom)
    p.close()
    p.text = "".join(p.text)
    return p


def load_fixture(tmp_path, name="run"):
    """A writable copy of the fixture run directory and its result."""
    dest = tmp_path / name
    shutil.copytree(FIXTURE, dest)
    with open(dest / "result.json", encoding="utf-8") as f:
        return dest, json.load(f)


def save_result(run_dir, result):
    with open(run_dir / "result.json", "w", encoding="utf-8") as f:
        json.dump(result, f)


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


# ---- tests --------------------------------------------------------------------

def test_fixture_report_content(tmp_path):
    out = tmp_path / "report.html"
    render(FIXTURE, out)
    root = parse_strict(out)
    with open(os.path.join(FIXTURE, "result.json"), encoding="utf-8") as f:
        result = json.load(f)
    scenarios = result["scenarios"]

    # one verdict, in words: the fixture has a failing scenario
    banner = by_id(root, "verdict")
    assert banner is not None and has_class(banner, "fail")
    assert text_of(banner).startswith("FAIL")
    assert "concurrent-duplicate" in text_of(banner)
    assert WITNESS in text_of(banner)

    # header: commit, PostgreSQL, totals
    body = text_of(root)
    assert result["commit"] in body
    assert "15.14" in body
    totals = text_of(by_id(root, "totals"))
    assert "2/3" in totals and str(result["totals"]["invariants_checked"]) in totals

    # summary table: one row per scenario, the failing one marked in words
    table = by_id(root, "summary")
    rows = table.find("tbody").findall("tr")
    assert len(rows) == len(scenarios)
    for row, sc in zip(rows, scenarios):
        cells = [text_of(td) for td in row.findall("td")]
        assert sc["name"] in cells[1]
        assert sc["crash_window"] == cells[2]
        assert ("FAIL" if sc["verdict"] == "fail" else "PASS") in cells[3]
        assert cells[7] == str(sc["counts"]["duplicates_absorbed"])
    assert "1 armed, not hit" in text_of(rows[1])

    # per scenario: one timeline, one lane per process, one marker per event
    for i, sc in enumerate(scenarios):
        section = by_id(root, f"s{i}")
        assert section is not None
        assert has_class(section, "fail" if sc["verdict"] == "fail" else "pass")
        svgs = [el for el in section.iter("svg") if has_class(el, "timeline")]
        assert len(svgs) == 1, f"scenario {sc['name']}: {len(svgs)} timelines"
        events = [json.loads(l) for l in
                  open(os.path.join(FIXTURE, sc["dir"], "timeline.jsonl"), encoding="utf-8")]
        procs = {e["proc"] for e in events}
        labels = {text_of(t) for t in svgs[0].iter("text") if has_class(t, "lanelabel")}
        assert labels == procs
        markers = [el for el in svgs[0].iter() if has_class(el, "mk")]
        assert len(markers) == len(events)
        # every marker has a hover title; message ids are in them
        assert all(m.find("title") is not None for m in markers)
        titles = "\n".join(text_of(m.find("title")) for m in markers)
        for e in events:
            if "id" in e:
                assert e["id"] in titles
        charts = [el for el in section.iter("svg") if has_class(el, "chart")]
        assert len(charts) == 8

    # the crash is shaded: fault window then process down, on relay-1's lane
    s0 = by_id(root, "s0")
    wins = [el for el in s0.iter("rect") if (el.get("class") or "").startswith("win-")]
    kinds = sorted(el.get("class") for el in wins)
    assert kinds == ["win-down", "win-fault"]
    assert any("relay/after_publish" in text_of(w) and "relay-1" in text_of(w) for w in wins)
    # the consumer was paused, then killed, then restarted
    s1 = by_id(root, "s1")
    kinds = sorted(el.get("class") for el in s1.iter("rect")
                   if (el.get("class") or "").startswith("win-"))
    assert kinds == ["win-down", "win-fault", "win-paused"]

    # the failure: invariant rows and witnesses in plain words, and the
    # witness message drawn across lanes
    s2 = by_id(root, "s2")
    failing = [tr for tr in s2.iter("tr") if has_class(tr, "fail")]
    names = {text_of(tr.find("td")) for tr in failing}
    assert {"one_effect_per_event", "inbox_marker_per_delivery"} <= names
    witnesses = [text_of(li) for ul in s2.iter("ul") if has_class(ul, "witness")
                 for li in ul.iter("li")]
    assert any(WITNESS in w for w in witnesses)
    wlines = [el for el in s2.iter("polyline") if has_class(el, "wline")]
    assert len(wlines) == 1
    assert len(wlines[0].get("points").split()) >= 6  # commit ... apply, apply
    assert sum(1 for el in s2.iter() if has_class(el, "w")) >= 6

    # mutant matrix and simulator
    matrix = by_id(root, "mutant-matrix")
    mrows = matrix.find("tbody").findall("tr")
    assert len(mrows) == len(result["mutants"])
    survived = [r for r in mrows if "SURVIVED" in text_of(r)]
    assert [text_of(r.find("td")) for r in survived] == ["mark_without_owner"]
    assert "crashwindow sim --replay 424242:17" in text_of(by_id(root, "sim-failing"))
    assert "relay/after_publish" in text_of(by_id(root, "sim-faults"))


def test_passing_run_reads_pass(tmp_path):
    run, result = load_fixture(tmp_path)
    result["scenarios"] = [s for s in result["scenarios"] if s["verdict"] == "pass"]
    result["verdict"] = "pass"
    result["mutant"] = None
    del result["mutants"]
    del result["simulator"]
    save_result(run, result)
    out = tmp_path / "pass.html"
    render(run, out)
    root = parse_strict(out)
    banner = by_id(root, "verdict")
    assert has_class(banner, "pass") and text_of(banner).startswith("PASS")
    assert not [el for el in root.iter() if has_class(el, "fail")]
    assert "FAIL" not in text_of(root)
    assert by_id(root, "mutant-matrix") is None and by_id(root, "simulator") is None


def test_verdict_is_not_taken_on_trust(tmp_path):
    """A result claiming pass with a failing scenario is shown as FAIL."""
    run, result = load_fixture(tmp_path)
    result["verdict"] = "pass"
    save_result(run, result)
    out = tmp_path / "r.html"
    render(run, out)
    banner = by_id(parse_strict(out), "verdict")
    assert has_class(banner, "fail") and text_of(banner).startswith("FAIL")
    assert "disagree" in text_of(banner)


def test_escaping(tmp_path):
    """Every string from the run is text, never markup, in XML and in Chromium."""
    run, result = load_fixture(tmp_path)
    sc = result["scenarios"][2]
    sc["title"] = PAYLOAD
    sc["name"] = PAYLOAD
    sc["error"] = "connection lost: " + PAYLOAD
    sc["crash_window"] = PAYLOAD
    sc["invariants"][2]["witnesses"].append(PAYLOAD)
    sc["expect"][0]["detail"] = PAYLOAD
    sc["counts"][PAYLOAD] = 1
    result["machine"]["hostname"] = PAYLOAD
    result["machine"]["libx"] = PAYLOAD
    result["commit"] = PAYLOAD
    result["mutants"][0]["name"] = PAYLOAD
    result["mutants"][0]["scenarios"][0]["witness"] = PAYLOAD
    result["simulator"]["failing"][0]["replay"] = PAYLOAD
    result["simulator"]["faults_fired"][PAYLOAD] = 3
    save_result(run, result)
    # the payload in log fields, a process name, a message id and a consumer
    # name; plus invalid UTF-8 and control bytes that XML forbids
    tl = run / sc["dir"] / "timeline.jsonl"
    lines = open(tl, encoding="utf-8").read().splitlines()
    first = json.loads(lines[0])
    extra = [
        dict(first, ts_us=first["ts_us"] + 5, proc="relay-1", event="publish",
             id=PAYLOAD, ok=False, error=PAYLOAD),
        dict(first, ts_us=first["ts_us"] + 6, proc=PAYLOAD, event=PAYLOAD,
             payload={"note": PAYLOAD}),
    ]
    with open(tl, "w", encoding="utf-8") as f:
        f.write(lines[0] + "\n")
        for e in extra:
            f.write(json.dumps(e) + "\n")
        f.write("\n".join(lines[1:]) + "\n")
    with open(tl, "ab") as f:
        f.write(b'{"ts_us":%d,"proc":"api","pid":1,"event":"request","path":"/p\xff\xfe\x01\x1b"}\n'
                % (first["ts_us"] + 7))
    mt = run / sc["dir"] / "metrics.jsonl"
    m = [json.loads(l) for l in open(mt, encoding="utf-8")]
    m[-1]["consumed"][PAYLOAD] = 2
    with open(mt, "w", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(x) for x in m) + "\n")

    out = tmp_path / "escape.html"
    render(run, out)
    raw = open(out, encoding="utf-8").read()
    assert "<img" not in raw and "</script><img" not in raw
    assert raw.count("<script>") == 1  # ours, at the end
    root = parse_strict(out)
    assert not list(root.iter("img"))
    body = text_of(root)
    assert body.count(PAYLOAD) >= 10, "payload must render as text"
    assert "\ufffd" in body  # the invalid bytes became replacement characters

    need_chromium()
    dom = dom_summary(chromium_dom(out, tmp_path / "profile"))
    assert dom.imgs == 0, "an <img> element reached the DOM"
    assert dom.scripts == 1
    assert PAYLOAD in dom.text


def test_chromium_renders_report(tmp_path):
    out = tmp_path / "report.html"
    render(FIXTURE, out)
    dom = dom_summary(chromium_dom(out, tmp_path / "profile"))
    with open(os.path.join(FIXTURE, "result.json"), encoding="utf-8") as f:
        n = len(json.load(f)["scenarios"])
    assert dom.summary_rows == n
    assert dom.timelines == {f"s{i}": 1 for i in range(n)}
    assert WITNESS in dom.text
    assert "FAIL" in dom.text
    png = tmp_path / "report.png"
    took = chromium_screenshot(out, png, tmp_path / "profile")
    print(f"chromium screenshot of the fixture report: {took:.2f} s")
    keep_screenshot(png, "report-fixture.png")


class HighlightProbe(html.parser.HTMLParser):
    """Collects the data-m of elements carrying the class hl."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.hl = []
        self.js_error = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "hl" in (a.get("class") or "").split():
            self.hl.append(a.get("data-m") or "")
        if tag == "html" and "data-js-error" in a:
            self.js_error = a["data-js-error"]

    handle_startendtag = handle_starttag


def test_hover_highlights_message_across_lanes(tmp_path):
    """Hovering a marker lights up every marker of that message: the page's
    script is run by Chromium with a synthetic mouseover."""
    out = tmp_path / "report.html"
    render(FIXTURE, out)
    root = parse_strict(out)
    s2 = by_id(root, "s2")
    first = next(el for el in s2.iter() if has_class(el, "mk") and has_class(el, "w"))
    token = first.get("data-m").split()[0]
    expected = [el for el in root.iter() if token in (el.get("data-m") or "").split()]
    lanes = {el.get("cy") for el in expected if el.get("cy")}
    assert len(expected) >= 6 and len(lanes) >= 3
    page = open(out, encoding="utf-8").read()
    page = page.replace("<body>", "<body><script>addEventListener('error',function(e){"
                        "document.documentElement.setAttribute('data-js-error',"
                        "String(e.message))})</script>", 1)
    page = page.replace("</body>", "<script>document.querySelector('[data-m~=\"" + token +
                        "\"].mk').dispatchEvent(new MouseEvent('mouseover',{bubbles:true}))"
                        "</script></body>", 1)
    probe = tmp_path / "probe.html"
    probe.write_text(page, encoding="utf-8")
    p = HighlightProbe()
    p.feed(chromium_dom(probe, tmp_path / "profile"))
    assert p.js_error is None, f"script error in the page: {p.js_error}"
    assert len(p.hl) == len(expected)
    assert all(token in m.split() for m in p.hl)


def test_bad_input_is_refused(tmp_path):
    out = tmp_path / "out.html"
    r = render(tmp_path / "missing", out, check=False)
    # bad input, as for check and merge
    assert r.returncode == 2 and "no such directory" in r.stderr, r.stderr
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = render(empty, out, check=False)
    assert r.returncode == 2 and "result.json: missing" in r.stderr, r.stderr
    assert not out.exists()

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "result.json").write_text('{"tool": "crashwindow", "scenarios": [')
    r = render(bad, out, check=False)
    assert r.returncode == 1 and "not valid JSON" in r.stderr
    assert not out.exists()
    (bad / "result.json").write_text('{"tool": "something-else"}')
    r = render(bad, out, check=False)
    assert r.returncode == 1 and "not a crashwindow result" in r.stderr
    assert not out.exists() and not list(tmp_path.glob("out.html.tmp*"))

    r = crashwindow("report", timeout=30)
    assert r.returncode == 2 and "usage" in r.stderr
    r = crashwindow("report", bad, "--bogus", timeout=30)
    assert r.returncode == 2 and "unknown option" in r.stderr

    # an unwritable destination leaves nothing behind and says why
    r = render(FIXTURE, tmp_path / "no-such-dir" / "r.html", check=False)
    assert r.returncode == 1 and "cannot create" in r.stderr


def test_scenario_dir_must_stay_inside_run(tmp_path):
    run, result = load_fixture(tmp_path)
    result["scenarios"][0]["dir"] = "../../etc"
    result["scenarios"][1]["dir"] = "/etc"
    result["scenarios"][2]["dir"] = "does-not-exist"
    save_result(run, result)
    out = tmp_path / "r.html"
    render(run, out)
    root = parse_strict(out)
    for i in (0, 1):
        assert "no usable scenario directory" in text_of(by_id(root, f"s{i}"))
        assert not [el for el in by_id(root, f"s{i}").iter("svg") if has_class(el, "timeline")]
    assert "timeline unavailable" in text_of(by_id(root, "s2"))


def test_a_database_outage_is_shaded_on_its_own_lane(tmp_path):
    """The runner logs a database fault when it is over, with when it
    began: the timeline shades that span on a "postgres" lane, and the
    legend names it."""
    run, result = load_fixture(tmp_path)
    sc = result["scenarios"][0]
    tl = run / sc["dir"] / "timeline.jsonl"
    lines = open(tl, encoding="utf-8").read().splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    began = first["ts_us"] + (last["ts_us"] - first["ts_us"]) // 3
    with open(tl, "a", encoding="utf-8") as f:
        f.write(json.dumps({"ts_us": began + 400000, "proc": "runner", "pid": 1,
                            "event": "db_fault", "started_us": began, "target": "postgres",
                            "action": "freeze", "detail": "server stopped 400 ms"}) + "\n")
    out = tmp_path / "r.html"
    render(run, out)
    s0 = by_id(parse_strict(out), "s0")
    wins = [el for el in s0.iter("rect") if el.get("class") == "win-db"]
    assert len(wins) == 1, [el.get("class") for el in s0.iter("rect")]
    assert "database freeze: server stopped 400 ms" in text_of(wins[0])
    assert float(wins[0].get("width")) > 1
    assert "database outage" in text_of(s0)


def test_a_links_lane_is_named_whole(tmp_path):
    """A link's fault gets a lane named after the link; the longest of the
    pipeline's ("net accounting->broker") is shown whole, not cut."""
    run, result = load_fixture(tmp_path)
    sc = result["scenarios"][0]
    tl = run / sc["dir"] / "timeline.jsonl"
    first = json.loads(open(tl, encoding="utf-8").readline())
    with open(tl, "a", encoding="utf-8") as f:
        f.write(json.dumps({"ts_us": first["ts_us"] + 1000, "proc": "runner", "pid": 1,
                            "event": "net_fault", "link": "accounting->broker",
                            "fault": "partition", "ms": 300}) + "\n")
    out = tmp_path / "r.html"
    render(run, out)
    s0 = by_id(parse_strict(out), "s0")
    labels = {text_of(t) for t in s0.iter("text") if has_class(t, "lanelabel")}
    assert "net accounting->broker" in labels, labels


def test_missing_and_malformed_parts(tmp_path):
    """Fields missing or null, malformed lines: the report still renders and
    says what it skipped."""
    run, result = load_fixture(tmp_path)
    sc = result["scenarios"][0]
    for key in ("counts", "classification", "faults_fired", "duration_ms", "kills"):
        sc.pop(key)
    sc["invariants"][0] = {"name": "x"}
    result.pop("machine")
    result.pop("totals")
    save_result(run, result)
    with open(run / sc["dir"] / "timeline.jsonl", "a", encoding="utf-8") as f:
        f.write("{broken\n[1,2,3]\n{\"proc\":\"api\"}\n")
    with open(run / sc["dir"] / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"ts_us": 1764450000100000, "pending": null, "consumed": 7}\nnope\n')
    out = tmp_path / "r.html"
    render(run, out)
    s0 = by_id(parse_strict(out), "s0")
    assert "3 malformed lines skipped" in text_of(s0)
    assert "1 malformed metric lines skipped" in text_of(s0)


def test_large_timeline_is_folded(tmp_path):
    """Thousands of events: routine ones become density bars, faults stay
    visible, and the file stays small."""
    run, result = load_fixture(tmp_path)
    sc = result["scenarios"][0]
    tl = run / sc["dir"] / "timeline.jsonl"
    base = [json.loads(l) for l in open(tl, encoding="utf-8")]
    t0 = base[0]["ts_us"]
    events = []
    for i in range(40000):
        mid = f"00000000-0000-4000-8000-{i:012d}"
        ts = t0 + i * 250
        events.append({"ts_us": ts, "proc": "relay-1", "pid": 9103, "event": "publish",
                       "id": mid, "ok": True})
        events.append({"ts_us": ts + 100, "proc": "accounting", "pid": 9104,
                       "event": "apply", "id": mid, "version": 1})
    events.append({"ts_us": t0 + 5_000_000, "proc": "relay-1", "pid": 9103,
                   "event": "fault_hit", "point": "relay/before_mark", "action": "stall"})
    events.append({"ts_us": t0 + 5_050_000, "proc": "relay-1", "pid": 9103,
                   "event": "fault_resumed", "point": "relay/before_mark"})
    events.sort(key=lambda e: e["ts_us"])
    with open(tl, "w", encoding="utf-8") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    out = tmp_path / "big.html"
    render(run, out)
    size = os.path.getsize(out)
    assert size < 1_500_000, f"report of an 80,000-event timeline is {size} bytes"
    s0 = by_id(parse_strict(out), "s0")
    assert "80002 events" in text_of(s0) and "density bars" in text_of(s0)
    assert [el for el in s0.iter("g") if has_class(el, "density")]
    assert [el for el in s0.iter() if has_class(el, "k-fault")]
    stall = [el for el in s0.iter("rect") if has_class(el, "win-fault")]
    assert len(stall) == 1 and "relay/before_mark (stall)" in text_of(stall[0])
