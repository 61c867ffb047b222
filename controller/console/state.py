"""The console's state on disk, beside the journal: its signing key, its sessions and its recent
sign-in attempts, each written readable by the owner only and replaced whole (a crash leaves the
old file or the new one, never half of one).

The documents are signed (HMAC-SHA256 with the key): a file edited by hand, or copied from another
table, is refused as a whole and the console starts from nothing for that file, with an error
logged. The key lives in its own file, made on first start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY_BYTES = 32
MAX_STATE_BYTES = 4 << 20  # the sessions and attempts are bounded far below this


class StateRefused(Exception):
    """A state file that cannot be trusted (unsigned, tampered, unreadable); one line."""


def state_paths(journal: Path) -> tuple[Path, Path, Path]:
    """The key, sessions and sign-in files of the console in front of the table journalling to
    ``journal``: ``<stem>.console-key``, ``<stem>.console-sessions.json`` and
    ``<stem>.console-sign-ins.json`` in the journal's directory."""
    stem = journal.name.rsplit(".", 1)[0] if "." in journal.name else journal.name

    def beside(part: str) -> Path:
        return journal.with_name(f"{stem}.console-{part}")

    return beside("key"), beside("sessions.json"), beside("sign-ins.json")


def write_private(path: Path, data: bytes) -> None:
    """``data`` into ``path``: a temporary file made 0600, synced, renamed over the old one."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an old temporary file keeps its mode through O_CREAT
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def load_key(path: Path) -> bytes:
    """The signing key in ``path``, made (random, 0600) when there is none. OSError when the
    directory cannot be written: the console cannot keep sessions without it."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(KEY_BYTES)
        write_private(path, key)
        return key
    if len(key) != KEY_BYTES:
        raise StateRefused(f"{path}: not a console key ({len(key)} bytes; remove it to make a new one)")
    return key


def _mac(key: bytes, kind: str, body: Any) -> str:
    canonical = json.dumps([kind, body], sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def save_signed(path: Path, key: bytes, kind: str, body: Any) -> None:
    doc = {"kind": kind, "mac": _mac(key, kind, body), "body": body}
    write_private(path, json.dumps(doc, separators=(",", ":")).encode())


def load_signed(path: Path, key: bytes, kind: str) -> Any:
    """The body saved by ``save_signed`` (None when there is no file); StateRefused when it is not
    ours, is not a ``kind`` document, or was changed since."""
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            raise StateRefused(f"{path}: larger than {MAX_STATE_BYTES} bytes")
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StateRefused(f"{path}: unreadable ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("kind") != kind or "body" not in doc:
        raise StateRefused(f"{path}: not a console {kind} file")
    if not hmac.compare_digest(str(doc.get("mac", "")), _mac(key, kind, doc["body"])):
        raise StateRefused(f"{path}: the signature does not match (edited, or another table's)")
    return doc["body"]


class SignedFile:
    """One signed document, saved off the event loop after each change: at most one write at a
    time, and ``save()`` returns once a write that includes every change made before it is on
    disk (concurrent callers share one write)."""

    def __init__(self, path: Path, key: bytes, kind: str, body: Callable[[], Any]) -> None:
        self.path, self.key, self.kind, self.body = path, key, kind, body
        self._changes = 0
        self._saved = 0
        self._lock: asyncio.Lock | None = None

    def load(self) -> Any:
        return load_signed(self.path, self.key, self.kind)

    def changed(self) -> None:
        self._changes += 1

    async def save(self) -> None:
        want = self._changes
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._saved >= want:
                return
            upto, body = self._changes, self.body()
            await asyncio.to_thread(save_signed, self.path, self.key, self.kind, body)
            self._saved = upto
