"""Device profiles: how one vendor's device lays out its registers or frames, as data.

A profile is a TOML file in config/devices/. Supporting another vendor's device means writing a
profile, not code: the drivers only know register *names* (``state``, ``draw_ring`` ...), enum
*names* and command *names*; the profile gives their addresses, codes and ranges. Loading
validates everything and raises :class:`ProfileError` with one line naming file, key and rule.
"""

from __future__ import annotations

import itertools
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from controller.bounded import InputRefused, read_toml
from devices.errors import FrameDecodeError, ProfileError


class DeviceKind(StrEnum):
    SHUFFLER = "shuffler"
    SHOE = "shoe"
    READER = "reader"
    STUB_COUNTER = "stub_counter"
    KEYPAD = "keypad"


class Protocol(StrEnum):
    MODBUS = "modbus"  # Modbus TCP or RTU: holding registers
    FRAMES = "frames"  # checksummed text frames over a serial line or MQTT


REGISTER_TYPES: Final = ("u16", "u32", "enum", "card", "bits")
U16_MAX: Final = 0xFFFF


@dataclass(frozen=True, slots=True)
class RegisterSpec:
    name: str
    address: int  # 0-based protocol address (mbpoll -0, or reference address + 1 with -1)
    count: int  # how many values of this type (a ring or one per box); u32 takes two words each
    type: str
    access: str  # "r", "w" or "rw"
    min: int
    max: int
    units: str
    enum: str | None
    doc: str

    @property
    def words(self) -> int:
        return self.count * (2 if self.type == "u32" else 1)


@dataclass(frozen=True, slots=True)
class BitField:
    shift: int
    bits: int

    def get(self, word: int) -> int:
        return (word >> self.shift) & ((1 << self.bits) - 1)

    def put(self, value: int) -> int:
        return (value & ((1 << self.bits) - 1)) << self.shift


@dataclass(frozen=True, slots=True)
class CardFormat:
    """One card in one 16-bit word: rank, suit, back colour and a face-up flag."""

    rank: BitField
    suit: BitField
    back: BitField
    face_up: BitField
    ranks: tuple[str, ...]  # code n (1-based) is ranks[n-1]; 0 means "no card"
    suits: tuple[str, ...]  # code 0 is "no suit" (the joker)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    min: int
    max: int


@dataclass(frozen=True, slots=True)
class FrameSpec:
    name: str
    tag: str
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True, slots=True)
class LineFormat:
    start: str
    end: str
    separator: str
    max_length: int


@dataclass(frozen=True)
class Profile:
    name: str
    kind: DeviceKind
    protocol: Protocol
    path: pathlib.Path
    registers: Mapping[str, RegisterSpec] = field(default_factory=dict)
    enums: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    commands: Mapping[str, int] = field(default_factory=dict)
    card: CardFormat | None = None
    line: LineFormat | None = None
    frames: Mapping[str, FrameSpec] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    # -- register helpers used by drivers and simulators alike ------------------------------

    def reg(self, name: str) -> RegisterSpec:
        return self.registers[name]

    def enum_value(self, enum: str, name: str) -> int:
        return self.enums[enum][name]

    def enum_name(self, enum: str, value: int) -> str:
        for n, v in self.enums[enum].items():
            if v == value:
                return n
        raise FrameDecodeError(f"{enum} code {value} is not in profile {self.name}")

    def poll_span(self) -> tuple[int, int]:
        """The one contiguous block (start, count) that covers every readable register."""
        readable = [r for r in self.registers.values() if "r" in r.access]
        start = min(r.address for r in readable)
        end = max(r.address + r.words for r in readable)
        return start, end - start

    def decode_block(self, start: int, words: list[int]) -> dict[str, list[int]]:
        """Split a polled block into named values, each checked against its range.

        Raises FrameDecodeError naming the register (never its value's meaning) when a value
        is out of range, so the caller drops this poll as a whole rather than act on half of it.
        """
        span_start, span_count = self.poll_span()
        if start != span_start or len(words) != span_count:
            raise FrameDecodeError(
                f"{self.name}: block too short or long ({len(words)} words, expected {span_count})"
            )
        out: dict[str, list[int]] = {}
        for spec in self.registers.values():
            if "r" not in spec.access:
                continue
            off = spec.address - start
            raw = words[off : off + spec.words]
            if len(raw) != spec.words:
                raise FrameDecodeError(f"{self.name}: block too short for register {spec.name}")
            values = (
                [(raw[i] << 16) | raw[i + 1] for i in range(0, len(raw), 2)]
                if spec.type == "u32"
                else list(raw)
            )
            for v in values:
                if spec.type == "enum" and spec.enum is not None:
                    if v not in self.enums[spec.enum].values():
                        raise FrameDecodeError(
                            f"{self.name}: register {spec.name} value {v} is not a known code"
                        )
                elif spec.type != "card" and not spec.min <= v <= spec.max:
                    raise FrameDecodeError(
                        f"{self.name}: register {spec.name} value {v} out of range {spec.min}-{spec.max}"
                    )
            out[spec.name] = values
        return out

    def encode(self, name: str, values: list[int]) -> list[int]:
        spec = self.registers[name]
        if spec.type != "u32":
            return [v & U16_MAX for v in values]
        words: list[int] = []
        for v in values:
            words += [(v >> 16) & U16_MAX, v & U16_MAX]
        return words

    # -- cards ------------------------------------------------------------------------------

    def card_word(self, rank: str, suit: str, back: str | None, face_up: bool) -> int:
        fmt = self._card_format()
        back_code = self.enums["back"].get(back or "", 0)
        suit_code = fmt.suits.index(suit) + 1 if suit else 0
        return (
            fmt.rank.put(fmt.ranks.index(rank) + 1)
            | fmt.suit.put(suit_code)
            | fmt.back.put(back_code)
            | fmt.face_up.put(int(face_up))
        )

    def card_fields(self, word: int) -> tuple[str, str, str | None, bool]:
        """(rank, suit, back, face_up) of a card word; FrameDecodeError when a code is unknown."""
        fmt = self._card_format()
        r, s, b = fmt.rank.get(word), fmt.suit.get(word), fmt.back.get(word)
        if not 1 <= r <= len(fmt.ranks):
            raise FrameDecodeError(f"{self.name}: card word has an unknown rank code")
        if s > len(fmt.suits):
            raise FrameDecodeError(f"{self.name}: card word has an unknown suit code")
        backs = {v: n for n, v in self.enums.get("back", {}).items()}
        if b and b not in backs:
            raise FrameDecodeError(f"{self.name}: card word has an unknown back colour code")
        suit = fmt.suits[s - 1] if s else ""
        return fmt.ranks[r - 1], suit, backs.get(b) if b else None, bool(fmt.face_up.get(word))

    def _card_format(self) -> CardFormat:
        if self.card is None:
            raise ProfileError(f"{self.path}: [card]: profile has no card format")
        return self.card


# -- what each kind of driver needs from its profile ---------------------------------------------

_REQUIRED_REGISTERS: Final[dict[DeviceKind, tuple[str, ...]]] = {
    DeviceKind.SHUFFLER: (
        "state", "cycle", "cards_counted", "fault_code",
        "slot_a_state", "slot_a_back", "slot_a_decks",
        "slot_b_state", "slot_b_back", "slot_b_decks", "command",
    ),
    DeviceKind.SHOE: ("draw_seq", "draw_ring", "remaining", "cover", "batch_seq", "batch_size",
                      "batch_back"),
    DeviceKind.READER: ("health", "insert_seq", "result", "up_rank", "command"),
    DeviceKind.KEYPAD: ("sensors", "sensor_faults", "locked", "lights", "meter", "key_seq",
                        "key_ring", "command"),
}  # fmt: skip
_REQUIRED_ENUMS: Final[dict[DeviceKind, tuple[str, ...]]] = {
    DeviceKind.SHUFFLER: ("shuffler_state", "back"),
    DeviceKind.SHOE: ("back",),
    DeviceKind.READER: ("result",),
    DeviceKind.KEYPAD: ("key",),
}
_REQUIRED_COMMANDS: Final[dict[DeviceKind, tuple[str, ...]]] = {
    DeviceKind.SHUFFLER: ("start_shuffle", "abort_shuffle", "eject_to_shoe", "clear_fault",
                          "mark_out_of_order"),
    DeviceKind.READER: ("set_up_card", "reset"),
    DeviceKind.KEYPAD: ("lock", "unlock", "set_light", "show_meter"),
}  # fmt: skip
_REQUIRED_FRAMES: Final[dict[DeviceKind, dict[str, tuple[str, ...]]]] = {
    DeviceKind.STUB_COUNTER: {
        "count": ("seq", "count", "verified"),
        "heartbeat": ("health",),
        "request": (),
    },
}


class _Checker:
    """Reads a TOML table with one-line errors that name the file and the dotted key."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def fail(self, key: str, rule: str) -> ProfileError:
        return ProfileError(f"{self.path}: {key}: {rule}")

    def table(self, data: Mapping[str, Any], key: str, *, required: bool = True) -> dict[str, Any]:
        v = data.get(key.rsplit(".", 1)[-1])
        if v is None and not required:
            return {}
        if not isinstance(v, dict):
            raise self.fail(key, "must be a table")
        return v

    def string(self, data: Mapping[str, Any], key: str, default: str | None = None) -> str:
        v = data.get(key.rsplit(".", 1)[-1], default)
        if not isinstance(v, str) or not v:
            raise self.fail(key, "must be a non-empty string")
        return v

    def integer(self, data: Mapping[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int:
        v = data.get(key.rsplit(".", 1)[-1], default)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise self.fail(key, f"must be an integer {lo}-{hi}")
        return v

    def choice(self, data: Mapping[str, Any], key: str, options: tuple[str, ...],
               default: str | None = None) -> str:  # fmt: skip
        v = data.get(key.rsplit(".", 1)[-1], default)
        if v not in options:
            raise self.fail(key, f"must be one of {', '.join(options)}")
        return str(v)

    def strings(self, data: Mapping[str, Any], key: str) -> tuple[str, ...]:
        v = data.get(key.rsplit(".", 1)[-1])
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            raise self.fail(key, "must be a non-empty list of strings")
        if len(set(v)) != len(v):
            raise self.fail(key, "must not repeat a name")
        return tuple(v)


def load_profile(path: pathlib.Path) -> Profile:
    try:
        data = read_toml(path)
    except InputRefused as exc:
        raise ProfileError(f"{path}: cannot use profile ({exc})") from None
    return parse_profile(data, path)


LATCHES: Final = "latches_on_start_game"


def parse_profile(data: Mapping[str, Any], path: pathlib.Path) -> Profile:
    c = _Checker(path)
    head = c.table(data, "profile")
    name = c.string(head, "profile.name")
    kind = DeviceKind(c.choice(head, "profile.kind", tuple(DeviceKind)))
    protocol = Protocol(c.choice(head, "profile.protocol", tuple(Protocol)))
    options = c.table(data, "options", required=False)
    enums = _enums(c, data)
    cmd_table = c.table(data, "commands", required=False)
    commands = {k: c.integer(cmd_table, f"commands.{k}", 1, U16_MAX) for k in cmd_table}
    for cmd in _REQUIRED_COMMANDS.get(kind, ()):
        if cmd not in commands:
            raise c.fail(f"commands.{cmd}", f"a {kind} profile must define this command code")
    for en in _REQUIRED_ENUMS.get(kind, ()):
        if en not in enums:
            raise c.fail(f"enums.{en}", f"a {kind} profile must define this enum")
    if kind is DeviceKind.KEYPAD and not isinstance(options.get(LATCHES, False), bool):
        # A keypad that freezes its own sensors when Start Game is pressed (687a.9(b)): the
        # controller's read after the press is then the latched snapshot, whatever came later.
        raise c.fail(f"options.{LATCHES}", "must be true or false")
    if kind is DeviceKind.SHUFFLER:
        unknown = set(enums["shuffler_state"]) - {s.value for s in _shuffler_states()}
        if unknown:
            raise c.fail("enums.shuffler_state", f"unknown state name {sorted(unknown)[0]!r}")

    registers: dict[str, RegisterSpec] = {}
    card: CardFormat | None = None
    line: LineFormat | None = None
    frames: dict[str, FrameSpec] = {}
    if protocol is Protocol.MODBUS:
        registers = _registers(c, data, enums)
        for reg in _REQUIRED_REGISTERS.get(kind, ()):
            if reg not in registers:
                raise c.fail(f"registers.{reg}", f"a {kind} profile must define this register")
        if "card" in data or any(r.type == "card" for r in registers.values()):
            card = _card_format(c, c.table(data, "card"))
    else:
        line = _line_format(c, c.table(data, "line"))
        frames = _frames(c, c.table(data, "frames"))
        for fname, fields in _REQUIRED_FRAMES.get(kind, {}).items():
            if fname not in frames:
                raise c.fail(f"frames.{fname}", f"a {kind} profile must define this frame")
            have = [f.name for f in frames[fname].fields]
            for f in fields:
                if f not in have:
                    raise c.fail(f"frames.{fname}.fields", f"must include field {f!r}")
    return Profile(name, kind, protocol, path, registers, enums, commands, card, line, frames,
                   options)  # fmt: skip


def _shuffler_states() -> tuple[StrEnum, ...]:
    from devices.events import ShufflerState

    return tuple(ShufflerState)


def _enums(c: _Checker, data: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for en, table in c.table(data, "enums", required=False).items():
        if not isinstance(table, dict) or not table:
            raise c.fail(f"enums.{en}", "must be a table of name = code")
        codes = {k: c.integer(table, f"enums.{en}.{k}", 0, U16_MAX) for k in table}
        if len(set(codes.values())) != len(codes):
            raise c.fail(f"enums.{en}", "two names share one code")
        out[en] = codes
    return out


def _registers(
    c: _Checker, data: Mapping[str, Any], enums: Mapping[str, Mapping[str, int]]
) -> dict[str, RegisterSpec]:
    out: dict[str, RegisterSpec] = {}
    regs = c.table(data, "registers")
    for name, t in regs.items():
        key = f"registers.{name}"
        if not isinstance(t, dict):
            raise c.fail(key, "must be a table")
        typ = c.choice(t, f"{key}.type", REGISTER_TYPES, "u16")
        hi_default = 0xFFFFFFFF if typ == "u32" else U16_MAX
        lo = c.integer(t, f"{key}.min", 0, hi_default, 0)
        hi = c.integer(t, f"{key}.max", lo, hi_default, hi_default)
        enum = t.get("enum")
        if typ == "enum" and (not isinstance(enum, str) or enum not in enums):
            raise c.fail(f"{key}.enum", "must name a table under [enums]")
        spec = RegisterSpec(
            name=name,
            address=c.integer(t, f"{key}.address", 0, U16_MAX),
            count=c.integer(t, f"{key}.count", 1, 125, 1),
            type=typ,
            access=c.choice(t, f"{key}.access", ("r", "w", "rw"), "r"),
            min=lo,
            max=hi,
            units=str(t.get("units", "")),
            enum=enum if typ == "enum" else None,
            doc=str(t.get("doc", "")),
        )
        out[name] = spec
    spans = sorted((s.address, s.address + s.words, s.name) for s in out.values())
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        if start < end:
            raise c.fail(f"registers.{b}.address", f"overlaps register {a}")
    if spans and spans[-1][1] > U16_MAX + 1:
        raise c.fail(f"registers.{spans[-1][2]}.address", "runs past address 65535")
    return out


def _bitfield(c: _Checker, t: Mapping[str, Any], key: str) -> BitField:
    bf = c.table(t, key)
    shift = c.integer(bf, f"{key}.shift", 0, 15)
    bits = c.integer(bf, f"{key}.bits", 1, 16 - shift)
    return BitField(shift, bits)


def _card_format(c: _Checker, t: Mapping[str, Any]) -> CardFormat:
    fmt = CardFormat(
        rank=_bitfield(c, t, "card.rank"),
        suit=_bitfield(c, t, "card.suit"),
        back=_bitfield(c, t, "card.back"),
        face_up=_bitfield(c, t, "card.face_up"),
        ranks=c.strings(t, "card.ranks"),
        suits=c.strings(t, "card.suits"),
    )
    used = 0
    for fld in (fmt.rank, fmt.suit, fmt.back, fmt.face_up):
        mask = ((1 << fld.bits) - 1) << fld.shift
        if used & mask:
            raise c.fail("card", "bit fields overlap")
        used |= mask
    if len(fmt.ranks) >= 1 << fmt.rank.bits or len(fmt.suits) >= 1 << fmt.suit.bits:
        raise c.fail("card", "too many rank or suit codes for their bit fields")
    return fmt


def _line_format(c: _Checker, t: Mapping[str, Any]) -> LineFormat:
    fmt = LineFormat(
        start=c.string(t, "line.start", "$"),
        end=c.string(t, "line.end", "\r\n"),
        separator=c.string(t, "line.separator", ","),
        max_length=c.integer(t, "line.max_length", 8, 4096, 128),
    )
    if len(fmt.start) != 1 or len(fmt.separator) != 1:
        raise c.fail("line", "start and separator must be one character each")
    if "*" in (fmt.start, fmt.separator):
        raise c.fail("line", "'*' is reserved for the checksum")
    return fmt


def _frames(c: _Checker, t: Mapping[str, Any]) -> dict[str, FrameSpec]:
    out: dict[str, FrameSpec] = {}
    for fname, ft in t.items():
        key = f"frames.{fname}"
        if not isinstance(ft, dict):
            raise c.fail(key, "must be a table")
        tag = c.string(ft, f"{key}.tag")
        fields_raw = ft.get("fields", [])
        if not isinstance(fields_raw, list):
            raise c.fail(f"{key}.fields", "must be a list of tables")
        fields: list[FieldSpec] = []
        for i, f in enumerate(fields_raw):
            if not isinstance(f, dict):
                raise c.fail(f"{key}.fields[{i}]", "must be a table")
            lo = c.integer(f, f"{key}.fields[{i}].min", 0, 2**31, 0)
            fields.append(
                FieldSpec(
                    c.string(f, f"{key}.fields[{i}].name"),
                    lo,
                    c.integer(f, f"{key}.fields[{i}].max", lo, 2**31, 65535),
                )
            )
        if any(s.tag == tag for s in out.values()):
            raise c.fail(f"{key}.tag", "two frames share one tag")
        out[fname] = FrameSpec(fname, tag, tuple(fields))
    return out
