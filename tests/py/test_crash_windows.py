"""A scenario's crash window is what it breaks: a fault point of the
catalogue (fault-points/catalogue.json) that the scenario arms -- in a
process's "faults", a start step's "faults" or a "fault" step -- or a name
outside the catalogue that says what it breaks ("broker/crash",
"net/relay-broker/partition").  A catalogue point named and never armed
would claim a window the scenario never opens.
"""
# needs: nothing
import glob
import json
import os

from cwtest import SOURCE_DIR


def catalogue():
    with open(os.path.join(SOURCE_DIR, "fault-points", "catalogue.json"), encoding="utf-8") as f:
        return {p["name"] for p in json.load(f)["points"]}


def armed_points(sc):
    """The fault points a scenario arms, wherever it arms them."""
    specs = [p.get("faults") for p in sc["processes"].values()]
    specs += [st.get("faults") for st in sc["steps"]]
    points = {st["point"] for st in sc["steps"] if st.get("do") == "fault" and "point" in st}
    for spec in filter(None, specs):
        points |= {part.split("=", 1)[0].strip() for part in spec.split(";") if part.strip()}
    return points


def unarmed_windows(paths, names):
    bad = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            sc = json.load(f)
        window = sc["crash_window"]
        if window in names and window not in armed_points(sc):
            bad.append(f"{os.path.relpath(path, SOURCE_DIR)}: crash_window {window} is a "
                       f"fault point the scenario never arms")
    return bad


def test_every_scenarios_crash_window_is_armed_or_outside_the_catalogue():
    paths = sorted(glob.glob(os.path.join(SOURCE_DIR, "scenarios", "*.json")))
    assert paths
    bad = unarmed_windows(paths, catalogue())
    assert not bad, "\n".join(bad)


def test_a_named_window_never_armed_is_caught(tmp_path):
    sc = {"crash_window": "relay/after_publish", "steps": [{"do": "payments", "count": 1}],
          "processes": {"relay-1": {"kind": "relay", "faults": "relay/after_claim=crash@1"}}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(sc))
    assert unarmed_windows([str(path)], catalogue())
    sc["steps"].append({"do": "fault", "proc": "relay-1", "point": "relay/after_publish",
                        "action": "park"})
    path.write_text(json.dumps(sc))
    assert not unarmed_windows([str(path)], catalogue())
