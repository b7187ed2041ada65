"""The shape of real conversions' log messages, for data sets at arXiv's scale (issue #25).

The sample corpus (`../shared/corpora/sample`) is converted once, in the sandbox with the default limits,
two at a time, and what its logs hold is kept in `<BENCH_ROOT>/sample-shape.json`: per document its
task status and its messages (severity, category, what, details) in log order. `scaled_messages` then
makes any number of tasks in that shape with about `per_task` messages each:

- task i takes document i mod D as its template and scales its message count by per_task / the mean
  count, so the spread of messages per task is the sample's;
- the template's messages repeat in order: a repeat keeps the message's class (the class mix is the
  sample's, by messages and by tasks) and its details' length, with other numbers in the details
  (line and column numbers, as repeats of one message in a real log have).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

Message = tuple[str, str, str, str]  # severity, category, what, details

_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Shape:
    """Per sample document: its task status (-1 .. -5) and its messages in log order."""

    statuses: list[int]
    documents: list[list[Message]]

    @property
    def mean_messages(self) -> float:
        return sum(len(messages) for messages in self.documents) / len(self.documents)

    def summary(self) -> str:
        messages = [m for document in self.documents for m in document]
        classes = {m[:3] for m in messages}
        distinct = sum(len({m[:3] for m in document}) for document in self.documents) / len(self.documents)
        empty = sum(1 for m in messages if not m[3])
        details = sum(len(m[3]) for m in messages) / len(messages)
        return (
            f"{len(self.documents)} documents, {len(messages)} messages ({self.mean_messages:.1f} a task, "
            f"{distinct:.1f} distinct classes a task), {len(classes)} classes, details {details:.0f} characters "
            f"a message on average ({100 * empty / len(messages):.0f}% empty)"
        )


def _payload(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()


def _convert(directory: Path) -> tuple[int, list[Message]]:
    from conversion.logparse import parse_log
    from conversion.worker import convert_task

    converted = convert_task(_payload(directory), timeout=120)
    with zipfile.ZipFile(io.BytesIO(converted.result)) as archive:
        parsed = parse_log(archive.read("cortex.log"))
    return parsed.status, [tuple(message) for message in parsed.messages]


def sample_shape(sample: Path, cache: Path) -> Shape:
    """The shape of the sample's conversions, from `cache` or by converting the sample once (~1 min)."""
    if cache.exists():
        data = json.loads(cache.read_text())
        return Shape(data["statuses"], [[tuple(m) for m in document] for document in data["documents"]])
    directories = sorted(path for path in sample.iterdir() if path.is_dir())
    print(f"converting the {len(directories)} sample documents once for their message shape ...", flush=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        converted = list(pool.map(_convert, directories))
    shape = Shape([status for status, _ in converted], [messages for _, messages in converted])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"statuses": shape.statuses, "documents": shape.documents}))
    return shape


def _renumber(details: str, step: int) -> str:
    return _NUMBER.sub(lambda match: str(int(match.group()) + step)[: len(match.group()) + 1], details)


def scaled_messages(shape: Shape, task: int, per_task: float) -> tuple[int, list[Message]]:
    """Task `task`'s status and messages: its template's, scaled to about `per_task` a task on average."""
    index = task % len(shape.documents)
    template = shape.documents[index]
    if not template:
        return shape.statuses[index], []
    count = max(1, round(len(template) * per_task / shape.mean_messages))
    messages = []
    for position in range(count):
        severity, category, what, details = template[position % len(template)]
        repeat = position // len(template)
        if repeat and details:
            details = _renumber(details, repeat * 7 + task % 13)
        messages.append((severity, category, what, details))
    return shape.statuses[index], messages
