"""The README and docs/ say what is true of the repository.

Every relative link of README.md and docs/*.md leads to a file that exists,
and an anchor (#section) to a heading of that file; every measured figure
of the benchmark, mutant-matrix and simulator pages sits in a paragraph
that gives the command that measured it and the day it was recorded; the
tables of mutants and of fault points list their catalogues (sim/mutants,
fault-points/catalogue.json); the README stays a guide (its first lines the
two commands, under 12 KB), and its worked scenario is one the runner
accepts.
"""
# needs: nothing
import glob
import json
import os
import re
import subprocess

import pytest

from cwtest import SOURCE_DIR, binary

PAGES = [os.path.join(SOURCE_DIR, "README.md")] + sorted(
    glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md")))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(    |\t)")


def rel(path):
    return os.path.relpath(path, SOURCE_DIR)


def prose(text):
    """The lines of a page outside its indented code blocks."""
    return "\n".join(line for line in text.split("\n") if not FENCE.match(line))


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped but
    for - and _, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return {slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} (.+)$", prose(text))}


def links(path):
    with open(path, encoding="utf-8") as f:
        return LINK.findall(prose(f.read()))


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_resolve(page):
    bad = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = page if file_part == "" else os.path.normpath(
            os.path.join(os.path.dirname(page), file_part))
        if not os.path.exists(dest):
            bad.append(f"{target}: no file {rel(dest)}")
        elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
            bad.append(f"{target}: no heading #{anchor} in {rel(dest)}")
    assert not bad, f"{rel(page)}: " + "; ".join(bad)


def test_every_docs_page_is_in_the_readmes_map():
    with open(PAGES[0], encoding="utf-8") as f:
        readme = f.read()
    missing = [rel(p) for p in PAGES[1:] if f"]({rel(p)})" not in readme]
    assert not missing, f"docs pages the README's map does not list: {missing}"


# A measured figure: a duration, a rate, a ratio of replays, a percentage.
FIGURE = re.compile(r"\b\d[\d,.]*\s?(?:min|ms|s|msg/s|requests/s|%)(?![\w/])|\b\d+/\d+\b")
COMMAND = re.compile(r"`[^`]*(?:scripts/[a-z-]+|crashwindow [a-z]+|perf record)[^`]*`")
RECORDED = re.compile(r"recorded\s+\d{4}-\d\d-\d\d", re.I)
MEASURED = {
    "benchmarks.md": None,
    "mutants.md": "## The full matrix, measured",
    "simulator.md": "## Measured figures",
}


def paragraphs(text):
    return [p for p in re.split(r"\n\s*\n", prose(text)) if p.strip()]


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_measured_figures_carry_command_and_date(name):
    with open(os.path.join(SOURCE_DIR, "docs", name), encoding="utf-8") as f:
        text = f.read()
    start = MEASURED[name]
    if start is not None:
        text = text[text.index(start):]
    bad = []
    for para in paragraphs(text):
        if para.startswith("#") or not FIGURE.search(para):
            continue
        if not (COMMAND.search(para) and RECORDED.search(para)):
            bad.append(para.strip().split("\n")[0][:80])
    assert not bad, f"docs/{name}: figures without their command or date: {bad}"


def test_mutants_table_is_the_catalogue():
    names = set()
    for src in glob.glob(os.path.join(SOURCE_DIR, "sim", "mutants", "*.[ch]")):
        with open(src, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"MUTANTS\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
        if m:
            names |= set(re.findall(r"\{\s*\"([a-z_]+)\",", m.group(1)))
    assert names, "no mutant catalogue found in sim/mutants"
    with open(os.path.join(SOURCE_DIR, "docs", "mutants.md"), encoding="utf-8") as f:
        table = set(re.findall(r"(?m)^\| `([a-z_]+)` \|", f.read()))
    assert table == names, (f"in the catalogue, not the table: {sorted(names - table)}; "
                            f"in the table, not the catalogue: {sorted(table - names)}")


def test_fault_points_table_is_the_catalogue():
    with open(os.path.join(SOURCE_DIR, "fault-points", "catalogue.json"), encoding="utf-8") as f:
        names = {p["name"] for p in json.load(f)["points"]}
    with open(os.path.join(SOURCE_DIR, "docs", "faults.md"), encoding="utf-8") as f:
        table = set(re.findall(r"(?m)^\| `([a-z_]+/[a-z_]+)` \|", f.read()))
    assert table == names, (f"in the catalogue, not the table: {sorted(names - table)}; "
                            f"in the table, not the catalogue: {sorted(table - names)}")


def test_readme_is_a_guide():
    path = PAGES[0]
    assert os.path.getsize(path) < 12 * 1024, "README.md grew past 12 KB: move depth to docs/"
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands = [line.split("#")[0].strip() for line in lines[:8] if line.startswith("    ./")]
    assert commands == ["./scripts/run-all", "./scripts/test-all"]


def test_readme_scenario_is_accepted(tmp_path):
    with open(PAGES[0], encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Write a scenario"):]
    block = re.search(r"\n\n((?:    .*\n)(?:    .*\n|\n)*)", section).group(1)
    spec = "\n".join(line[4:] for line in block.split("\n"))
    path = tmp_path / "example.json"
    path.write_text(spec)
    r = subprocess.run([binary("crashwindow"), "run", str(path), "--dry-run"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
