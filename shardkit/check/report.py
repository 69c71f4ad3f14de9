"""Plain-text reports for ``inspect`` and ``verify``, readable on an 80-column terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardkit.check.verify import VerifyReport
from shardkit.features.registry import kind_named, of_entry
from shardkit.units import plural, size

WIDTH = 80
KINDS = {"sequence_example": "sequence example", "other": "other record"}  # what inspection counts, as a noun


def table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Columns padded to their widest cell; the last column is cut to fit ``WIDTH``."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        line = "  " + "  ".join(cells).rstrip()
        lines.append(line if len(line) <= WIDTH else line[: WIDTH - 3] + "...")
    return lines


def _shape(feature: dict[str, Any]) -> str:
    if feature.get("ragged"):
        return f"ragged {feature.get('min_length')}..{feature.get('max_length')}"
    shape = feature.get("shape")
    return "scalar" if shape == [] else str(shape)


def _details(feature: dict[str, Any]) -> str:
    return ", ".join(of_entry(feature, feature.get("dtype", "bytes")).details(feature))


def _containers(info: dict[str, Any]) -> str:
    """``tfrecord shards``, ``tfrecord and arrayrecord shards, gzip-compressed``."""
    said = " and ".join(info["formats"]) + " shards"
    return f"{said}, {info['compression']}-compressed" if info["compression"] else said


def output_text(info: dict[str, Any]) -> list[str]:
    lines = [
        f"{info['path']}: shardkit output (shardkit {info['shardkit_version']}, manifest v{info['manifest_version']}, {_containers(info)})"
    ]
    rows = [["split", "shards", "records", "bytes", "skipped"]]
    for name, s in info["splits"].items():
        rows.append([name, str(s["shards"]), str(s["records"]), size(s["bytes"]), str(s["skipped"])])
    lines += table(rows, right=(1, 2, 3, 4))
    lines.append("")
    rows = [["feature", "dtype", "shape", "details"]]
    rows += [[f["key"], f["dtype"], _shape(f), _details(f)] for f in info["schema"]]
    lines += table(rows)
    for key, names in info["classes"].items():
        shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
        lines.append(f"classes of {key}: {shown}")
    for summary in info.get("summaries", ()):
        lines += kind_named(summary["kind"]).summary_lines(summary)
    if info.get("label_balance"):
        lines.append("")
        lines.append("label balance: the shard whose mix differs most from its split's (0 = the same)")
        rows = [["label", "split", "values", "deviation", "at random", "shard"]]
        rows += [
            [b["key"], b["split"], str(b["values"]), f"{b['largest_deviation']:.3f}", f"{b['by_chance']:.3f}", b["shard"]]
            for b in info["label_balance"]
        ]
        lines += table(rows, right=(2, 3, 4))
    return lines


def inferred_text(info: dict[str, Any]) -> list[str]:
    n = info["records_scanned"]
    limit = info["limited_to"]
    scope = "every record" if limit is None or n < limit else f"the first {n}; --all for every record"
    kinds = ", ".join(plural(v, KINDS.get(k, k.replace("_", " "))) for k, v in info["kinds"].items()) or "no records"
    lines = [f"{plural(len(info['files']), 'file')}, {plural(n, 'record')} scanned ({scope}): {kinds}"]
    for f in info["files"]:
        if f["problem"]:
            lines.append(f"  {f['path']}: {f['problem']}")
        elif f["compression"] != "none":
            lines.append(f"  {f['path']}: {f['compression']}-compressed")
    for name, features in (("feature", info["features"]), ("feature list", info["feature_lists"])):
        if not features:
            continue
        rows = [[name, "dtype", "length", "present", "looks like", "example"]]
        for key, f in features.items():
            length = str(f["min_length"]) if not f["ragged"] else f"{f['min_length']}..{f['max_length']}"
            if "steps" in f:
                length = f"steps {f['steps'][0]}..{f['steps'][1]}"
            rows.append([key, f["dtype"], length, f"{f['present']}/{n}", ",".join(f["looks_like"]), f["example"]])
        lines.append("")
        lines += table(rows)
    for reason in info["not_examples"]:
        lines.append(f"not an Example: {reason}")
    return lines


def verify_text(report: VerifyReport) -> list[str]:
    lines = []
    for f in report.files:
        if f.ok:
            lines.append(f"OK      {f.path} ({plural(f.records, 'record')}, {size(f.bytes)})")
        else:
            lines.append(f"FAILED  {f.path}: {f.problem}")
    lines += [f"FAILED  {problem}" for problem in report.problems]
    failed = sum(not f.ok for f in report.files) + len(report.problems)
    rate = f", {report.bytes / report.seconds / 1e9:.2f} GB/s" if report.seconds > 0 else ""
    verdict = "all whole" if report.ok else f"{failed} FAILED"
    records = sum(f.records for f in report.files)
    counted = f"{plural(len(report.files), 'file')}, {plural(records, 'record')}"
    lines.append(f"{counted}, {size(report.bytes)} checked in {report.seconds:.2f}s{rate}: {verdict}")
    return lines
