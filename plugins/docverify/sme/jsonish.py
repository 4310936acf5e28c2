"""Reading the JSON the SME modules get from outside (a stored packet's classification, an error
record, a form's fields) without trusting its shape: the objects of a list, an object or nothing,
an integer as ``int()`` reads it. Nothing here converts what the caller did not ask for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import SupportsIndex, SupportsInt


def objects(value: object) -> list[Mapping[str, object]]:
    """The objects of a JSON list, in order (none when ``value`` is not a list)."""
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_int(value: object) -> int:
    """``int(value)`` of a JSON value: TypeError for what ``int()`` refuses (None, a list, an object),
    ValueError for a string that is no integer."""
    if isinstance(value, str | bytes | bytearray | SupportsInt | SupportsIndex):
        return int(value)
    raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, "
                    f"not '{type(value).__name__}'")


def items(value: object) -> Iterable[object]:
    """``value`` to iterate over: TypeError when it is not iterable, as ``iter()`` raises."""
    if isinstance(value, Iterable):
        return value
    raise TypeError(f"'{type(value).__name__}' object is not iterable")
