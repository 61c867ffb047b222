"""One table-file loader (issue 14): the file is read and checked once; the telemetry and the
console take their sections from that reading, and every problem is one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.appliance.wiring import build_telemetry
from controller.cli import main
from controller.errors import ConfigError
from controller.shipped import shipped_file, shipped_names
from controller.supervisor.config import load_table_config


def _table(tmp_path: Path, extra: str = "") -> Path:
    src = shipped_file("tables", "double-back-jack")
    assert src is not None
    # Copied out of the checkout: the game and profiles are found among the shipped files.
    path = tmp_path / "t.toml"
    path.write_text(src.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return path


def test_the_telemetry_and_console_use_the_one_reading(tmp_path: Path) -> None:
    path = _table(tmp_path, '\n[telemetry]\nbroker = "mqtt://127.0.0.1:1883"\nkeepalive_s = 30\n')
    config = load_table_config(path)
    path.write_text("not toml at all [", encoding="utf-8")  # a second read would now fail
    telemetry, _ = build_telemetry(config, None, tmp_path / "j.db")
    assert telemetry is not None and telemetry.broker.keepalive == 30


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        ("\n[extra]\nx = 1\n", "extra: unknown section (expected [table], [devices.<name>]"),
        (
            "\n[telemetry]\nkeepalive_s = 1\n",
            "telemetry.keepalive_s: must be a whole number of seconds from 2",
        ),
        ("\n[telemetry]\nkeepalive_s = true\n", "telemetry.keepalive_s: must be a whole number of seconds"),
        ('\n[telemetry]\nusername = ""\n', "telemetry.username: must be a non-empty string"),
        ("\n[telemetry]\nrequire_tls = 1\n", "telemetry.require_tls: must be true or false"),
        ("\n[console]\nusers = 7\n", "console.users: must be a path"),
        ("\n[console]\nlisten = 7\n", "console.listen: must be a string HOST:PORT"),
        ("\n[telemetry]\nbroker = 7\n", "telemetry.broker: must be an mqtt:// or mqtts:// URL"),
    ],
)
def test_a_bad_section_is_one_line_naming_file_and_key(tmp_path: Path, extra: str, line: str) -> None:
    path = _table(tmp_path, extra)
    with pytest.raises(ConfigError) as info:
        load_table_config(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: {line}"), msg


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ('id = "dbj-01"', 'id = "dbj-01\\n"', "table.id: letters, digits, '.', '_' and '-' only"),
        ('id = "dbj-01"', "id = 7", "table.id: must be a non-empty string"),
        (
            'id = "dbj-01"',
            'id = "dbj-01"\nseats = 6',
            "table.seats: unknown key (expected id, site, game, time_zone, gaming_day_starts)",
        ),
    ],
)
def test_the_table_section_is_checked(tmp_path: Path, old: str, new: str, line: str) -> None:
    path = _table(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_table_config(path)
    assert str(info.value).startswith(f"{path}: {line}"), info.value


def test_a_shipped_table_is_found_by_name_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no config/ here: the name alone finds the shipped file
    assert main(["config", "check", "down-under"]) == 0
    assert "shipped/tables/down-under.toml: ok: table dub-01" in capsys.readouterr().out
    assert main(["config", "check", "down-unda"]) == 2
    err = capsys.readouterr().err
    tables = ", ".join(shipped_names("tables"))
    assert err == f"down-unda: no such table file (or name a shipped table: {tables})\n"


@pytest.mark.usefixtures("restore_logging")
def test_run_makes_no_directory_for_its_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    assert main(["run", "--config", "down-under", "--journal", str(missing / "j.db")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"tablectl run: --journal {missing / 'j.db'}: directory {missing} does not exist"
        " (create it for the appliance's user, or give --journal PATH)\n"
    )
    assert not (tmp_path / "nonexistent").exists()
    # No --journal: the default directory is not made either; the line says which and how.
    monkeypatch.setattr("controller.appliance.cli.JOURNAL_DIR", tmp_path / "var-lib-tablectl")
    assert main(["run", "--config", "down-under"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"tablectl run: no --journal given, and the default {tmp_path}/var-lib-tablectl/dub-01.db"
    )
    assert not (tmp_path / "var-lib-tablectl").exists()


async def test_the_table_keeps_its_files_gaming_day_and_opens_its_journal_at_the_real_time(
    tmp_path: Path,
) -> None:
    """Issue 26: table_opened was dated 1970; the gaming day is the table file's."""
    import time
    from datetime import time as clock_time

    from controller.gaming_day import GamingDay
    from controller.journal import Journal
    from controller.supervisor.supervisor import Supervisor
    from tests.relocated import relocated_table

    path = relocated_table("down-under", tmp_path)
    text = path.read_text(encoding="utf-8")
    # In place of the shared base's New York day from 06:00 (the table is written out whole).
    assert 'time_zone = "America/New_York"' in text and 'gaming_day_starts = "06:00"' in text
    text = text.replace('time_zone = "America/New_York"', 'time_zone = "America/Chicago"')
    text = text.replace('gaming_day_starts = "06:00"', 'gaming_day_starts = "05:30"')
    path.write_text(text, encoding="utf-8")
    config = load_table_config(path)
    assert config.gaming_day == GamingDay("America/Chicago", clock_time(5, 30))
    began = time.time()
    supervisor = Supervisor(config, tmp_path / "j.db")
    await supervisor.start()  # its devices are not there: it waits for them, which is enough here
    try:
        assert supervisor.table.calendar == config.gaming_day
    finally:
        await supervisor.stop()
    with Journal.open(tmp_path / "j.db", create=False, readonly=True) as journal:
        first = next(journal.records())
    assert first.kind == "table_opened" and began <= first.at <= time.time()
