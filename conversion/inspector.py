"""Inspect a share of a corpus directory's entries in a process of its own, so that an import of millions of
entries uses every core (the import runs in a job process, where a multiprocessing pool may not start).

    python -m conversion.inspector < {"directory": "...", "roots": ["..."], "names": ["...", ...]}

writes a JSON list with one list per name, in the same order: the fields of conversion.archive.Entry
(FIELDS).
Standard library only, like the rest of `conversion`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from conversion.archive import Entry, inspect_entry

# The fields of an Entry, in the order each inspected entry is written as a list.
FIELDS = tuple(field.name for field in dataclasses.fields(Entry))


def inspect_names(directory: Path, names: list[str], roots: list[Path]) -> list[list[str]]:
    """conversion.archive.inspect_entry for each of `names`, each as the list of its FIELDS."""
    found = []
    for name in names:
        entry = inspect_entry(directory / name, name, roots=roots)
        found.append([getattr(entry, field) for field in FIELDS])
    return found


def main() -> int:
    request = json.load(sys.stdin)
    entries = inspect_names(Path(request["directory"]), request["names"], [Path(root) for root in request["roots"]])
    json.dump(entries, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
