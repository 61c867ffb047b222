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
from typing import Annotated, Any, Final

from pydantic import AfterValidator, Field, ValidationError

from controller.bounded import InputRefused, read_toml
from controller.schema import Document, NonEmpty, Rule, between, one_line
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
WORD_ORDERS: Final = ("high_first", "low_first")
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

    @property
    def bits(self) -> int:
        """The width of each value: 32 for a u32 (two words), else 16. A counter wraps at
        2**bits: the drivers, the rings and the device check take it from here."""
        return 32 if self.type == "u32" else 16


@dataclass(frozen=True, slots=True)
class BitSpec:
    """One bit of a register (a status word), named on its own: read as if it were a register
    of that name holding 0 or 1 (``cover``, ``door_open``)."""

    name: str
    register: str
    bit: int


class Halts(StrEnum):
    """When a device condition stops dealing."""

    NEVER = "never"  # an alarm for the floor; dealing goes on
    IN_ROUND = "in_round"  # only while a round is in play (none at all between rounds)
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A condition a device reports on a named bit (a door open, a tilt): what the floor is told
    while it holds. ``section``: the subsection it rests on, written once for the blackjack
    chapters (``"7(b)"``: 673a.7(b), 665a.7(b), 685a.7(b)); empty when no section applies."""

    name: str
    message: str
    action: str
    halts: Halts
    section: str = ""


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
    bits: Mapping[str, BitSpec] = field(default_factory=dict)
    conditions: Mapping[str, ConditionSpec] = field(default_factory=dict)
    # The order of the two words of a u32: the high word first (Modbus's usual big-endian) or
    # the low word first ("word swapped", as some PLCs send it).
    low_word_first: bool = False
    page: str | None = None  # its page under docs/devices/ when not its variant's

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
            values = self._values(spec, raw)
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
        for b in self.bits.values():
            out[b.name] = [(out[b.register][0] >> b.bit) & 1]
        return out

    def _values(self, spec: RegisterSpec, raw: list[int]) -> list[int]:
        if spec.type != "u32":
            return list(raw)
        hi, lo = (1, 0) if self.low_word_first else (0, 1)
        return [(raw[i + hi] << 16) | raw[i + lo] for i in range(0, len(raw), 2)]

    def encode(self, name: str, values: list[int]) -> list[int]:
        spec = self.registers[name]
        if spec.type != "u32":
            return [v & U16_MAX for v in values]
        words: list[int] = []
        for v in values:
            pair = [(v >> 16) & U16_MAX, v & U16_MAX]
            words += pair[::-1] if self.low_word_first else pair
        return words

    def encode_all(self, values: Mapping[str, list[int]]) -> list[tuple[RegisterSpec, list[int]]]:
        """The words of every register named in ``values``; a named bit's value (0 or 1) is set
        in its register's word (another bit of that word is 0 unless named too)."""
        merged = {n: list(v) for n, v in values.items() if n in self.registers}
        for name, v in values.items():
            b = self.bits.get(name)
            if b is None:
                continue
            word = merged.setdefault(b.register, [0])
            word[0] = (word[0] & ~(1 << b.bit)) | ((v[0] & 1) << b.bit)
        return [(self.registers[n], self.encode(n, v)) for n, v in merged.items()]

    def has(self, name: str) -> bool:
        """Whether the profile names a register or a bit ``name``."""
        return name in self.registers or name in self.bits

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
        "state",
        "cycle",
        "cards_counted",
        "fault_code",
        "slot_a_state",
        "slot_a_back",
        "slot_a_decks",
        "slot_b_state",
        "slot_b_back",
        "slot_b_decks",
        "command",
    ),
    DeviceKind.SHOE: ("draw_seq", "draw_ring", "remaining", "cover", "batch_seq", "batch_size", "batch_back"),
    DeviceKind.READER: ("health", "insert_seq", "result", "up_rank", "command"),
    DeviceKind.KEYPAD: (
        "sensors",
        "sensor_faults",
        "locked",
        "lights",
        "meter",
        "key_seq",
        "key_ring",
        "command",
    ),
}
_REQUIRED_ENUMS: Final[dict[DeviceKind, tuple[str, ...]]] = {
    DeviceKind.SHUFFLER: ("shuffler_state", "back"),
    DeviceKind.SHOE: ("back",),
    DeviceKind.READER: ("result",),
    DeviceKind.KEYPAD: ("key",),
}
_REQUIRED_COMMANDS: Final[dict[DeviceKind, tuple[str, ...]]] = {
    DeviceKind.SHUFFLER: (
        "start_shuffle",
        "abort_shuffle",
        "eject_to_shoe",
        "clear_fault",
        "mark_out_of_order",
    ),
    DeviceKind.READER: ("set_up_card", "reset"),
    DeviceKind.KEYPAD: ("lock", "unlock", "set_light", "show_meter"),
}
_REQUIRED_FRAMES: Final[dict[DeviceKind, dict[str, tuple[str, ...]]]] = {
    DeviceKind.STUB_COUNTER: {
        "count": ("seq", "count", "verified"),
        "heartbeat": ("health",),
        "request": (),
    },
}


def _choice(options: tuple[str, ...]) -> Any:
    def check(value: str) -> str:
        if value not in options:
            raise ValueError("not a choice")
        return value

    return check


def _fail(path: pathlib.Path, key: str, rule: str) -> ProfileError:
    return ProfileError(f"{path}: {key}: {rule}")


def _one_char(value: str) -> str:
    if len(value) != 1:
        raise ValueError("must be one character")
    if value == "*":
        raise ValueError("'*' is reserved for the checksum")
    return value


def _unique(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("must be a non-empty list of strings")
    if len(set(value)) != len(value):
        raise ValueError("must not repeat a name")
    return value


Word = Annotated[int, between(0, U16_MAX)]
Names = Annotated[list[NonEmpty], AfterValidator(_unique)]
Separator = Annotated[str, Field(min_length=1), Rule("must be a non-empty string"), AfterValidator(_one_char)]


class _Head(Document):
    name: NonEmpty
    kind: Annotated[str, AfterValidator(DeviceKind), Rule(f"must be one of {', '.join(DeviceKind)}")]
    protocol: Annotated[str, AfterValidator(Protocol), Rule(f"must be one of {', '.join(Protocol)}")]
    vendor: NonEmpty | None = None
    word_order: Annotated[
        str, AfterValidator(_choice(WORD_ORDERS)), Rule(f"must be one of {', '.join(WORD_ORDERS)}")
    ] = "high_first"
    # The page that documents this profile, relative to docs/devices/, when it is not its variant's.
    page: NonEmpty | None = None


class _Register(Document):
    address: Word
    count: Annotated[int, between(1, 125)] = 1
    type: Annotated[
        str, AfterValidator(_choice(REGISTER_TYPES)), Rule(f"must be one of {', '.join(REGISTER_TYPES)}")
    ] = "u16"
    access: Annotated[str, AfterValidator(_choice(("r", "w", "rw"))), Rule("must be one of r, w, rw")] = "r"
    min: Annotated[int, Rule("must be an integer 0-4294967295", ge=0, le=0xFFFFFFFF)] = 0
    max: Annotated[int, Rule("must be an integer 0-4294967295", ge=0, le=0xFFFFFFFF)] | None = None
    units: str = ""
    enum: NonEmpty | None = None
    doc: str = ""


class _BitFieldDoc(Document):
    shift: Annotated[int, between(0, 15)]
    bits: Annotated[int, between(1, 16)]


class _CardDoc(Document):
    rank: _BitFieldDoc
    suit: _BitFieldDoc
    back: _BitFieldDoc
    face_up: _BitFieldDoc
    ranks: Names
    suits: Names


class _LineDoc(Document):
    start: Separator = "$"
    end: Annotated[str, Field(min_length=1), Rule("must be a non-empty string")] = (
        "\r\n"  # white space only: not NonEmpty
    )
    separator: Separator = ","
    max_length: Annotated[int, between(8, 4096)] = 128


class _FieldDoc(Document):
    name: NonEmpty
    min: Annotated[int, between(0, 2**31)] = 0
    max: Annotated[int, between(0, 2**31)] = 65535


class _FrameDoc(Document):
    tag: NonEmpty
    fields: list[_FieldDoc] = Field(default_factory=list)


class _BitDoc(Document):
    reg: NonEmpty = Field(alias="register")  # ``register`` is a name pydantic keeps for itself
    bit: Annotated[int, between(0, 31)]


class _ConditionDoc(Document):
    message: NonEmpty
    action: NonEmpty
    halts: Annotated[str, AfterValidator(Halts), Rule(f"must be one of {', '.join(Halts)}")] = "never"
    section: str = ""


class ProfileFile(Document):
    """A device profile's keys and their types (the schema); what a kind of driver needs from
    it, and the checks across keys, are in ``parse_profile``."""

    profile: _Head
    options: dict[str, Any] = Field(default_factory=dict)
    enums: dict[str, dict[str, Word]] = Field(default_factory=dict)
    commands: dict[str, Annotated[int, between(1, U16_MAX)]] = Field(default_factory=dict)
    registers: dict[str, _Register] | None = None
    card: _CardDoc | None = None
    line: _LineDoc = _LineDoc()
    frames: dict[str, _FrameDoc] | None = None
    # One bit of a register, named: ``door_open = { register = "status", bit = 3 }``.
    bits: dict[str, _BitDoc] = Field(default_factory=dict)
    # What the floor is told while a named bit is 1 (docs/extending.md, "Adding a device variant").
    conditions: dict[str, _ConditionDoc] = Field(default_factory=dict)


def load_profile(path: pathlib.Path) -> Profile:
    try:
        data = read_toml(path)
    except InputRefused as exc:
        raise ProfileError(f"{path}: cannot use profile ({exc})") from None
    return parse_profile(data, path)


LATCHES: Final = "latches_on_start_game"


def parse_profile(data: Mapping[str, Any], path: pathlib.Path) -> Profile:
    try:
        doc = ProfileFile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(one_line(exc, str(path), model=ProfileFile)) from None
    kind, protocol = DeviceKind(doc.profile.kind), Protocol(doc.profile.protocol)
    options = doc.options
    enums = doc.enums
    for en, table in enums.items():
        if not table:
            raise _fail(path, f"enums.{en}", "must be a table of name = code")
        if len(set(table.values())) != len(table):
            raise _fail(path, f"enums.{en}", "two names share one code")
    commands = doc.commands
    for cmd in _REQUIRED_COMMANDS.get(kind, ()):
        if cmd not in commands:
            raise _fail(path, f"commands.{cmd}", f"a {kind} profile must define this command code")
    for en in _REQUIRED_ENUMS.get(kind, ()):
        if en not in enums:
            raise _fail(path, f"enums.{en}", f"a {kind} profile must define this enum")
    if kind is DeviceKind.KEYPAD and not isinstance(options.get(LATCHES, False), bool):
        # A keypad that freezes its own sensors when Start Game is pressed (687a.9(b)): the
        # controller's read after the press is then the latched snapshot, whatever came later.
        raise _fail(path, f"options.{LATCHES}", "must be true or false")
    if kind is DeviceKind.SHUFFLER:
        unknown = set(enums["shuffler_state"]) - {s.value for s in _shuffler_states()}
        if unknown:
            raise _fail(path, "enums.shuffler_state", f"unknown state name {sorted(unknown)[0]!r}")

    registers: dict[str, RegisterSpec] = {}
    bits: dict[str, BitSpec] = {}
    conditions: dict[str, ConditionSpec] = {}
    card: CardFormat | None = None
    line: LineFormat | None = None
    frames: dict[str, FrameSpec] = {}
    if protocol is Protocol.MODBUS:
        if doc.registers is None:
            raise _fail(path, "registers", "must be a table")
        registers = _registers(path, doc.registers, enums)
        bits = _bits(path, doc.bits, registers)
        for reg in _REQUIRED_REGISTERS.get(kind, ()):
            if reg not in registers and reg not in bits:
                raise _fail(path, f"registers.{reg}", f"a {kind} profile must define this register (or bit)")
        conditions = _conditions(path, doc.conditions, bits)
        if doc.card is not None or any(r.type == "card" for r in registers.values()):
            if doc.card is None:
                raise _fail(path, "card", "must be a table")
            card = _card_format(path, doc.card)
    else:
        if doc.bits or doc.conditions:
            raise _fail(path, "bits" if doc.bits else "conditions", "only for a Modbus profile")
        line = LineFormat(doc.line.start, doc.line.end, doc.line.separator, doc.line.max_length)
        if doc.frames is None:
            raise _fail(path, "frames", "must be a table")
        frames = _frames(path, doc.frames)
        for fname, fields in _REQUIRED_FRAMES.get(kind, {}).items():
            if fname not in frames:
                raise _fail(path, f"frames.{fname}", f"a {kind} profile must define this frame")
            have = [f.name for f in frames[fname].fields]
            for f in fields:
                if f not in have:
                    raise _fail(path, f"frames.{fname}.fields", f"must include field {f!r}")
    return Profile(
        doc.profile.name, kind, protocol, path, registers, enums, commands, card, line, frames, options,
        bits, conditions, low_word_first=doc.profile.word_order == "low_first", page=doc.profile.page,
    )  # fmt: skip


def _shuffler_states() -> tuple[StrEnum, ...]:
    from devices.events import ShufflerState

    return tuple(ShufflerState)


def _registers(
    path: pathlib.Path, regs: Mapping[str, _Register], enums: Mapping[str, Mapping[str, int]]
) -> dict[str, RegisterSpec]:
    out: dict[str, RegisterSpec] = {}
    for name, t in regs.items():
        key = f"registers.{name}"
        hi_default = 0xFFFFFFFF if t.type == "u32" else U16_MAX
        if t.min > hi_default:
            raise _fail(path, f"{key}.min", f"must be an integer 0-{hi_default}")
        hi = hi_default if t.max is None else t.max
        if not t.min <= hi <= hi_default:
            raise _fail(path, f"{key}.max", f"must be an integer {t.min}-{hi_default}")
        if t.type == "enum" and (t.enum is None or t.enum not in enums):
            raise _fail(path, f"{key}.enum", "must name a table under [enums]")
        out[name] = RegisterSpec(
            name=name,
            address=t.address,
            count=t.count,
            type=t.type,
            access=t.access,
            min=t.min,
            max=hi,
            units=t.units,
            enum=t.enum if t.type == "enum" else None,
            doc=t.doc,
        )
    spans = sorted((s.address, s.address + s.words, s.name) for s in out.values())
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        if start < end:
            raise _fail(path, f"registers.{b}.address", f"overlaps register {a}")
    if spans and spans[-1][1] > U16_MAX + 1:
        raise _fail(path, f"registers.{spans[-1][2]}.address", "runs past address 65535")
    return out


def _bits(
    path: pathlib.Path, docs: Mapping[str, _BitDoc], regs: Mapping[str, RegisterSpec]
) -> dict[str, BitSpec]:
    out: dict[str, BitSpec] = {}
    for name, b in docs.items():
        key = f"bits.{name}"
        if name in regs:
            raise _fail(path, key, "is a register already")
        reg = regs.get(b.reg)
        if reg is None or reg.type not in ("u16", "bits", "u32") or "r" not in reg.access:
            raise _fail(path, f"{key}.register", "must name a readable u16, bits or u32 register")
        if reg.count != 1:
            raise _fail(path, f"{key}.register", "must name a register of one value (count = 1)")
        if b.bit >= reg.bits:
            raise _fail(path, f"{key}.bit", f"must be an integer 0-{reg.bits - 1}")
        out[name] = BitSpec(name, b.reg, b.bit)
    return out


def _conditions(
    path: pathlib.Path, docs: Mapping[str, _ConditionDoc], bits: Mapping[str, BitSpec]
) -> dict[str, ConditionSpec]:
    out: dict[str, ConditionSpec] = {}
    for name, c in docs.items():
        if name not in bits:
            raise _fail(path, f"conditions.{name}", "must be the name of a bit under [bits]")
        out[name] = ConditionSpec(name, c.message, c.action, Halts(c.halts), c.section)
    return out


def _bitfield(path: pathlib.Path, doc: _BitFieldDoc, key: str) -> BitField:
    if doc.bits > 16 - doc.shift:
        raise _fail(path, f"{key}.bits", f"must be an integer 1-{16 - doc.shift}")
    return BitField(doc.shift, doc.bits)


def _card_format(path: pathlib.Path, doc: _CardDoc) -> CardFormat:
    fmt = CardFormat(
        rank=_bitfield(path, doc.rank, "card.rank"),
        suit=_bitfield(path, doc.suit, "card.suit"),
        back=_bitfield(path, doc.back, "card.back"),
        face_up=_bitfield(path, doc.face_up, "card.face_up"),
        ranks=tuple(doc.ranks),
        suits=tuple(doc.suits),
    )
    used = 0
    for fld in (fmt.rank, fmt.suit, fmt.back, fmt.face_up):
        mask = ((1 << fld.bits) - 1) << fld.shift
        if used & mask:
            raise _fail(path, "card", "bit fields overlap")
        used |= mask
    if len(fmt.ranks) >= 1 << fmt.rank.bits or len(fmt.suits) >= 1 << fmt.suit.bits:
        raise _fail(path, "card", "too many rank or suit codes for their bit fields")
    return fmt


def _frames(path: pathlib.Path, docs: Mapping[str, _FrameDoc]) -> dict[str, FrameSpec]:
    out: dict[str, FrameSpec] = {}
    for fname, ft in docs.items():
        key = f"frames.{fname}"
        fields: list[FieldSpec] = []
        for i, f in enumerate(ft.fields):
            if f.max < f.min:
                raise _fail(path, f"{key}.fields[{i}].max", f"must be an integer {f.min}-{2**31}")
            fields.append(FieldSpec(f.name, f.min, f.max))
        if any(s.tag == ft.tag for s in out.values()):
            raise _fail(path, f"{key}.tag", "two frames share one tag")
        out[fname] = FrameSpec(fname, ft.tag, tuple(fields))
    return out
