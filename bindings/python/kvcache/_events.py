"""KV events (events.h): drain a cache's events as Event values, take a
snapshot of its cached blocks, and compute portable block hashes from a
config alone."""
import collections
import ctypes

from ._buffers import host_input
from ._capi import lib
from ._types import EVENT_NO_TOKENS, EventKind, Status
from .errors import KvCacheError, check
from .records import read_record

__all__ = ["EventCalls", "Event", "Snapshot", "block_hashes"]

_RAW = read_record("event")
_DRAIN = read_record("event_drain")
_ENTRY = read_record("snapshot_entry")
_CHUNK = 4096  # most events one C call drains

Event = collections.namedtuple(
    "Event", "id kind tier hash parent_hash groups lora_id has_lora priority num_tokens tokens "
             "lost_count")
Event.__doc__ = """One event (kvc_event_t) of Cache.drain_events(). kind is an EventKind;
fields a kind does not use are 0. Ids count from 1 without gaps. Applying
the events in id order to an index keyed by (hash, place) gives
Cache.snapshot(), the place being the tree for tiers PRIMARY and HOST and
the store itself for DISK and REMOTE (a block can have a tree entry and a
store entry at once): STORED adds `groups` to the entry (created with
parent_hash, tier, priority, num_tokens, lora_id), REMOVED takes `groups`
away (erasing the entry when none is left), TIER_CHANGED moves a tree entry
to `tier` holding `groups`, PRIORITY_CHANGED sets a tree entry's
`priority`, CLEARED erases every tree entry (store entries stay), and
LOST says events [id, id + lost_count) were dropped: resync from a
snapshot. tokens: a STORED block's token ids (a list) when the drain asked
for them, else None (always None for a store's STORED: its entries are
addressed by hash alone; the remote tier names only this cache's own
writes; include/kvcache/events.h, "Store entries")."""

Snapshot = collections.namedtuple("Snapshot", "event_id entries")
Snapshot.__doc__ = """Cache.snapshot(): every cached block (SnapshotEntry, parents before
children) as of event event_id: applying the later events gives the cache's
state at any later moment."""


def _event(raw, tokens):
    r = _RAW.read(raw)
    toks = None
    if r.kind == EventKind.STORED and r.token_offset != EVENT_NO_TOKENS and tokens is not None:
        toks = list(tokens[r.token_offset:r.token_offset + r.num_tokens])
    return Event(r.id, r.kind, r.tier, r.hash, r.parent_hash, r.groups, r.lora_id,
                 bool(r.has_lora), r.priority, r.num_tokens, toks, r.lost_count)


class EventCalls:
    """The event calls of Cache (a mixin; see Cache)."""

    def drain_events(self, tokens=False):
        """Moves every pending event, in id order, into a list of Event
        (kvc_cache_drain_events): drains until nothing is pending or until
        the newest event emitted when the call began is drained. With
        tokens=True, STORED events carry their token ids. After a full
        ring the first event is a LOST one. Raises KvCacheError(UNSUPPORTED)
        when events are off (event_buffer_size 0)."""
        op = "kvc_cache_drain_events"
        r = _DRAIN.new()
        self._call(op, lib.kvc_cache_drain_events, None, 0, None, 0, ctypes.byref(r))
        target, pending, tokens_pending = r.last_id, r.events_pending, r.tokens_pending
        out = []
        events = (_RAW.ctype * min(max(pending, 1), _CHUNK))()
        while pending > 0:
            buf = (ctypes.c_int32 * tokens_pending)() if tokens and tokens_pending else None
            self._call(op, lib.kvc_cache_drain_events, events, len(events), buf,
                       len(buf) if buf is not None else 0, ctypes.byref(r))
            written = buf[:r.tokens] if buf is not None else None
            out.extend(_event(events[i], written) for i in range(r.events))
            if r.events:
                last = out[-1]
                last_id = last.id + last.lost_count - 1 if last.kind == EventKind.LOST else last.id
                if last_id >= target:
                    break
            elif r.events_pending and (not tokens or r.tokens_pending <= tokens_pending):
                raise KvCacheError(Status.INTERNAL, "kvc_cache_drain_events wrote nothing "
                                   "with room for the pending tokens", op)
            pending, tokens_pending = r.events_pending, r.tokens_pending
        return out

    def snapshot(self):
        """Every cached block as of an event id: a Snapshot(event_id,
        entries) (kvc_cache_snapshot). Raises KvCacheError(UNSUPPORTED) when
        events are off."""
        op = "kvc_cache_snapshot"
        count, event_id = ctypes.c_size_t(), ctypes.c_uint64()
        entries = (_ENTRY.ctype * 0)()
        while True:
            status, message = self._status(op, lib.kvc_cache_snapshot, entries, len(entries),
                                           ctypes.byref(count), ctypes.byref(event_id))
            if status == 0 and count.value <= len(entries):
                return Snapshot(event_id.value,
                                [_ENTRY.read(entries[i]) for i in range(count.value)])
            if status not in (0, Status.BUFFER_TOO_SMALL):
                raise KvCacheError(status, message, op)
            entries = (_ENTRY.ctype * count.value)()


def block_hashes(config, tokens, options, option_kwargs):
    """Config.block_hashes (kvc_block_hashes)."""
    from ._sequences import _options
    op = "kvc_block_hashes"
    ptr, n, keep = host_input(tokens, ("i4",), "tokens", op)
    opts = _options(options, option_kwargs)
    count = ctypes.c_size_t()
    out = (ctypes.c_uint64 * 0)()
    while True:
        status = lib.kvc_block_hashes(config._use(op), ptr, n, opts, out, len(out),
                                      ctypes.byref(count))
        if status == 0 and count.value <= len(out):
            return list(out[:count.value])
        if status != Status.BUFFER_TOO_SMALL:
            check(status, op)
        out = (ctypes.c_uint64 * count.value)()
