"""Join-key helpers: the store's scan order of keys, and hashable forms of ARRAY/MAP keys."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from engine.builders.joins import hashable, serialized_order


def test_keys_of_other_types_sort_by_their_text() -> None:
    assert serialized_order(Decimal("1.5")) == b"Decimal('1.5')"
    assert serialized_order(dt.date(2020, 1, 2)) < serialized_order(dt.date(2020, 1, 3))


def test_array_and_map_keys_become_hashable_and_stay_distinct() -> None:
    a, b = hashable([1, [2, 3]]), hashable([1, [2, 4]])
    assert hash(a) != hash(b) and a != b
    assert hashable({"k": [1]}) == ("__map", (("k", ("__list", (1,))),))
    assert hashable([1]) != hashable({"1": 1})
