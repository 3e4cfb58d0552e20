"""The layout's dependency rules, checked on every #include of src/ and sim/.

Each folder of src/ and sim/ is one component; a component may include the
headers of the components this table allows and no others.  Arrows point down
and inward: programs use core and bus, never each other; nothing in src/
includes anything from sim/; the harness may use core's public headers, and of
a program's only its option table (PROGRAM_OPTIONS), which the scenario format
reads a process's "args" over.  libfiu's headers belong to the fault-point module alone.
"""
# needs: nothing
import os
import re
import shutil

from cwtest import SOURCE_DIR

ALLOWED = {
    "src/core": set(),
    "src/bus": {"src/core"},
    "src/api": {"src/core", "src/bus"},
    "src/relay": {"src/core", "src/bus"},
    "src/consumer": {"src/core", "src/bus"},
    "src/outboxctl": {"src/core"},
    "sim/common": set(),
    "sim/netproxy": {"src/core"},
    "sim/scenario": {"sim/netproxy", "src/core"},
    "sim/target": set(),
    "sim/fakebroker": {"src/core"},
    "sim/rabbitbridge": {"src/core", "src/bus"},
    "sim/checker": {"sim/scenario", "src/core"},
    "sim/report": {"src/core"},
    "sim/merge": {"sim/report", "src/core"},
    "sim/pgfault": {"src/core"},
    "sim/runner": {"sim/scenario", "sim/target", "sim/checker", "sim/report", "sim/merge",
                   "sim/fakebroker", "sim/pgfault", "sim/netproxy", "src/core"},
    "sim/simulator": {"sim/runner", "sim/target", "sim/scenario", "sim/merge", "src/core"},
    "sim/mutants": {"sim/runner", "sim/merge", "src/core"},
    "sim": {"sim/scenario", "sim/target", "sim/fakebroker", "sim/checker", "sim/report", "sim/pgfault",
            "sim/netproxy", "sim/merge", "sim/runner", "sim/simulator", "sim/mutants", "src/core"},
}
# sim/common holds what several harness folders share: every one may use it.
for _comp in ALLOWED:
    if _comp.startswith("sim") and _comp != "sim/common":
        ALLOWED[_comp] = ALLOWED[_comp] | {"sim/common"}

# A program's option table, the one header of a program the scenario format may
# include: a scenario's "args" are checked against the table the program itself
# parses its command line over.
PROGRAM_OPTIONS = {"api_options.h", "consumer_options.h", "relay_options.h"}
OPTIONS_READERS = {"sim/scenario"}

# System headers only one file may include.
PRIVATE_SYSTEM = {"fiu.h": "src/core/fault.h", "fiu-control.h": "src/core/fault.c"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def sources(root):
    """Every .c and .h file under src/ and sim/: path relative to root."""
    for top in ("src", "sim"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, n), root)


def violations(root):
    """The broken rules of the tree at root, as sentences."""
    files = list(sources(root))
    home = {}
    out = []
    for f in files:
        if f.endswith(".h"):
            name = os.path.basename(f)
            if name in home:
                out.append(f"header {name} exists twice: {home[name]} and {f}")
            home[name] = os.path.dirname(f)
    for f in files:
        comp = os.path.dirname(f)
        if comp not in ALLOWED:
            out.append(f"{f}: folder {comp} is not a known component (add it to ALLOWED)")
            continue
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            text = fh.read()
        for kind, name in INCLUDE.findall(text):
            if kind == "<":
                owner = PRIVATE_SYSTEM.get(name)
                if owner is not None and f != owner and f != owner.replace(".h", ".c"):
                    out.append(f"{f} includes <{name}>, which only {owner} may")
                continue
            target = home.get(os.path.basename(name))
            if target is None:
                out.append(f"{f} includes \"{name}\", which no folder of src/ or sim/ holds")
            elif (os.path.basename(name) in PROGRAM_OPTIONS and comp in OPTIONS_READERS
                  and target.startswith("src/")):
                continue
            elif target != comp and target not in ALLOWED[comp]:
                out.append(f"{f} includes \"{name}\" from {target}: {comp} may use only "
                           f"{sorted(ALLOWED[comp]) or 'its own headers'}")
    return out


def test_every_include_follows_the_layout():
    bad = violations(SOURCE_DIR)
    assert not bad, "\n".join(bad)


def test_every_component_folder_is_known():
    comps = {os.path.dirname(f) for f in sources(SOURCE_DIR)}
    assert comps <= set(ALLOWED), sorted(comps - set(ALLOWED))
    for c in comps:
        assert os.path.isfile(os.path.join(SOURCE_DIR, c, "CMakeLists.txt")), \
            f"{c} has no CMakeLists.txt of its own"


def plant(tmp_path, rel, line):
    """A copy of src/ and sim/ with line added at the top of rel."""
    for top in ("src", "sim"):
        shutil.copytree(os.path.join(SOURCE_DIR, top), tmp_path / top)
    p = tmp_path / rel
    p.write_text(line + "\n" + p.read_text(encoding="utf-8"), encoding="utf-8")
    return violations(str(tmp_path))


def test_a_program_including_another_programs_header_is_caught(tmp_path):
    bad = plant(tmp_path, "src/outboxctl/outboxctl_cleanup.c", '#include "relay.h"')
    assert any("relay.h" in b and "src/relay" in b for b in bad), bad


def test_src_including_the_harness_is_caught(tmp_path):
    bad = plant(tmp_path, "src/core/pgx.c", '#include "checker.h"')
    assert any("checker.h" in b and "sim/checker" in b for b in bad), bad


def test_the_harness_including_a_program_is_caught(tmp_path):
    bad = plant(tmp_path, "sim/runner/runner.c", '#include "api_store.h"')
    assert any("api_store.h" in b for b in bad), bad


def test_libfiu_outside_the_fault_module_is_caught(tmp_path):
    bad = plant(tmp_path, "src/relay/relay_loop.c", "#include <fiu.h>")
    assert any("<fiu.h>" in b for b in bad), bad


def test_only_the_scenario_format_reads_a_programs_option_table(tmp_path):
    bad = plant(tmp_path / "a", "sim/scenario/scenario_steps.c", '#include "relay.h"')
    assert any("relay.h" in b and "src/relay" in b for b in bad), bad
    bad = plant(tmp_path / "b", "sim/runner/runner.c", '#include "relay_options.h"')
    assert any("relay_options.h" in b for b in bad), bad
