"""A process's "args" are read over its program's own option table when the
scenario loads: a misspelt option, a value the program would refuse, or a
value given to nothing is a bad scenario file (exit 2, naming the file, the
process and the option) and nothing starts.  A process that still exits at
start -- over something its table cannot see -- is reported by its first
line, its error, not by the last line of its usage text.

Scenarios here are written into tmp_path: they test the runner.
"""
# needs: pg
import pytest

from cwtest import PIPELINE, RELAY, by_name, crashwindow, load_result, scenario

STEPS = [{"do": "payments", "count": 1, "key_prefix": "t-args"},
         {"do": "wait", "until": "consumed", "count": 1, "timeout_ms": 10000}]


@pytest.mark.parametrize("proc,args,message", [
    ("relay-1", {"lease-msec": 1000}, "outbox-relay has no option --lease-msec"),
    ("relay-1", {"lease-ms": "abc"}, "--lease-ms: 'abc' is not an integer in 100..86400000"),
    ("relay-1", {"batch": 0}, "--batch: '0' is not an integer in 1..10000"),
    ("relay-1", {"batch": True}, "--batch of outbox-relay takes a value"),
    ("accounting", {"prefetch": "many"}, "--prefetch: 'many' is not an integer"),
    ("api", {"lease-ms": 800}, "payments-api has no option --lease-ms"),
])
def test_a_bad_arg_is_a_bad_file_naming_process_and_option(tmp_path, proc, args, message):
    procs = {name: dict(p) for name, p in PIPELINE.items()}
    procs[proc]["args"] = {**procs[proc].get("args", {}), **args}
    path = scenario(tmp_path, "bad-args", STEPS, processes=procs)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    option = next(iter(args))
    assert f"{path}: processes.{proc}.args.{option}: {message}" in r.stderr, r.stderr
    assert not out.exists(), "a bad arg must stop the run before anything starts"


def test_a_process_that_exits_at_start_shows_its_error(tmp_path, pg_cluster):
    """A consumer name without a default effect passes the option table (any
    name is a name) and is refused by the consumer itself, which prints its
    error and then its usage: the failure quotes the error."""
    procs = {**PIPELINE, "relay-1": RELAY,
             "accounting": {"kind": "consumer", "args": {"name": "ledgers"}}}
    path = scenario(tmp_path, "exits-at-start", STEPS, processes=procs)
    out = tmp_path / "out"
    r = crashwindow("run", path, "--pg", pg_cluster, "--out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    err = by_name(load_result(out))["exits-at-start"]["error"]
    assert err.startswith("accounting exited while starting (exit status 2): "), err
    assert "consumer name 'ledgers' has no default effect" in err, err
    assert "consumer name 'ledgers' has no default effect" in r.stdout + r.stderr
