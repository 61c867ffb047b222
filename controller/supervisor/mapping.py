"""Device events into table-core inputs, and core commands into device commands.

The meaning of a key depends on what the round is waiting for, so the translation reads the table
(never changes it). What the devices report about themselves (which batch each shuffler slot
holds, which bet sensors see chips) is kept here, because the core does not model it.

Conventions of the reference keypad (docs/install.md, "What the keypad means"):
- spot 1 of a box is its main wager (the blackjack bet; DJ Wild's Ante and Blind), spot 2 its
  optional wager (Bust It, Match-the-Dealer, DJ Wild's Progressive Bonus);
- the sensors see chips, not their value: each sensed spot is one ``UNIT_BET``;
- ``double`` at a decision doubles down: for its limit, or for the amount keyed with it (a
  double for less, 673a.10(a), 665a.10(a), 685a.9(a));
- ``double`` while a wager offer (insurance, Double Attack) is open takes that wager at its
  maximum (or for the amount keyed with it), and answers a yes/no offer that registered it
  (even money) with yes;
- DJ Wild: ``next`` after Start Game says the hands are dealt (687a.9(c)-(e)); a stub count says
  so too; ``next`` after the deal puts the stub away uncounted.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.games import GameId
from controller.rules.requests import MasqueRange as CoreRange
from controller.rules.requests import WagerOffer
from controller.rules.round import side_wagers
from controller.rules.state import SeatWagers
from controller.table import inputs as I
from controller.table.batches import Place, ShufflerState
from controller.table.core import Command as CoreCommand
from controller.table.core import Table
from controller.table.recorder import Seen
from devices import commands as dc
from devices import events as dev

UNIT_BET = 10  # what one sensed chip stack stands for, in table units
MAIN_SPOT, SIDE_SPOT = 1, 2

_RANGE_OF_LIGHT = {
    dev.MasqueLight.SMALL: CoreRange.SMALL,
    dev.MasqueLight.MEDIUM: CoreRange.MEDIUM,
    dev.MasqueLight.LARGE: CoreRange.LARGE,
}


class Untranslatable(Exception):
    """A device event or core command that cannot be carried over; one line, no secrets."""


@dataclass
class SlotView:
    state: dev.ShufflerState
    back: str | None


@dataclass(frozen=True)
class ShoeLoad:
    """A batch the shoe reported loaded that the table has not taken into its shoe (yet): the
    cut stack put in before the cut or the cover card was recorded, a batch the table refused.
    ``back`` None: the shoe does not tell backs."""

    back: str | None
    cards: int


class Translator:
    def __init__(self, table_backs: tuple[str, str] = ("red", "blue")) -> None:
        self.slots: dict[dev.Slot, SlotView] = {}
        self.config_backs = dict(zip(dev.Slot, table_backs, strict=True))
        self.bets: set[tuple[int, int]] = set()  # (box, spot) sensed now
        self.progressive_closed = False  # a failed keypad closes progressive wagers
        # What the shoe shows loaded that the table has not taken: the reconciler takes it once
        # the table can (the cut recorded), the stall check alarms while it cannot.
        self.shoe_load: ShoeLoad | None = None
        self.why = ""  # why the last event translated to no input: its outcome in the log

    # ------------------------------------------------------------------ shuffler slots
    def back_of(self, slot: dev.Slot) -> str:
        view = self.slots.get(slot)
        if view is not None and view.back is not None:
            return view.back
        return self.config_backs[slot]

    def slot_of(self, back: str) -> dev.Slot:
        for slot in dev.Slot:
            if self.back_of(slot) == back:
                return slot
        raise Untranslatable(f"no shuffler slot holds the {back} batch")

    # ------------------------------------------------------------------ events -> inputs
    def inputs(self, event: dev.DeviceEvent, table: Table) -> list[I.Input]:
        """The core's inputs for ``event``; none, with ``why`` saying why (every observation has
        an outcome in the journal or the log: docs/design.md, "Nothing silent")."""
        self.why = "a device's health or reading, not an input of the table"
        match event:
            case dev.BatchSlotChanged(slot=slot, state=state, back=back):
                self.slots[slot] = SlotView(state, back)
                self.why = f"shuffler slot {slot.value} reads {state.value}"
                return []
            case dev.ShuffleStarted(slot=slot):
                back = self.back_of(slot)
                batch = table.batches.get(back)
                first: list[I.Input] = []
                if batch is not None and batch.location in (Place.NEW, Place.DISCARD):
                    first = [I.BatchToShuffler(back=back)]  # loaded and started between two polls
                return [*first, I.ShuffleStarted(back=back)]
            case dev.ShuffleDone(slot=slot, cards_counted=counted):
                back = self.back_of(slot)
                batch = table.batches.get(back)
                stored = batch is not None and batch.location is Place.SHUFFLER
                if stored and batch is not None and batch.shuffler is ShufflerState.READY:
                    self.why = f"the journal has the {back} batch shuffled already"
                    return []  # a restart's reading of a slot the journal has ready already
                unseen = (
                    batch is not None
                    and batch.location is Place.SHUFFLER
                    and batch.shuffler in (ShufflerState.UNSHUFFLED, ShufflerState.JAMMED)
                )  # started and done while the controller was down, or between two polls
                return [
                    *([I.ShuffleStarted(back=back)] if unseen else []),
                    I.ShuffleCompleted(back=back, cards_counted=counted),
                ]
            case dev.ShufflerJammed(slot=slot, code=code):
                return [I.ShuffleFailed(back=self.back_of(slot), reason=f"jammed, code {code}")]
            case dev.ShuffleIncomplete(slot=slot, reason=reason):
                return [I.ShuffleFailed(back=self.back_of(slot), reason=reason)]
            case dev.ShufflerOutOfOrder():
                self.why = "the shuffler is marked out of order already"
                return [] if table.shuffler_out_of_order else [I.ShufflerOutOfOrder(by="device")]
            case dev.CardDrawn(card=card, face_up=face_up, remaining=remaining):
                return [I.CardDrawn(card=card, face_up_in_shoe=face_up, remaining=remaining)]
            case dev.DeviceGlitch(what=what, reason=reason, unaccounted=n, remaining=remaining):
                return [I.DeviceGap(event.device, what, reason, n, remaining, event.halts, event.check)]
            case dev.DrawsMissed(count=n):
                return [I.DeviceGap(event.device, "cards", "drawn beyond the shoe's history, unseen", n)]
            case dev.KeysMissed(count=n):
                return [I.DeviceGap(event.device, "keys", "pressed beyond the keypad's history, unseen", n)]
            case dev.DeviceCondition(name=name, active=active):
                return self._condition(event, table) if active else self._cleared(name)
            case dev.CoverCardReached(remaining=remaining):
                return [I.CoverCardReached(remaining=remaining)]  # the core refuses it at a 5(h) shoe
            case dev.BatchLoaded(back=back, cards=cards):
                return self._loaded(back, cards, table)
            case dev.ReaderResult(blackjack=blackjack):
                return [I.ReaderReport(blackjack=blackjack)]
            case dev.MasqueRange(light=light):
                return [I.ReaderReport(light=_RANGE_OF_LIGHT[light])]
            case dev.ReaderFailed(code=code):
                self.why = "the journal has the reader failed already"
                return [] if table.reader_failed else [I.ReaderFailed(code=code)]
            case dev.ReaderMisuse():
                self.why = "the table judges the insert by the reader's result that comes with it"
                return []
            case dev.StubCounted(count=count):
                wild = table.wild
                dealt = [I.WildHandsDealt()] if wild is not None and wild.locked and not wild.dealt else []
                return [*dealt, I.StubCounted(count=count)]
            case dev.BetSensed(box=box, spot=spot, present=present):
                (self.bets.add if present else self.bets.discard)((box, spot))
                wild = table.wild
                if wild is not None and not wild.locked and spot == SIDE_SPOT and not self.progressive_closed:
                    return [I.BetSensed(box=box, present=present)]
                self.why = f"chips {'on' if present else 'off'} box {box} spot {spot}: the layout shown"
                return []
            case dev.ButtonPressed(key=key, amount=amount):
                return self.key_inputs(key.value, table, amount=amount)
        return []

    def _cleared(self, name: str) -> list[I.Input]:
        self.why = f"{name} cleared: the alarm it raised stands until the floor acknowledges it"
        return []

    def _condition(self, c: dev.DeviceCondition, table: Table) -> list[I.Input]:
        """A condition the device reports, as its profile describes it (``halts``: never,
        in_round, always); one that halts only in a round is no alarm between rounds."""
        if c.halts == "in_round" and not table.in_round:
            self.why = f"{c.name} between rounds: no round to halt"
            return []
        return [I.DeviceCondition(c.device, c.name, c.message, c.action, c.halts != "never", c.section)]

    def _loaded(self, back: str | None, cards: int, table: Table) -> list[I.Input]:
        """The shoe saw a batch come in: the cut stack the dealer put in (673a.5(d)), or a
        direct-insert shuffler's eject. The load the table made is nothing new; any other is put
        to the core as the batch into the shoe, which takes it or refuses it naming the section.
        One it cannot take yet is kept (``shoe_load``): taken once the cut and the cover card
        are recorded (Reconciler), an alarm while it cannot be (controller/supervisor/stalls.py)."""
        held = table.shoe_back
        if held is not None and back in (None, held):
            self.shoe_load = None
            self.why = f"the table has the {held} batch in the shoe already"
            return []
        self.shoe_load = ShoeLoad(back, cards)
        cut = table.cut
        taken = back if back is not None else (cut.back if cut is not None else None)
        if taken is None:
            self.why = "a batch of a back the shoe does not tell, with no cut stack to be it"
            return []
        return [I.BatchToShoe(back=taken, in_shoe=True)]

    def key_inputs(
        self, key: str, table: Table, boxes: tuple[int, ...] | None = None, *, amount: int | None = None
    ) -> list[I.Input]:
        """A key from the keypad (or the same key sent as an authorised command); ``amount``: the
        chips keyed with it, which the core checks against the limit of what it answers."""
        if not table.blackjack:
            return self._wild_key(key, table, boxes, amount)
        if key == dev.Key.START_GAME:
            return [self.round_opened(table, boxes)]
        req = table.round.request if table.round is not None else None
        if key == dev.Key.DOUBLE and isinstance(req, WagerOffer):
            return [I.WagerPlaced(seat=req.seat, amount=req.maximum if amount is None else amount)]
        # Any other key (`double` on a yes/no offer among them) is the core's to take or refuse,
        # by the keys the offer registered.
        return [I.KeyPressed(key=key, amount=amount)]

    def round_opened(self, table: Table, boxes: tuple[int, ...] | None) -> I.RoundOpened:
        seats = boxes if boxes is not None else tuple(sorted(b for b, s in self.bets if s == MAIN_SPOT))
        opts = table.options
        wagers = []
        for seat in seats:
            side = side_wagers(opts, UNIT_BET) if (seat, SIDE_SPOT) in self.bets else {}
            wagers.append(SeatWagers(seat=seat, bet=UNIT_BET, side=side))
        return I.RoundOpened(wagers=tuple(wagers))

    def _wild_key(
        self, key: str, table: Table, boxes: tuple[int, ...] | None, amount: int | None
    ) -> list[I.Input]:
        wild = table.wild
        if key == dev.Key.START_GAME:
            if wild is not None:
                return [I.StartGame()]
            seats = boxes if boxes is not None else tuple(sorted(b for b, s in self.bets if s == MAIN_SPOT))
            progressive = [] if self.progressive_closed else sorted(b for b, s in self.bets if s == SIDE_SPOT)
            return [
                I.WildRoundOpened(boxes=seats),
                *(I.BetSensed(box=b, present=True) for b in progressive),
                I.StartGame(),
            ]
        if key == dev.Key.NEXT and wild is not None and wild.locked and not wild.dealt:
            return [I.WildHandsDealt()]
        return [I.KeyPressed(key=key, amount=amount)]

    # ------------------------------------------------------------------ commands -> devices
    def device_command(self, cmd: CoreCommand) -> dc.Command:
        match (cmd.device, cmd.action, cmd.args):
            case ("shuffler", "clear_fault", ()):
                return dc.ClearFault()
            case ("shuffler", "mark_out_of_order", ()):
                return dc.MarkOutOfOrder()
            case ("shuffler", "eject_to_shoe", (str() as back,)):
                return dc.EjectToShoe(self.slot_of(back))
            case ("keypad", "lock_sensors", ()):
                return dc.LockSensors()
            case ("keypad", "set_light", (int() as box, bool() as on)):
                return dc.SetLight(box, SIDE_SPOT, on)
        raise Untranslatable(f"no device command for {cmd.device}.{cmd.action}")


def seen_of(event: dev.DeviceEvent) -> Seen | None:
    """The counters a device event was read up to: journalled with what the event caused, so a
    restart reads the device on from there (nothing lost, nothing read twice)."""
    match event:
        case dev.CardDrawn(sequence=seq, remaining=remaining, batch=batch):
            return Seen(event.device, (("draw_seq", seq), ("remaining", remaining), ("batch_seq", batch)))
        case dev.ButtonPressed(sequence=seq):
            return Seen(event.device, (("key_seq", seq),))
        case dev.ReaderResult(sequence=seq) | dev.MasqueRange(sequence=seq):
            return Seen(event.device, (("insert_seq", seq),))
        case dev.StubCounted(sequence=seq):
            return Seen(event.device, (("count_seq", seq),))
        case dev.ShuffleDone(cycle=cycle):
            return Seen(event.device, (("cycle", cycle),))
        case dev.CountersRead(counters=counters) | dev.DeviceGlitch(counters=counters) if counters:
            # The first reading's baseline, or where a reset or conflict leaves the device: in the
            # journal before anything else, so a restart neither loses nor repeats them.
            return Seen(event.device, counters)
    return None


def stub_count_asked(table: Table) -> bool:
    """Whether the table would take a stub count now (687a.9(f): after the cards are dealt; a
    count that comes with the deal's lock says the cards are dealt)."""
    wild = table.wild
    return wild is not None and (wild.dealt or wild.locked)


def is_dj_wild(table: Table) -> bool:
    return table.options.game == GameId.DJ_WILD
