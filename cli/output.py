"""What ccs prints: the API's JSON as it came (--json), or tables for people, drawn from the body's
shape: a list of records is one table, a record is a table of its fields with a table for each list of
records inside it. Tables and progress go to stdout and stderr through Rich; JSON is written as the
server sent it, byte for byte."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)

CELL_MAX = 80  # characters of a nested value shown in a cell


def raw_json(content: bytes) -> None:
    """The response body exactly as the API sent it (it is JSON), with a final newline."""
    sys.stdout.buffer.write(content)
    if not content.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict) and all(not isinstance(item, (dict, list)) for item in value.values()):
        text = " ".join(f"{key}={_cell(item)}" for key, item in value.items())
    elif isinstance(value, list) and all(not isinstance(item, (dict, list)) for item in value):
        text = ", ".join(_cell(item) for item in value)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, (dict, list)):
        return text if len(text) <= CELL_MAX else text[: CELL_MAX - 1] + "…"
    return str(value)


def _records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def records_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str | None = None
) -> Table:
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(column)) for column in columns))
    return table


def _flatten(record: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A record's fields, nested records as dotted keys; lists of records are left to tables of their own."""
    fields: list[tuple[str, Any]] = []
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and len(value) <= 12:
            fields.extend(_flatten(value, f"{name}."))
        elif not _records(value):
            fields.append((name, value))
    return fields


def render(body: Any, columns: Sequence[str] | None = None) -> None:
    """Tables for people. `columns` narrows the main list of records to those named."""
    if body is None:
        out.print("nothing (null)")
        return
    if isinstance(body, list):
        if not body:
            out.print("none")
        elif _records(body):
            out.print(records_table(body, columns))
        else:
            for item in body:
                out.print(_cell(item))
        return
    if not isinstance(body, dict):
        out.print(_cell(body))
        return
    fields = _flatten(body)
    if fields:
        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in fields:
            table.add_row(key, _cell(value))
        out.print(table)
    for key, value in body.items():
        if _records(value):
            out.print()
            out.print(records_table(value, columns, title=key))
