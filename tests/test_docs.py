"""Every example in README.md and docs/ runs, against a demo dataset, so the docs cannot rot.

Each page gets a fresh folder holding ``data/`` (segmentation index files), ``photos/`` (an
ImageFolder tree), and copies of ``configs/`` and ``scripts/``; its code blocks run there in
order, so a page's later examples see what its earlier ones built:

* ``bash`` blocks run with ``bash -euo pipefail`` and must exit 0;
* ``console`` blocks run each ``$ command``; the output shown under it must appear, line by line
  in order, in what the command printed (numbers may differ, ``...`` stands for anything, progress
  bar lines are skipped), and it must exit 0, or N where the command ends with ``# exit N``;
* ``python`` blocks run as scripts and must exit 0;
* ``yaml`` blocks are configs and must parse as one.

A block that cannot run here (it installs, or needs a cluster) follows a line
``<!-- not run: REASON -->``; other languages (``text``) are not run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shardkit import demo
from shardkit.pipeline.config import parse_config
from tests.paths import REPO

ROOT = REPO
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("bash", "console", "python", "yaml")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
EXIT = re.compile(r"#\s*exit (\d+)\b")


@dataclasses.dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason, for a block marked not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```") and lines[i].strip() != "```":
            lang = lines[i][3:].strip().split()[0]
            start = i
            i += 1
            body = []
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            marked = NOT_RUN.fullmatch(before.strip())
            found.append(Block(page.name, start + 1, lang, "\n".join(body) + "\n", marked.group(1) if marked else None))
        i += 1
    return found


@pytest.fixture(scope="session")
def world_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    world = tmp_path_factory.mktemp("docs-world")
    demo.make_segmentation(world / "data", train=40, val=12)
    demo.make_classification(world / "photos", per_class=8)
    for folder in ("configs", "scripts"):
        shutil.copytree(ROOT / folder, world / folder)
    return world


def environment() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # the venv's shardkit and python
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONWARNINGS": "ignore"}


def run_shell(command: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=environment(), capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def expected_pattern(line: str) -> re.Pattern[str]:
    """A shown output line as a pattern: numbers may differ, ``...`` is anything, spacing is loose."""
    parts = re.split(r"(\.\.\.|\d+(?:\.\d+)?|\s+)", line.strip())
    pattern = ""
    for part in parts:
        if part == "...":
            pattern += ".*"
        elif re.fullmatch(r"\d+(?:\.\d+)?", part):
            pattern += r"\d+(?:\.\d+)?"
        elif part.isspace():
            pattern += r"\s+"
        else:
            pattern += re.escape(part)
    return re.compile(pattern)


def console_steps(code: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def check_console(block: Block, world: Path) -> None:
    for command, shown in console_steps(block.code):
        done = run_shell(command, world)
        wanted = EXIT.search(command)
        code = int(wanted.group(1)) if wanted else 0
        printed = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        assert done.returncode == code, f"{block.where}: `{command}` exited {done.returncode}, not {code}:\n{done.stdout}{done.stderr}"
        position = 0
        for line in shown:
            if not line.strip() or line.strip() == "..." or "%|" in line:
                continue
            pattern = expected_pattern(line)
            while position < len(printed) and not pattern.fullmatch(printed[position]):
                position += 1
            assert position < len(printed), f"{block.where}: `{command}` did not print {line.strip()!r}; it printed:\n" + "\n".join(printed)
            position += 1


def check_block(block: Block, world: Path) -> None:
    if block.lang == "bash":
        done = run_shell(block.code, world)
        assert done.returncode == 0, f"{block.where}: exited {done.returncode}:\n{done.stdout}{done.stderr}"
    elif block.lang == "console":
        check_console(block, world)
    elif block.lang == "python":
        script = world / f"example_{block.line}.py"
        script.write_text(block.code)
        done = subprocess.run([sys.executable, str(script)], cwd=world, env=environment(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{block.where}: exited {done.returncode}:\n{done.stdout}{done.stderr}"
    elif block.lang == "yaml":
        parse_config(yaml.safe_load(block.code), block.where)


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUN and b.not_run is None]


EXAMPLE_PAGES = [p for p in PAGES if runnable(p)]


@pytest.mark.slow
@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=[p.name for p in EXAMPLE_PAGES])
def test_every_example_on_the_page_runs(page: Path, world_template: Path, tmp_path: Path) -> None:
    world = tmp_path / "world"
    shutil.copytree(world_template, world)
    for block in runnable(page):
        check_block(block, world)


def test_every_page_but_the_map_has_examples_that_run() -> None:
    assert [p.name for p in PAGES if p not in EXAMPLE_PAGES] == ["architecture.md"]


def test_docs_pages_exist_and_link_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    pages = (
        *("building", "detection", "clusters", "inspect-and-verify", "preview", "reading", "resharding", "performance", "architecture"),
        "statistics",
    )
    for name in pages:
        assert (ROOT / "docs" / f"{name}.md").is_file(), name
        assert f"(docs/{name}.md)" in readme, f"README does not link docs/{name}.md"


def test_the_harness_sees_every_block_and_its_marks() -> None:
    """A fence the parser missed would be an example nobody runs."""
    for page in PAGES:
        text = page.read_text()
        found = blocks(page)
        opening = [m for m in re.finditer(r"^```\S", text, flags=re.M)]
        assert len(found) == len(opening), page.name
        marks = NOT_RUN.findall(text)
        assert len(marks) == sum(b.not_run is not None for b in found), f"{page.name}: a not-run mark is not right above a block"


def test_expected_output_patterns() -> None:
    assert expected_pattern("built 4 shards in 2.1s (702 records/s)").fullmatch("built 2 shards in 0.4s (55 records/s)")
    assert not expected_pattern("built 4 shards").fullmatch("built 1 shard")
    assert expected_pattern("manifest: .../shards/manifest.json").fullmatch("manifest: /tmp/x/shards/manifest.json")
    steps = console_steps("$ a  # exit 1\nout\n...\n$ b\n")
    assert steps == [("a  # exit 1", ["out", "..."]), ("b", [])]
