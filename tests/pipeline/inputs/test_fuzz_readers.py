"""The COCO, VOC, YOLO, Label Studio, LabelMe and Parquet readers on mutated real-shaped inputs (bytes flipped, cut short,
deep nesting and long strings put in, values swapped for other types): reading through the input
format's API (registry -> ``file_splits`` / ``folder_splits`` / ``read_rows``) gives rows or an
``EntryError`` / ``ShardkitError``, never another exception, and memory grows by under 300 MB for
inputs under 1 MB.

Each family is fuzzed in a child process (``python -m tests.pipeline.inputs.test_fuzz_readers
FAMILY ROOT``) under an address-space limit, which reports its peak RSS over its baseline; the
examples are drawn deterministically (``derandomize``), so CI sees the same inputs every run.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
FAMILIES = ("coco", "voc", "yolo", "labelstudio", "labelme", "parquet")
EXAMPLES = 120  # a family: about 10 s each on a shared 2-core machine
GROWTH_MB = 300

pytestmark = pytest.mark.slow  # six child processes, about 60 s in all


@pytest.mark.parametrize("family", FAMILIES)
def test_mutated_inputs_give_rows_or_one_line_errors_in_bounded_memory(family: str, tmp_path: Path) -> None:
    target = _write(family, tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "tests.pipeline.inputs.test_fuzz_readers", family, str(tmp_path), str(target)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-6000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["examples"] >= EXAMPLES // 2, report
    assert report["growth_mb"] < GROWTH_MB, report


def _write(family: str, root: Path) -> Path:
    """The real-shaped input of ``family`` under ``root``; returns the file the fuzzing mutates."""
    from tests.detection_sets import write_coco, write_voc, write_yolo

    if family == "coco":
        return write_coco(root / "set")
    if family == "voc":
        return write_voc(root) / "Annotations" / "2008_000008.xml"
    if family == "yolo":
        return write_yolo(root / "yolo")
    if family in ("labelstudio", "labelme"):
        return _write_labelling(family, root)
    from tests.table_sets import write_hub_export

    write_hub_export(root, {"train": 6})
    return root / "data" / "train-00000-of-00001.parquet"


def _write_labelling(family: str, root: Path) -> Path:
    from tests.detection_sets import photo
    from tests.labelling_sets import lm_shape, ls_annotation, ls_polygon, ls_rectangle, ls_task, write_label_studio, write_labelme

    if family == "labelme":
        write_labelme(root / "lm", "b.jpg", (32, 24), [], 1)
        shapes = [lm_shape("car", [[1, 2], [9, 8]], "rectangle"), lm_shape("leaf", [[1, 1], [9, 2], [5, 9]], "polygon", group_id=1)]
        return write_labelme(root / "lm", "a.jpg", (32, 24), shapes, 0)
    photo(root / "1a2b-a.jpg", 32, 24, 0)
    regions = [ls_rectangle("r1", "car", 10, 10, 50, 50, (32, 24)), ls_polygon("p1", "leaf", [[1, 1], [90, 2], [50, 90]], (32, 24))]
    tasks = [
        ls_task(1, "/data/upload/3/1a2b-a.jpg", [ls_annotation(1, 1, regions, "2024-05-01")]),
        ls_task(2, "/data/upload/3/1a2b-a.jpg", []),
    ]
    return write_label_studio(root / "project-3-at-2024-05-01-10-00-8f3a2b1c.json", tasks)


# -- the child: mutate, read, judge ---------------------------------------------------------------


def _read(family: str, root: Path, target: Path) -> None:
    """Every row ``family``'s reader gives for the (mutated) input, through the registry."""
    from shardkit.pipeline.inputs import registry
    from shardkit.pipeline.inputs.formats.input_format import Piece

    path = str(target)
    if family in ("voc", "labelme"):
        folder = str(target.parent.parent if family == "voc" else target.parent)
        layout = registry.layout_format(folder)
        pieces = [piece for _, piece in layout.folder_splits(folder)] if layout else []
        fmt = layout
    else:
        fmt = registry.file_format(path)
        if fmt is None:
            return
        named = fmt.file_splits(path)
        pieces = [piece for _, piece in named] if named is not None else fmt.cut(path, 1 << 20)
        fmt.label_map(path)
        fmt.default_config(path)
    for piece in pieces:
        assert fmt is not None
        for row in fmt.read_rows(Piece(piece.path) if family == "coco" else piece):
            del row


def _swapped_json(rng: random.Random, document: Any, value: str) -> str:
    """``document`` as JSON with one value somewhere in it replaced by the JSON text ``value``."""
    nodes: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            nodes.append((node, key))
            walk(node[key])

    walk(document)
    if nodes:
        parent, key = rng.choice(nodes)
        parent[key] = "\x00swapped\x00"
    text = json.dumps(document)
    return text.replace('"\\u0000swapped\\u0000"', value, 1) if nodes else value


def _value(rng: random.Random) -> str:
    """A JSON value of another type than the one it replaces, hostile ones among them."""
    depth = rng.choice([1, 50, 99, 101, 2000, 60_000])
    return rng.choice(
        ["null", "true", "-1", "0", "1e308", "-1e308", "1e999", '""', '"x"', "[]", "{}", "[[]]", '{"a": {}}', "3.5",
         '"' + "s" * rng.choice([10, 5000, 300_000]) + '"', "[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth,
         '{"counts": [1, 99999999999], "size": [10, 10]}', "[[1e8, 2, 3, 4, 5, 6]]", '"../../../../etc/passwd"']
    )  # fmt: skip


def _mutated(family: str, original: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["flip", "flip", "truncate", "insert", "swap", "swap", "swap"])
    if kind == "flip":
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == "truncate":
        return original[: rng.randrange(len(original))]
    if kind == "insert":  # deep nesting or a long string, anywhere
        at = rng.randrange(len(original))
        depth = rng.choice([200, 5000, 100_000])
        junk = rng.choice([b"[" * depth + b"]" * depth, b"<a>" * depth + b"</a>" * depth, b"x" * 500_000, b"{" * depth])
        return original[:at] + junk + original[at:]
    text = original.decode("utf-8", "replace")
    if family in ("coco", "labelstudio", "labelme"):
        return _swapped_json(rng, json.loads(text), _value(rng)).encode()
    if family == "yolo":
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        key = lines[i].split(":", 1)[0] if ":" in lines[i] else lines[i]
        return "\n".join([*lines[:i], f"{key}: {_value(rng)}", *lines[i + 1 :]]).encode()
    if family == "voc":
        texts = list(re.finditer(r">([^<]*)<", text))
        found = rng.choice(texts)
        value = rng.choice(["-1", "nan", "1e308", "", "inf", "x" * 300_000, "0", "../../../etc/passwd", "<a>" * 3000])
        return (text[: found.start(1)] + value + text[found.end(1) :]).encode()
    return _swapped_parquet(original, rng)


def _swapped_parquet(original: bytes, rng: random.Random) -> bytes:
    """The table with its Hub metadata's values, or a column's type, swapped."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(original))
    metadata = dict(table.schema.metadata or {})
    if rng.random() < 0.5:
        metadata[b"huggingface"] = _swapped_json(rng, json.loads(metadata[b"huggingface"]), _value(rng)).encode()
        table = table.replace_schema_metadata(metadata)
    else:
        name = rng.choice(table.column_names)
        column = rng.choice([pa.array([None] * len(table)), pa.array(["x"] * len(table)), pa.array([-1] * len(table)),
                             pa.array([[1, 2]] * len(table))])  # fmt: skip
        table = table.set_column(table.column_names.index(name), name, column).replace_schema_metadata(metadata)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _fuzz(family: str, root: Path, target: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from shardkit.errors import EntryError, ShardkitError

    original = target.read_bytes()
    assert len(original) < 1 << 20
    examples = 0
    _read(family, root, target)  # the imports and caches a first reading brings: the baseline
    baseline = _rss_mb()
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) << 10
    resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), size + (2 << 30)))  # a runaway stops here, not in the kernel

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32))
    def one(seed: int) -> None:
        nonlocal examples
        data = _mutated(family, original, random.Random(seed))
        assert len(data) < 1 << 20
        target.write_bytes(data)
        try:
            _read(family, root, target)
        except (EntryError, ShardkitError):
            pass
        finally:
            target.write_bytes(original)
        examples += 1

    one()
    print(json.dumps({"examples": examples, "growth_mb": round(_rss_mb() - baseline, 1)}))


if __name__ == "__main__":
    _fuzz(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
