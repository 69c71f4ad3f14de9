"""The package's shape holds: public names resolve, imports run only downwards, nothing loads TensorFlow early."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import shardkit

PACKAGE = Path(shardkit.__file__).parent

# Every name README and docs/ show, by the import path they show it under.
PUBLIC = {
    "shardkit": [
        "build", "finalize", "inspect", "count_records", "verify", "write_idx_files", "materialize_snapshot",
        "BuildResult", "VerifyReport", "FileReport", "IndexReport", "SnapshotResult", "__version__", "preview", "BuildOptions",
        "build_with", "reshard", "ReshardResult", "ReshardOptions", "stats", "DatasetStatistics",
    ],
    "shardkit.errors": [
        "ShardkitError", "UsageError", "ConfigError", "EntryError", "OutputError", "StateError", "WriteError", "CorruptShardError",
        "WorkerError",
    ],
    "shardkit.executors": ["DaskExecutor", "PoolExecutor", "InlineExecutor", "Executor", "default_workers"],
    "shardkit.tfdata": ["load", "feature_spec", "read_manifest", "shard_files"],
    "shardkit.reader": ["ShardReader"],
    "shardkit.demo": ["make_segmentation", "make_classification", "make_detection"],
}  # fmt: skip

# Who may import whom: a layer imports itself and the layers below it, never one beside or above.
# cli -> api (and the public paths) -> view -> pipeline | check | read -> features, output -> formats -> storage -> errors, version
LEAVES = {"errors", "interrupts", "units", "version"}  # import nothing of shardkit but errors
LAYERS = {
    "errors": set(),
    "version": set(),
    "interrupts": {"errors"},
    "units": set(),
    "demo": set(),
    "duplicates": LEAVES,  # perceptual hashes, digests, the search for twins: NumPy, Pillow, scipy
    "storage": LEAVES,
    "formats": {"storage"} | LEAVES,
    "statistics": {"formats", "storage"} | LEAVES,  # what records hold, counted: NumPy and sketches
    "features": {"statistics", "formats", "storage"} | LEAVES,
    "output": {"formats", "storage"} | LEAVES,  # the typed contract of OUT: names, manifest, build state, shard records
    "pipeline": {"features", "statistics", "output", "formats", "storage", "duplicates"} | LEAVES,
    "check": {"features", "statistics", "output", "formats", "storage"} | LEAVES,
    "read": {"features", "statistics", "output", "formats", "storage"} | LEAVES,
    "view": {"pipeline", "check", "read", "features", "statistics", "output", "formats", "storage", "duplicates"} | LEAVES,
    "api": {"view", "pipeline", "check", "read", "features", "statistics", "output", "formats", "storage", "duplicates"} | LEAVES,
    # shardkit.tfdata, .reader, .executors
    "public": {"pipeline", "check", "read", "features", "statistics", "output", "formats", "storage"} | LEAVES,
    "package": {"api", "version"},  # shardkit/__init__.py
    "cli": {"api", "public", "package", "check", "output"} | LEAVES,  # output: the names in OUT it prints
}
PUBLIC_PATHS = {"tfdata", "reader", "executors"}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts == ["shardkit"]:
        return "package"
    top = parts[1]
    return "public" if top in PUBLIC_PATHS else top


def all_modules() -> list[str]:
    found = ["shardkit"]
    for info in pkgutil.walk_packages([str(PACKAGE)], "shardkit."):
        found.append(info.name)
    return sorted(found)


def shardkit_imports(module: str) -> set[str]:
    """The shardkit modules ``module`` imports, at top level or inside functions (TYPE_CHECKING too)."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shardkit"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("shardkit"))
    return {m for m in found if m in MODULES}


MODULES = set(all_modules())


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_documented_name_imports(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in PUBLIC[module]:
        assert getattr(loaded, name, None) is not None, f"{module}.{name}"


def test_submodules_do_not_shadow_the_public_functions() -> None:
    """``import shardkit.x.y`` sets the attribute ``shardkit.x``: no subpackage may be named like a function."""
    for module in MODULES:
        if not module.startswith("shardkit.cli"):
            importlib.import_module(module)
    for name in PUBLIC["shardkit"]:
        value = getattr(shardkit, name)
        assert not isinstance(value, type(shardkit)), f"shardkit.{name} is a module, not the API's {name}"
    assert shardkit.build.__module__ == "shardkit.pipeline.builder" and callable(shardkit.verify)


@pytest.mark.parametrize("module", sorted(MODULES - {"shardkit"}))
def test_imports_run_only_downwards(module: str) -> None:
    layer = layer_of(module)
    allowed = LAYERS[layer] | {layer}
    wrong = sorted(m for m in shardkit_imports(module) if layer_of(m) not in allowed and m != "shardkit")
    assert not wrong, f"{module} ({layer}) imports {wrong}: allowed layers are {sorted(allowed)}"


def test_no_module_imports_the_package_root() -> None:
    """The root re-exports the API; a module importing it (for __version__, say) points the arrow back up."""
    importers = sorted(m for m in MODULES if m != "shardkit" and "shardkit" in _root_imports(m))
    assert importers and all(m.startswith("shardkit.cli.") for m in importers), importers  # the CLI calls the public API through it


def _root_imports(module: str) -> set[str]:
    path = PACKAGE.joinpath(*module.split(".")[1:])
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(source.read_text())
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    for node in ast.walk(tree):  # from shardkit import NAME: the root's own attribute, unless NAME is a submodule
        if isinstance(node, ast.ImportFrom) and node.module == "shardkit":
            found |= {"shardkit" for a in node.names if f"shardkit.{a.name}" not in MODULES}
    return found


def test_modules_stay_small() -> None:
    sizes = {m: len(_source(m).splitlines()) for m in MODULES}
    too_big = {m: n for m, n in sizes.items() if n > 400}
    assert not too_big, f"split these by job: {too_big}"


def _source(module: str) -> str:
    path = PACKAGE.joinpath(*module.split(".")[1:])
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def test_importing_the_package_and_every_public_path_loads_no_tensorflow() -> None:
    script = (
        "import sys\n"
        "import shardkit, shardkit.api, shardkit.tfdata, shardkit.reader, shardkit.executors, shardkit.errors, shardkit.cli\n"
        "shardkit.build, shardkit.verify, shardkit.inspect, shardkit.materialize_snapshot\n"
        "loaded = [m for m in ('tensorflow', 'distributed', 'torch') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_version_comes_from_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert shardkit.__version__ == version("shardkit")


def test_the_architecture_page_lists_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    packages = {"shardkit"} | {m for m in MODULES if (PACKAGE.joinpath(*m.split(".")[1:]) / "__init__.py").exists()}
    missing = sorted(m for m in MODULES - packages if f"`{m.removeprefix('shardkit.')}`" not in page)
    assert not missing, f"docs/architecture.md does not list {missing}"


def test_the_package_re_exports_exactly_the_api() -> None:
    import shardkit.api

    assert set(shardkit.__all__) - {"__version__"} == set(shardkit.api.__all__)


# -- extension points: a kind of feature or an input format is a class, not a branch in many files --

KIND_NAMES = {"image", "mask", "int64", "float", "bytes", "string", "class_name", "encoded_image", "objects"}


def _compared_literals(module: str) -> set[str]:
    """The string constants a module compares anything with (==, !=, in, not in, match cases)."""
    found: set[str] = set()

    def strings(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(strings(e) for e in node.elts)) if node.elts else set()
        return set()

    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found |= strings(side)
        elif isinstance(node, ast.MatchValue):
            found |= strings(node.value)
    return found


def _kind_class_checks(module: str) -> bool:
    """Whether a module asks ``isinstance(x, SomeKind)``."""
    return any(
        isinstance(node, ast.Call)
        and ast.unparse(node.func) == "isinstance"
        and len(node.args) == 2
        and "Kind" in ast.unparse(node.args[1])
        for node in ast.walk(ast.parse(_source(module)))
    )


def test_at_most_three_modules_compare_with_a_kind() -> None:
    comparing = sorted(m for m in MODULES if _compared_literals(m) & KIND_NAMES or _kind_class_checks(m))
    assert len(comparing) <= 3, f"these modules branch on a feature kind; ask the kind instead (features/): {comparing}"


def test_no_folder_holds_more_than_twelve_modules_and_no_name_prefixes_another() -> None:
    folders: dict[Path, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folders.setdefault(path.parent, []).append(path.stem)
    for folder, stems in folders.items():
        modules = [s for s in stems if s not in ("__init__", "__main__")]
        assert len(modules) <= 12, f"{folder}: {len(modules)} modules; split it into folders by phase"
        clashes = [(a, b) for a in modules for b in modules if a != b and b.startswith(a)]
        assert not clashes, f"{folder}: names a reader must guess between: {clashes}"
    top = [p for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    assert len(top) <= 10, sorted(p.name for p in top)


def test_no_import_circles_not_even_for_types() -> None:
    graph = {m: shardkit_imports(m) - {m} for m in MODULES}
    # A package's __init__ importing its own modules is how it hands names on, not a circle.
    for module in graph:
        graph[module] = {m for m in graph[module] if not (module == m.rsplit(".", 1)[0] and _is_package(module))}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                raise AssertionError("import circle: " + " -> ".join([*trail[trail.index(target) :], target]))
            if target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def _is_package(module: str) -> bool:
    return (PACKAGE.joinpath(*module.split(".")[1:]) / "__init__.py").exists()


FORMAT_NAMES = {"txt", "csv", "tsv", "jsonl", "coco", "od-csv", "yolo", "voc", "folder", ".txt", ".csv", ".tsv", ".jsonl"}


def _suffix_literals(module: str) -> set[str]:
    """The string constants a module hands to ``str.endswith``/``startswith`` (a suffix test)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("endswith", "startswith"):
            for arg in node.args:
                found |= {n.value for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


def test_no_module_branches_on_an_input_format_name() -> None:
    """Formats are told apart by ``pipeline.inputs.registry``, from the names and suffixes each
    format module declares: the registry compares those values, never a literal."""
    comparing = sorted(m for m in MODULES if (_compared_literals(m) | _suffix_literals(m)) & FORMAT_NAMES)
    assert not comparing, f"these modules branch on an input format; ask the format instead (pipeline/inputs/formats/): {comparing}"


OUT_NAMES = ("manifest.json", "build.json", "errors.jsonl", "dataset_info.json", "features.json", ".labels.txt", ".shardkit")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of a parsed module's docstring constants (the module's, each function's and class's)."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def test_one_module_names_the_files_in_out() -> None:
    """``output.layout`` owns every name in OUT: no other module spells one (docstrings aside)."""
    spelled = {}
    for module in MODULES - {"shardkit.output.layout"}:
        tree = ast.parse(_source(module))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found = [name for name in OUT_NAMES if name in node.value]
                if found:
                    spelled.setdefault(module, set()).update(found)
    assert not spelled, f"name these through shardkit.output.layout: {spelled}"


CONTAINERS = "shardkit.formats.containers"
# What only a container's own modules know: TFRecord's framing, walk, .idx and writer, and its names.
CONTAINER_MODULES = {f"{CONTAINERS}.{m}" for m in ("tfrecord_io", "tfrecord_scan", "idx_sidecar", "masked_crc")}
CONTAINER_NAMES = ("RecordWriter", "frame_batch", "masked_crc", "HEADER_SIZE", "FOOTER_SIZE")
CONTAINER_SPELLINGS = (".tfrecord", ".idx", ".array_record")


def _code_strings(module: str) -> set[str]:
    """The string constants in a module's code: docstrings and the CLI's ``help=`` texts aside."""
    tree = ast.parse(_source(module))
    prose = _docstrings(tree)
    prose |= {id(n) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "help" for n in ast.walk(node.value)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in prose}


def test_only_the_containers_frame_walk_or_name_shard_files() -> None:
    """Outside ``formats/containers/`` no module imports TFRecord's framing, walk or ``.idx``
    modules, names its writer or framing, or spells a container's suffix: it asks an adapter."""
    outside = sorted(m for m in MODULES if not m.startswith(CONTAINERS))
    importing = {m: sorted(shardkit_imports(m) & CONTAINER_MODULES) for m in outside if shardkit_imports(m) & CONTAINER_MODULES}
    assert not importing, f"ask formats.containers' adapters (registry, adapter) instead: {importing}"
    naming = {m: sorted(n for n in CONTAINER_NAMES if re.search(rf"\b{n}\b", _source(m))) for m in outside}
    assert not {m: n for m, n in naming.items() if n}, "TFRecord's writer and framing are its adapter's"
    spelled = {m: sorted(s for s in CONTAINER_SPELLINGS if any(s in text for text in _code_strings(m))) for m in outside}
    assert not {m: s for m, s in spelled.items() if s}, "a container's file names are its adapter's"
