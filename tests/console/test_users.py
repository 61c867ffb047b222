"""``tablectl users``: passwords read twice from standard input, stored only as salted scrypt
hashes; list and remove; a broken users file refused in one line naming file and key."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from controller.cli import main as tablectl
from controller.console.users import hash_password, load_users, verify_password


def _users(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return tablectl(["users", *argv])


def test_add_list_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "users.toml"
    assert (
        _users(["add", "ann", "--role", "floor", "--file", str(f)], "s3cret-pass\ns3cret-pass\n", monkeypatch)
        == 0
    )
    assert (
        _users(["add", "bob", "--role", "dealer", "--file", str(f)], "other-pass\nother-pass\n", monkeypatch)
        == 0
    )
    text = f.read_text()
    assert "s3cret-pass" not in text and "other-pass" not in text and text.count("scrypt$") == 2
    assert f.stat().st_mode & 0o077 == 0  # readable by its owner only
    users = load_users(f)
    assert verify_password("s3cret-pass", users["ann"].password) and not users["ann"].verify("other-pass")
    assert hash_password("s3cret-pass") != users["ann"].password  # salted: the same password, another hash
    capsys.readouterr()
    assert tablectl(["users", "list", "--file", str(f)]) == 0
    assert capsys.readouterr().out == "ann\tfloor\nbob\tdealer\n"
    assert tablectl(["users", "remove", "bob", "--file", str(f)]) == 0
    assert set(load_users(f)) == {"ann"}
    out = capsys.readouterr()
    assert "s3cret" not in out.out + out.err


@pytest.mark.parametrize(
    ("argv", "stdin", "error"),
    [
        (["add", "ann", "--role", "floor"], "one-password\nanother-one\n", "the two passwords differ"),
        (["add", "ann", "--role", "floor"], "short\nshort\n", "8 to 256 characters"),
        (["add", "Ann Smith", "--role", "floor"], "long-enough\nlong-enough\n", "a name is 1-32"),
        (["remove", "zed"], "", "no user zed"),
    ],
)
def test_refusals_are_one_line(
    argv: list[str],
    stdin: str,
    error: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _users([*argv, "--file", str(tmp_path / "u.toml")], stdin, monkeypatch) == 2
    err = capsys.readouterr().err
    assert error in err and err.count("\n") == 1 and "long-enough" not in err


def test_a_broken_users_file_names_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "users.toml"
    f.write_text('[users.ann]\nrole = "boss"\npassword = "scrypt$1"\n')
    assert tablectl(["users", "list", "--file", str(f)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"tablectl users: {f}: users.ann.role: must be one of dealer, floor"
    )
