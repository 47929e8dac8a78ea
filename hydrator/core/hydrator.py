"""The core's entry point for engines: pure steps over (state record, input) -> Transition.

An engine is given a Hydrator built with the run's codec (hydrator.formats.codec_for). Its loop
is: `read = Read(record)`, `key = hydrator.route(read)` (once per record: the codec's canonical
key); a DeadLetter goes out as `rejected(key)`; otherwise load the state record for
`(record.topic, key)` (no state for a None key), `t = hydrator.process(state, read, key, now_ms)`
with the same Read, so the codec parses the value once for both; store `t.state`, write
`t.emitted` to the output topic (same partition), `t.handoffs` to the handoff topic, `t.dead` to
the DLQ. Handoffs read back go through `receive_handoff`; `tick` applies timeouts.

These entry points never raise for what a record carries: whatever the exception, the record
becomes a dead letter whose reason is `<format>: <ExceptionType>: <message>` (the format named,
as a wrong `--format` is the commonest cause; under `auto` the format detected or those tried),
and the state stays as it was. Only `--on-unresolved fail` (UnresolvedColumnsError), running
out of memory, a failing state store (StorageError: a large value is read from the store while
the rules run) and a service the codec needs not answering (Unavailable: a schema registry that
is down) go through: they are no record's fault.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from hydrator.core import rules, visibility
from hydrator.core.changes import changed_columns, changed_header
from hydrator.core.records import (
    HEADER_FILLED,
    HEADER_SOURCE,
    HEADER_UNRESOLVED,
    DeadLetter,
    OutputRecord,
    Transition,
)
from hydrator.core.reselected import Reselected, reselect_headers
from hydrator.core.settings import (
    HydrationSettings,
    OnStale,
    OnUnresolved,
    UnresolvedColumnsError,
)
from hydrator.events import (
    Absent,
    ChangeEvent,
    Codec,
    Headers,
    Op,
    Passthrough,
    RawRecord,
    Read,
    Unavailable,
)
from state.errors import StorageError
from state.handoff import Handoff
from state.record import StateRecord

HEADER_STALE = "hydrator.stale"
# An event older than the key's bootstrapped image (docs/cold-start.md).
_OLDER = ((HEADER_STALE, b"bootstrap"),)
# Not hostile input: deliberate stops, the machine itself failing (memory, the state store), and
# a service the codec needs (a schema registry) that does not answer.
_PASSED_THROUGH = (UnresolvedColumnsError, MemoryError, StorageError, Unavailable)
REASON_CHARS = 1000


def failure_reason(exc: BaseException, prefix: str = "") -> str:
    """A dead letter's reason for an exception: its type and message (cut short: a message can
    quote the whole record)."""
    reason = f"{prefix}{type(exc).__name__}: {exc}"
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."


def format_label(codec: Codec, read: Read) -> str:
    """The format a dead letter's reason names: the codec's, or what a codec that chooses per
    record (`auto`) says of this one (`format_label(read)`, optional)."""
    label = getattr(codec, "format_label", None)
    if label is None:
        return codec.name
    try:
        return str(label(read))
    except Exception:
        return codec.name


def format_failure(codec: Codec, read: Read, exc: BaseException) -> str:
    """A dead letter's reason for a record the format could not take: the format first."""
    return failure_reason(exc, f"{format_label(codec, read)}: ")


def _read_of(record: RawRecord | Read) -> Read:
    """The Read of `record`: engines pass the one they made, so `route` and `process` share it;
    a bare RawRecord (tools, tests, a parked record replayed) gets a Read of its own."""
    return record if isinstance(record, Read) else Read(record)


def read_handoff(record: RawRecord) -> Handoff | DeadLetter:
    """A record of the handoff topic as a Handoff. Anything can be written to that topic, so one
    that does not decode is a dead letter, as bad input is."""
    try:
        return Handoff.decode(record.value or b"")
    except _PASSED_THROUGH:
        raise
    except Exception as exc:
        return DeadLetter(record, f"unreadable handoff: {failure_reason(exc)}")


def rejected(dead: DeadLetter, state: StateRecord | None = None) -> Transition:
    """A record that becomes a dead letter, `state` unchanged."""
    return Transition(state, dead=(dead,), counts={"dead_letters": 1})


class Hydrator:
    def __init__(self, codec: Codec, settings: HydrationSettings | None = None) -> None:
        self.codec = codec
        self.settings = settings or HydrationSettings()
        # input topic -> the snapshot its table was bootstrapped in (visibility.TableMark)
        self._table_marks: dict[str, tuple[int, ...]] = dict(self.settings.table_snapshots)

    # -- routing -------------------------------------------------------------------------------

    def route(self, record: RawRecord | Read) -> str | DeadLetter | None:
        """The canonical key the record's state lives under (the codec's `key`); None for a
        record without identity (it is hydrated statelessly); a DeadLetter when the key cannot
        be decoded or the record is over the size limit. Hand `process` the same Read."""
        read = _read_of(record)
        try:
            oversize = self._oversize(read.record)
            if oversize is not None:
                return oversize
            return self.codec.key(read)
        except _PASSED_THROUGH:
            raise
        except Exception as exc:  # whatever the key holds, it is this record's fault
            return DeadLetter(read.record, format_failure(self.codec, read, exc))

    # -- records -------------------------------------------------------------------------------

    def process(
        self,
        state: StateRecord | None,
        record: RawRecord | Read,
        key: str | None,
        now_ms: int,
        reselected: Reselected | None = None,
    ) -> Transition:
        """Apply one input record to its key's state (`key` is what `route` gave: the key of
        `state`, None for a stateless record; `record` the Read `route` was given); a record
        that cannot be applied is a dead letter, whatever it raised. `reselected`: values read
        from the source for columns of this record that nothing else can fill
        (core/reselected.py)."""
        read = _read_of(record)
        try:
            return self._process(state, read, key, now_ms, reselected)
        except _PASSED_THROUGH:
            raise
        except Exception as exc:
            dead = DeadLetter(read.record, format_failure(self.codec, read, exc))
            return rejected(dead, state)

    def _process(
        self,
        state: StateRecord | None,
        read: Read,
        key: str | None,
        now_ms: int,
        reselected: Reselected | None = None,
    ) -> Transition:
        record = read.record
        oversize = self._oversize(record)
        if oversize is not None:
            return rejected(oversize, state)
        if state is not None and state.is_parked:
            if _already_parked(state, record):
                return Transition(state, counts={"redelivered_parked": 1})
            return self._park(state, record)
        decoded = self.codec.decode(read)  # BadInput and the rest: see process()
        if isinstance(decoded, Passthrough):
            return Transition(
                state, emitted=(_output(record, record.value),), counts={"passthrough": 1}
            )
        return self._apply(state, record, key, decoded, now_ms, reselected)

    def _apply(
        self,
        state: StateRecord | None,
        record: RawRecord,
        key: str | None,
        event: ChangeEvent,
        now_ms: int,
        reselected: Reselected | None = None,
    ) -> Transition:
        if state is not None and state.bootstrap is not None:
            if self._image_contains(state.bootstrap, state.pos, record.topic, event):
                return self._older_than_bootstrap(state, record, key, event, now_ms)
        elif self._table_marks and _no_row(state):
            mark = self._table_marks.get(record.topic)
            if mark is not None and visibility.table_contains(
                mark, event.transaction, event.position
            ):
                return self._older_than_bootstrap(state, record, key, event, now_ms)
        if rules.is_stale(state, event.position):
            return self._stale(state, record)
        image = rules.live_image(state)
        if event.old_key is not None:
            handoff = (
                rules.claim_handoff(state, event.old_key, event.position)
                if state is not None
                else None
            )
            if handoff is not None and state is not None:  # a handoff is only claimed from a state
                image = handoff.image
                state = _settle(replace(state, handoffs=_without(state.handoffs, handoff)), now_ms)
            elif event.missing_after or event.absent is Absent.MISSING:
                # a patch stream's CREATE can lack any column of the old row
                if (full := self._parked_full((), record)) is not None:
                    return self._overflow(state, record, full)
                waiting = replace(state or StateRecord(), parked=(record,), awaiting=event.old_key)
                return Transition(_settle(waiting, now_ms), counts={"parked": 1})
        hydration = rules.hydrate(state, event, self.settings, now_ms, image, reselected)
        # a plain dict: Counter's constructor cost a tenth of a whole step
        counts = {"events": 1, "filled_columns": len(hydration.filled)}
        if hydration.reselected or hydration.reselected_current:
            counts["reselected_columns_exact"] = len(hydration.reselected)
            counts["reselected_columns_current"] = len(hydration.reselected_current)
        if state is not None and state.bootstrap is not None:
            counts["bootstrap_applied_events"] = 1
        handoffs: tuple[Handoff, ...] = ()
        if event.op is Op.DELETE and event.new_key is not None and key is not None:
            handoffs = (
                Handoff(
                    record.topic,
                    event.new_key,
                    key,
                    rules.handoff_image(state, event),
                    event.position,
                    record.source,
                    event.new_key_route,
                ),
            )
            counts["handoffs_sent"] = 1
        if not hydration.unresolved:
            value = self.codec.encode(event, hydration.patch)
            emitted = (
                _output(record, value, hydration.filled, (), self._changed(event, hydration)),
            )
            return Transition(hydration.state, emitted, handoffs, (), counts)
        return self._unresolved(record, event, hydration, handoffs, counts)

    def _image_contains(
        self, mark: tuple[int, ...], pos: tuple[int, ...] | None, topic: str, event: ChangeEvent
    ) -> bool:
        """Whether a bootstrapped image (`mark`, `pos`: StateRecord.bootstrap and .pos) already
        holds `event`. An image read in the snapshot its table was bootstrapped in also has the
        snapshot's log position: an event past it is later, whatever its transaction id says."""
        limit = None
        if self._table_marks:
            table = self._table_marks.get(topic)
            if table is not None and visibility.same_snapshot(table, mark):
                limit = table[0]
        return visibility.contains(mark, pos, event.transaction, event.position, limit)

    def _changed(self, event: ChangeEvent, hydration: rules.Hydration) -> Headers:
        """Headers `hydrator.changed` (unless `--no-changed-header`) and the re-selected ones."""
        extra = reselect_headers(hydration.reselected, hydration.reselected_current)
        if not self.settings.changed_header:
            return extra
        unresolved = hydration.unresolved
        if hydration.unknown_before:  # a `before` lacking them says nothing of the new values
            unresolved = tuple(c for c in unresolved if c not in hydration.unknown_before)
        changed = changed_columns(event, hydration.patch, unresolved)
        return (*extra, changed_header(changed)) if extra else (changed_header(changed),)

    def _older_than_bootstrap(
        self,
        state: StateRecord | None,
        record: RawRecord,
        key: str | None,
        event: ChangeEvent,
        now_ms: int,
    ) -> Transition:
        """An event the bootstrap already contains (hydrator.core.visibility): the key's image,
        or, for a key the snapshot did not hold (a row deleted or re-keyed before it), the
        table's snapshot. The image is later than the event, so nothing is filled from it. The
        event goes out as it came, marked `hydrator.stale: bootstrap`, its missing columns
        unresolved (rule 6); the state stays. A key change it carries hands off no image (its
        old image is unknown), so the new key does not wait."""
        hydration = rules.hydrate(None, event, self.settings, now_ms, None)
        counts = {"events": 1, "bootstrap_older_events": 1}
        handoffs: tuple[Handoff, ...] = ()
        if event.op is Op.DELETE and event.new_key is not None and key is not None:
            handoff = Handoff(
                record.topic,
                event.new_key,
                key,
                None,
                event.position,
                record.source,
                event.new_key_route,
            )
            handoffs = (handoff,)
            counts["handoffs_sent"] = 1
        if hydration.unresolved:
            return self._unresolved(record, event, hydration, handoffs, counts, _OLDER, state)
        output = _output(record, self.codec.encode(event, hydration.patch), extra=_OLDER)
        return Transition(state, (output,), handoffs, (), counts)

    def _unresolved(
        self,
        record: RawRecord,
        event: ChangeEvent,
        hydration: rules.Hydration,
        handoffs: tuple[Handoff, ...],
        counts: dict[str, int],
        extra: Headers = (),
        kept: StateRecord | None = None,
    ) -> Transition:
        """Rule 6: columns no state could fill, under `--on-unresolved`. The new state is
        `hydration.state`; with `extra` (an event older than the bootstrap), `kept`."""
        policy = self.settings.on_unresolved
        state = kept if extra else hydration.state
        columns = ",".join(hydration.unresolved)
        counts["unresolved_events"] = 1
        counts["unresolved_columns"] = len(hydration.unresolved)
        if policy is OnUnresolved.FAIL:
            raise UnresolvedColumnsError(
                f"{record.source}: unresolved columns {columns} (--on-unresolved fail)"
            )
        if policy is OnUnresolved.DROP:
            counts["unresolved_dropped"] = 1
            return Transition(state, (), handoffs, counts=counts)
        if policy is OnUnresolved.DLQ:
            dead = DeadLetter(record, f"unresolved columns: {columns}")
            counts["dead_letters"] = 1
            return Transition(state, (), handoffs, (dead,), counts)
        value = self.codec.encode(event, hydration.patch)
        # an event older than a bootstrapped image carries its marker, not a change list
        headers = extra or self._changed(event, hydration)
        emitted = (_output(record, value, hydration.filled, hydration.unresolved, headers),)
        return Transition(state, emitted, handoffs, counts=counts)

    def _stale(self, state: StateRecord | None, record: RawRecord) -> Transition:
        if self.settings.on_stale is OnStale.DROP:
            return Transition(state, counts={"stale_dropped": 1})
        output = _output(record, record.value, extra=((HEADER_STALE, b"true"),))
        return Transition(state, (output,), counts={"stale_forwarded": 1})

    # -- parked records ------------------------------------------------------------------------

    def _park(self, state: StateRecord, record: RawRecord) -> Transition:
        """A record behind a key change that still waits for its old image: kept in order, up
        to the parked-records caps; past them, a dead letter."""
        full = self._parked_full(state.parked, record)
        if full is not None:
            return self._overflow(state, record, full)
        return Transition(replace(state, parked=(*state.parked, record)), counts={"parked": 1})

    def _parked_full(self, parked: tuple[RawRecord, ...], record: RawRecord) -> str | None:
        """Why `record` cannot join `parked` (None when it can)."""
        settings = self.settings
        if len(parked) >= settings.max_parked_records:
            return (
                f"parked records of this key over the limit: {len(parked)} wait already, "
                f"at most {settings.max_parked_records}"
            )
        size = _size(record) + sum(map(_size, parked))
        if size > settings.max_parked_bytes:
            return (
                f"parked records of this key over the limit: {size} bytes with this one, "
                f"over the {settings.max_parked_bytes}-byte limit"
            )
        return None

    @staticmethod
    def _overflow(state: StateRecord | None, record: RawRecord, reason: str) -> Transition:
        return Transition(
            state,
            dead=(DeadLetter(record, reason),),
            counts={"dead_letters": 1, "parked_overflow": 1},
        )

    def _oversize(self, record: RawRecord) -> DeadLetter | None:
        """A dead letter for a key or value over `max_record_bytes` (checked before the codec
        reads either: a codec may find the key in the value)."""
        limit = self.settings.max_record_bytes
        key, value = record.key, record.value
        # every record passes here twice (route, process): the common answer without a loop
        if (key is None or len(key) <= limit) and (value is None or len(value) <= limit):
            return None
        for part, data in (("key", key), ("value", value)):
            if data is not None and len(data) > limit:
                return DeadLetter(
                    record, f"{part} is {len(data)} bytes, over the {limit}-byte limit"
                )
        return None

    # -- key changes (rule 5) ------------------------------------------------------------------

    def receive_handoff(
        self,
        state: StateRecord | None,
        handoff: Handoff,
        now_ms: int,
        reselected: Mapping[str, Reselected] | None = None,
    ) -> Transition:
        """Apply a key-change handoff to the new key's state; releases parked records when it is
        the one the first of them awaits. Handoffs are matched on their old key: two key changes
        into one new key may deliver their handoffs in either order. A handoff that cannot be
        applied (its bytes came from the handoff topic, where anything can be written) is a
        dead letter, and the state stays as it was. `reselected`: values read from the source
        for released records whose columns neither the state nor the handoff fills, by the
        record's `source` (an empty handoff is a miss like any other, core/reselected.py)."""
        try:
            return self._receive_handoff(state, handoff, now_ms, reselected)
        except _PASSED_THROUGH:
            raise
        except Exception as exc:
            return rejected(DeadLetter(_handoff_record(handoff), failure_reason(exc)), state)

    def _receive_handoff(
        self,
        state: StateRecord | None,
        handoff: Handoff,
        now_ms: int,
        reselected: Mapping[str, Reselected] | None,
    ) -> Transition:
        if rules.is_stale(state, handoff.pos):
            # The key is already past it: the CREATE it was meant for is done (it needed no
            # fill), or this is a redelivery, possibly long after a later key change from the
            # same old key, whose CREATE it must not fill.
            return Transition(state, counts={"handoffs_unneeded": 1})
        if state is not None and state.is_parked and handoff.old_key == state.awaiting:
            counts = {"handoffs_applied": 1}
            return self._release(state, handoff, now_ms, counts, reselected)
        return Transition(_keep(state, handoff, now_ms), counts={"handoffs_pending": 1})

    def _release(
        self,
        state: StateRecord,
        handoff: Handoff,
        now_ms: int,
        counts: dict[str, int],
        reselected: Mapping[str, Reselected] | None = None,
    ) -> Transition:
        """Replay the parked records, oldest first, now that the awaited old image is known
        (each with what `reselected` holds for it); a later one that awaits another handoff
        parks again with the rest behind it."""
        current: StateRecord | None = replace(
            _keep(state, handoff, now_ms), parked=(), awaiting=None
        )
        emitted: list[OutputRecord] = []
        handoffs: list[Handoff] = []
        dead: list[DeadLetter] = []
        total: Counter[str] = Counter(counts)
        for record in state.parked:
            read = reselected.get(record.source) if reselected else None
            step = self.process(current, record, handoff.new_key, now_ms, read)
            current = step.state
            emitted += step.emitted
            handoffs += step.handoffs
            dead += step.dead
            total.update(step.counts)
        total["parked"] -= len(state.parked)  # replays are not new arrivals
        return Transition(current, tuple(emitted), tuple(handoffs), tuple(dead), +total)

    # -- timers --------------------------------------------------------------------------------

    def tick(self, state: StateRecord, now_ms: int) -> Transition:
        """Timeouts: parked records past `handoff_timeout` are emitted unresolved; unclaimed
        handoffs are dropped; tombstones past retention and records untouched for `state_ttl`
        are forgotten (Transition.state None). Should that fail (a state no rule can read), the
        parked records become dead letters and what waited is dropped; the row stays."""
        try:
            return self._tick(state, now_ms)
        except _PASSED_THROUGH:
            raise
        except Exception as exc:
            reason = failure_reason(exc)
            dead = tuple(DeadLetter(record, reason) for record in state.parked)
            cleared = replace(state, parked=(), handoffs=(), awaiting=None, waiting_since_ms=None)
            counts = {"dead_letters": len(dead), "tick_failures": 1}
            return Transition(cleared, dead=dead, counts=counts)

    def _tick(self, state: StateRecord, now_ms: int) -> Transition:
        settings = self.settings
        since = state.waiting_since_ms
        if since is not None and now_ms - since >= settings.handoff_timeout_ms:
            if state.is_parked:
                first = state.parked[0]
                key = self.route(first)  # the state's key: engines tick without it
                if not isinstance(key, str):
                    raise ValueError(f"a parked record without a key: {key}")
                nothing = Handoff(first.topic, key, state.awaiting or "", None, None, "timeout")
                return self._release(state, nothing, now_ms, counts={"handoff_timeouts": 1})
            expired = len(state.handoffs)
            state = _settle(replace(state, handoffs=()), now_ms)
            if state.image is None and not state.deleted and state.pos is None:
                return Transition(None, counts={"handoffs_expired": expired})
            return Transition(state, counts={"handoffs_expired": expired})
        if state.is_waiting:
            return Transition(state)
        idle = now_ms - state.updated_at_ms
        if state.deleted and idle >= settings.tombstone_retention_ms:
            return Transition(None, counts={"tombstones_expired": 1})
        if settings.state_ttl_ms is not None and idle >= settings.state_ttl_ms:
            return Transition(None, counts={"states_expired": 1})
        return Transition(state)

    def next_deadline_ms(self, state: StateRecord) -> int | None:
        """When `tick` would next change this state, for timer-driven engines."""
        settings = self.settings
        if state.waiting_since_ms is not None:
            return state.waiting_since_ms + settings.handoff_timeout_ms
        deadlines = []
        if state.deleted:
            deadlines.append(state.updated_at_ms + settings.tombstone_retention_ms)
        if settings.state_ttl_ms is not None:
            deadlines.append(state.updated_at_ms + settings.state_ttl_ms)
        return min(deadlines, default=None)


def _no_row(state: StateRecord | None) -> bool:
    """The key holds nothing of its row: no state, or one that only waits on a key change (a
    tombstone and a stream's image are rows; a bootstrapped image has its own mark)."""
    return state is None or (state.image is None and state.pos is None and not state.deleted)


def _already_parked(state: StateRecord, record: RawRecord) -> bool:
    """The same Kafka record again (an engine that restored state ahead of its committed input
    offsets reads it a second time): a key's records come from one partition in offset order, so
    the last parked one tells."""
    last = state.parked[-1]
    return (
        record.offset <= last.offset
        and record.partition == last.partition
        and record.topic == last.topic
    )


def _size(record: RawRecord) -> int:
    """What a record takes in state: its key, value and headers."""
    size = len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += len(name) + len(value or b"")
    return size


def _handoff_record(handoff: Handoff) -> RawRecord:
    """A handoff as a dead letter: its own bytes under its new key; `source` names the record
    the key change came from."""
    try:
        value = handoff.encode()
    except Exception:  # the handoff is the problem; its key still says which it was
        value = None
    key = handoff.route_key if isinstance(handoff.route_key, bytes) else None
    source = str(handoff.source).encode("utf-8", "replace")
    return RawRecord(str(handoff.topic), 0, -1, key, value, (("hydrator.handoff.source", source),))


def _settle(state: StateRecord, now_ms: int) -> StateRecord:
    """Keep `waiting_since_ms` while anything waits (from when it started), clear it otherwise."""
    if not state.is_waiting:
        return state if state.waiting_since_ms is None else replace(state, waiting_since_ms=None)
    if state.waiting_since_ms is None:
        return replace(state, waiting_since_ms=now_ms)
    return state


def _keep(state: StateRecord | None, handoff: Handoff, now_ms: int) -> StateRecord:
    """Add a pending handoff, unless it is a redelivery of one already pending."""
    base = state or StateRecord()
    redelivered = any(h.old_key == handoff.old_key and h.pos == handoff.pos for h in base.handoffs)
    if redelivered:
        return base
    return _settle(replace(base, handoffs=(*base.handoffs, handoff)), now_ms)


def _without(handoffs: tuple[Handoff, ...], handoff: Handoff | None) -> tuple[Handoff, ...]:
    return tuple(h for h in handoffs if h is not handoff)


def _output(
    record: RawRecord,
    value: bytes | None,
    filled: tuple[str, ...] = (),
    unresolved: tuple[str, ...] = (),
    extra: Headers = (),
) -> OutputRecord:
    """Rule 7: same key bytes and partition, original headers plus the hydrator's."""
    headers = list(record.headers)
    if filled:
        headers.append((HEADER_FILLED, ",".join(filled).encode()))
    if unresolved:
        headers.append((HEADER_UNRESOLVED, ",".join(unresolved).encode()))
    headers.extend(extra)
    headers.append((HEADER_SOURCE, record.source.encode()))
    return OutputRecord(record.partition, record.key, value, tuple(headers))
