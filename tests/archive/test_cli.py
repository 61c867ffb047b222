"""``tablectl archive``'s refusals: exit 2 and one line naming what is wrong."""

from __future__ import annotations

import json
import pathlib

import pytest

from controller.cli import main
from tests.archive.conftest import fill_journal
from tests.ports import free_port


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["archive", "--broker", "mqtt://user:pw@h:1883", "--db", "postgresql://x"],
            "may not carry credentials",
        ),
        (["archive", "--broker", "mqtt://h", "--db", "postgresql://x", "--group", "a/b"], "archive group"),
        (["archive", "verify", "--db", "postgresql://x", "--journal", "/nonexistent.db"], "no such journal"),
        (
            ["archive", "--broker", "mqtt://h", "--db", "postgresql://x", "--tables-from", "/nonexistent"],
            "--tables-from /nonexistent: cannot read",
        ),
        (
            ["archive", "--broker", "mqtt://h", "--db", "postgresql://x", "--table", "floor/archive"],
            "reserved for the casino's archive",
        ),
        (["archive", "report", "--db", "postgresql://x", "--day", "yesterday"], "is not a date"),
    ],
)
def test_refused_with_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "pw" not in err


def test_an_unreachable_database_is_one_line(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "j.db"
    fill_journal(journal, "dab-01", 3)
    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/x?connect_timeout=2"
    assert main(["archive", "verify", "--db", dsn, "--journal", str(journal)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archive verify: database:") and err.count("\n") == 1


@pytest.mark.usefixtures("restore_logging")
def test_archive_with_an_unreachable_database_gives_up_in_one_line(
    tmp_path: pathlib.Path, db: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Not for ever in silence (issue 26): a few attempts, each a JSON log line like `run`'s, then
    one line on stderr and exit 2. The database is missing from a running server: no waiting
    makes it appear."""
    missing = db.replace("/t_", "/nosuch_")
    code = main(["archive", "--broker", f"mqtt://127.0.0.1:{free_port()}", "--db", missing])
    out, err = capfd.readouterr()
    assert code == 2
    assert err.startswith("archive: PostgreSQL unreachable after 5 attempts:") and err.count("\n") == 1
    assert "does not exist" in err
    attempts = [json.loads(line) for line in out.splitlines()]
    assert [a["attempt"] for a in attempts if a["event"] == "archive.db_unavailable"] == [1, 2, 3, 4, 5]
