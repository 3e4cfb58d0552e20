"""The fault-point catalogue and the code must name the same points."""
# needs: nothing
import json
import os
import re

from cwtest import SOURCE_DIR

SITE = re.compile(r'CW_FAULT\(\s*"([^"]+)"')


def code_sites():
    """Every CW_FAULT site under src/: point name -> files (paths from the root)."""
    sites = {}
    for top, _, names in sorted(os.walk(os.path.join(SOURCE_DIR, "src"))):
        for name in sorted(names):
            if not name.endswith(".c"):
                continue
            path = os.path.join(top, name)
            rel = os.path.relpath(path, SOURCE_DIR)
            with open(path, encoding="utf-8") as f:
                for m in SITE.finditer(f.read()):
                    sites.setdefault(m.group(1), set()).add(rel)
    return sites


def catalogue():
    with open(os.path.join(SOURCE_DIR, "fault-points", "catalogue.json"), encoding="utf-8") as f:
        return json.load(f)["points"]


def test_names_are_unique_and_well_formed():
    names = [p["name"] for p in catalogue()]
    assert len(names) == len(set(names)), "a point is listed twice"
    for n in names:
        assert re.fullmatch(r"[a-z]+/[a-z_]+", n), f"{n} is not component/window"


def test_every_code_site_is_catalogued():
    listed = {p["name"] for p in catalogue()}
    missing = sorted(set(code_sites()) - listed)
    assert not missing, f"fault points in code but not in fault-points/catalogue.json: {missing}"


def test_every_catalogued_point_is_in_its_file():
    sites = code_sites()
    for p in catalogue():
        assert p["name"] in sites, f"{p['name']} is catalogued but no CW_FAULT site names it"
        assert p["file"] in sites[p["name"]], \
            f"{p['name']}: catalogue says {p['file']!r}, code has it in {sorted(sites[p['name']])}"


def test_one_site_per_name():
    text_counts = {}
    for rel in {f for files in code_sites().values() for f in files}:
        with open(os.path.join(SOURCE_DIR, rel), encoding="utf-8") as f:
            for m in SITE.finditer(f.read()):
                text_counts[m.group(1)] = text_counts.get(m.group(1), 0) + 1
    reused = sorted(n for n, c in text_counts.items() if c > 1)
    assert not reused, f"fault point names used at more than one code site: {reused}"


def scenario_points():
    """Fault points each scenario file enables: CW_FAULTS of its processes and
    of its start/restart steps, and its runtime fault steps."""
    enabled = {}
    scen_dir = os.path.join(SOURCE_DIR, "scenarios")
    for name in sorted(os.listdir(scen_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(scen_dir, name), encoding="utf-8") as f:
            sc = json.load(f)
        specs = [p.get("faults") for p in sc["processes"].values()]
        specs += [s.get("faults") for s in sc["steps"] if s.get("do") in ("start", "restart")]
        points = {item.split("=", 1)[0] for spec in specs if spec
                  for item in spec.split(";") if "=" in item}
        points |= {s["point"] for s in sc["steps"]
                   if s.get("do") == "fault" and not s.get("disable")}
        for p in points:
            enabled.setdefault(p, set()).add(sc["name"])
    return enabled


def test_every_point_is_covered_by_a_scenario():
    listed = {p["name"] for p in catalogue()}
    enabled = scenario_points()
    uncovered = sorted(n for n in listed if not enabled.get(n))
    assert not uncovered, f"fault points no scenario enables: {uncovered}"
    unknown = sorted(set(enabled) - listed)
    assert not unknown, f"scenarios enable points missing from the catalogue: {unknown}"


def test_scenarios_arrays_match_the_scenario_files():
    enabled = scenario_points()
    for p in catalogue():
        assert sorted(p["scenarios"]) == sorted(enabled.get(p["name"], ())), \
            f"{p['name']}: catalogue lists {sorted(p['scenarios'])}, " \
            f"scenario files enable it in {sorted(enabled.get(p['name'], ()))}"
