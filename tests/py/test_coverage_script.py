"""scripts/coverage refuses a bad layer or a missing value before it builds
or starts anything: a coverage run takes minutes, and a typo must not cost
them."""
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
