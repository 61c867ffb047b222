"""No card leaves in an alarm before its very draw is public (issue 38 item 6).

The alarms that name cards are two: the shoe's conflict with the journal ("check draw N (card)",
controller/table/devices.py, naming what the shoe's driver read at each disowned draw) and the
reader used out of turn (naming the dealer's up card, face up by then). The conflict decided by
card value: a hole card was named whenever a player held a card of the same rank and suit from
another deck of the batch. Here the shoe is stacked so that every card of the round is one card
(six decks hold six of it), and after the hole card is dealt a forged history disowns each draw
of the round: only draws face up at the table may be named with their card, in the alarm, in the
log lines and in the table's published state; the hole card's draw is named by number only.
Faults are injected through a real Modbus TCP proxy in front of the simulated shoe.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from controller import logs
from controller.rules.requests import DEALER
from controller.table.recorder import SEEN_KEY
from devices.drivers.shoe import SETTLE_POLLS
from sim.models import DealtCard
from sim.wire_dealer import ask_identity
from tests.supervisor.conftest import journal_kinds
from tests.supervisor.test_shoe_glitches import Glitched, shoe_behind_proxy

NAMED = re.compile(r"draw (\d+) \(([^)]*)\)")
SHOWN = {"card_dealt", "card_discarded_extra"}  # face up at the table when journalled


def _draws(path: Path) -> dict[int, str]:
    """Draw number -> the kind of the record its card went into, as the journal says."""
    out: dict[int, str] = {}
    for kind, payload in journal_kinds(path):
        seen = payload.get(SEEN_KEY)
        if isinstance(seen, dict) and "draw_seq" in seen.get("counters", {}):
            out[int(seen["counters"]["draw_seq"])] = kind
    return out


def _dealer_cards(path: Path) -> int:
    return sum(1 for k, p in journal_kinds(path) if "card_dealt" in k and p.get("seat") == DEALER)


async def _deal_until_the_dealer_has(g: Glitched, cards: int) -> None:
    """The virtual dealer answers the table's asks until the dealer's ``cards``-th card of the
    round is dealt (1: the up card, 2: the hole card)."""
    dealer, path = g.rig.dealer, g.rig.supervisor.journal_path
    snap: dict[str, Any] = await dealer.link.state()
    until = _dealer_cards(path) + cards
    while _dealer_cards(path) < until:
        ask = snap.get("asking")
        if isinstance(ask, dict) and dealer._new_ask(ask) and await dealer._ready(snap, ask):
            dealer._answered = ask_identity(ask)
            await dealer._act(ask, snap)
            snap = dealer._snap = await dealer.link.state()
        else:
            snap = dealer._snap = await dealer.link.wait()


async def test_a_conflict_names_no_card_whose_draw_is_not_face_up(tmp_path: Path) -> None:
    logs.configure(cache=False)  # capture_logs misses cached loggers
    async with shoe_behind_proxy(tmp_path, boxes=1) as g:
        rig, sup = g.rig, g.rig.supervisor
        await rig.dealer.open_table()
        shoe = rig.sim.devices["shoe"].model
        while shoe.draw_seq <= len(shoe.ring):  # past the shoe's history ring: not a fresh shoe
            await rig.dealer.play_round()
        shoe, path = rig.sim.devices["shoe"].model, sup.journal_path
        # Every copy of one card first: the player's cards, the up card and the hole card alike.
        counts: dict[str, int] = {}
        for c in shoe.cards:
            counts[str(c.card)] = counts.get(str(c.card), 0) + 1
        same = max(counts, key=lambda k: counts[k])
        assert counts[same] >= 5, counts[same]
        first = shoe.draw_seq + 1
        shoe.cards = [c for c in shoe.cards if str(c.card) == same] + [
            c for c in shoe.cards if str(c.card) != same
        ]
        await _deal_until_the_dealer_has(g, 2)
        draws = _draws(path)
        (hole,) = [n for n, k in draws.items() if k == "hole_card_dealt" and n >= first]
        assert any(draws[n] in SHOWN for n in range(first, hole)), draws
        other = next(c.card for c in shoe.cards if str(c.card) != same)
        word = shoe_word(g, DealtCard(other))
        last = shoe.draw_seq

        def disown(r: dict[str, list[int]]) -> None:
            # The shoe's history now holds another card at every draw of this round.
            ring = r["draw_ring"]
            for n in range(first, last + 1):
                ring[(n - 1) % len(ring)] = word

        alarms = len([k for k, _ in journal_kinds(path) if k == "alarm_raised"])
        with capture_logs() as lines:
            for _ in range(SETTLE_POLLS):
                await g.poll_shoe(disown)
        new = [p for k, p in journal_kinds(path) if k == "alarm_raised"][alarms:]
        assert len(new) == 1 and new[0]["halts"], new
        message = str(new[0]["message"])
        assert f"draw {hole}" in message, message  # the hole card's draw is to be checked ...
        named = {int(n): c for n, c in NAMED.findall(message)}
        assert hole not in named, message  # ... by number only
        assert named, message  # the face-up ones are named with their card
        for n, c in named.items():
            assert draws[n] in SHOWN and c == same, (n, c, draws)
        # Nor anywhere else: the log lines and the table's published state say the same.
        texts = [str(line) for line in lines] + [str(sup.snapshot())]
        for text in texts:
            for n, _ in NAMED.findall(text):
                assert draws[int(n)] in SHOWN, text


def shoe_word(g: Glitched, dc: DealtCard) -> int:
    c = dc.card
    return g.proxy.profile.card_word(c.rank, c.suit, c.back, dc.face_up)


async def test_the_reader_used_out_of_turn_names_only_the_up_card(tmp_path: Path) -> None:
    """The other alarm that names a card (673a.13(i), 665a.13(h), 685a.12(h)): a card put into
    the reader before the hole card is dealt names the up card, whose draw is face up; never
    the card put in."""
    logs.configure(cache=False)
    async with shoe_behind_proxy(tmp_path, boxes=1) as g:
        rig, sup = g.rig, g.rig.supervisor
        await rig.dealer.open_table()
        path = sup.journal_path
        await _deal_until_the_dealer_has(g, 1)
        up = [p for k, p in journal_kinds(path) if k == "card_dealt" and p.get("seat") == DEALER][-1]
        shoe = rig.sim.devices["shoe"].model
        shown = {str(p["card"]) for _, p in journal_kinds(path) if "card" in p}
        inserted = next(c.card for c in shoe.cards if str(c.card) not in shown)  # never dealt yet
        alarms = len([k for k, _ in journal_kinds(path) if k == "alarm_raised"])
        with capture_logs() as lines:
            rig.sim.devices["reader"].model.insert(inserted)
            await sup.settle("reader")
        new = [p for k, p in journal_kinds(path) if k == "alarm_raised"][alarms:]
        assert len(new) == 1 and f"(up card {up['card']})" in str(new[0]["message"]), new
        for text in [str(line) for line in lines] + [str(sup.snapshot())]:
            assert str(inserted) not in text, text
