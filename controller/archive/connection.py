"""An archive worker's one PostgreSQL connection (the MQTT worker's and the JetStream worker's):
opened on first use, the schema migrated and the known tables registered before anything is
stored; dropped after a failure, to be opened again on the next use."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import psycopg

from controller.archive.schema import migrate
from controller.archive.store import EventStore


class ArchiveConnection:
    def __init__(self, dsn: str, worker: str, tables: Iterable[tuple[str, str]], tables_source: str) -> None:
        self.dsn, self.worker = dsn, worker
        self.tables, self.tables_source = tables, tables_source
        self.store: EventStore | None = None  # open while set

    async def open(self) -> EventStore:
        if self.store is None:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await migrate(conn)
            store = EventStore(conn, self.worker)
            await store.register(self.tables, self.tables_source)
            self.store = store
        return self.store

    async def drop(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            with contextlib.suppress(psycopg.Error):
                await store.conn.close()
