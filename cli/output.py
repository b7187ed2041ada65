"""What ccs prints: the API's JSON as it came (--json), or screens for people drawn from a layout of the
command (cli/layouts.py): a record's chosen fields as `key  value` lines, and a table for each list of
records, a few columns chosen for a person, names first, long text cut with an ellipsis so that every
line fits the terminal (COLUMNS, 80 without a terminal). Links are full URLs on the server's base URL.
Tables and progress go to stdout and stderr through Rich; JSON is written as the server sent it, byte
for byte. A body without a layout (a write's answer) is drawn from its shape, to the same width."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)

# What a column or field holds, which says how it is written and, when the line is too long, how it gives
# way: TEXT first (cut with an ellipsis), then NAME, then the others; LINK and PROSE wrap instead.
NAME, NUM, TEXT, TIME, LINK, PROSE, DURATION = "name", "num", "text", "time", "link", "prose", "duration"
SHRINK_ORDER = (TEXT, NAME, TIME, DURATION)
FLOOR = {TEXT: 8, NAME: 6, TIME: 11, DURATION: 5}  # the narrowest a column is cut to
GAP = 2  # characters between two columns
CELL_MAX = 80  # characters of a nested value shown in a cell without a layout


@dataclass(frozen=True)
class Col:
    """A column of a table, or a field of a record: its header and what it shows, a dotted key of the
    record or a function of it."""

    header: str
    value: str | Callable[[dict[str, Any]], Any]
    kind: str = NAME

    def of(self, record: dict[str, Any]) -> Any:
        return self.value(record) if callable(self.value) else dig(record, self.value)


@dataclass(frozen=True)
class Rows:
    """A table: the records at `rows` of the body (a dotted key or a function of the body; None: the body
    is the list), in `columns`. `links` are (label, key, by): each record's link at `key`, printed under
    the table once as a pattern over the field `by` when every record's link follows it (else a column)."""

    title: str | None
    rows: str | Callable[[Any], list[dict[str, Any]]] | None
    columns: tuple[Col, ...]
    links: tuple[tuple[str, str, str], ...] = ()
    empty: str = "none"


@dataclass(frozen=True)
class Layout:
    """What a read shows: fields of the record, then tables; `null` is what a null body says."""

    fields: tuple[Col, ...] = ()
    tables: tuple[Rows, ...] = ()
    null: str = "nothing (null)"


def dig(record: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(record, dict):
            return None
        record = record.get(part)
    return record


def absolute(base: str, link: Any) -> Any:
    """A link of the API (a path from the root) as a full URL on the server's base URL."""
    if isinstance(link, str) and link.startswith("/"):
        return base.rstrip("/") + link
    return link


def when(value: Any, seconds: bool = True) -> str:
    """An API timestamp in this machine's time zone: 2026-05-04 13:02:11; in a table without seconds, and
    without the year when it is this year's (05-04 13:02)."""
    try:
        moment = datetime.fromisoformat(str(value)).astimezone()
    except ValueError:
        return str(value)
    if seconds:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.year == datetime.now().astimezone().year:
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%Y-%m-%d")


def duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return str(seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    return f"{hours // 24}d {hours % 24:02d}h"


def number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def cell(value: Any, kind: str = NAME, base: str = "", seconds: bool = True) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if kind == LINK:
        return str(absolute(base, value))
    if kind == TIME:
        return when(value, seconds)
    if kind == DURATION:
        return duration(value)
    if kind == NUM:
        return number(value)
    if isinstance(value, list):
        return ", ".join(cell(item) for item in value)
    if isinstance(value, dict):
        return " ".join(f"{key}={cell(item)}" for key, item in value.items())
    return str(value)


def raw_json(content: bytes) -> None:
    """The response body exactly as the API sent it (it is JSON), with a final newline."""
    sys.stdout.buffer.write(content)
    if not content.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()


def fitted(kinds: Sequence[str], natural: Sequence[int], width: int) -> list[int]:
    """Column widths whose sum with the gaps fits `width`: the widest TEXT column gives a character at a
    time, then NAME, TIME and DURATION columns, each down to its floor."""
    widths = list(natural)
    excess = sum(widths) + GAP * (len(widths) - 1) - width
    for kind in SHRINK_ORDER:
        while excess > 0:
            candidates = [i for i, k in enumerate(kinds) if k == kind and widths[i] > FLOOR[kind]]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return widths


def table(headers: Sequence[str], kinds: Sequence[str], rows: Sequence[Sequence[str]], title: str | None) -> Table:
    width = out.width
    natural = [max([len(header), *(len(row[i]) for row in rows)]) for i, header in enumerate(headers)]
    # Links and prose wrap: they take what the other columns leave, at least a third of the line.
    fixed = [n for n, k in zip(natural, kinds, strict=True) if k not in (LINK, PROSE)]
    wrapping = [i for i, k in enumerate(kinds) if k in (LINK, PROSE)]
    room = width - GAP * (len(headers) - 1)
    if wrapping:
        share = max(width // 3, (room - sum(fixed)) // len(wrapping))
        for i in wrapping:
            natural[i] = min(natural[i], share)
    widths = fitted(kinds, natural, width)
    grid = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
        padding=(0, 1), collapse_padding=True, expand=False,
    )  # fmt: skip
    for header, kind, size in zip(headers, kinds, widths, strict=True):
        wraps = kind in (LINK, PROSE)
        grid.add_column(
            header, justify="right" if kind == NUM else "left", no_wrap=not wraps,
            overflow="fold" if wraps else "ellipsis", max_width=size, min_width=min(size, len(header)),
        )  # fmt: skip
    for row in rows:
        grid.add_row(*row)
    return grid


def fields_table(pairs: Sequence[tuple[str, str, str]]) -> Table:
    """`key  value` lines; a value too long is cut with an ellipsis, a link or prose wraps."""
    key_width = max(len(key) for key, _, _ in pairs)
    room = max(out.width - key_width - 2, 10)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(max_width=room, overflow="fold")  # a link longer than the room folds onto the next line
    for key, value, kind in pairs:
        wraps = kind in (LINK, PROSE)
        shown = value
        if not wraps and len(value) > room:
            shown = value[: room - 1] + "…"
        grid.add_row(key, shown if wraps else shown.replace("\n", " "))
    return grid


def _records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _rows_of(spec: Rows, body: Any) -> list[dict[str, Any]]:
    if spec.rows is None:
        found = body
    elif callable(spec.rows):
        found = spec.rows(body)
    else:
        found = dig(body, spec.rows)
    return [row for row in (found or []) if isinstance(row, dict)]


def _pattern(rows: list[dict[str, Any]], key: str, by: str) -> tuple[str, str] | None:
    """The (prefix, suffix) every row's link at `key` is made of around its `by` field, or None."""
    from urllib.parse import quote

    first = rows[0].get(key)
    name = quote(str(rows[0].get(by)), safe="")
    if not isinstance(first, str) or name not in first:
        return None
    prefix, _, suffix = first.rpartition(name)
    for row in rows:
        if row.get(key) != f"{prefix}{quote(str(row.get(by)), safe='')}{suffix}":
            return None
    return prefix, suffix


def rows_print(spec: Rows, body: Any, base: str, gap: bool = False) -> None:
    """The table of `spec`, after an empty line when `gap` (something is above it)."""
    rows = _rows_of(spec, body)
    if gap:
        out.print()
    if not rows:
        out.print(f"{spec.title}: {spec.empty}" if spec.title else spec.empty, markup=False)
        return
    columns = list(spec.columns)
    footers = []
    for label, key, by in spec.links:
        present = [row for row in rows if row.get(key)]
        found = _pattern(present, key, by) if present else None
        if found:
            footers.append(f"{label}: {absolute(base, found[0])}<{by}>{found[1]}")
        elif present:
            columns.append(Col(label, key, LINK))
    kinds = [column.kind for column in columns]
    cells = [[cell(column.of(row), column.kind, base, seconds=False) for column in columns] for row in rows]
    out.print(table([column.header for column in columns], kinds, cells, spec.title))
    for footer in footers:
        out.print(footer, markup=False)


def render_layout(body: Any, layout: Layout, base: str, preface: Sequence[tuple[str, str, str]] = ()) -> None:
    if body is None:
        for key, value, _ in preface:
            out.print(f"{key}  {value}", markup=False)
        out.print(layout.null, markup=False)
        return
    pairs = list(preface)
    if isinstance(body, dict):
        pairs += [(f.header, cell(f.of(body), f.kind, base), f.kind) for f in layout.fields]
    if pairs:
        out.print(fields_table(pairs))
    for number, spec in enumerate(layout.tables):
        rows_print(spec, body, base, gap=bool(pairs) or number > 0)


def render(
    body: Any,
    layout: Layout | Callable[[Any], Layout] | None = None,
    base: str = "",
    preface: Sequence[tuple[str, str, str]] = (),
) -> None:
    """Screens for people: the command's layout (a function of the body when the body's shape says which),
    or without one the body's own shape."""
    if layout is not None:
        render_layout(body, layout(body) if callable(layout) else layout, base, preface)
        return
    if body is None:
        out.print("nothing (null)")
        return
    if isinstance(body, list):
        if not body:
            out.print("none")
        elif _records(body):
            rows_print(Rows(None, None, _shape_columns(body)), body, base)
        else:
            for item in body:
                out.print(cell(item), markup=False)
        return
    if not isinstance(body, dict):
        out.print(cell(body), markup=False)
        return
    pairs = [(key, cell(_nested(value), _kind(key), base), TEXT) for key, value in body.items() if not _records(value)]
    if pairs:
        out.print(fields_table(pairs))
    for key, value in body.items():
        if _records(value):
            rows_print(Rows(key, key, _shape_columns(value)), body, base, gap=True)


def _kind(key: str) -> str:
    """A field of the API that holds a link (`url`, `html`, `…_url`), printed as a full URL; else text."""
    return LINK if key in ("url", "html") or key.endswith("_url") else TEXT


def _shape_columns(rows: list[dict[str, Any]]) -> tuple[Col, ...]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return tuple(Col(key, _field_of(key), _kind(key)) for key in seen)


def _field_of(key: str) -> Callable[[dict[str, Any]], Any]:
    """What a shaped column shows of a row: its field `key`, nested values in one line."""
    return lambda row: _nested(row.get(key))


def _nested(value: Any) -> Any:
    if isinstance(value, (dict, list)) and any(isinstance(item, (dict, list)) for item in _items(value)):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return text if len(text) <= CELL_MAX else text[: CELL_MAX - 1] + "…"
    return value


def _items(value: dict[str, Any] | list[Any]) -> list[Any]:
    return list(value.values()) if isinstance(value, dict) else list(value)
