"""Payload checks (DESIGN §7 "Payloads"): inputs and outputs are plain JSON, under a size cap."""

import json
import math
from collections import OrderedDict
from datetime import UTC, date, datetime
from decimal import Decimal
from uuid import uuid4

import pytest

from django_xjobs.errors import PayloadTooLargeError
from django_xjobs.payload import NotJSON, check_json, dumps, encode

# --- accepted -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**70,  # a big int: jsonb numeric holds it
        1.5,
        -0.0,
        "",
        "plain",
        "unicode: é ß 中文 🎉",
        [],
        {},
        [1, "two", None, 3.0, [4, [5]]],
        (1, 2, (3, 4)),
        {"a": {"b": [1, {"c": "d"}]}, "e": None},
        {"clé": "valeur", "🔑": ["🎉"]},
        OrderedDict(a=1),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_plain_json_is_accepted(value):
    assert check_json(value) is None


# --- refused --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (math.nan, "$"),
        (math.inf, "$"),
        (-math.inf, "$"),
        ({"x": math.nan}, "$.x"),
        ([1, 2, math.inf], "$[2]"),
        ({"a": [{"b": math.nan}]}, "$.a[0].b"),
    ],
)
def test_nan_and_infinity_are_refused_with_the_path(value, path):
    with pytest.raises(NotJSON) as caught:
        check_json(value)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


def test_nul_in_a_value_is_refused():
    with pytest.raises(NotJSON) as caught:
        check_json({"note": ["ok", "a\x00b"]})
    assert caught.value.path == "$.note[1]"
    assert "NUL" in caught.value.reason


def test_nul_in_a_key_is_refused():
    with pytest.raises(NotJSON) as caught:
        check_json({"ok": 1, "bad\x00key": 2})
    assert caught.value.path.startswith("$.bad")
    assert "NUL" in caught.value.reason


@pytest.mark.parametrize("key", [1, 1.5, None, True, ("a",)], ids=repr)
def test_non_string_keys_are_refused(key):
    """``json.dumps`` would silently turn ``{1: ...}`` into ``{"1": ...}``: no round trip."""
    with pytest.raises(NotJSON) as caught:
        check_json({"outer": {key: "v"}})
    assert caught.value.path == "$.outer"
    assert "key" in caught.value.reason
    assert type(key).__name__ in caught.value.reason


@pytest.mark.parametrize(
    "value",
    [datetime(2024, 1, 1, tzinfo=UTC), date(2024, 1, 1)],
    ids=["datetime", "date"],
)
def test_dates_are_refused_with_isoformat_advice(value):
    with pytest.raises(NotJSON) as caught:
        check_json({"when": value})
    assert caught.value.path == "$.when"
    assert type(value).__name__ in caught.value.reason
    assert "isoformat" in caught.value.reason


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (Decimal("1.10"), "Decimal"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (object(), "object"),
        (b"bytes", "bytes"),
        (uuid4(), "UUID"),
    ],
)
def test_other_types_are_refused(value, type_name):
    with pytest.raises(NotJSON) as caught:
        check_json([0, value])
    assert caught.value.path == "$[1]"
    assert type_name in caught.value.reason


def test_model_like_object_gets_primary_key_advice():
    class Order:
        pk = 7

    with pytest.raises(NotJSON) as caught:
        check_json({"order": Order()})
    assert "primary key" in caught.value.reason


def test_custom_root_path():
    with pytest.raises(NotJSON) as caught:
        check_json({"x": {1, 2}}, "inputs")
    assert caught.value.path == "inputs.x"


def test_not_json_is_a_value_error():
    with pytest.raises(ValueError):
        check_json(math.nan)


def test_lone_surrogate_is_refused():
    """A lone surrogate cannot be encoded as UTF-8, so PostgreSQL cannot store it."""
    with pytest.raises(NotJSON) as caught:
        check_json({"s": "\ud800"})
    assert caught.value.path == "$.s"


def test_circular_structure_is_refused_as_not_json():
    """A self-referencing list has no JSON form: a clear NotJSON, not a RecursionError."""
    loop: list = []
    loop.append(loop)
    with pytest.raises(NotJSON):
        check_json({"loop": loop})


# --- encode() and the size cap --------------------------------------------------------------


def test_encode_is_compact_json():
    text = encode({"a": [1, 2], "b": "é"}, limit=1000, what="the input")
    assert text == '{"a":[1,2],"b":"é"}'
    assert json.loads(text) == {"a": [1, 2], "b": "é"}


def test_encode_tuple_becomes_list():
    assert encode({"t": (1, 2)}, limit=100, what="x") == '{"t":[1,2]}'


def test_encode_at_the_cap_is_accepted():
    value = {"s": "x" * 10}
    size = len(json.dumps(value, separators=(",", ":")).encode())
    assert encode(value, limit=size, what="x") == '{"s":"xxxxxxxxxx"}'


def test_encode_over_the_cap_is_refused():
    value = {"s": "x" * 10}
    size = len(json.dumps(value, separators=(",", ":")).encode())
    with pytest.raises(PayloadTooLargeError) as caught:
        encode(value, limit=size - 1, what="the input of job 'demo'")
    error = caught.value
    assert error.code == "X_PAYLOAD_TOO_LARGE"
    assert "the input of job 'demo'" in error.message
    assert str(size) in error.message
    assert str(size - 1) in error.message
    assert error.hint
    assert str(error).startswith("X_PAYLOAD_TOO_LARGE: ")


def test_encode_counts_utf8_bytes_not_characters():
    value = "é" * 10  # 10 characters, 20 bytes, plus 2 quotes
    assert encode(value, limit=22, what="x") == '"' + "é" * 10 + '"'
    with pytest.raises(PayloadTooLargeError):
        encode(value, limit=21, what="x")


@pytest.mark.parametrize(
    "value",
    [
        {"n": 1},
        "text",
        [1, 2.5, None, True, False, -0.0, 1e15, 1e-300, 2**62],
        {"nested": {"deeper": [{"k": 'é \u2028 " \\ \n'}]}, "": []},
        {},
    ],
)
def test_encode_writes_what_the_standard_encoder_writes(value):
    """``encode`` calls the C encoder it made once; its text is the text json.dumps would write
    with the same options, for every kind of value check_json lets through (but a float the
    standard encoder writes with a positive exponent, below)."""
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert encode(value, limit=10_000, what="it") == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e16, "10000000000000000.0"),
        (-1.2345678901234566e25, "-12345678901234566000000000.0"),
        (1.5e300, "15" + "0" * 299 + ".0"),
        ({"a": [2e20]}, '{"a":[200000000000000000000.0]}'),
        # an exponent inside a string is text: it is left as written, escapes included
        ({'1e+20 "x\\': "y 1e+20"}, '{"1e+20 \\"x\\\\":"y 1e+20"}'),
        (["\\", 3e16, '"', 4e16], '["\\\\",30000000000000000.0,"\\"",40000000000000000.0]'),
    ],
)
def test_a_float_past_the_exponent_is_written_in_full_with_its_point(value, text):
    """SPEC DRV-05: jsonb keeps ``1e+20`` as the digits of an int; written out with ``.0`` it
    keeps its scale and reads back as the float, which ``json.loads`` of the text is too."""
    written = dumps(value)
    assert written == text
    assert json.loads(written) == value
    assert encode(value, limit=10_000, what="it") == text
