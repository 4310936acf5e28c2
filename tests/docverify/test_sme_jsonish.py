"""docverify.sme.jsonish: stored JSON read as int() and iteration read it, without trusting its shape."""

from __future__ import annotations

import pytest

from docverify.sme.jsonish import as_int, items, mapping, objects


@pytest.mark.parametrize("value", ["3", " 7 ", 3, 2.9, True, b"4", -1])
def test_as_int_is_int(value):
    assert as_int(value) == int(value)


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, "x", "1.5", float("nan"), float("inf")])
def test_as_int_refuses_what_int_refuses_with_the_same_error(value):
    with pytest.raises(Exception) as expected:
        int(value)
    with pytest.raises(expected.type):
        as_int(value)


def test_objects_mapping_items():
    assert objects([{"a": 1}, 2, "s", None, {"b": 2}]) == [{"a": 1}, {"b": 2}]
    assert objects({"a": 1}) == [] and objects(None) == [] and objects("ab") == []
    assert mapping({"a": 1}) == {"a": 1} and mapping([1]) == {} and mapping(None) == {}
    assert list(items("ab")) == ["a", "b"] and list(items([1, 2])) == [1, 2]
    with pytest.raises(TypeError, match="'int' object is not iterable"):
        items(3)
