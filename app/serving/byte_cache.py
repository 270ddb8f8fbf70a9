"""A cache bounded by bytes, not entries: a room's computed run or rendered page can be 35 MB, so a
count of entries says nothing about memory. Least recently used entries go first; an entry over the
whole budget is not kept at all."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import fields, is_dataclass
from typing import Generic, TypeVar

import numpy as np

V = TypeVar("V")


def deep_size(obj: object, depth: int = 0) -> int:
    """About the bytes ``obj`` holds: NumPy arrays by their data, strings by their size, walking
    dataclasses, tuples, lists and dicts (deep enough for a run's record of intermediates)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, str | bytes):
        return sys.getsizeof(obj)
    if depth > 8:
        return 0
    if is_dataclass(obj) and not isinstance(obj, type):
        return 64 + sum(deep_size(getattr(obj, f.name, None), depth + 1) for f in fields(obj))
    if isinstance(obj, tuple | list | set | frozenset):
        return 56 + sum(deep_size(item, depth + 1) for item in obj)
    if isinstance(obj, dict):
        return 64 + sum(deep_size(k, depth + 1) + deep_size(v, depth + 1) for k, v in obj.items())
    return 32


class ByteCache(Generic[V]):
    """At most ``budget`` bytes of values, each sized once when kept."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        found = self.items.get(key)
        if found is None:
            return None
        self.items.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        self.pop(key)
        if size > self.budget:
            return
        while self.items and self.used + size > self.budget:
            _, (_, freed) = self.items.popitem(last=False)
            self.used -= freed
        self.items[key] = (value, size)
        self.used += size

    def pop(self, key: Hashable) -> None:
        found = self.items.pop(key, None)
        if found is not None:
            self.used -= found[1]

    def clear(self) -> None:
        self.items.clear()
        self.used = 0

    def __len__(self) -> int:
        return len(self.items)
