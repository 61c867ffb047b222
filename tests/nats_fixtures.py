"""A three-node NATS cluster of its own (Debian's nats-server 2.9: JetStream and the MQTT
listener) on free loopback ports, for the clustered archive's tests and bench/archive_failover.py.
Never the machine's own server. A node is ready when its log says so; the cluster is ready when
one node's log names a JetStream metadata leader.

Open (no users, no TLS) by default; with ``Secure`` each node runs the shipped
config/nats/node.conf (TLS on clients, routes and MQTT; the accounts `tablectl archive
nats-accounts` makes), only its ports, paths and names replaced."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from dataclasses import dataclass, field

import pytest

from controller.archive.nats_accounts import render
from tests.ports import free_port

CLUSTER = "tablectl"
SHIPPED = pathlib.Path(__file__).resolve().parents[1] / "config" / "nats" / "node.conf"


@dataclass(frozen=True)
class Secure:
    pki: pathlib.Path  # ca.crt, server.crt, server.key (tests/mosquitto_fixtures.make_pki)
    passwords: dict[str, str]  # user -> password, as `tablectl archive nats-accounts` reads them


def _replace(text: str, old: str, new: str) -> str:
    if old not in text:  # the shipped file changed: the tests must follow it, never drift from it
        raise AssertionError(f"config/nats/node.conf no longer has {old!r}")
    return text.replace(old, new)


def nats_binary() -> str:
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not pathlib.Path(binary).exists():
        pytest.skip("nats-server is not installed")
    return binary


@dataclass
class Node:
    name: str
    dir: pathlib.Path
    port: int = field(default_factory=free_port)
    cluster_port: int = field(default_factory=free_port)
    mqtt_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log(self) -> pathlib.Path:
        return self.dir / f"{self.name}.log"

    def secure_conf(self, routes: list[int], secure: Secure, accounts: pathlib.Path) -> str:
        text = SHIPPED.read_text(encoding="utf-8")
        text = _replace(text, "server_name: nats-1", f"server_name: {self.name}")
        text = _replace(text, "listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{self.port}")
        text = _replace(text, "listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{self.cluster_port}")
        text = _replace(text, "listen: 0.0.0.0:8883", f"listen: 127.0.0.1:{self.mqtt_port}")
        text = _replace(text, "/etc/nats/tls/", f"{secure.pki}/")
        text = _replace(text, '"/var/lib/nats/jetstream"', f'"{self.dir / self.name}"')
        text = _replace(text, "max_file_store: 200GB", "max_file_store: 4GB, max_memory_store: 256MB")
        shipped_routes = text[text.index("  routes: [") : text.index("]", text.index("  routes: [")) + 1]
        route_list = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        text = _replace(text, shipped_routes, f"  routes: [{route_list}]")
        return _replace(text, 'include "accounts.conf"', f'include "{accounts.name}"')

    def conf(self, routes: list[int]) -> str:
        route_list = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        return (
            f"server_name: {self.name}\nlisten: 127.0.0.1:{self.port}\n"
            f'jetstream {{ store_dir: "{self.dir / self.name}", max_memory_store: 268435456, '
            "max_file_store: 4294967296 }\n"
            f"cluster {{ name: {CLUSTER}, listen: 127.0.0.1:{self.cluster_port}, routes: [{route_list}] }}\n"
            f"mqtt {{ listen: 127.0.0.1:{self.mqtt_port}, stream_replicas: 3, consumer_replicas: 3 }}\n"
        )


@dataclass
class NatsCluster:
    dir: pathlib.Path
    nodes: list[Node] = field(default_factory=list)
    secure: Secure | None = None

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = [Node(f"n{i}", self.dir) for i in (1, 2, 3)]

    @property
    def servers(self) -> list[str]:
        if self.secure is not None:
            return [f"tls://127.0.0.1:{n.port}" for n in self.nodes]
        return [n.url for n in self.nodes]

    def start_node(self, node: Node) -> None:
        routes = [n.cluster_port for n in self.nodes if n is not node]
        conf = self.dir / f"{node.name}.conf"
        if self.secure is None:
            conf.write_text(node.conf(routes), encoding="utf-8")
        else:
            accounts = self.dir / "accounts.conf"
            # Written aside and renamed into place: the nodes share this file, and rewriting it in
            # place for the second node truncated it under the first while that one read its
            # config (on a loaded machine: a node with no accounts let anyone in, and refused the
            # others' routes for accounts it did not know).
            aside = self.dir / f"accounts.conf.{node.name}"
            aside.write_text(render(self.secure.passwords), encoding="utf-8")
            os.replace(aside, accounts)
            conf.write_text(node.secure_conf(routes, self.secure, accounts), encoding="utf-8")
        node.proc = subprocess.Popen(
            [nats_binary(), "-c", str(conf), "-l", str(node.log)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def start(self, guard_s: float = 60.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            self.start_node(node)
        self.wait_log(lambda text: "Server is ready" in text, self.nodes, guard_s)
        self.wait_log(
            lambda text: "metadata leader" in text, self.nodes[:1] + self.nodes, guard_s, any_node=True
        )

    def wait_log(self, ready: object, nodes: list[Node], guard_s: float, *, any_node: bool = False) -> None:
        """Until each node's log (or any node's, ``any_node``) shows ``ready``; the log is a file the
        server writes, so this reads it again every 50 ms (a process outside, not a race inside)."""
        assert callable(ready)
        deadline = time.monotonic() + guard_s
        while True:
            seen = [
                n.log.exists() and ready(n.log.read_text(encoding="utf-8", errors="replace")) for n in nodes
            ]
            if any(seen) if any_node else all(seen):
                return
            for n in nodes:
                if n.proc is not None and n.proc.poll() is not None:
                    raise RuntimeError(
                        f"nats-server {n.name} exited: {n.log.read_text(errors='replace')[-800:]}"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError("the NATS cluster did not become ready")
            time.sleep(0.05)

    def kill(self, node: Node) -> None:
        """kill -9: no goodbye to the cluster or its clients."""
        if node.proc is not None:
            node.proc.kill()
            node.proc.wait()
            node.proc = None

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None:
                node.proc.terminate()
                try:
                    node.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
                node.proc = None
