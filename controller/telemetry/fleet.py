"""The fleet view's model: every table on the broker, folded from its MQTT messages. Pure (no I/O),
so the monitor, the benchmark and the tests share it.

What a row shows is decided here too (``FleetView.rows``, ``FleetView.summary``), as plain strings
and flags: the terminal view and the web page only style them, so the two cannot drift apart.

Gap detection follows the events' contract: sequence numbers are contiguous per table; a repeat
(QoS 1 after a reconnect) is dropped by seq; a jump is a gap, counted and shown. The first event
seen from a table sets the baseline (a monitor that starts late has not lost anything). The seq
shown is known before any event: the retained birth says the journal's last seq when the table
connected, and the retained state the last seq the table has published since.

Retained state, alarms and device health are shown only for the table's current process: each
carries the ``incarnation`` of the `tablectl run` that published it, the status says which one is
current, and what an earlier process left retained (a restart on a fresh journal starts again at
round 0) is held back, never shown as the table's (docs/mqtt.md, "Incarnation").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from controller.bounded import MAX_MESSAGE_BYTES, InputRefused, load_json
from controller.telemetry.topics import parse_topic


@dataclass
class TableView:
    site: str
    table: str
    online: bool | None = None  # None: no status seen yet
    clean_exit: bool | None = None
    game: str = "?"
    state: dict[str, Any] = field(default_factory=dict)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)
    last_seq: int = 0
    # The journal's seq as the table last announced it on a retained message, for a monitor that
    # started late: the birth's journal.last_seq, then each state's journal.published_seq.
    announced_seq: int = 0
    events: int = 0
    repeats: int = 0
    gaps: int = 0
    missing: int = 0  # sequence numbers never received, summed over the gaps
    incarnation: str | None = None  # the process the retained status names
    # Retained messages of another incarnation than the status's, by topic leaf (a device's by its
    # name): an earlier process's, never shown, or a new one's that came before its status.
    held: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def halted(self) -> bool:
        return any(a.get("halts_dealing") for a in self.current_alarms)

    @property
    def current_alarms(self) -> list[dict[str, Any]]:
        """The alarms as the table last said them, none once it is offline: its retained alarms
        are then stale (a table shut down cleanly is not ringing), and offline says it all."""
        return [] if self.online is False else self.alarms

    def urgency(self) -> int:
        """Sort key: halting alarms, other alarms, stream gaps, offline, then the quiet ones."""
        if self.halted:
            return 0
        if self.current_alarms:
            return 1
        if self.gaps:
            return 2
        if self.online is False:
            return 3
        return 4


class FleetView:
    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], TableView] = {}
        self.messages = 0
        self.malformed = 0
        self.fold_errors = 0  # messages whose folding raised (a bug): counted and skipped
        self.last_fold_error: str | None = None
        self.stopped: str | None = None  # why the fold loop is no longer running; /healthz says so
        # The broker as the monitor last found it: an empty fleet must not pass for a quiet one
        # when the broker is simply out of reach (wrong URL, down, refusing the login).
        self.broker_connected = False
        self.broker_problem: str | None = None  # one line, from the last failed attempt; None once in
        self.rate = MessageRate()  # messages per second, sampled by whoever shows it (sample_rate)
        self.rate_per_s = 0.0

    def sample_rate(self, now: float) -> float:
        """The message rate with the count as it is at ``now`` (a monotonic clock's seconds)."""
        self.rate_per_s = self.rate.sample(now, self.messages)
        return self.rate_per_s

    def broker_up(self) -> None:
        self.broker_connected, self.broker_problem = True, None

    def broker_down(self, problem: str) -> None:
        self.broker_connected, self.broker_problem = False, problem

    def table(self, site: str, table: str) -> TableView:
        view = self.tables.get((site, table))
        if view is None:
            view = self.tables[(site, table)] = TableView(site, table)
        return view

    def ingest(self, topic: str, payload: bytes) -> None:
        self.messages += 1
        parsed = parse_topic(topic)
        if parsed is None or parsed.leaf == "cmd":
            return
        try:
            doc = load_json(payload, max_bytes=MAX_MESSAGE_BYTES)
        except InputRefused:
            self.malformed += 1
            return
        if not isinstance(doc, dict):
            self.malformed += 1
            return
        view = self.table(parsed.site, parsed.table)
        leaf = parsed.leaf
        if leaf == "events":
            self._event(view, doc)
        elif leaf == "status":
            self._status(view, doc)
        else:
            key = leaf if parsed.name is None else f"{leaf}/{parsed.name}"
            incarnation = doc.get("incarnation")
            if isinstance(incarnation, str) and incarnation != view.incarnation:
                view.held[key] = (incarnation, doc)  # shown once (if ever) the status names it
                return
            self._retained(view, leaf, parsed.name, doc)

    def _status(self, view: TableView, doc: dict[str, Any]) -> None:
        """The retained status: online or not, and which process (incarnation) is current."""
        incarnation = doc.get("incarnation")
        if isinstance(incarnation, str) and incarnation != view.incarnation:
            # Another process: what the one before left retained is not this one's.
            if view.incarnation is not None:
                view.state, view.alarms, view.devices = {}, [], {}
                # Its stream goes on after what its birth says it published (a fresh journal, a
                # new gaming day, starts again at 1: those events are not repeats).
                published = _journal_seq(doc, "published_seq")
                if published is not None:
                    view.last_seq = published
            view.incarnation = incarnation
            held, view.held = view.held, {}
            for key, (inc, message) in held.items():
                if inc == incarnation:
                    leaf, _, name = key.partition("/")
                    self._retained(view, leaf, name or None, message)
        view.online = doc.get("online") is True
        if view.online:
            view.game = str(doc.get("game", view.game))
            view.clean_exit = None
            seq = _journal_seq(doc, "last_seq")
            if seq is not None:
                view.announced_seq = seq
        else:
            view.clean_exit = doc.get("clean") is True

    @staticmethod
    def _retained(view: TableView, leaf: str, name: str | None, doc: dict[str, Any]) -> None:
        if leaf == "state":
            snapshot = doc.get("snapshot")
            view.state = snapshot if isinstance(snapshot, dict) else {}
            view.game = str(doc.get("game", view.game))
            devices = doc.get("devices")
            if isinstance(devices, dict):
                view.devices.update({str(k): str(v) for k, v in devices.items()})
            seq = _journal_seq(doc, "published_seq")
            if seq is not None:
                view.announced_seq = max(view.announced_seq, seq)
        elif leaf == "alarms":
            alarms = doc.get("alarms")
            view.alarms = [a for a in alarms if isinstance(a, dict)] if isinstance(alarms, list) else []
        elif leaf == "devices" and name is not None:
            view.devices[name] = str(doc.get("health", "?"))

    @staticmethod
    def _event(view: TableView, doc: dict[str, Any]) -> None:
        seq = doc.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, int):
            return
        if view.last_seq and seq <= view.last_seq:
            view.repeats += 1
            return
        if view.last_seq and seq > view.last_seq + 1:
            view.gaps += 1
            view.missing += seq - view.last_seq - 1
        view.last_seq = seq
        view.events += 1

    def ordered(self) -> list[TableView]:
        return sorted(self.tables.values(), key=lambda v: (v.urgency(), v.site, v.table))

    def rows(self, limit: int | None = None) -> list[Row]:
        """The first ``limit`` tables (all when None) in ``ordered()`` order, as displayed."""
        tables = self.ordered()
        # One site (the usual floor): the table name alone identifies a table, so say only that.
        sites = len({t.site for t in tables}) > 1
        return [Row.of(t, sites) for t in (tables if limit is None else tables[: max(limit, 0)])]

    def summary(self) -> Summary:
        tables = self.tables.values()
        return Summary(
            tables=len(tables),
            online=sum(1 for t in tables if t.online),
            with_alarms=sum(1 for t in tables if t.current_alarms),
            stream_gaps=sum(t.gaps for t in tables),
            messages=self.messages,
            rate_per_s=round(self.rate_per_s, 1),
            broker_problem=self.broker_problem,
        )


# Levels rather than colours: each renderer maps them to its own styling.
StatusLevel = Literal["unknown", "ok", "warn", "bad"]
AlarmLevel = Literal["halt", "alarm", "none"]

# What both renderers show, in order: (header, Row field). The terminal and the web page build
# their columns from this one list, so they cannot show different columns or orders.
COLUMNS: Final = (
    ("table", "name"),
    ("status", "status"),
    ("game", "game"),
    ("round", "round"),
    ("shoe", "shoe"),
    ("alarms", "alarms"),
    ("devices", "devices"),
    ("seq", "seq"),
    ("gaps", "gaps_text"),
)


@dataclass(frozen=True, slots=True)
class Row:
    """One table as the fleet view shows it. Every string is untrusted text from the broker (topic
    levels and payloads are whatever a publisher sent): renderers must print it literally."""

    name: str  # site/table
    site: str
    table: str
    status: str  # ? | online | offline | LOST
    status_level: StatusLevel
    game: str
    round: str
    shoe: str
    alarms: str
    alarm_level: AlarmLevel
    devices: str
    seq: int
    gaps: int
    missing: int
    gaps_text: str
    urgency: int

    @classmethod
    def of(cls, view: TableView, with_site: bool = True) -> Row:
        status, level = _status(view)
        bad = {n: h for n, h in view.devices.items() if h not in ("online", "ok")}
        alarms = view.current_alarms
        return cls(
            name=f"{view.site}/{view.table}" if with_site else view.table,
            site=view.site,
            table=view.table,
            status=status,
            status_level=level,
            game=view.game,
            round=str(view.state.get("round", "")),
            shoe=_shoe(view.state, view.game),
            alarms=" | ".join(_alarm_text(a) for a in alarms),
            alarm_level="halt" if view.halted else ("alarm" if alarms else "none"),
            devices=", ".join(f"{n}={h}" for n, h in sorted(bad.items())) or f"{len(view.devices)} ok",
            seq=max(view.last_seq, view.announced_seq),
            gaps=view.gaps,
            missing=view.missing,
            gaps_text=f"{view.gaps} ({view.missing} missing)" if view.gaps else "0",
            urgency=view.urgency(),
        )

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Summary:
    tables: int
    online: int
    with_alarms: int
    stream_gaps: int
    messages: int
    rate_per_s: float = 0.0  # messages a second over the last MessageRate.window_s
    broker_problem: str | None = None  # the broker cannot be reached, and why (one line)

    @property
    def text(self) -> str:
        """The fleet line; an unreachable broker comes first, so 0 tables never reads as an empty floor."""
        fleet = (
            f"{self.tables} tables, {self.online} online, {self.with_alarms} with alarms, "
            f"{self.stream_gaps} stream gaps; {self.messages} messages ({self.rate_per_s:,.0f}/s)"
        )
        return f"{self.broker_problem}; {fleet}" if self.broker_problem else fleet

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__} | {"text": self.text}


def _alarm_text(alarm: dict[str, Any]) -> str:
    """One alarm as the floor reads it: its section, what happened, and what the floor must do."""
    return f"{alarm.get('section')}: {alarm.get('message')} -> {alarm.get('floor_action')}"


def _journal_seq(doc: dict[str, Any], key: str) -> int | None:
    """``doc["journal"][key]`` when it is a seq (a whole number, not a bool), else None."""
    journal = doc.get("journal")
    seq = journal.get(key) if isinstance(journal, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None


class MessageRate:
    """Messages per second over the last ``window_s`` seconds, from the running count sampled at
    any moments (each redraw, each poll of the page). Bursts (a table publishes a batch, then
    nothing for a second) do not make it flicker between 0 and a peak as a rate between two
    redraws does: the count at the window's start is read between the samples around it."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def sample(self, now: float, count: int) -> float:
        """Take the count at ``now`` (a monotonic clock's) and return the rate."""
        if self._samples and now <= self._samples[-1][0]:
            self._samples[-1] = (self._samples[-1][0], count)
        else:
            self._samples.append((now, count))
        start = now - self.window_s
        while len(self._samples) > 2 and self._samples[1][0] <= start:
            self._samples.popleft()  # the one before the window's start is kept, to read across it
        return self.per_second()

    def per_second(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        (t0, c0), (t1, c1) = self._samples[0], self._samples[1]
        now, count = self._samples[-1]
        start = now - self.window_s
        at_start = float(c0)
        if t0 < start < t1:  # the count at the window's start, read between its two samples
            at_start, t0 = c0 + (c1 - c0) * (start - t0) / (t1 - t0), start
        return max(count - at_start, 0.0) / (now - t0)


def _status(view: TableView) -> tuple[str, StatusLevel]:
    if view.online is None:
        return "?", "unknown"
    if view.online:
        return "online", "ok"
    # A clean stop is expected; no clean stop means the broker fired the Last Will for a lost table.
    return ("offline", "warn") if view.clean_exit else ("LOST", "bad")


def _shoe(state: dict[str, Any], game: str) -> str:
    if not state:
        return ""
    if game == "dj-wild":  # 687a.9: dealt from the hand, no shoe to count
        back = state.get("batch_in_shoe")
        return f"{back} deck, by hand" if back else "no deck in play"
    cover = " cover" if state.get("cover_card_reached") else ""
    return f"{state.get('batch_in_shoe') or '-'} {state.get('cards_in_shoe', 0)} left{cover}"
