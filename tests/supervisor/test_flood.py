"""A flood on one device's line delays no other device's events by more than one poll (issue 11:
1 MiB of "$" on the stub counter's serial line kept the table busy for 18 s with every other
device unprocessed). On the virtual clock, polling on demand: no timing is asserted, only that
each key pressed during the flood is handled by the keypad's next poll."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from controller.supervisor.rig import Rig
from devices import events as dev
from devices.events import Key
from devices.framing import encode_frame
from sim.frame_server import PtySink
from tests.supervisor.conftest import journal_kinds

MakeRig = Callable[..., Awaitable[Rig]]
FLOOD = b"$" * (1 << 20)


async def test_a_flood_on_the_stub_counter_line_delays_no_keypad_event(table_rig: MakeRig) -> None:
    rig = await table_rig("dj-wild")
    sup = rig.supervisor
    stub = rig.sim.devices["stub"].frame_sim
    assert stub is not None and isinstance(stub.sink, PtySink)
    keypad = rig.sim.devices["keypad"].model
    handled: list[dev.DeviceEvent] = []
    on_event = sup.device_events.on_event

    async def spy(event: dev.DeviceEvent) -> None:
        handled.append(event)
        await on_event(event)

    sup.device_events.on_event = spy  # type: ignore[method-assign]

    def pressed() -> int:
        return sum(isinstance(e, dev.ButtonPressed) for e in handled)

    flood = asyncio.create_task(stub.sink.send_all(FLOOD))
    presses = 0
    while not flood.done() or presses == 0:
        keypad.press(Key.NEXT)
        presses += 1
        await sup.settle("keypad")  # one poll of the keypad
        assert pressed() == presses, f"key {presses} not handled by the keypad's next poll"
    await flood
    # What the link holds of the flood is read first: bytes that reach a full buffer are dropped
    # on arrival (a UART overrun), and a count sent into it would be dropped with them.
    link = sup.drivers["stub"].link  # type: ignore[attr-defined]
    while link._buffered:
        polls = sup.progress.polls_done["stub"]
        sup.progress.poke["stub"].set()
        await sup.wait_for(lambda: sup.progress.polls_done["stub"] > polls)  # noqa: B023
    # The stub counter itself is back as soon as the flood ends: its next count is read. (Sent
    # with send_all: the line may still hold flood bytes, and send() drops what does not fit.)
    m = stub.model
    m.count_stub(53)
    count = {"seq": m.seq, "count": m.count, "verified": 1}
    await stub.sink.send_all(encode_frame(stub.profile, "count", count))

    def counted() -> bool:
        return any(isinstance(e, dev.StubCounted) for e in handled)

    while not counted():
        # Polling on demand, a read with nothing but frame errors waits for the next poll.
        polls = sup.progress.polls_done["stub"]
        sup.progress.poke["stub"].set()
        await sup.wait_for(lambda: sup.progress.polls_done["stub"] > polls or counted())  # noqa: B023
    errors = [e for e in handled if isinstance(e, dev.FrameError)]
    # At least one key pressed while the flood was on the line (how many depends on how fast the
    # line drains: the journal's commits no longer hold the loop, so the flood may end within one).
    assert presses >= 1 and 1 <= len(errors) <= 4, (presses, errors)  # a burst is one or two events
    assert sum(e.count for e in errors) > 1000  # ... standing for every broken frame


CHATTY = 2_000  # valid counts in a row, outside any round (the counter sent 10,000)


async def test_counts_nobody_asked_for_are_one_alarm_not_a_record_each(table_rig: MakeRig) -> None:
    """Issue 21 item 6: a stub counter that sends valid counts outside a round (nobody asked for
    them) writes one alarm (687a.9(f)) with its counter, not a journal record and a log line per
    count; when the table next asks for a count the last one's counter is journalled (so a
    restart does not take the counter's repeat of it for news), once, and a round counts as ever."""
    rig = await table_rig("dj-wild")
    sup = rig.supervisor
    await rig.dealer.open_table()
    stub = rig.sim.devices["stub"].frame_sim
    assert stub is not None
    m = stub.model
    before = sup.jt.journal.last_seq if sup.jt else 0
    frames = b""
    for _ in range(CHATTY):
        m.count_stub(53)
        frames += encode_frame(stub.profile, "count", {"seq": m.seq, "count": m.count, "verified": 1})
    driver = sup.drivers["stub"]
    with structlog.testing.capture_logs() as lines:
        await stub.sink.send_all(frames)
        while driver._last_seq != m.seq:  # type: ignore[attr-defined]
            polls = sup.progress.polls_done["stub"]
            sup.progress.poke["stub"].set()
            await sup.wait_for(lambda: sup.progress.polls_done["stub"] > polls)  # noqa: B023
        await sup.settle()
    assert sup.jt is not None
    added = journal_kinds(sup.journal_path)[before:]
    # One record: the first count's counter rides in the alarm's (the table meanwhile goes on
    # with its batches, which is none of the stub's doing).
    of_stub = [
        k for k, p in added if k in ("alarm_raised", "device_seen", "stub_counted") or "device_seen" in p
    ]
    assert of_stub == ["alarm_raised"], added
    alarm = next(p for k, p in journal_kinds(sup.journal_path) if k == "alarm_raised")
    assert alarm["section"] == "687a.9(f)" and not alarm["halts"]
    said = [x for x in lines if x.get("device") == "stub" and x["log_level"] in ("info", "warning", "error")]
    assert len(said) <= 2, said
    # The table asks for a count again: the last unasked one's counter goes in, once; the round
    # is dealt and its count read as ever.
    await rig.dealer.play_round()
    kinds = [k for k, _ in journal_kinds(sup.journal_path)]
    assert kinds.count("stub_counted") == 1 and "round_settled" in kinds
    # The round's count is the counter's latest: the unasked ones' counter went in before it.
    assert sup.table.device_seen["stub"]["count_seq"] == m.seq
