"""Every benchmark in scripts/ builds and runs from a fresh clone, at a size
that takes seconds: a benchmark that no longer links, or whose SQL no longer
matches the code it measures, fails here rather than on the day someone
needs its figure.  Figures are not judged (they are the benchmarks' job,
and this machine is busy); each run must end with status 0, or 1 only where
the script's own goal was missed and it said so, and print its summary.

The benchmarks that run whole suites, a RabbitMQ node or a browser
(bench-scenarios, bench-recovery, bench-shards, bench-sim, bench-report,
bench-latency, bench-rabbitmq, bench-window-target) take minutes at any size; here they must
refuse a bad argument with a usage line and status 2 before starting
anything.
"""
# needs: pg
import os
import re
import subprocess

import pytest

from cwtest import BUILD_DIR, SOURCE_DIR

# script, arguments, environment, a line its summary prints
RUNS = [
    ("bench-broker", ["500"], {}, "deliver+ack, prefetch 100"),
    ("bench-relay", [], {"BENCH_ROWS": "1000", "BENCH_PAIRS": "2"},
     "two relays: what the cores allow at their CPU per message / the ceiling: median"),
    ("bench-claim", [], {"BENCH_DUE": "200", "BENCH_BACKOFF": "0 200", "BENCH_CLAIMS": "5",
                         "BENCH_PAIRS": "2"},
     "backing off / healthy, per round: median"),
    ("bench-api", ["1", "2", "4"], {}, "ratio API / pgbench, per round: median"),
    ("bench-proxy", ["1", "2", "1000"], {}, "relay: proxied/direct, per round: median"),
    ("bench-slowclients", ["1", "2", "2"], {}, "ratio with / alone, per round: median"),
    ("bench-window", ["3"], {}, "goal (>= 99%)"),
    ("bench-consumer", ["--events", "1000", "--seconds", "1", "--pairs", "2"], {},
     "consumer/pgbench, the median of 2 pairs"),
]
USAGE_ONLY = ["bench-scenarios", "bench-recovery", "bench-shards", "bench-sim", "bench-report",
              "bench-latency", "bench-rabbitmq", "bench-window-target"]


@pytest.mark.parametrize("script,args,env,summary", RUNS, ids=[r[0] for r in RUNS])
def test_benchmark_runs_small(script, args, env, summary):
    r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", script), *args],
                       env={**os.environ, "CW_BUILD_DIR": BUILD_DIR, **env},
                       capture_output=True, text=True, timeout=600, cwd=SOURCE_DIR)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1), out
    assert "ERROR" not in out and "undefined reference" not in out, out
    assert summary in out, out
    if script == "bench-relay":
        # the CPU bound is a figure, not an empty field
        assert re.search(r"cores carry at most [1-9][0-9]* msg/s", out), out
    if r.returncode == 1:
        assert "NOT met" in out or "MISSES" in out, out


def test_bench_relay_refuses_a_bad_pair_count():
    r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "bench-relay")],
                       env={**os.environ, "CW_BUILD_DIR": BUILD_DIR, "BENCH_PAIRS": "0"},
                       capture_output=True, text=True, timeout=120, cwd=SOURCE_DIR)
    assert r.returncode == 2 and "BENCH_PAIRS must be a number from 1 to 99" in r.stderr, r


@pytest.mark.parametrize("script", USAGE_ONLY)
def test_benchmark_refuses_a_bad_argument(script):
    r = subprocess.run([os.path.join(SOURCE_DIR, "scripts", script), "--no-such-flag"],
                       env={**os.environ, "CW_BUILD_DIR": BUILD_DIR},
                       capture_output=True, text=True, timeout=120, cwd=SOURCE_DIR)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "usage" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
