"""Inspect a share of a corpus directory's entries in a process of its own, so that an import of millions of
entries uses every core (the import runs in a job process, where a multiprocessing pool may not start).

    python -m conversion.inspector < {"directory": "...", "roots": ["..."], "names": ["...", ...]}

writes a JSON list with one object per name, in the same order: the fields of conversion.archive.Entry.
Standard library only, like the rest of `conversion`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from conversion.archive import inspect_entry


def inspect_names(directory: Path, names: list[str], roots: list[Path]) -> list[dict[str, str]]:
    """conversion.archive.inspect_entry for each of `names`, as dictionaries."""
    return [dataclasses.asdict(inspect_entry(directory / name, name, roots=roots)) for name in names]


def main() -> int:
    request = json.load(sys.stdin)
    entries = inspect_names(Path(request["directory"]), request["names"], [Path(root) for root in request["roots"]])
    json.dump(entries, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
