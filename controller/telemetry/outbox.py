"""The journal as the telemetry outbox, read in a thread of its own.

SQLite calls block: a read of a few hundred records, or the cursor commit waiting for the
writer's lock, must not stall the event loop the supervisor runs the table on. So this object
owns one worker thread and one Journal opened in it (Python's sqlite3 ties a connection to the
thread that opened it). It never appends: it reads records and moves the published cursor,
which is why it opens the file writable (``mark_published`` needs a write) but with
``create=False``, so a wrong path is an error rather than a new empty journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from controller.gaming_day import PENNSYLVANIA, GamingDay
from controller.journal import Classification, Journal
from controller.telemetry.payloads import encode, event_message

T = TypeVar("T")


class JournalOutbox:
    def __init__(self, path: str | Path, gaming_day: GamingDay = PENNSYLVANIA) -> None:
        self.path = Path(path)
        self.gaming_day = gaming_day
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="telemetry-journal")
        self._journal: Journal | None = None  # touched only in the worker thread
        self._journal_id: str | None = None  # the first record's hash, once there is one
        self._closed = False

    def _open(self) -> Journal:
        if self._journal is None:
            self._journal = Journal.open(self.path, create=False)
        return self._journal

    async def _run(self, fn: Callable[[Journal], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self._open()))

    def _identity(self, journal: Journal) -> str | None:
        """The journal's identity: the hash of its first record when that record is public (a
        ``table_opened``, whose hash is published with it anyway); None for an empty journal, or
        one whose first record is withheld (its hash must not leave the table)."""
        if self._journal_id is None:
            first = next(journal.records(), None)
            if first is not None and first.classification is Classification.PUBLIC:
                self._journal_id = first.hash
        return self._journal_id

    async def journal_id(self) -> str | None:
        return await self._run(self._identity)

    async def cursor(self) -> tuple[int, int]:
        """(published_seq, last_seq)."""
        return await self._run(lambda j: (j.published_seq(), j.last_seq))

    async def encoded_after(self, seq: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` records after ``seq``, as (seq, the events message), in seq order.

        Encoding happens here, beside the read, so the redaction rule is applied before a record
        ever reaches the event loop.
        """

        def read(journal: Journal) -> list[tuple[int, bytes]]:
            out: list[tuple[int, bytes]] = []
            # One record before the batch is read too: whether it is public decides whether the
            # first message may carry its prev_hash (payloads.event_message).
            prev_public = False
            journal_id = self._identity(journal)
            for record in journal.records(after_seq=max(0, seq - 1)):
                if record.seq > seq:
                    out.append(
                        (
                            record.seq,
                            encode(
                                event_message(
                                    record, self.gaming_day, prev_public=prev_public, journal_id=journal_id
                                )
                            ),
                        )
                    )
                    if len(out) >= limit:
                        break
                prev_public = record.classification is Classification.PUBLIC
            return out

        return await self._run(read)

    async def encoded_range(self, first: int, last: int) -> list[tuple[int, bytes]]:
        """Records ``first``..``last`` that the journal holds, encoded exactly as ``encoded_after``
        encodes them (a withheld record stays a placeholder): what ``republish`` sends again."""
        if last < first:
            return []
        return [m for m in await self.encoded_after(first - 1, last - first + 1) if m[0] <= last]

    async def mark_published(self, seq: int) -> None:
        await self._run(lambda j: j.mark_published(seq))

    async def close(self) -> None:
        def close(_: Journal | None = None) -> None:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, close)
        self._executor.shutdown(wait=False)
