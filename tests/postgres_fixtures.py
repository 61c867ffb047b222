"""A throwaway PostgreSQL cluster for tests: initdb in a temp dir, pg_ctl on a free port.

Never the machine's own server: each cluster has its own data directory, socket directory and
port, and ``kill_all`` (tests/conftest.py) stops any a test left running. initdb and pg_ctl refuse
to run as root, so as root the server binaries (only they: the test's venv may sit in a home
directory the ``postgres`` user cannot read) run as ``postgres`` through runuser.
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

import pytest

from tests.ports import free_port


def bin_dir() -> pathlib.Path:
    """Debian's postgresql server binaries (the newest installed); skips the test when none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return pathlib.Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.skip("postgresql is not installed")
    return pathlib.Path(initdb).parent


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


_STARTED: list[Cluster] = []


@dataclass
class Cluster:
    dir: pathlib.Path
    port: int = field(default_factory=free_port)
    running: bool = False
    durable: bool = False  # fsync on, as a floor's archive runs (the benches that compare rates)

    @property
    def data(self) -> pathlib.Path:
        return self.dir / "data"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=5"

    def _run(self, *argv: str) -> None:
        done = subprocess.run(_as_server_user(list(argv)), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {(done.stderr or done.stdout)[-800:]}")

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            str(bin_dir() / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )

    def start(self) -> None:
        # fsync off: a test needs no protection from a power cut, and a killed server still keeps
        # every commit (the OS has it). synchronous_commit stays on: the archive acknowledges to the
        # broker after a commit, and the restart test kills the server.
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        options += " -c fsync=on" if self.durable else " -c fsync=off"
        self._run(
            str(bin_dir() / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "log"),
            "-w",
            "-o",
            options,
            "start",
        )
        self.running = True
        if self not in _STARTED:
            _STARTED.append(self)

    def stop(self, mode: str = "immediate") -> None:
        if self.running:
            self._run(str(bin_dir() / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
            self.running = False


# Where a cluster without fsync lives: in memory (tmpfs) when the host has /dev/shm. On disk, the
# session's cluster (a database per archive test, a few hundred MB) took 35 s to delete at the end
# of the suite: on a file system mounted with ``discard`` every unlink waits for the disk to trim
# the freed blocks. A durable cluster (the benches that compare commit rates) stays on disk.
MEMORY = pathlib.Path("/dev/shm")


def make_cluster(*, durable: bool = False) -> Cluster:
    """A new cluster, started; in a fresh directory under /dev/shm or the system temp dir (both of
    which ``postgres`` can reach, unlike a root-owned pytest tmp_path under /tmp/pytest-of-root)."""
    where = MEMORY if not durable and MEMORY.is_dir() and os.access(MEMORY, os.W_OK) else None
    d = pathlib.Path(tempfile.mkdtemp(prefix="tablectl-pg-", dir=where))
    d.chmod(0o755)
    cluster = Cluster(d, durable=durable)
    cluster.init()
    cluster.start()
    return cluster


def remove(cluster: Cluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.dir, ignore_errors=True)


def kill_all() -> None:
    while _STARTED:
        remove(_STARTED.pop())
