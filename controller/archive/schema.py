"""Versioned schema migrations: ``migrations/NNNN_name.sql``, applied in order, each once.

The applied versions are kept in ``schema_migrations``; each file runs in its own transaction
with the version row, under an advisory lock so two workers starting together do not race.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql\Z")
_LOCK = 0x7461626C  # any fixed key: the one advisory lock migrations take


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    out: list[Migration] = []
    for entry in resources.files("controller.archive").joinpath("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            out.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    out.sort(key=lambda m: m.version)
    return out


async def migrate(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Apply the migrations this database lacks; return the versions applied now."""
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version FROM schema_migrations")
        done = {row[0] for row in await cur.fetchall()}
        for m in migrations():
            if m.version in done:
                continue
            async with conn.transaction():
                await conn.execute(m.sql.encode("utf-8"))
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (m.version, m.name)
                )
            applied_now.append(m.version)
    return applied_now
