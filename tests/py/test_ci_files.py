"""The GitHub Actions workflow and the Kubernetes Indexed Job example say
what the README says and nothing crashwindow does not understand.

Every crashwindow command line in them is checked against that command's
own --help (each option it passes must be one the command lists); every
matrix of shards is 1..N for the N its --shard says; every suite's shards
have a merge job that runs even when a shard failed and merges exactly
those shards; the Indexed Job's CW_SHARD_COUNT equals its completions.
"""
# needs: nothing
import os
import re

import yaml

from cwtest import SOURCE_DIR, crashwindow

WORKFLOW = os.path.join(SOURCE_DIR, ".github", "workflows", "crashwindow.yml")
K8S = os.path.join(SOURCE_DIR, "kubernetes", "sim-indexed-job.yaml")
COMMAND = re.compile(r"build/sim/crashwindow (\w+)((?:[^\n\\]|\\\n)*)")


def helps():
    out = {}
    for sub in ("run", "mutants", "sim", "merge"):
        r = crashwindow(sub, "--help", timeout=30)
        assert r.returncode == 0, (sub, r.stderr)
        out[sub] = r.stdout
    return out


def commands(script):
    """(subcommand, argument text) of every crashwindow command in script."""
    return [(m.group(1), m.group(2).replace("\\\n", " ")) for m in COMMAND.finditer(script)]


def check_command(sub, args, known):
    assert sub in known, f"crashwindow {sub} is not a command"
    for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", args):
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", known[sub]), \
            f"crashwindow {sub} {opt}: not an option of crashwindow {sub} --help"


def steps_scripts(job):
    return "\n".join(s.get("run", "") for s in job.get("steps", []))


def test_workflow_commands_are_the_readmes():
    with open(WORKFLOW, encoding="utf-8") as f:
        wf = yaml.safe_load(f)
    with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    known = helps()
    jobs = wf["jobs"]
    shard_jobs = {}
    seen = []
    for name, job in jobs.items():
        script = steps_scripts(job)
        seen += commands(script)
        for sub, args in commands(script):
            check_command(sub, args, known)
            assert f"crashwindow {sub}" in readme
        # scripts called are the README's
        for s in re.findall(r"scripts/[a-z-]+", script):
            assert os.path.exists(os.path.join(SOURCE_DIR, s)) and s in readme, s
        shard = re.search(r"--shard \$\{\{ matrix\.shard \}\}/(\d+)", script)
        if shard:
            n = int(shard.group(1))
            assert job["strategy"]["matrix"]["shard"] == list(range(1, n + 1)), name
            assert job["strategy"]["fail-fast"] is False, name
            art = [s for s in job["steps"] if s.get("uses", "").startswith(
                "actions/upload-artifact")]
            assert art and art[0].get("if") == "always()", name
            shard_jobs[name] = art[0]["with"]["name"].split("-$")[0]
    assert set(shard_jobs) == {"scenarios", "mutants", "simulator"}
    assert sorted({sub for sub, _ in seen}) == ["merge", "mutants", "run", "sim"]
    for name, prefix in shard_jobs.items():
        merge = jobs[f"{name}-merge"]
        assert merge["needs"] == name and merge["if"].startswith("always()")
        dl = [s for s in merge["steps"] if s.get("uses", "").startswith(
            "actions/download-artifact")]
        assert dl and dl[0]["with"]["pattern"] == f"{prefix}-*"
        assert f"crashwindow merge shards/{prefix}-* --out merged" in steps_scripts(merge)
    # Every shard of a simulation runs the same seed.
    assert "--seed ${{ github.run_id }}" in steps_scripts(jobs["simulator"])


def test_kubernetes_indexed_job():
    with open(K8S, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_name = {d["metadata"]["name"]: d for d in docs}
    known = helps()
    job = by_name["crashwindow-sim"]
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert int(config["data"]["CW_SHARD_COUNT"]) == job["spec"]["completions"]
    script = "\n".join(job["spec"]["template"]["spec"]["containers"][0]["args"])
    cmds = commands(script)
    assert [c[0] for c in cmds] == ["sim"] and "--shard env" in cmds[0][1]
    for sub, args in cmds:
        check_command(sub, args, known)
    merge = by_name["crashwindow-sim-merge"]
    script = "\n".join(merge["spec"]["template"]["spec"]["containers"][0]["args"])
    assert [c[0] for c in commands(script)] == ["merge"]
    for sub, args in commands(script):
        check_command(sub, args, known)


def test_a_wrong_option_is_caught():
    known = helps()
    try:
        check_command("run", " --all --shards 1/3", known)
    except AssertionError as e:
        assert "--shards" in str(e)
    else:
        raise AssertionError("a misspelt option went unnoticed")
