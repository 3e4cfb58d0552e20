"""`crashwindow sim` counts its runs: the verdict states the runs done of the
runs asked; a time budget that stops runs short makes it INCOMPLETE (exit 1,
"incomplete" in result.json), never a PASS of the runs asked; `--runs`
without `--time-budget` runs every one of them.

Whether a generated run passes is the simulator's business (test_sim.py):
these tests count runs, and accept a run that fails as long as it is said.
"""
# needs: pg
from cwtest import crashwindow, load_result


def test_a_time_budget_that_stops_runs_is_not_a_pass(tmp_path, pg_cluster):
    out = tmp_path / "out"
    r = crashwindow("sim", "--seed", 7, "--runs", 3, "--time-budget", 1, "--pg", pg_cluster,
                    "--out", out)
    assert r.returncode == 1, r.stdout + r.stderr
    res = load_result(out)
    sim = res["simulator"]
    assert 1 <= sim["runs"] < 3 and sim["runs_asked"] == 3, sim
    assert sim["stopped_by"] == "time_budget" and sim["time_budget_s"] == 1, sim
    verdict = "fail" if sim["failures"] else "incomplete"
    assert res["verdict"] == verdict
    assert f"{verdict.upper()}: {sim['runs']} of 3 runs done, {sim['failures']} failed" \
        in r.stdout, r.stdout
    assert "the time budget of 1 s stopped the other" in r.stdout
    assert "PASS" not in r.stdout


def test_runs_without_a_budget_are_all_run(tmp_path, pg_cluster):
    out = tmp_path / "out"
    r = crashwindow("sim", "--seed", 7, "--runs", 2, "--pg", pg_cluster, "--out", out)
    res = load_result(out)
    sim = res["simulator"]
    assert sim["runs"] == sim["runs_asked"] == 2 and sim["stopped_by"] is None, sim
    assert sim["time_budget_s"] is None
    assert "no time budget" in r.stdout
    verdict = "fail" if sim["failures"] else "pass"
    assert res["verdict"] == verdict and r.returncode == (1 if sim["failures"] else 0)
    assert f"{verdict.upper()}: 2 of 2 runs done" in r.stdout, r.stdout
