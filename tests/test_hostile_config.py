"""Issue 11 item 7: config and journal inputs that gave tracebacks or were silently accepted.
Each is refused by ``tablectl config check`` with exit 2 and one line naming the file, the key
and the rule."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.appliance.cli import check_main
from controller.cli import main
from controller.supervisor.rig import ROOT
from tests.console.conftest import write_users
from tests.console.test_tls import make_cert
from tests.support.flat_table import flatten

TABLE = "tables/double-attack.toml"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A copy of the shipped config tree, to spoil one file of."""
    shutil.copytree(
        ROOT / "config", tmp_path / "config", ignore=shutil.ignore_patterns("mosquitto", "systemd")
    )
    return tmp_path / "config"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"# ", b"# caf\xe9 ", 1))


def _drop_device(path: Path, name: str) -> None:
    """Remove ``[devices.<name>]`` and its subtables (``[devices.<name>.sim]``) from a table file
    (written out whole first: a device its base gives cannot be taken out otherwise)."""
    flatten(path)
    out, dropping = [], False
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("["):
            dropping = line.startswith((f"[devices.{name}]", f"[devices.{name}."))
        if not dropping:
            out.append(line)
    path.write_text("".join(out), encoding="utf-8")


def _console(c: Path, section: str) -> None:
    write_users(c / "tables/users.toml")
    _append(c / TABLE, "\n[console]\n" + section)


def _certs(c: Path, cert: str, key: str) -> None:
    """``[console]`` with the TLS files ``cert`` and ``key`` (made by openssl, as the TLS tests do;
    "garbage" writes a file that is no certificate, "missing" none)."""
    for name in ("a", "b"):
        make_cert(c / "tables", name)
    (c / "tables/garbage.crt").write_text("hello\n", encoding="utf-8")
    _console(c, f'users = "users.toml"\ntls_cert = "{cert}"\ntls_key = "{key}"\n')


def run_refused(table: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``tablectl run --config TABLE`` writes on stderr when it refuses the file (exit 2), run
    in this process through the command's own ``main`` (a fresh interpreter per case cost a second
    of imports each; test_the_cli_exits_2_with_the_one_line runs the real process once). A run that
    is not refused fails here, at the supervisor it would have started."""
    import controller.appliance.cli as run_cli

    def not_refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"tablectl run accepted {table}")

    monkeypatch.setattr(run_cli, "Supervisor", not_refused)
    capsys.readouterr()
    code = main(["run", "--config", str(table), "--journal", str(table.parent.parent / "j.db")])
    err = capsys.readouterr().err
    assert code == 2, err
    return err


CASES: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    # (id, spoil the tree, file that must be named, key, rule)
    ("table file not UTF-8", lambda c: _not_utf8(c / TABLE), TABLE, "", "not UTF-8 (byte"),
    (
        "game file not UTF-8",
        lambda c: _not_utf8(c / "games/double-attack.toml"),
        "games/double-attack.toml",
        "",
        "not UTF-8 (byte",
    ),
    (
        "sim number of the wrong type",
        lambda c: _edit(c / TABLE, "decks = 8", 'decks = 8\ncycle_s = "fast"'),
        TABLE,
        "devices.shuffler.sim.cycle_s",
        "must be a number of seconds",
    ),
    (
        "sim decks of the wrong type",
        lambda c: _edit(c / TABLE, "decks = 8", "decks = 8.5"),
        TABLE,
        "devices.shuffler.sim.decks",
        "whole number of decks",
    ),
    (
        "deeply nested TOML",
        lambda c: _append(c / TABLE, "\n[extra]\nx = " + "[" * 5000 + "]" * 5000 + "\n"),
        TABLE,
        "",
        "nested deeper than 32 levels",
    ),
    (
        "ca_file that is not a certificate",
        lambda c: (
            (c / "tables/not-a-ca.pem").write_text("hello\n", encoding="utf-8"),
            _append(
                c / TABLE, '\n[telemetry]\nbroker = "mqtts://127.0.0.1:8883"\nca_file = "not-a-ca.pem"\n'
            ),
        ),
        TABLE,
        "telemetry.ca_file",
        "not a usable CA certificate",
    ),
    (
        "unknown [telemetry] key",
        lambda c: _append(c / TABLE, "\n[telemetry]\nrequier_tls = true\n"),
        TABLE,
        "telemetry.requier_tls",
        "unknown key",
    ),
    (
        "duplicate RTU id on one line",
        lambda c: _edit(c / TABLE, "[devices.keypad]\n", "[devices.keypad]\ndevice_id = 2\n"),
        TABLE,
        "devices.keypad.device_id",
        "one id per RTU line",
    ),
    (
        "negative cycle_s",
        lambda c: _edit(c / TABLE, "decks = 8", "decks = 8\ncycle_s = -30"),
        TABLE,
        "devices.shuffler.sim.cycle_s",
        "above 0",
    ),
    (
        "cover_fraction = 2",
        lambda c: _append(c / TABLE, "\n[devices.shoe.sim]\ncover_fraction = 2\n"),
        TABLE,
        "devices.shoe.sim.cover_fraction",
        "fraction of the shoe",
    ),
    # Issue 38 item 8: what `run` refuses, `config check` refuses too, naming the key.
    (
        "serial path that is no serial device",
        lambda c: _edit(c / TABLE, 'path = "/tmp/tablectl/dab-01/rs485"', 'path = "/etc/passwd"'),
        TABLE,
        "devices.reader.path",
        "/etc/passwd is not a serial device",
    ),
    (
        "a chip unit beyond any chip",
        lambda c: _edit(c / "games/double-attack.toml", "min_chip = 1", "min_chip = 100000000000000000000"),
        "games/double-attack.toml",
        "table.game: " + "{config}/games/double-attack.toml: rulings.min_chip",
        "G3: min_chip must be a chip unit from 1 to 100000",
    ),
    (
        "port = 0",
        lambda c: _edit(c / TABLE, "port = 15032", "port = 0"),
        TABLE,
        "devices.shoe.port",
        "tablectl run needs the device's TCP port",
    ),
    (
        "missing users file",
        lambda c: _console(c, 'users = "misspelled.toml"\n'),
        TABLE,
        "console.users",
        "misspelled.toml: no such users file",
    ),
    (
        "missing console certificate",
        lambda c: _certs(c, "nope.crt", "a.key"),
        TABLE,
        "console.tls_cert, console.tls_key",
        "nope.crt: no such file",
    ),
    (
        "garbage console certificate",
        lambda c: _certs(c, "garbage.crt", "a.key"),
        TABLE,
        "console.tls_cert, console.tls_key",
        "not a certificate and its key",
    ),
    (
        "mismatched console certificate",
        lambda c: _certs(c, "a.crt", "b.key"),
        TABLE,
        "console.tls_cert, console.tls_key",
        "not a certificate and its key",
    ),
    # table.game's problems name the key that named the file (and the file's own key).
    (
        "table.game not TOML",
        lambda c: (
            (c / "tables/notes.txt").write_text("not a game\n", encoding="utf-8"),
            _edit(c / TABLE, 'game = "../games/double-attack.toml"', 'game = "notes.txt"'),
        ),
        TABLE,
        "table.game",
        "not valid TOML",
    ),
    (
        "table.game not a game file",
        lambda c: _edit(
            c / TABLE, 'game = "../games/double-attack.toml"', 'game = "../devices/ref-shoe.toml"'
        ),
        TABLE,
        "table.game: " + "{config}/devices/ref-shoe.toml: game",
        "missing (one of",
    ),
    (
        "table.game with a key of another game",
        lambda c: _edit(c / "games/double-attack.toml", "bust_it = true", "progressive = true"),
        TABLE,
        "table.game: " + "{config}/games/double-attack.toml: wagers",
        "687a.9(b): the progressive wager belongs to DJ Wild Stud Poker",
    ),
]


@pytest.mark.usefixtures("restore_logging")  # run's main points the logs at the test's capture
@pytest.mark.parametrize(("spoil", "named", "key", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_in_one_line_naming_file_key_and_rule(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    spoil: Callable[[Path], None],
    named: str,
    key: str,
    rule: str,
) -> None:
    assert check_main([str(config / TABLE)]) == 0
    capsys.readouterr()
    spoil(config)
    assert check_main([str(config / TABLE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(config / named) in err or named.split("/")[-1] in err, err
    assert not key or f"{key.format(config=config)}: " in err, err
    assert rule in err, err
    # `run` refuses it by the same check, in the same words (the shipped unit runs the check
    # first: a file it passes must not stop `run`).
    assert run_refused(config / TABLE, monkeypatch, capsys) == f"tablectl run: {err}"


def test_the_cli_exits_2_with_the_one_line(config: Path) -> None:
    _append(config / TABLE, "\n[devices.shoe.sim]\ncover_fraction = 2\n")
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", "config", "check", str(config / TABLE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().endswith(
        "devices.shoe.sim.cover_fraction: must be a fraction of the shoe between 0.01 and 0.99"
    )
    # `run` as a process of its own (the cases above run its main in-process): the same line.
    run = subprocess.run(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config / TABLE), "--journal",
         str(config / "j.db")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 2 and run.stderr == f"tablectl run: {out.stderr}", run.stderr


# Issue 34 item 3: a table that lacks a device its chapter requires would deal into a wait that
# cannot end; `config check` and `run` refuse it naming the subsection, found from the table's
# devices (not only from the game file's keys), and the key to change for every combination.
DEVICE_CASES: list[tuple[str, str, Callable[[Path, str], None], str, str]] = [
    # (id, game, spoil (config dir, table file), key, rule)
    *[
        (f"{game}-no-reader", game, lambda c, t: _drop_device(c / t, "reader"), "devices", rule)
        for game, rule in (
            ("double-back-jack", "673a.2(d): a Double Back Jack table must have a reader"),
            ("double-attack", "665a.2(d): a Double Attack Blackjack table must have a reader"),
            ("down-under", "685a.2(d): a Down Under Blackjack table must have a reader"),
        )
    ],
    *[
        (f"{game}-no-shuffler", game, lambda c, t: _drop_device(c / t, "shuffler"), "devices", rule)
        for game, rule in (
            ("double-back-jack", "673a.3(b): the game file (table.game) has an automated shuffler"),
            ("down-under", "685a.3(b): the game file (table.game) has an automated shuffler"),
            ("dj-wild", "687a.9(a)(1): the game file (table.game) has an automated shuffler"),
        )
    ],
    (
        "down-under-peek-reader",
        "down-under",
        lambda c, t: _edit(c / t, "ref-reader-masque.toml", "ref-reader-peek.toml"),
        "devices.reader.profile",
        "685a.2(d): a Down Under Blackjack table's reader is a Masque Card Reader",
    ),
    (
        "double-back-jack-masque-reader",
        "double-back-jack",
        lambda c, t: _edit(c / t, "ref-reader-peek.toml", "ref-reader-masque.toml"),
        "devices.reader.profile",
        "673a.2(d): a Double Back Jack table's reader tells whether the hole card gives the dealer",
    ),
    (
        "double-attack-no-shoe",
        "double-attack",
        lambda c, t: _drop_device(c / t, "shoe"),
        "devices",
        "665a.7(a): a Double Attack Blackjack table must have a shoe",
    ),
    (
        "hand-shuffled-with-a-shuffler",
        "double-back-jack",
        lambda c, t: _edit(
            c / "games/double-back-jack.toml", "automated_shuffler = true", "automated_shuffler = false"
        ),
        "devices.shuffler",
        "673a.3(b): the game file (table.game) shuffles by hand (automated_shuffler = false)",
    ),
    (
        "self-shuffling-shoe-with-a-shuffler",
        "down-under",
        lambda c, t: _edit(
            c / "games/down-under.toml",
            "automated_shuffler = true",
            "automated_shuffler = false\nself_shuffling_shoe = true",
        ),
        "devices.shuffler",
        "685a.5(h): a self-shuffling shoe replaces the batch shuffler",
    ),
    (
        "dj-wild-self-shuffling-shoe",
        "dj-wild",
        lambda c, t: _edit(
            c / "games/dj-wild.toml", "automated_shuffler = true", "self_shuffling_shoe = true"
        ),
        "table.game: {config}/games/dj-wild.toml: self_shuffling_shoe",
        "687a.9(a)(2): DJ Wild is dealt from the dealer's hand, not from a shoe",
    ),
    (
        "dj-wild-with-a-shoe",
        "dj-wild",
        lambda c, t: _append(
            c / t,
            '\n[devices.shoe]\nkind = "shoe"\nprofile = "../devices/ref-shoe.toml"\n'
            'transport = "modbus-tcp"\nhost = "127.0.0.1"\nport = 15052\n',
        ),
        "devices.shoe",
        "687a.9(a)(2): DJ Wild Stud Poker is dealt from the dealer's hand; a dealing shoe has no place",
    ),
    (
        "dj-wild-progressive-no-keypad",
        "dj-wild",
        lambda c, t: _drop_device(c / t, "keypad"),
        "devices",
        "687a.9(b): Progressive Bonus Wagers are placed on the keypad's sensors",
    ),
]


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize(
    ("game", "spoil", "key", "rule"), [c[1:] for c in DEVICE_CASES], ids=[c[0] for c in DEVICE_CASES]
)
def test_a_table_without_a_device_its_chapter_requires_is_refused(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    game: str,
    spoil: Callable[[Path, str], None],
    key: str,
    rule: str,
) -> None:
    table = f"tables/{game}.toml"
    assert check_main([str(config / table)]) == 0
    capsys.readouterr()
    spoil(config, table)
    assert check_main([str(config / table)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{config / table}: {key.format(config=config)}: "), err
    assert rule in err, err
    assert run_refused(config / table, monkeypatch, capsys) == f"tablectl run: {err}"
