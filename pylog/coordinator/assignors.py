"""Kafka's partition assignors: ``range``, ``roundrobin`` and ``cooperative-sticky``.

Each takes ``{member_id: [topic, ...]}`` (subscriptions), ``{topic: partition count}``
and, for the sticky one, ``{member_id: [(topic, partition), ...]}`` (what each member
owns now), and returns ``{member_id: [(topic, partition), ...]}``. Members are taken in
member-id order, as Kafka sorts them. Cost: O(partitions x members) at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pylog.logdir.metadata import LogDirMetadata


def range_assign(subscriptions: dict, counts: dict, owned: dict | None = None) -> dict:
    """Per topic, its subscribers in order each take a contiguous range; the first
    ``partitions % subscribers`` take one more (Kafka's RangeAssignor)."""
    out = {m: [] for m in subscriptions}
    for topic in sorted({t for ts in subscriptions.values() for t in ts}):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        n = counts.get(topic, 0)
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            size = per + (1 if i < extra else 0)
            out[m].extend((topic, p) for p in range(start, start + size))
            start += size
    return out


def round_robin_assign(subscriptions: dict, counts: dict, owned: dict | None = None) -> dict:
    """Every partition of every topic, in (topic, partition) order, dealt to the members in
    turn, skipping members not subscribed to its topic (Kafka's RoundRobinAssignor)."""
    out = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    i = 0
    for topic in sorted({t for ts in subscriptions.values() for t in ts}):
        for p in range(counts.get(topic, 0)):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subscriptions[m]:
                    out[m].append((topic, p))
                    break
    return out


def sticky_assign(subscriptions: dict, counts: dict, owned: dict | None = None) -> dict:
    """Balanced, moving as few partitions as possible (Kafka's sticky assignors): each
    member keeps what it owns while it is subscribed and under its fair share; the rest go
    to the least loaded subscribed members."""
    owned = owned or {}
    all_tps = sorted((t, p) for t in {t for ts in subscriptions.values() for t in ts} for p in range(counts.get(t, 0)))
    members = sorted(subscriptions)
    fair = -(-len(all_tps) // len(members)) if members else 0
    out = {m: [] for m in members}
    taken = set()
    for m in members:
        for tp in sorted(owned.get(m, ())):
            tp = tuple(tp)
            if tp[0] in subscriptions[m] and tp[1] < counts.get(tp[0], 0) and tp not in taken and len(out[m]) < fair:
                out[m].append(tp)
                taken.add(tp)
    floor = len(all_tps) // len(members) if members else 0
    for tp in all_tps:
        if tp in taken:
            continue
        eligible = [m for m in members if tp[0] in subscriptions[m]]
        if eligible:
            out[min(eligible, key=lambda m: (len(out[m]), m))].append(tp)
            taken.add(tp)
    # members above the fair share give partitions to members below the floor
    for m in members:
        while len(out[m]) > floor + 1 or (len(out[m]) > floor and any(len(out[o]) < floor for o in members)):
            poorest = min((o for o in members if o != m), key=lambda o: (len(out[o]), o), default=None)
            if poorest is None or len(out[poorest]) + 1 >= len(out[m]):
                break
            movable = [tp for tp in out[m] if tp[0] in subscriptions[poorest]]
            if not movable:
                break
            tp = movable[-1]
            out[m].remove(tp)
            out[poorest].append(tp)
    return out


@dataclass(frozen=True)
class Assignor:
    name: str
    assign: Callable
    cooperative: bool = False


ASSIGNORS = {a.name: a for a in (
    Assignor("range", range_assign),
    Assignor("roundrobin", round_robin_assign),
    Assignor("cooperative-sticky", sticky_assign, cooperative=True),
)}


def partition_counts(root: str, topics) -> dict:
    """``{topic: partitions}`` as the log dir holds them now (missing topics: 0)."""
    metadata = LogDirMetadata.for_root(root)
    return {t: metadata.partition_count(t) for t in topics}


def assign(protocol: str, root: str, subscriptions: dict, owned: dict) -> dict:
    """The assignment of ``protocol`` for the topics of ``root``."""
    counts = partition_counts(root, {t for ts in subscriptions.values() for t in ts})
    return ASSIGNORS[protocol].assign(subscriptions, counts, owned)
