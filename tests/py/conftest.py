"""Fixtures for the integration tests; the helpers are in cwtest.py.

Every test that touches PostgreSQL gets its own database, cloned from a
migrated template on one throwaway cluster per test session (pg_cluster,
pg_template, db).  procs starts real processes and makes sure every one is
gone afterwards; broker is a fake broker of the test's own; rabbit_node a
throwaway RabbitMQ node.
"""
import os
import subprocess
import uuid

import psycopg
import pytest

from cwtest import SOURCE_DIR, Procs, binary, conninfo_with_db, wait_for


@pytest.fixture
def procs(tmp_path):
    ps = Procs(tmp_path)
    yield ps
    ps.cleanup()


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory):
    """One throwaway cluster per test session (or CW_TEST_PG to reuse one)."""
    given = os.environ.get("CW_TEST_PG")
    if given:
        yield given
        return
    out = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "pg-cluster"), "start"],
                         check=True, capture_output=True, text=True).stdout.strip()
    cluster_dir = dict(kv.split("=", 1) for kv in out.split())["host"]
    try:
        yield out
    finally:
        subprocess.run([os.path.join(SOURCE_DIR, "scripts", "pg-cluster"), "stop", cluster_dir],
                       check=False)


@pytest.fixture(scope="session")
def pg_template(pg_cluster):
    """A database migrated with `outboxctl migrate`, used as template."""
    name = "cw_template_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([binary("outboxctl"), "--db", conninfo_with_db(pg_cluster, name), "migrate"],
                   check=True, capture_output=True, text=True)
    return name


@pytest.fixture
def db(pg_cluster, pg_template):
    """A fresh migrated database for one test; yields its connection string."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    yield conninfo_with_db(pg_cluster, name)
    with psycopg.connect(pg_cluster, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def broker(procs, tmp_path):
    """A fake broker on a Unix socket in tmp_path; yields (proc, socket path)."""
    sock = str(tmp_path / "broker.sock")
    p = procs.start("fakebroker", [binary("fakebroker"), "--socket", sock])
    wait_for(lambda: os.path.exists(sock) or not p.alive(), 10, "broker socket")
    assert p.alive(), p.stderr_text()
    return p, sock


@pytest.fixture(scope="session")
def rabbit_node(tmp_path_factory):
    """A throwaway RabbitMQ node (scripts/rabbit-node) for the session:
    yields (url, node_dir); stopped and removed afterwards."""
    node_dir = str(tmp_path_factory.mktemp("rabbit"))
    script = os.path.join(SOURCE_DIR, "scripts", "rabbit-node")
    r = subprocess.run([script, "start", node_dir], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"rabbit-node start failed: {r.stderr}"
    url = r.stdout.strip()
    try:
        yield url, node_dir
    finally:
        subprocess.run([script, "stop", node_dir], capture_output=True, text=True, timeout=120)
