"""The shipped broker config is the one docs/scale-out.md requires of the archive's broker."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _settings(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def test_the_shipped_mosquitto_conf_queues_without_limit_as_the_docs_require() -> None:
    conf = _settings((ROOT / "config/mosquitto/mosquitto.conf").read_text(encoding="utf-8"))
    docs = (ROOT / "docs/scale-out.md").read_text(encoding="utf-8")
    # What the docs say is required ...
    required = re.search(r"`max_queued_messages (\d+)`", docs)
    assert required is not None, "docs/scale-out.md no longer names max_queued_messages"
    # ... is what ships: a limit drops QoS 1 events mosquitto acknowledged to the tables.
    assert conf["max_queued_messages"] == required[1] == "0"
    assert conf["persistence"] == "true"
