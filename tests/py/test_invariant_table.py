"""The invariants are stated once: the table of sim/checker/invariants.c.

`crashwindow invariants` prints it as Markdown; docs/invariants.md holds that
output between its markers; each judge it names is defined, with the judges'
signature, in the file it names; and its names are the scenario format's
(sim/scenario/scenario.c), in the same order, since both are indexed by
enum sc_invariant.  Any of them drifting from the others fails here.
"""
# needs: nothing
import os
import re

from cwtest import SOURCE_DIR, crashwindow

BEGIN = "<!-- invariants:begin -->"
END = "<!-- invariants:end -->"
JUDGED_BY = re.compile(r"`(\w+)` \((checker\w*\.c)\)")


def printed():
    r = crashwindow("invariants", timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def rows(markdown):
    """The table's rows as (number, name, asserts, reads, judged by)."""
    out = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].isdigit():
            out.append(cells)
    return out


def read(*parts):
    with open(os.path.join(SOURCE_DIR, *parts), encoding="utf-8") as f:
        return f.read()


def scenario_format_names():
    src = read("sim", "scenario", "scenario.c")
    m = re.search(r"invariant_names\[\]\s*=\s*\{(.*?)\};", src, re.S)
    assert m, "sim/scenario/scenario.c holds no invariant_names array"
    return re.findall(r'"(\w+)"', m.group(1))


def test_the_page_holds_what_the_command_prints():
    page = read("docs", "invariants.md")
    assert page.count(BEGIN) == 1 and page.count(END) == 1, "markers missing or repeated"
    between = page.split(BEGIN, 1)[1].split(END, 1)[0]
    assert between.strip("\n") == printed().strip("\n"), \
        "docs/invariants.md is stale: put `crashwindow invariants` between its markers"


def test_every_row_is_complete_and_numbered_in_order():
    table = rows(printed())
    assert table, "crashwindow invariants printed no rows"
    for i, (num, name, asserts, reads, judged) in enumerate(table, 1):
        assert num == str(i), (num, name)
        assert re.fullmatch(r"`\w+`", name), name
        assert asserts.endswith(".") and ". " not in asserts, \
            f"{name}: what it asserts is one sentence: {asserts!r}"
        assert reads, f"{name} reads nothing"
        assert JUDGED_BY.fullmatch(judged), f"{name}: judged by {judged!r}"


def test_every_judge_is_defined_in_the_file_it_names():
    for _, name, _, _, judged in rows(printed()):
        fn, fname = JUDGED_BY.fullmatch(judged).groups()
        path = os.path.join("sim", "checker", fname)
        assert os.path.isfile(os.path.join(SOURCE_DIR, path)), f"{name}: no file {path}"
        assert re.search(r"^void " + fn + r"\(struct chk_ctx \*c\)\n\{", read(path), re.M), \
            f"{name}: {path} defines no judge {fn}"


def test_the_names_are_the_scenario_formats_in_its_order():
    names = [r[1].strip("`") for r in rows(printed())]
    assert names == scenario_format_names()


def test_an_argument_is_refused():
    r = crashwindow("invariants", "--all", timeout=30)
    assert r.returncode == 2 and "unexpected argument" in r.stderr, r
