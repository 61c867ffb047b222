"""The simulators read and written by an independent Modbus master: Debian's mbpoll, built on
libmodbus, over a real socket (Modbus TCP) and a real pty (the RTU line the reader and the keypad
share), exactly as the device pages in docs/devices/ show it.

mbpoll cannot send what libmodbus refuses to build (a quantity of 0 or 126, an unknown function
code, a broadcast on RTU): tests/devices/test_modbus_conformance.py sends those as raw frames.
The only waits here are mbpoll's own response timeout where the point is that no answer comes.
"""

from __future__ import annotations

import asyncio
import re
import shutil

import pytest

from devices.events import ShufflerState, Slot
from tests.devices.conftest import GUARD_S, Rig

MBPOLL = shutil.which("mbpoll")
pytestmark = pytest.mark.skipif(MBPOLL is None, reason="mbpoll is not installed (bin/test installs it)")

ANSWER_S = "5"  # mbpoll's response timeout where an answer is due: never reached when it comes
SILENCE_S = "0.2"  # where none is due: how long mbpoll listens before it says so


async def mbpoll(*args: str) -> tuple[int, str]:
    """Run mbpoll to the end (the simulators answer on this loop meanwhile)."""
    assert MBPOLL is not None
    proc = await asyncio.create_subprocess_exec(
        MBPOLL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(GUARD_S):
        out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def values(out: str) -> dict[int, int]:
    """The ``[address]: value`` lines of a read."""
    return {int(a): int(v) for a, v in re.findall(r"^\[(\d+)\]:\s+(-?\d+)$", out, re.MULTILINE)}


def tcp(
    rig: Rig, name: str, *args: str, unit: int = 1, timeout: str = ANSWER_S, write: str = ""
) -> list[str]:
    """mbpoll's arguments for a TCP device; ``write``: the values to write, else it reads."""
    port = str(rig.server(name).port)
    return ["-m", "tcp", "-p", port, "-a", str(unit), "-o", timeout, "-0", *args, "127.0.0.1", *write.split()]


def rtu(rig: Rig, *args: str, unit: int, timeout: str = ANSWER_S, write: str = "") -> list[str]:
    line = rig.server("keypad").path  # the reader (id 2) and the keypad (id 3) share it
    options = ["-m", "rtu", "-b", "19200", "-P", "none", "-a", str(unit), "-o", timeout, "-0", *args]
    return [*options, line, *write.split()]


async def test_the_shuffler_map_reads_as_its_page_documents(rig: Rig) -> None:
    code, out = await mbpoll(*tcp(rig, "shuffler", "-t", "4", "-r", "0", "-c", "10", "-1"))
    assert code == 0, out
    # docs/devices/shuffler.md: state idle (0); slot A idle (0), red (1), 6 decks; slot B idle,
    # blue (2), 6 decks, as double-back-jack.toml loads them.
    assert values(out) == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 6, 7: 0, 8: 2, 9: 6}


async def test_tcp_unit_ids_0xff_and_0_reach_the_device_others_get_no_answer(rig: Rig) -> None:
    for unit in (1, 0xFF, 0):
        code, out = await mbpoll(*tcp(rig, "shuffler", "-t", "4", "-r", "6", "-1", unit=unit))
        assert (code, values(out)) == (0, {6: 6}), out
    code, out = await mbpoll(*tcp(rig, "shuffler", "-t", "4", "-r", "6", "-1", unit=7, timeout=SILENCE_S))
    assert code != 0 and "Connection timed out" in out, out


@pytest.mark.parametrize(
    ("data_type", "what"), [("0", "coil"), ("1", "discrete input"), ("3", "input register")]
)
async def test_undocumented_tables_are_illegal_function_on_both_transports(
    rig: Rig, data_type: str, what: str
) -> None:
    """Functions 1, 2 and 4: no device page documents coils, discrete inputs or input registers."""
    for args in (
        tcp(rig, "shuffler", "-t", data_type, "-r", "0", "-1"),
        rtu(rig, "-t", data_type, "-r", "0", "-1", unit=3),
    ):
        code, out = await mbpoll(*args)
        assert code != 0 and "Illegal function" in out, (what, out)


async def test_an_address_outside_the_map_is_illegal_data_address(rig: Rig) -> None:
    for args in (
        tcp(rig, "shoe", "-t", "4", "-r", "100", "-1"),
        rtu(rig, "-t", "4", "-r", "45", "-1", unit=3),  # the keypad's map ends at 44
    ):
        code, out = await mbpoll(*args)
        assert code != 0 and "Illegal data address" in out, out


async def test_a_command_is_carried_out_and_a_refused_one_is_illegal_data_value(rig: Rig) -> None:
    start_a = tcp(rig, "shuffler", "-t", "4", "-r", "10", write="1 1 0 0")  # start_shuffle, slot A
    code, out = await mbpoll(*start_a)
    assert code == 0 and "Written 4 references" in out, out
    assert rig.model("shuffler").slots[Slot.A].state is ShufflerState.SHUFFLING
    code, out = await mbpoll(*start_a)  # already shuffling: refused
    assert code != 0 and "Illegal data value" in out, out


async def test_the_keypad_locks_and_lights_the_bets_on_the_shared_line(rig: Rig) -> None:
    keypad = rig.model("keypad")
    keypad.place_bet(2, 1)
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "33", unit=3, write="1 0 0 0"))  # lock
    assert code == 0, out
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "14", "-c", "3", "-1", unit=3))
    # keypad.md: locked = 1; lights of boxes 1 and 2 (15, 16) show the wager sensed at the lock.
    assert (code, values(out)) == (0, {14: 1, 15: 0, 16: 1}), out
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "33", unit=3, write="2 0 0 0"))  # unlock
    assert code == 0, out
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "14", "-c", "3", "-1", unit=3))
    assert (code, values(out)) == (0, {14: 0, 15: 0, 16: 0}), out


async def test_on_the_shared_line_only_the_addressed_device_answers(rig: Rig) -> None:
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "0", "-1", unit=9, timeout=SILENCE_S))
    assert code != 0 and "Connection timed out" in out, out  # nobody on the line is 9
    rig.model("reader").faults.dead = True
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "0", "-1", unit=2))  # the reader's health
    assert (code, values(out)) == (0, {0: 21}), out
    code, out = await mbpoll(*rtu(rig, "-t", "4", "-r", "0", "-1", unit=3))  # the keypad's sensors
    assert (code, values(out)) == (0, {0: 0}), out
