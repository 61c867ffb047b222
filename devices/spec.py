"""The device behaviour specs: for each Modbus device kind, the states it can be in, the commands
each state takes and what each does, as rows of data.

One source for three readers: the device pages in docs/devices/ show these rows as their
"Commands by state" table (a test checks the page shows exactly these rows), the simulators'
models are walked through every row (tests/devices/test_behaviour_spec.py), and
``tablectl device check`` drives a real device through the rows it can reach safely. So the
doc, the reference implementation and the conformance check cannot drift apart.

A row's ``command`` is a command name of the profile (its code comes from the profile, so a
vendor's profile with other codes is checked against the same rows), or ``UNKNOWN`` for a code
the profile does not define. ``answer`` is ``ok`` (a normal write reply) or a Modbus exception
code (``03``: the device cannot carry it out). ``then`` is the state after it, in the same
vocabulary as ``state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devices.profiles import DeviceKind

UNKNOWN: Final = "(unknown code)"  # a command code the profile does not define
UNKNOWN_CODE: Final = 99


@dataclass(frozen=True, slots=True)
class CommandRow:
    state: str
    command: str
    args: tuple[int, ...]
    answer: str  # "ok" or a two-digit exception code
    then: str
    does: str

    def words(self, codes: dict[str, int], block: int = 4) -> tuple[int, ...]:
        """The command block as written (function 16, all of its words)."""
        code = UNKNOWN_CODE if self.command == UNKNOWN else codes[self.command]
        return (code, *self.args, *([0] * block))[:block]

    def cells(self, codes: dict[str, int]) -> list[str]:
        """The row as the device page shows it."""
        words = " ".join(str(w) for w in self.words(codes))
        return [self.state, f"`{self.command}`" if self.command != UNKNOWN else self.command,
                f"`{words}`", self.answer, self.then, self.does]  # fmt: skip


HEADER: Final = ["State", "Command", "Words", "Answer", "Then", "What it does"]

_S = CommandRow
SHUFFLER: Final = (
    _S("A idle", "start_shuffle", (1,), "ok", "A shuffling", "starts a cycle of slot A's batch"),
    _S("A idle", "abort_shuffle", (1,), "03", "A idle", "nothing to abort"),
    _S("A idle", "eject_to_shoe", (1,), "03", "A idle", "an unshuffled batch is never ejected"),
    _S("A idle", "start_shuffle", (3,), "03", "A idle", "slot 3 does not exist (1 = A, 2 = B)"),
    _S("A idle", "clear_fault", (), "ok", "A idle", "nothing to clear; harmless"),
    _S("A idle", UNKNOWN, (), "03", "A idle", "a code the profile does not define"),
    _S("A shuffling", "start_shuffle", (1,), "03", "A shuffling", "a cycle is already under way"),
    _S("A shuffling", "eject_to_shoe", (1,), "03", "A shuffling", "the batch is not shuffled yet"),
    _S(
        "A shuffling",
        "abort_shuffle",
        (1,),
        "ok",
        "A idle",
        "stops the cycle; the batch must be shuffled again",
    ),
    _S("A ready", "abort_shuffle", (1,), "03", "A ready", "no cycle to abort"),
    _S("A ready", "start_shuffle", (1,), "ok", "A shuffling", "shuffles the ready batch again (a reshuffle)"),
    _S(
        "A ready",
        "eject_to_shoe",
        (1,),
        "ok",
        "A empty",
        "the shuffled batch goes to the shoe (or the dealer's hand)",
    ),
    _S("A empty", "start_shuffle", (1,), "03", "A empty", "no cards in the slot"),
    _S("A empty", "eject_to_shoe", (1,), "03", "A empty", "no cards in the slot"),
    _S("A jammed", "start_shuffle", (1,), "03", "A jammed", "a jam is cleared first"),
    _S("A jammed", "eject_to_shoe", (1,), "03", "A jammed", "a jammed batch is never dealt (673a.13(k))"),
    _S("A jammed", "clear_fault", (), "ok", "A idle", "the cards stay, unshuffled: shuffle them again"),
    _S("fault", "start_shuffle", (1,), "03", "fault", "the device is faulted"),
    _S("fault", "clear_fault", (), "ok", "A idle", "clears the fault code"),
    _S("A idle", "mark_out_of_order", (), "ok", "out_of_order", "673a.13(l): signed out of order"),
    _S("out_of_order", "start_shuffle", (1,), "03", "out_of_order", "refused until a power cycle"),
    _S("out_of_order", "eject_to_shoe", (1,), "03", "out_of_order", "refused until a power cycle"),
    _S("out_of_order", "clear_fault", (), "ok", "out_of_order", "does not undo out of order"),
)

READER: Final = (
    _S("no up card", "set_up_card", (1,), "ok", "up card A", "the up card is an ace (rank code 1)"),
    _S("no up card", "set_up_card", (14,), "03", "no up card", "14 is no rank code"),
    _S("up card A", "set_up_card", (0,), "ok", "no up card", "rank code 0 clears the up card alone"),
    _S(
        "up card A",
        "reset",
        (),
        "ok",
        "no up card",
        "forgets the round: up card and result; insert_seq and health stay",
    ),
    _S("no up card", UNKNOWN, (), "03", "no up card", "a code the profile does not define"),
    _S("failed", "reset", (), "ok", "failed", "a reset is not a repair: health stays non-zero"),
)

KEYPAD: Final = (
    _S(
        "unlocked",
        "lock",
        (),
        "ok",
        "locked",
        "sensors frozen at what they sense; lights = sensed spots (687a.9(b))",
    ),
    _S("locked", "lock", (), "ok", "locked", "no change"),
    _S("locked", "unlock", (), "ok", "unlocked", "sensors live again; all lights off"),
    _S("unlocked", "set_light", (1, 1, 1), "ok", "unlocked, light 1/1 on", "one light on, locked or not"),
    _S("unlocked, light 1/1 on", "set_light", (1, 1, 0), "ok", "unlocked", "that light off"),
    _S("unlocked", "set_light", (1, 1, 2), "03", "unlocked", "a light is 0 (off) or 1 (on)"),
    _S("unlocked", "set_light", (8, 1, 1), "03", "unlocked", "no box 8 on a 7-box keypad"),
    _S(
        "unlocked",
        "show_meter",
        (0, 12345),
        "ok",
        "unlocked, meter 12345",
        "the meter shows 123.45 (high word, low word)",
    ),
    _S("unlocked", UNKNOWN, (), "03", "unlocked", "a code the profile does not define"),
)

SHOE: Final = ()  # no command block: every write is exception 02 (shoe.md)

COMMAND_ROWS: Final[dict[DeviceKind, tuple[CommandRow, ...]]] = {
    DeviceKind.SHUFFLER: SHUFFLER,
    DeviceKind.READER: READER,
    DeviceKind.KEYPAD: KEYPAD,
    DeviceKind.SHOE: SHOE,
}


def markdown_table(rows: tuple[CommandRow, ...], codes: dict[str, int]) -> str:
    """The rows as the device page's "Commands by state" table (reference profile's codes)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells(codes)) + " |" for r in rows]
    return "\n".join(lines)
