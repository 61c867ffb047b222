"""A shipped example table, copied with its fixed loopback ports and serial paths moved to free
ports and a test's own folder, so tests that run it as `tablectl sim` and `tablectl run` do not
collide with each other or with a copy of the table running on the machine."""

from __future__ import annotations

import re
from pathlib import Path

from controller.shipped import table_file
from tests.ports import free_port
from tests.support.flat_table import flat_text


def relocated_table(game: str, folder: Path) -> Path:
    """The example table of ``game`` in ``folder``, written out whole (its shared base merged in,
    so a test may change any setting by its line): every ``port = N`` a free port, every serial
    ``path`` under ``folder``; the game and profiles still resolve (as shipped files)."""
    text = flat_text(table_file(game))
    ports: dict[str, str] = {}

    def port(m: re.Match[str]) -> str:
        return f"port = {ports.setdefault(m.group(1), str(free_port()))}"

    text = re.sub(r"(?m)^port = (\d+)$", port, text)
    text = re.sub(
        r'(?m)^path = "/tmp/tablectl/[^/"]+/([^"]+)"$', lambda m: f'path = "{folder}/{m.group(1)}"', text
    )
    out = folder / f"{game}.toml"
    out.write_text(text, encoding="utf-8")
    return out
