"""The people who may sign in to the table console: a TOML file of names, roles and password hashes.

    [users.ann]
    role = "floor"
    password = "scrypt$16384$8$1$<salt hex>$<hash hex>"

Passwords are stored only as salted scrypt hashes (hashlib.scrypt from the standard library: a
memory-hard slow hash, so a stolen file does not give the passwords back cheaply). A plain
password is never written to disk or to a log. ``tablectl users add|list|remove`` edits the file.

A new password must pass ``password_problem``: 12 to 256 characters, and at least "safely
unguessable" to zxcvbn (the strength estimator of Dropbox's, with its lists of common passwords,
names, words and keyboard patterns, given the person's name as a word of theirs). Length is what
makes a guessed password expensive; the estimator stops the long passwords every guesser tries
first (``Password123!``, ``qwertyuiopas``, the name with a year).
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import hmac
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TextIO

from pydantic import AfterValidator, Field, ValidationError

from controller.actions import ROLES
from controller.bounded import InputRefused, read_toml
from controller.errors import ConfigError
from controller.ids import USER_NAME, matches
from controller.schema import Document, Rule, first_error, one_line

# scrypt cost: N=2**14, r=8, p=1 is the interactive-login setting (16 MiB, tens of ms a try).
N, R, P = 2**14, 8, 1
MAX_PASSWORD = 256
MIN_PASSWORD = 12
# zxcvbn's score: 3 is "safely unguessable" (about 10^10 guesses or more), enough behind a salted
# scrypt hash and a sign-in lockout; 0-2 are the common passwords, words and patterns.
MIN_SCORE = 3
# zxcvbn's own bound: its time grows steeply with length (76 s for 256 random characters), so the
# first 72 are judged. A password whose first 72 characters are hard to guess is at least as hard.
JUDGED = 72
MAX_FILE_BYTES = 1 << 20


def _role(value: str) -> str:
    if value not in ROLES:
        raise ValueError("not a role")
    return value


def _scrypt(value: str) -> str:
    if not value.startswith("scrypt$"):
        raise ValueError("not a hash")
    return value


class _Entry(Document):
    role: Annotated[str, AfterValidator(_role), Rule(f"must be one of {', '.join(sorted(ROLES))}")]
    password: Annotated[
        str, AfterValidator(_scrypt), Rule("must be a scrypt hash written by tablectl users add")
    ] = Field(repr=False)


class UsersFile(Document):
    """The users file's schema: ``[users.<name>]`` with a role and a password hash each."""

    users: dict[str, _Entry] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: str
    password: str  # the encoded hash, never the password

    def verify(self, password: str) -> bool:
        return verify_password(password, self.password)


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=N, r=R, p=P, dklen=32)
    return f"scrypt${N}${R}${P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches; a malformed hash matches nothing."""
    try:
        kind, n, r, p, salt, digest = encoded.split("$")
        if kind != "scrypt" or len(password) > MAX_PASSWORD:
            return False
        n_, r_, p_ = int(n), int(r), int(p)
        if not (2 <= n_ <= 2**20 and 1 <= r_ <= 32 and 1 <= p_ <= 4):
            return False  # a file edited to make every login take minutes
        got = hashlib.scrypt(
            password.encode("utf-8"),
            salt=bytes.fromhex(salt),
            n=n_,
            r=r_,
            p=p_,
            dklen=len(digest) // 2,
            maxmem=256 * 1024 * 1024,
        )
        return hmac.compare_digest(got, bytes.fromhex(digest))
    except ValueError:
        return False


def fingerprint(encoded: str) -> str:
    """A short digest of a stored hash: a session remembers it, and is over when the person's
    password changes (their hash, and so this, is then another)."""
    return hashlib.sha256(encoded.encode("ascii", "replace")).hexdigest()[:32]


def password_problem(name: str, password: str) -> str | None:
    """Why ``password`` may not be ``name``'s, in one line; None when it may."""
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        return f"a password is {MIN_PASSWORD} to {MAX_PASSWORD} characters"
    # Imported here: only `tablectl users add` judges passwords, and its lists take a moment to
    # load that `run` and the console's process need not spend.
    from zxcvbn import zxcvbn  # type: ignore[import-untyped]  # ships no type hints

    judged: dict[str, Any] = zxcvbn(password[:JUDGED], user_inputs=[name, "tablectl"])
    if judged["score"] >= MIN_SCORE:
        return None
    warning = str(judged["feedback"].get("warning") or "").rstrip(".")
    why = f" ({warning[0].lower()}{warning[1:]})" if warning else ""
    return f"that password is too easy to guess{why}; use a few uncommon words"


def load_users(path: Path, *, missing_ok: bool = False) -> dict[str, User]:
    """The users in ``path``; ConfigError naming file and key. A missing file is refused (a
    misspelled path would otherwise refuse every sign-in in silence) unless ``missing_ok``
    (``users add`` creating the file)."""
    if not path.exists():
        if missing_ok:
            return {}
        raise ConfigError(f"{path}: no such users file (tablectl users add NAME --role ROLE --file FILE)")
    try:
        doc = read_toml(path, max_bytes=MAX_FILE_BYTES)
    except InputRefused as e:
        raise ConfigError(f"{path}: {e}") from None
    try:
        file = UsersFile.model_validate(doc)
    except ValidationError as e:
        first = first_error(e)
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            raise ConfigError(
                f"{path}: {first['loc'][0]}: unknown section (expected [users.<name>])"
            ) from None
        raise ConfigError(one_line(e, str(path), model=UsersFile)) from None
    users: dict[str, User] = {}
    for name, entry in file.users.items():
        if not matches(USER_NAME, name):
            rule = "a name is 1-32 of a-z, 0-9, '_', '.', '-', starting with a letter"
            raise ConfigError(f"{path}: users.{name}: {rule}")
        users[name] = User(name, entry.role, entry.password)
    return users


def save_users(path: Path, users: dict[str, User]) -> None:
    """Written to a temporary file readable by its owner only, then renamed over the old one."""
    lines = ["# tablectl users: salted scrypt hashes only; edit with `tablectl users`.", ""]
    for u in sorted(users.values(), key=lambda u: u.name):
        lines += [f"[users.{u.name}]", f'role = "{u.role}"', f'password = "{u.password}"', ""]
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_password(name: str, stdin: TextIO) -> str:
    """Twice, without echo on a terminal; from a pipe, two lines."""
    if stdin.isatty():
        first, second = getpass.getpass("password: "), getpass.getpass("again: ")
    else:
        first, second = stdin.readline().rstrip("\r\n"), stdin.readline().rstrip("\r\n")
    if first != second:
        raise ConfigError("the two passwords differ")
    problem = password_problem(name, first)
    if problem is not None:
        raise ConfigError(problem)
    return first


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl users", description="People who may sign in to the console.")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="add a person (password read twice from stdin)")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=sorted(ROLES))
    add.add_argument(
        "--replace",
        action="store_true",
        help="the person exists: give them this role and password (their sessions end)",
    )
    add.add_argument("--file", required=True, type=Path)
    ls = sub.add_parser("list", help="names and roles")
    ls.add_argument("--file", required=True, type=Path)
    rm = sub.add_parser("remove", help="remove a person")
    rm.add_argument("name")
    rm.add_argument("--file", required=True, type=Path)
    return p


def main(argv: list[str], stdin: TextIO | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        users = load_users(args.file, missing_ok=args.action == "add")
        if args.action == "list":
            for u in sorted(users.values(), key=lambda u: u.name):
                print(f"{u.name}\t{u.role}")
            return 0
        if not matches(USER_NAME, args.name):
            raise ConfigError(
                f"{args.name!r}: a name is 1-32 of a-z, 0-9, '_', '.', '-', starting with a letter"
            )
        if args.action == "remove":
            if users.pop(args.name, None) is None:
                raise ConfigError(f"{args.file}: no user {args.name}")
        else:
            if args.name in users and not args.replace:
                raise ConfigError(f"{args.file}: {args.name} exists (--replace to change their password)")
            password = _read_password(args.name, stdin or sys.stdin)
            users[args.name] = User(args.name, args.role, hash_password(password))
        save_users(args.file, users)
        print(
            f"{args.name}: {'removed from' if args.action == 'remove' else 'saved in'} {args.file}",
            file=sys.stderr,
        )
        return 0
    except (ConfigError, OSError) as e:
        print(f"tablectl users: {e}", file=sys.stderr)
        return 2
