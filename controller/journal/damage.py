"""A journal SQLite cannot read, told apart and located: a file that is not ours, or ours damaged
(where it breaks: the byte, the page, the record), in one line that never quotes a stored value
(a hole card's record must not be printed because a bit of it flipped)."""

from __future__ import annotations

import mmap
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from controller.errors import short_reason
from controller.journal.model import APPLICATION_ID, JournalError

_SQLITE_MAGIC = b"SQLite format 3\x00"


class DamagedJournalError(JournalError):
    """Our journal, but SQLite cannot read all of it; ``where`` says where it breaks."""

    def __init__(self, path: str | Path, where: str) -> None:
        super().__init__(f"{path}: damaged journal: {where}; restore it from a copy")
        self.where = where


def unreadable(path: str | Path, error: BaseException) -> JournalError:
    """Why SQLite cannot read ``path``, told apart: a file that is not ours ("not a tablectl
    journal") or our journal damaged, with where (truncated at which byte and page, or SQLite's
    own account of the first bad page). A damaged journal is evidence: restore it, do not replace it."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        return JournalError(f"{path}: cannot read: {e.strerror or e}")
    if not header.startswith(_SQLITE_MAGIC[: len(header)]) or not header:
        return JournalError(f"{path}: not a tablectl journal (not an SQLite database)")
    if len(header) < 100:
        return DamagedJournalError(path, f"truncated to {size} bytes, inside the SQLite header")
    if int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        return JournalError(f"{path}: not a tablectl journal (another application's SQLite database)")
    page_size = int.from_bytes(header[16:18], "big") or 1
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if size < page_size * pages:
        where = (
            f"truncated at byte {size} of {page_size * pages} (in page {size // page_size + 1} of {pages})"
        )
        return DamagedJournalError(path, where)
    return DamagedJournalError(path, _first_bad_page(path, page_size) or safe_reason(error))


# Python's sqlite3 quotes the whole cell when it cannot decode a text column ("Could not decode to
# UTF-8 column 'payload' with text '{...,"card":"10H"}'"): a flipped bit in a hole card's record
# would print the card. That text never leaves this module.
_UNDECODABLE = "Could not decode to UTF-8"
_PAGE = re.compile(r"[Pp]age (\d+)")
_TEXT_COLUMNS = ("kind", "classification", "payload", "prev_hash", "hash")


def safe_reason(error: BaseException) -> str:
    """One line about an SQLite failure that never quotes a stored value."""
    text = short_reason(error)
    if _UNDECODABLE in text:
        return "a stored text is not UTF-8"
    # SQLite's own messages name tables, columns and constraints, not values; cut anything that
    # looks like a quoted value anyway, whatever a future version adds.
    return text.split(" with text ", 1)[0].split("'", 1)[0].strip() or type(error).__name__


def failure(path: str | Path, error: sqlite3.Error, what: str) -> JournalError:
    """The JournalError for an SQLite failure while doing ``what``: a damaged file says where it
    breaks (the record's seq and the byte offset), anything else the reason in one line. Never a
    stored value."""
    if isinstance(error, sqlite3.DatabaseError) and is_damage(error):
        return unreadable(path, error)
    if _UNDECODABLE in str(error):
        return DamagedJournalError(path, locate_undecodable(path))
    return JournalError(f"{path}: {what}: {safe_reason(error)}")


def locate_undecodable(path: str | Path) -> str:
    """Which record holds text that is not UTF-8, and at which byte of the file (or of its
    write-ahead log); read as bytes so the value is never decoded, let alone shown."""
    conn = _bytes_reader(path)
    if conn is None:
        return "a stored text is not UTF-8"
    try:
        rows = conn.execute(f"SELECT seq, {', '.join(_TEXT_COLUMNS)} FROM records ORDER BY seq")
        for seq, *values in rows:
            for column, value in zip(_TEXT_COLUMNS, values, strict=True):
                if not isinstance(value, bytes):
                    continue
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError as e:
                    return (
                        f"record {seq}: its {column} is not UTF-8 ({_offset(path, value, e.start, column)})"
                    )
    except sqlite3.Error:
        pass
    finally:
        conn.close()
    return "a stored text is not UTF-8"


def record_offset(path: str | Path, seq: int | None) -> str:
    """``"; record N is at byte X of FILE"`` for a record found in the file (or its -wal), else "":
    where to look in the file, for whoever examines it. Its last two cells (prev_hash, hash) lie
    side by side and together are in no other record; the record is reported from its payload's
    first byte. Read as bytes: nothing of the record is decoded or shown."""
    conn = _bytes_reader(path) if seq is not None else None
    if conn is None:
        return ""
    try:
        row = conn.execute("SELECT payload, prev_hash, hash FROM records WHERE seq = ?", (seq,)).fetchone()
    except sqlite3.Error:
        row = None
    finally:
        conn.close()
    if row is None or not all(isinstance(v, bytes) for v in row):
        return ""
    payload, prev_hash, hash_ = row
    for name, at in _found(path, prev_hash + hash_):
        if at >= len(payload):
            return f"; record {seq} is at byte {at - len(payload)} of {name}"
    return ""


def _offset(path: str | Path, value: bytes, start: int, column: str) -> str:
    """Where the bad byte lies: in the file (or its -wal) when the cell is found there whole."""
    found = next(_found(path, value), None)
    return f"byte {found[1] + start} of {found[0]}" if found else f"byte {start} of the {column}"


def _bytes_reader(path: str | Path) -> sqlite3.Connection | None:
    """The journal opened read-only, its text read as bytes (never decoded); None if it cannot be."""
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    conn.text_factory = bytes
    return conn


def _found(path: str | Path, needle: bytes) -> Iterator[tuple[str, int]]:
    """Where ``needle`` first lies in the journal's file, then in its write-ahead log: the file's
    name and the byte. Mapped and searched as bytes, nothing decoded."""
    for name in (str(path), f"{path}-wal"):
        try:
            with open(name, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at = data.find(needle)
        except (OSError, ValueError):  # no such file; an empty one cannot be mapped
            continue
        if at >= 0:
            yield Path(name).name, at


def is_damage(error: sqlite3.DatabaseError) -> bool:
    """SQLite's own word that the file's bytes are wrong (not, say, a dropped table)."""
    return getattr(error, "sqlite_errorcode", None) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _first_bad_page(path: str | Path, page_size: int) -> str | None:
    try:
        conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
        try:
            row = conn.execute("PRAGMA quick_check(1)").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    text = str(row[0]) if row else ""
    if text in ("", "ok"):
        return None
    # SQLite names pages; whoever restores or examines the file wants the byte offset.
    page = _PAGE.search(text)
    where = f" (page {page[1]} starts at byte {(int(page[1]) - 1) * page_size})" if page else ""
    return safe_reason(Exception(text.replace("\n", " ")[:200])) + where
