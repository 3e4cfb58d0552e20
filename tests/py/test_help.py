"""Help and errors as a newcomer meets them: `--help` of every program and
command exits 0 and names every option the program accepts -- the very
table it parses its command line over, which CW_LIST_OPTIONS prints
(src/core/cliutil.h) -- and the mistakes a first try makes get an error
that says what is wrong, with exit status 2 for bad usage or input.
"""
# needs: nothing
import os
import re
import subprocess

import pytest

from cwtest import binary, crashwindow

PROGRAMS = [("payments-api",), ("outbox-relay",), ("accounting-consumer",), ("outboxctl",),
            ("fakebroker",), ("netproxy",), ("rabbit-bridge",)]
COMMANDS = ["run", "check", "report", "mutants", "sim", "merge"]
CASES = [(binary(p[0]),) for p in PROGRAMS] + [(binary("crashwindow"), c) for c in COMMANDS]


def option_table(argv):
    """The options argv's program parses with, as (name, kind) pairs."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                       env={**os.environ, "CW_LIST_OPTIONS": "1"})
    assert r.returncode == 0, r.stderr
    return [tuple(line.split()) for line in r.stdout.splitlines() if line.strip()]


def names(text, option):
    return re.search(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", text) is not None


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(os.path.basename(x) for x in a))
def test_help_exits_0_and_names_every_option(argv):
    table = option_table(list(argv))
    assert table, f"{argv}: no option table"
    r = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    missing = [name for name, _ in table if not names(r.stdout, name)]
    assert not missing, f"{' '.join(argv)} --help names none of {missing}:\n{r.stdout}"


def test_every_program_has_its_help_in_the_list():
    """A program added to build/src or build/sim is added to PROGRAMS too."""
    built = set()
    for prog in ("outbox-relay", "crashwindow"):
        d = os.path.dirname(binary(prog))
        built |= {n for n in os.listdir(d)
                  if os.path.isfile(os.path.join(d, n)) and os.access(os.path.join(d, n), os.X_OK)}
    assert built <= {p[0] for p in PROGRAMS} | {"crashwindow"}, built


@pytest.mark.parametrize("command", ["run", "sim", "mutants"])
def test_usage_lines_name_jobs(command):
    r = crashwindow(command, "--help")
    usage = r.stdout.split("\n  -", 1)[0]
    assert names(usage, "--jobs"), usage


def test_crashwindow_help_exits_0():
    for args in (("--help",), ("invariants", "--help")):
        r = crashwindow(*args)
        assert r.returncode == 0 and r.stdout, args


def test_a_directory_given_as_a_scenario_is_said_to_be_one(tmp_path):
    r = crashwindow("run", tmp_path)
    assert r.returncode == 2
    assert f"{tmp_path}: is a directory, not a scenario file" in r.stderr, r.stderr
    assert "not valid JSON" not in r.stderr


@pytest.mark.parametrize("command", ["report", "check", "merge"])
def test_a_missing_run_directory_is_bad_input(tmp_path, command):
    missing = tmp_path / "nowhere"
    args = [command, missing] + (["--out", tmp_path / "merged"] if command == "merge" else [])
    r = crashwindow(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert str(missing) in r.stderr


def test_a_run_directory_without_a_result_is_bad_input_to_report(tmp_path):
    r = crashwindow("report", tmp_path)
    assert r.returncode == 2
    assert f"{tmp_path}/result.json: missing" in r.stderr, r.stderr


@pytest.mark.parametrize("args,message", [
    (("--replay", "7"), "--replay takes SEED:RUN"),
    (("--replay", "7:1", "--runs", "3"), "--replay S:I runs one run"),
    (("--runs", "many"), "--runs"),
])
def test_a_refused_sim_value_is_said_without_the_usage(args, message):
    r = crashwindow("sim", *args)
    assert r.returncode == 2
    assert message in r.stderr and "usage:" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_an_unknown_sim_option_still_gets_the_usage():
    r = crashwindow("sim", "--frobnicate")
    assert r.returncode == 2 and "usage: crashwindow sim" in r.stderr
