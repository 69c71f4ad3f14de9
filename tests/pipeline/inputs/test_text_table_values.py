"""What a value in a ``.csv``, ``.tsv`` or ``.jsonl`` index file means in a record: today's rules
(Python's ``csv`` and ``json``, then each kind's ``typed``), pinned before these files are read as
Arrow columns (issue 32), whose readers type a column their own way. Each table is one build with
``on_error="skip"``, each case one row of it: its value read back with TensorFlow, or its line and
reason in errors.jsonl. Where today's rule is wrong the test says the right one, marked xfail.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shardkit.errors import EntryError
from tests.text_tables import Bad, Built, bits, build_table, delimited, listed

Build = Callable[..., Built]
NULL = "v: column 'v' is null: give the feature a 'default:' in the config, or build with --on-error skip"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """One build per distinct table, shared by its cases."""
    cache: dict[tuple[str, str | bytes, str], Built] = {}

    def get(name: str, data: str | bytes, features: str) -> Built:
        if (name, data, features) not in cache:
            cache[name, data, features] = build_table(tmp_path_factory.mktemp("table"), name, data, features)
        return cache[name, data, features]

    return get


def _table_row(built: Build, fmt: str, kind: str, values: Sequence[str], text: str, quoting: int = csv.QUOTE_MINIMAL) -> Any:
    table = built(f"train.{fmt}", delimited(fmt, values, quoting), f"  id: {{kind: string}}\n  v: {{{kind}}}\n")
    assert len(table.records) + len(table.errors) == len(values)  # no row left out unsaid
    i = list(values).index(text)
    return table.row(i + 2, str(i)), table


def _jsonl(values: Sequence[str]) -> str:
    """``{"id": "i", "v": VALUE}`` lines, VALUE the JSON text as written: row i on line i + 1."""
    return "".join(f'{{"id": "{i}", "v": {v}}}\n' for i, v in enumerate(values))


def _jsonl_row(built: Build, kind: str, values: Sequence[str], text: str) -> Any:
    table = built("train.jsonl", _jsonl(values), f"  id: {{kind: string}}\n  v: {{{kind}}}\n")
    assert len(table.records) + len(table.errors) == len(values)
    i = list(values).index(text)
    return table.row(i + 1, str(i)), table


def _texts(cases: Sequence[Any]) -> list[str]:
    """Each case's text, in table order (a ``pytest.param`` holds its case in ``values``)."""
    return [case.values[0] if hasattr(case, "marks") else case[0] for case in cases]


def _xfail(case: tuple[Any, ...], reason: str) -> Any:
    return pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason=reason))


DELIMITED = ["csv", "tsv"]
WRONG_INF = "a number past float64's range becomes infinity, where one past float32's range is refused"

# -- CSV and TSV fields: the text with spaces around it stripped, quoted or not --------------------

STRINGS = [("007", b"007"), ("1e3", b"1e3"), ("-0", b"-0"), (" 12 ", b"12"), (" 1e3\t", b"1e3"), ("a b", b"a b")]
STRINGS += [("", b""), ("NA", b"NA"), ("true", b"true"), ("héllo ✓", "héllo ✓".encode())]


@pytest.mark.parametrize("quoting", [csv.QUOTE_MINIMAL, csv.QUOTE_ALL], ids=["plain", "quoted"])
@pytest.mark.parametrize("fmt", DELIMITED)
@pytest.mark.parametrize(("text", "expected"), STRINGS)
def test_a_string_field_is_its_text_stripped(built: Build, fmt: str, quoting: int, text: str, expected: bytes) -> None:
    row, _ = _table_row(built, fmt, "kind: string", _texts(STRINGS), text, quoting)
    assert row["v"] == expected


INTS: list[Any] = [("+5", 5), ("007", 7), ("-0", 0), ("1_000", 1000), (" 3 ", 3), (" -7\t", -7), ("١٢", 12)]
INTS += [("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63))]
INTS += [("9223372036854775808", Bad("v: value out of int64 range")), ("-9223372036854775809", Bad("v: value out of int64 range"))]
INTS += [(t, Bad(f"v: {t!r} is not a valid int64")) for t in ("1e3", "3.0", "", "NA", "true", "0x10", "1,5")]


@pytest.mark.parametrize("fmt", DELIMITED)
@pytest.mark.parametrize(("text", "expected"), INTS)
def test_an_int64_field_is_what_python_int_reads(built: Build, fmt: str, text: str, expected: int | Bad) -> None:
    row, _ = _table_row(built, fmt, "kind: int64", _texts(INTS), text)
    assert row == expected if isinstance(expected, Bad) else listed(row["v"]) == [expected]


def test_an_int64_field_that_is_not_an_integer_stops_the_build_naming_its_line(tmp_path: Path) -> None:
    with pytest.raises(EntryError) as caught:
        build_table(tmp_path, "train.csv", "n\r\n5\r\n1e3\r\n", "  n: {kind: int64}\n", on_error="fail")
    assert str(caught.value) == f"{tmp_path / 'train.csv'}:3: n: '1e3' is not a valid int64"
    skipped = build_table(tmp_path / "skip", "train.csv", "n\r\n5\r\n1e3\r\n", "  n: {kind: int64}\n")
    assert (skipped.errors, len(skipped.records)) == ([("train.csv", 3, "n: '1e3' is not a valid int64")], 1)


# float(text), then float32: a tie for float32 rounds to even, and a text just off a tie is rounded
# twice (to float64, landing on the tie, then to even), as numpy.float32(float(text)) does.
TIE = "1.000000178813934326171875"  # halfway between 1 + 2**-23 and 1 + 2**-22
FLOATS: list[Any] = [("1e3", 1000.0), ("nan", np.nan), ("NaN", np.nan), ("-nan", np.nan), ("inf", np.inf), ("-Infinity", -np.inf)]
FLOATS += [("+inf", np.inf), ("1_0.5", 10.5), (".5", 0.5), ("5.", 5.0), (" 2.5 ", 2.5), ("-0", -0.0), ("16777217", 16777216.0)]
FLOATS += [("1.0000000000000000000001", 1.0), (TIE, 1 + 2**-22), (TIE + "01", 1 + 2**-22), (TIE[:-1] + "4999", 1 + 2**-22)]
FLOATS += [("1.0000002384185791015625", 1 + 2**-22), ("1.00000005960464477539062", 1.0), ("1e-46", 0.0), ("1e-45", 2**-149)]
FLOATS += [("3.4e38", 3.4e38), ("3.4028234663852886e38", 3.4028234663852886e38), ("-3.4e38", -3.4e38)]
FLOATS += [(t, Bad("v: value out of float32 range")) for t in ("3.5e38", "-3.5e38", "3.4028235e38")]
FLOATS += [(t, Bad(f"v: {t!r} is not a valid float")) for t in ("", "0x1p3", "NA", "true", "1,5")]
FLOATS += [(t, Bad("v: value out of float32 range")) for t in ("1e400", "-1e309")]


@pytest.mark.parametrize("fmt", DELIMITED)
@pytest.mark.parametrize(("text", "expected"), FLOATS)
def test_a_float_field_is_float32_of_python_float(built: Build, fmt: str, text: str, expected: float | Bad) -> None:
    row, _ = _table_row(built, fmt, "kind: float", _texts(FLOATS), text)
    if isinstance(expected, Bad):
        assert row == expected
    else:
        assert bits(row["v"]) == bits(float(text))  # NaN's sign too
        assert np.isnan(expected) or bits(row["v"]) == bits(expected)


CLASS_NAMES: list[Any] = [("007", "007"), ("7", "7"), ("NA", "NA"), ("True", "True"), (" cat ", "cat"), ("cat", "cat"), ("Cat", "Cat")]
CLASS_NAMES += [("", Bad("v: expected a class name, got ''"))]


@pytest.mark.parametrize("fmt", DELIMITED)
@pytest.mark.parametrize(("text", "expected"), CLASS_NAMES)
def test_a_class_name_field_is_its_stripped_text(built: Build, fmt: str, text: str, expected: str | Bad) -> None:
    row, table = _table_row(built, fmt, "kind: class_name", _texts(CLASS_NAMES), text)
    assert row == expected if isinstance(expected, Bad) else table.classes["v"][int(row["v"])] == expected
    assert table.classes["v"] == ["007", "7", "Cat", "NA", "True", "cat"]  # sorted: "007" and "7" are two classes


CLASS_IDS: list[Any] = [("1", 1), (" 1 ", 1), ("01", 1), ("0", 0), ("2", 2), ("١", 1)]
CLASS_IDS += [(t, Bad(f"v: expected a class id, got {t!r}")) for t in ("-1", "1.0", "", "+1", "b")]
CLASS_IDS += [("3", Bad("v: class id 3 is not one of the 3 classes (0 to 2)"))]


@pytest.mark.parametrize("fmt", DELIMITED)
@pytest.mark.parametrize(("text", "expected"), CLASS_IDS)
def test_a_class_id_field_is_digits(built: Build, fmt: str, text: str, expected: int | Bad) -> None:
    row, _ = _table_row(built, fmt, "kind: class_id, classes: [a, b, c]", _texts(CLASS_IDS), text)
    assert row == expected if isinstance(expected, Bad) else int(row["v"]) == expected


def test_a_class_id_of_superscript_digits_is_a_bad_row(tmp_path: Path) -> None:
    table = build_table(tmp_path, "train.csv", "c\r\n²\r\n1\r\n", "  c: {kind: class_id, classes: [a, b]}\n")
    assert table.errors == [("train.csv", 2, "c: expected a class id, got '²'")] and len(table.records) == 1


def test_an_empty_csv_field_is_empty_text_not_a_null_so_no_default_applies(tmp_path: Path) -> None:
    features = "  id: {kind: string}\n  n: {kind: int64, default: -1}\n  x: {kind: float, default: 0.5}\n"
    features += "  s: {kind: string, default: none}\n  c: {kind: class_name, default: unknown}\n"
    table = build_table(tmp_path, "train.csv", "id,n,x,s,c\r\na,,,,\r\nb,1,2,,c\r\nc,1,2,t,\r\nd,1,,t,c\r\n", features)
    assert [(r["id"], r["s"]) for r in table.records] == [(b"b", b"")]
    assert [e[1:] for e in table.errors] == [
        (2, "n: '' is not a valid int64"),
        (4, "c: expected a class name, got ''"),
        (5, "x: '' is not a valid float"),
    ]


# -- JSONL values: JSON's types, a number or true/false in a string feature as Python writes it ----

JSON_INTS: list[Any] = [("1.0", [1]), ("1e3", [1000]), ("-0.0", [0]), ('"5"', [5]), ('" 5 "', [5]), ('"007"', [7])]
JSON_INTS += [("9223372036854775807", [2**63 - 1]), ("[1, 2]", [1, 2]), ("[]", []), ("null", Bad(NULL))]
JSON_INTS += [("true", Bad("v: expected int64, got True")), ("false", Bad("v: expected int64, got False"))]
JSON_INTS += [("[true]", Bad("v: expected int64, got True")), ("[null]", Bad("v: expected int64, got None"))]
JSON_INTS += [('{"a": 1}', Bad("v: expected int64, got {'a': 1}")), ("1.5", Bad("v: 1.5 is not an integer"))]
JSON_INTS += [(t, Bad("v: value out of int64 range")) for t in ("9223372036854775808", "-9223372036854775809", "1e20")]
JSON_INTS += [('"1e3"', Bad("v: '1e3' is not a valid int64")), ('""', Bad("v: '' is not a valid int64"))]


@pytest.mark.parametrize(("text", "expected"), JSON_INTS)
def test_a_json_value_in_an_int64_feature(built: Build, text: str, expected: list[int] | Bad) -> None:
    row, _ = _jsonl_row(built, "kind: int64", _texts(JSON_INTS), text)
    assert row == expected if isinstance(expected, Bad) else listed(row["v"]) == expected


JSON_FLOATS: list[Any] = [("1", [1.0]), ("[1.5, 2]", [1.5, 2.0]), ("[]", []), ('"nan"', [np.nan]), ('"1e3"', [1000.0])]
JSON_FLOATS += [("-0.0", [-0.0]), ("1.1", [1.1]), ("12345678901234567890", [1.2345678901234567e19]), ("null", Bad(NULL))]
JSON_FLOATS += [("true", Bad("v: expected float, got True")), ("[[1]]", Bad("v: expected float, got [1]"))]
JSON_FLOATS += [('"a"', Bad("v: 'a' is not a valid float")), ("3.5e38", Bad("v: value out of float32 range"))]
JSON_FLOATS += [_xfail(("1E400", Bad("v: value out of float32 range")), WRONG_INF)]


@pytest.mark.parametrize(("text", "expected"), JSON_FLOATS)
def test_a_json_value_in_a_float_feature(built: Build, text: str, expected: list[float] | Bad) -> None:
    row, _ = _jsonl_row(built, "kind: float", _texts(JSON_FLOATS), text)
    assert row == expected if isinstance(expected, Bad) else bits(row["v"]) == bits(expected)


JSON_STRINGS: list[Any] = [("true", [b"True"]), ("false", [b"False"]), ("1e3", [b"1000.0"]), ("-0", [b"0"]), ("1.10", [b"1.1"])]
JSON_STRINGS += [("1.0", [b"1.0"]), ('" 5 "', [b" 5 "]), ('"007"', [b"007"]), ('""', [b""]), ('["a", 1, true]', [b"a", b"1", b"True"])]
JSON_STRINGS += [("[]", []), ("null", Bad(NULL)), ("[null]", Bad("v: expected text, got None"))]
JSON_STRINGS += [('{"a": 1}', Bad("v: expected text, got {'a': 1}"))]


@pytest.mark.parametrize(("text", "expected"), JSON_STRINGS)
def test_a_json_value_in_a_string_feature(built: Build, text: str, expected: list[bytes] | Bad) -> None:
    row, _ = _jsonl_row(built, "kind: string", _texts(JSON_STRINGS), text)
    assert row == expected if isinstance(expected, Bad) else listed(row["v"]) == expected


JSON_NAMES: list[Any] = [('"007"', "007"), ('"7"', "7"), ('" cat "', " cat "), ('"cat"', "cat"), ("1", "1"), ("1.0", "1.0")]
JSON_NAMES += [("true", Bad("v: expected a class name, got True")), ('""', Bad("v: expected a class name, got ''"))]
JSON_NAMES += [("null", Bad(NULL)), ('["a"]', Bad("v: expected a class name, got ['a']"))]


@pytest.mark.parametrize(("text", "expected"), JSON_NAMES)
def test_a_json_value_in_a_class_name_feature(built: Build, text: str, expected: str | Bad) -> None:
    row, table = _jsonl_row(built, "kind: class_name", _texts(JSON_NAMES), text)
    assert row == expected if isinstance(expected, Bad) else table.classes["v"][int(row["v"])] == expected
    assert table.classes["v"] == [" cat ", "007", "1", "1.0", "7", "cat"]  # not stripped, unlike a CSV field


def test_a_json_null_takes_the_default_but_a_missing_key_or_a_null_item_does_not(tmp_path: Path) -> None:
    features = "  n: {kind: int64, default: -1}\n  x: {kind: float, default: 0.5}\n"
    features += "  s: {kind: string, default: none}\n  c: {kind: class_name, default: unknown}\n"
    lines = ['{"n": null, "x": null, "s": null, "c": null}', '{"n": [null], "x": 1, "s": "a", "c": "b"}', '{"x": 2, "s": "a", "c": "b"}']
    table = build_table(tmp_path, "train.jsonl", "\n".join(lines) + "\n", features)
    (record,) = table.records
    assert (listed(record["n"]), bits(record["x"]), record["s"]) == ([-1], bits(0.5), b"none")
    assert table.classes["c"][int(record["c"])] == "unknown"
    assert [e[1:] for e in table.errors] == [(2, "n: expected int64, got None"), (3, "no column 'n' (columns: x, s, c)")]
