"""scripts/coverage refuses a bad layer or a missing value before it builds
or starts anything: a coverage run takes minutes, and a typo must not cost
them.  Its summary, run here on counters written by the test, lists each
untaken error branch under the reason no scenario takes it."""
# needs: nothing
import os
import subprocess

from cwtest import SOURCE_DIR


def run(*args):
    return subprocess.run([os.path.join(SOURCE_DIR, "scripts", "coverage"), *args],
                          capture_output=True, text=True, timeout=30, cwd=SOURCE_DIR)


def test_unknown_layer_is_named():
    r = run("--with", "unit,fuzz")
    assert r.returncode == 2
    assert "unknown layer 'fuzz'" in r.stderr


def test_options_without_values_print_usage():
    for args in (["--out"], ["--with"], ["--out", "reports/never", "--with", ""]):
        r = run(*args)
        assert r.returncode == 2, args
        assert "usage: scripts/coverage" in r.stderr, args


def test_untaken_error_branches_are_listed_with_their_reason(tmp_path):
    """The summary's own code, run on counters written here: each untaken
    branch whose line tests a failure is listed under why no scenario takes
    it (a mutant's, an allocation's, a program's start) or as open."""
    with open(os.path.join(SOURCE_DIR, "scripts", "coverage"), encoding="utf-8") as f:
        text = f.read()
    code = text.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    root, out = tmp_path / "root", tmp_path / "out"
    (root / "src" / "relay").mkdir(parents=True)
    out.mkdir()
    (root / "src" / "relay" / "relay_fake.c").write_text(
        "char *p = malloc(10);\n"
        "if (p == NULL)\n"
        "if (rc < 0)\n"
        "const int t = CW_MUTANT(x) && rc < 0;\n"
        "if (rc < 0)\n")
    (root / "src" / "relay" / "relay_main.c").write_text("if (rc < 0)\n")
    info = []
    for name, lines in (("relay_fake.c", (2, 3, 4)), ("relay_main.c", (1,))):
        info.append(f"SF:{root}/src/relay/{name}")
        info += [f"DA:{n},1" for n in lines] + [f"BRDA:{n},0,0,0" for n in lines]
        info.append("end_of_record")
    info[3:3] = ["DA:5,1", "BRDA:5,0,0,1", "BRDA:5,0,1,1"]  # line 5: both ways taken
    (out / "scenarios.info").write_text("\n".join(info) + "\n")
    r = subprocess.run(["python3", "-", str(out), str(root), "scenarios"], input=code,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ("no scenario took: 4 (uncovered-error-branches.txt): 1 mutant, 1 allocation, "
            "1 start-up, 1 open") in r.stdout, r.stdout
    listed = (out / "uncovered-error-branches.txt").read_text().splitlines()
    assert listed == [
        "# mutant: a known-wrong build's branch: the mutant matrix takes it",
        "src/relay/relay_fake.c:4: const int t = CW_MUTANT(x) && rc < 0;",
        "# allocation: an allocation failed: no scenario runs a process out of memory",
        "src/relay/relay_fake.c:2: if (p == NULL)",
        "# start-up: a program's start (options, config, listening, threads): tests/py drive "
        "the bad ones, a scenario starts every program well",
        "src/relay/relay_main.c:1: if (rc < 0)",
        "# open: an error path no scenario reaches yet",
        "src/relay/relay_fake.c:3: if (rc < 0)"], listed
