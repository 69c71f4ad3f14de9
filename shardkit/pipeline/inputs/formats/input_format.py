"""``InputFormat``, what every input format answers, and the values it deals in: ``Row``, ``Piece``.

A format is one value in ``pipeline.inputs.registry``'s table. It says which inputs it reads
(files by suffix, or by content; folders by layout) and, for an input that names its own splits
(a Pascal VOC folder, a YOLO ``data.yaml``), which piece is which split; it cuts a file into
pieces that processes plan side by side, reads the rows of a whole input or of a piece, and
writes a row into a plan line and reads it back in the worker. The pipeline asks it once per
input or piece, never per row: rows come out of the format's own loop, and a plan's payload
functions are looked up once per source.

A format is a frozen dataclass, so a copy that crossed a process boundary (a pool, Dask) equals
the registered one.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from shardkit.errors import EntryError
from shardkit.storage import boundary, location

_SPLIT_RE = re.compile(r"[_.\-]")


@dataclasses.dataclass(slots=True)  # not frozen: a frozen init costs 1 us a row, 10 s at 10M rows
class Row:
    """One data line of an input: positional values, and names where the format has them."""

    source: str
    line: int
    values: tuple[Any, ...]
    names: tuple[str, ...] | None = None
    key: str = ""  # stable identity for seeding; defaults to "<file name>:<line>"
    text: str | None = None  # the line as read, where it alone gives the values back (.txt, .jsonl)

    @property
    def identity(self) -> str:
        return self.key or f"{file_name(self.source)}:{self.line}"

    def get(self, column: int | str, txt_names: Sequence[str] | None = None) -> Any:
        if isinstance(column, int):
            if column >= len(self.values):
                raise EntryError(self.source, self.line, f"no column {column}: the line has {len(self.values)} columns")
            return self.values[column]
        names = self.names if self.names is not None else txt_names
        if names is None:
            raise EntryError(
                self.source,
                self.line,
                f"column {column!r} is named, but .txt columns have no names: "
                "use a 0-based position or a top-level 'columns:' list in the config",
            )
        if column not in names:
            raise EntryError(self.source, self.line, f"no column {column!r} (columns: {', '.join(names)})")
        position = list(names).index(column)
        if position >= len(self.values):
            raise EntryError(self.source, self.line, f"no value for column {column!r}")
        return self.values[position]


def split_name(file_name: str) -> str:
    """The first word of a file name: ``train_3.txt`` -> ``train``."""
    return _SPLIT_RE.split(file_name, maxsplit=1)[0]


@functools.lru_cache(maxsize=1024)
def file_name(source: str) -> str:
    return os.path.basename(source)


@dataclasses.dataclass(frozen=True)
class Piece:
    """What one process reads rows from: an input whole (a file, or a folder read as one source),
    or bytes ``start:stop`` of a file, cut where the format allows."""

    path: str
    start: int = 0
    stop: int | None = None  # None: to the end
    first_line: int = 1  # the number of its first line
    # What the format learned of the input before this piece and needs in it (.txt: the columns
    # and number of the file's first data line; an ImageFolder split: the tree's root).
    context: Any = None
    # The files the format reads besides the input while reading its rows (VOC's XML, YOLO's image
    # lists and labels) must stay in the dataset's root; False with ``--allow-outside-root``.
    confined: bool = True

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop is None


@dataclasses.dataclass(frozen=True)
class TableBatch:
    """Rows of a table as Arrow columns: consecutive from row ``first`` (Parquet), or numbered
    by ``lines`` (a CSV's rows, by the line each starts on); ``errors``: rows refused as read
    (a CSV row of the wrong width), reported as the rows' own problems are."""

    source: str
    first: int
    columns: dict[str, Any]  # name -> pyarrow Array
    lines: Any = None  # a NumPy array of each row's number, where they are not consecutive
    errors: tuple[EntryError, ...] = ()

    @property
    def rows(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def numbers(self) -> Any:
        """Each row's number (a NumPy int64 array)."""
        import numpy as np

        return self.lines if self.lines is not None else np.arange(self.first, self.first + self.rows, dtype=np.int64)


def rows_of(batch: TableBatch, numbers: Sequence[int], names: Sequence[str], named: bool) -> list[Row]:
    """The rows of ``batch`` (numbered ``numbers``) as wide as the source's columns ``names``, a
    column the batch lacks None (a config may name a column by its position); ``named``: whether
    the rows carry the names (a ``.txt`` row's columns are named by the config, if at all)."""
    read = {name: column.to_pylist() for name, column in batch.columns.items()}
    empty = [None] * len(numbers)
    values = zip(*(read.get(name, empty) for name in names), strict=True)
    keep = tuple(names) if named else None
    return [Row(batch.source, n, row, keep) for n, row in zip(numbers, values, strict=True)]


def found_at(numbered: Any, wanted: Any) -> tuple[Any, Any]:
    """Where each of the sorted numbers ``wanted`` is in the sorted ``numbered`` (NumPy arrays),
    and which are there at all."""
    import numpy as np

    at = np.searchsorted(numbered, wanted)
    if not len(numbered):
        return at, np.zeros(len(wanted), dtype=bool)
    return at, (at < len(numbered)) & (numbered[np.minimum(at, len(numbered) - 1)] == wanted)


@dataclasses.dataclass(frozen=True)
class InputFormat:
    """One input format. ``name`` is kept in the build state of every OUT built with it: never
    rename one. ``suffixes`` are the file names it claims (lower case, with the dot); the
    registry matches them, so a format told by suffix alone overrides no ``claims``."""

    name: str
    suffixes: tuple[str, ...] = ()
    # The plan keeps the source's column names (a header) once, beside the split's sources,
    # rather than in every line: the planner records the names of a source's first row.
    keeps_names: ClassVar[bool] = False
    # Suffixes of files this format may take by content ahead of the format claiming the suffix
    # (the OD API's CSV among ``.csv`` index files): ``claims`` is asked first for these alone,
    # so every other file costs it nothing.
    claims_ahead: ClassVar[tuple[str, ...]] = ()
    # A layout any folder has (ImageFolder): read only where ``--from-folder`` names the folder;
    # a folder given as an input is a folder of index files unless a layout of its own claims it.
    any_folder: ClassVar[bool] = False
    # Rows read back by their number from the input itself (a table), many at a time: the plan
    # keeps no payload, and a worker asks ``rows_at`` for a block of its shard's rows at once.
    reads_tables: ClassVar[bool] = False
    # Its rows are read back from the columns planning staged (``plan.staged_rows``) whatever the
    # config: reading them again from the file (a CSV) means parsing all of it.
    stages_rows: ClassVar[bool] = False
    # Its rows' shuffle keys hash their identities (``FILE:LINE``), as when it was read row by row,
    # so a build's order did not change when it became a table; a Parquet row's key is arithmetic.
    keys_by_identity: ClassVar[bool] = False
    # Its table is read with ``read_blocks``, whose blocks Arrow cannot read exactly come back as
    # pieces to read with ``read_rows`` (a ``.jsonl``'s): those rows' plan lines keep a payload.
    reads_rows_where_unclean: ClassVar[bool] = False
    # Its files are written by other tools and people (annotation files, tables): the paths they
    # name must resolve inside the dataset's root (``root_of``; ``storage.boundary``). An index
    # file the user writes names any path.
    confines_paths: ClassVar[bool] = False

    def claims(self, path: str) -> bool:
        """Whether this format reads the file ``path``, told by its content (a COCO JSON among
        other ``.json`` files); asked only when no format claims the file's suffix, or first
        for the suffixes in ``claims_ahead``. ``path`` may name no file at all (a pattern, a
        folder, an output): then it is not this format's."""
        return False

    def claims_folder(self, root: str) -> bool:
        """Whether the folder ``root`` (an input, or a ``--from-folder`` ROOT) has this format's layout."""
        return False

    def folder_splits(self, root: str) -> list[tuple[str, Piece]]:
        """A folder this format claimed -> (split, the piece read as that split's source), in order."""
        raise NotImplementedError(f"{self.name} does not read folders")

    def file_splits(self, path: str) -> list[tuple[str, Piece]] | None:
        """A file of this format that names its own splits (YOLO's ``data.yaml``) -> (split, the
        piece read as that split's source), in order; None for a file that is one split's, told
        by its name (``split_name``)."""
        return None

    def split_name(self, path: str) -> str:
        """The split a file of this format belongs to, told by its name: ``train_3.txt`` ->
        ``train``; ``val.csv`` -> ``val``; ``test-0.jsonl`` -> ``test``."""
        return split_name(file_name(path))

    def folder_of(self, path: str) -> str:
        """What relative paths in the input resolve against, absolute: the folder it is in."""
        return location.dirname(location.absolute(path))

    def root_of(self, path: str, image_root: str | None) -> str:
        """The folder the paths the input ``path`` names must stay in (``confines_paths``): the
        ``--image-root`` where given, else the deepest folder holding both the input and the folder
        its relative paths resolve against (COCO's standard layout: the folder holding
        ``annotations/`` and ``val2017/``)."""
        return image_root or boundary.common_root(location.dirname(location.absolute(path)), self.folder_of(path))

    def default_config(self, path: str) -> Mapping[str, Any] | None:
        """The config (as YAML would give it) a build of the input ``path`` uses when none is
        given; None: inferred from the first row, as for index files."""
        return None

    def label_map(self, path: str) -> tuple[tuple[int, str], ...] | None:
        """The (id, class name) pairs the input ``path`` fixes for its objects, in id order
        (COCO's categories, YOLO's names); None where its rows name classes by text alone."""
        return None

    def record_ids(self, path: str) -> Iterator[Any] | None:
        """The ids the input ``path`` gives its records as their own (COCO's image ids, written as
        ``image/source_id``); None where its format has none. Two inputs of a split must not share one."""
        return None

    def unread_annotations(self, path: str, folder: str) -> str | None:
        """Why building the input ``path`` (its relative paths against ``folder``) with the
        config its first row suggests would leave annotations beside its files unread (YOLO
        labels beside a plain image list's images), as one line saying what to build instead;
        None where nothing is left. Asked once per input, where no config is given."""
        return None

    def described(self, row: Row) -> str:
        """What a build's fingerprint keeps of ``row`` where no one file's hash covers it (a row
        read from a folder, or from a file naming its own splits): its identity, by default."""
        return row.identity

    def cut(self, path: str, piece_bytes: int) -> list[Piece]:
        """The input as pieces of about ``piece_bytes``, for processes to plan side by side;
        one whole piece where the format cannot be cut."""
        return [Piece(path)]

    def read_rows(self, piece: Piece) -> Iterator[Row | EntryError]:
        """The data rows of ``piece``, streamed, with their line numbers. A malformed row is
        yielded as an ``EntryError`` rather than raised: the caller decides between stopping
        (``--on-error fail``) and recording it and going on (``skip``)."""
        raise NotImplementedError

    def plan_payload(self, row: Row) -> str:
        """The ``ROW`` field of ``row``'s plan line: here its values as a JSON list."""
        return json.dumps(list(row.values))

    def plan_row(self, source: str, names: tuple[str, ...] | None, line: int, payload: str) -> Row:
        """``plan_payload`` read back in a worker, with the source's kept names."""
        return Row(source, line, tuple(json.loads(payload)), names)

    def column_names(self, path: str) -> tuple[str, ...]:
        """A table's columns, as a config names them (``reads_tables``)."""
        raise NotImplementedError(f"{self.name} inputs are not tables")

    def read_tables(self, piece: Piece, columns: Sequence[str] | None) -> Iterator[Any]:
        """A table's rows as column batches (``TableBatch``) of ``columns`` (None: all), in order."""
        raise NotImplementedError(f"{self.name} inputs are not tables")

    def read_blocks(self, piece: Piece, types: Mapping[str, str]) -> Iterator[Any]:
        """A table's rows as column batches (``TableBatch``) of the columns ``types`` names, each read
        as its type, and pieces (``Piece``) to read with ``read_rows`` (``reads_rows_where_unclean``)."""
        raise NotImplementedError(f"{self.name} inputs are not read in blocks")

    def table_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> Any:
        """The rows numbered ``numbers``, in that order, as one column batch (``TableBatch``)."""
        raise NotImplementedError(f"{self.name} inputs are not tables")

    def rows_at(self, source: str, numbers: Sequence[int], columns: Sequence[str] | None) -> list[Row]:
        """The rows numbered ``numbers``, in that order, with the named ``columns`` (None: all):
        how a worker reads its rows back where the format ``reads_tables``."""
        raise NotImplementedError(f"{self.name} rows are read back from their plan lines")
