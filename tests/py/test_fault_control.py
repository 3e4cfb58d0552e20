"""libfiu's remote control is private to the user who started the process.

libfiu obeys whoever can write a process's control FIFO, so the FIFOs live in
a directory made by mkdtemp (mode 0700), are 0600 themselves, and are named
in the process's start event ("fault_fifo").  Another user (nobody, through
setpriv) can neither open them nor drive them with fiu-ctrl, while their
owner can.  A CW_FIU_FIFO whose directory others may enter is refused.
"""
# needs: pg
import os
import shutil
import signal
import stat
import subprocess

import pytest

from cwtest import wait_for
from test_relay import insert_rows, start_relay, wait_published

FIU_CTRL = shutil.which("fiu-ctrl") or "/usr/bin/fiu-ctrl"


def as_nobody(args, timeout=10):
    """Runs args as the user nobody (no groups); needs root."""
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           *args], capture_output=True, text=True, timeout=timeout)


def fifo_prefix(proc):
    """The FIFO prefix named in proc's start event (None: remote control off)."""
    start = wait_for(lambda: (proc.events("start") or [None])[0] or
                     (None if proc.alive() else pytest.fail(proc.stderr_text())),
                     10, f"{proc.name}'s start event")
    return start["fault_fifo"]


def test_fifos_are_private_and_another_user_cannot_use_them(db, procs, broker, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user (setpriv)")
    _, sock = broker
    # No CW_FIU_FIFO: the process makes its own directory.
    relay = start_relay(procs, db, sock, env_fifo="")
    prefix = fifo_prefix(relay)
    fdir = os.path.dirname(prefix)
    assert os.path.basename(prefix) == "fiu" and os.path.basename(fdir).startswith("cwfiu")

    st = os.lstat(fdir)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.geteuid()
    for end in ("in", "out"):
        fst = os.lstat(f"{prefix}-{relay.pid}.{end}")
        assert stat.S_ISFIFO(fst.st_mode) and stat.S_IMODE(fst.st_mode) == 0o600

    # Another user: refused at the directory, by the kernel.
    probe = ("import os, sys\n"
             "try:\n"
             "    os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)\n"
             "except PermissionError:\n"
             "    print('refused'); sys.exit(0)\n"
             "except OSError as e:\n"
             "    print('error', e.errno); sys.exit(1)\n"
             "print('opened'); sys.exit(1)\n")
    r = as_nobody(["/usr/bin/python3", "-c", probe, f"{prefix}-{relay.pid}.in"])
    assert r.returncode == 0 and r.stdout.strip() == "refused", r.stdout + r.stderr
    # ... and fiu-ctrl run by that user cannot arm a crash (fiu-ctrl exits 0
    # even then: the proof is that the relay publishes on, alive).
    r = as_nobody([FIU_CTRL, "-f", prefix, "-c", "enable name=relay/after_publish,failinfo=0",
                   str(relay.pid)])
    assert "unknown pid or named pipe" in r.stdout + r.stderr, r.stdout + r.stderr
    first = insert_rows(db, 1)
    wait_published(db, first)
    assert relay.alive() and relay.events("fault_hit") == []

    # The owner can: the same command through the same FIFO arms the crash,
    # and the next publish kills the relay at that window.
    r = subprocess.run([FIU_CTRL, "-f", prefix, "-c", "enable name=relay/after_publish,failinfo=0",
                        str(relay.pid)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "unknown pid" not in r.stdout, r.stdout + r.stderr
    insert_rows(db, 1)
    assert relay.wait_exit(15) == -signal.SIGKILL
    assert [e["point"] for e in relay.events("fault_hit")] == ["relay/after_publish"]
    # Killed, it could not clean up: its directory is left for the runner
    # (proc_fifo_cleanup) or for the owner to remove.
    shutil.rmtree(fdir)


def test_a_fifo_directory_others_can_enter_is_refused(db, procs, broker, tmp_path):
    _, sock = broker
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    relay = start_relay(procs, db, sock, env_fifo=str(shared / "fiu"))
    assert fifo_prefix(relay) is None
    assert "fault control off" in relay.stderr_text() and "mode 0700" in relay.stderr_text()
    assert os.listdir(shared) == []
    assert relay.alive(), "the process runs on, without remote control"


def test_a_clean_stop_removes_the_fifos_and_their_directory(db, procs, broker):
    _, sock = broker
    relay = start_relay(procs, db, sock, env_fifo="")
    fdir = os.path.dirname(fifo_prefix(relay))
    assert os.path.isdir(fdir)
    assert relay.stop() == 0
    assert not os.path.exists(fdir)
