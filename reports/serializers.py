"""DTOs of the reports app, the formats of the messages export, and a converted paper's files as served."""

from __future__ import annotations

import csv
import io
import json
import mimetypes
import re
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework import serializers

from config.api.fields import StrictCharField
from config.errors import BadRequest
from config.links import LinkField
from corpora.choices import RunControlAction
from corpora.queries.reports import CONTEXTS_MAX, EXPORT_CLASS_CACHE, EXPORT_COLUMNS, ExportTask, export_rows
from corpora.serializers import PairSerializer, StatusCountsSerializer
from reports.links import document_html_url, document_result_url


class RunControlSerializer(serializers.Serializer[object]):
    """The answer to pause or resume: which scope, and how many tasks were blocked or resumed."""

    corpus = serializers.CharField(allow_null=True)
    service = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=RunControlAction.values)
    blocked = serializers.IntegerField(required=False)
    resumed = serializers.IntegerField(required=False)


class PercentagesSerializer(serializers.Serializer[object]):
    todo = serializers.FloatField()
    queued = serializers.FloatField()
    no_problem = serializers.FloatField()
    warning = serializers.FloatField()
    error = serializers.FloatField()
    fatal = serializers.FloatField()
    blocked = serializers.FloatField()


class ServiceOverviewSerializer(PairSerializer):
    total = serializers.IntegerField()
    counts = StatusCountsSerializer()
    percentages = PercentagesSerializer(help_text="of all tasks but the invalid ones")
    run_in_progress = serializers.BooleanField()
    severities = serializers.ListField(child=serializers.CharField())
    infrastructure_fatal = serializers.IntegerField(
        help_text="fatal tasks the machine ended, not the converter (Fatal:infrastructure): part of counts.fatal"
    )


class MeaningFieldsMixin(serializers.Serializer[object]):
    """A message category's meaning at the report's severity (the specification's message taxonomy)."""

    meaning = serializers.CharField(
        allow_null=True, required=False, help_text="what the category means; null where the taxonomy does not say"
    )
    what_names = serializers.CharField(
        allow_null=True, required=False, help_text="what the category's whats name: a file name, a command name..."
    )


class ReportRowSerializer(MeaningFieldsMixin):
    """A category row (with its meaning) or a what row (without)."""

    name = serializers.CharField()
    tasks = serializers.IntegerField()
    messages = serializers.IntegerField()
    task_percent = serializers.FloatField()
    message_percent = serializers.FloatField()


class GrainReportSerializer(MeaningFieldsMixin):
    """A category report (one row per category) or, with `category` set, a what report (with the
    category's meaning)."""

    corpus = serializers.CharField()
    service = serializers.CharField()
    severity = serializers.CharField()
    category = serializers.CharField(required=False)
    computing = serializers.BooleanField(help_text="true while the rollup is built in the background")
    count = serializers.IntegerField(help_text="rows in all pages")
    tasks = serializers.IntegerField()
    messages = serializers.IntegerField()
    tasks_without_messages = serializers.IntegerField(allow_null=True)
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    rows = ReportRowSerializer(many=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """A category report has no `category` key (the DTO's is None)."""
        data = super().to_representation(instance)
        if data.get("category") is None:
            data.pop("category", None)
        return data


class EntrySerializer(serializers.Serializer[object]):
    document = serializers.CharField()
    status = serializers.CharField()
    details = serializers.CharField(allow_blank=True)


class EntryListSerializer(PairSerializer):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    entries = EntrySerializer(many=True)


class MessageSerializer(serializers.Serializer[object]):
    severity = serializers.CharField()
    category = serializers.CharField()
    what = serializers.CharField()
    details = serializers.CharField(allow_blank=True)


class SourceLineSerializer(serializers.Serializer[object]):
    """A line of the document's source (conversion.source_context.SourceLine), as plain text."""

    number = serializers.IntegerField(help_text="the line's number in its file, from 1")
    text = serializers.CharField(allow_blank=True, trim_whitespace=False, help_text="the line, or a window of it")
    offset = serializers.IntegerField(help_text="the column of text's first character: 0 unless a long line is cut")
    clipped = serializers.BooleanField(help_text="whether the line goes on after text")
    marked = serializers.BooleanField(help_text="whether the line is one of the message's")


class SourceContextSerializer(serializers.Serializer[object]):
    """The document's own source around a message's location (conversion.source_context.SourceContext)."""

    file = serializers.CharField(help_text="the file's path inside the document's entry")
    line = serializers.IntegerField()
    column = serializers.IntegerField(allow_null=True, help_text="characters of the line before the place")
    to_line = serializers.IntegerField(allow_null=True, help_text="a range's last line")
    to_column = serializers.IntegerField(allow_null=True)
    lines = SourceLineSerializer(many=True)


class LoggedMessageSerializer(MessageSerializer):
    # The stubs read a declared field as a class attribute, here one over Field.context; DRF's metaclass pops it.
    context = SourceContextSerializer(  # type: ignore[assignment]
        allow_null=True,
        help_text=f"the source lines around the message's location (at most {CONTEXTS_MAX} messages of a document"
        " have them, the worst first);"
        " null without a location, or where it is not in the document's own files",
    )


class ExplainedMessageSerializer(MessageSerializer, MeaningFieldsMixin):
    pass


class ExplanationSerializer(serializers.Serializer[object]):
    """A document's conversion in words (corpora.queries.reports.document_explanation)."""

    summary = serializers.CharField()
    causes = ExplainedMessageSerializer(many=True, help_text="the fatal messages, or else the first errors")
    missing_files = serializers.ListField(
        child=serializers.CharField(), help_text="files and packages that could not be loaded (missing_file whats)"
    )


class DocumentReportSerializer(PairSerializer):
    document = serializers.CharField()
    entry = serializers.CharField()
    explanation = ExplanationSerializer()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    runtime_ms = serializers.IntegerField(allow_null=True)
    messages = LoggedMessageSerializer(many=True)
    result_url = LinkField(
        lambda report: (
            document_result_url(report.corpus, report.service, report.document) if report.has_result else None
        ),
        allow_null=True,
        help_text="the stored result archive; null without one",
    )
    has_html = serializers.BooleanField(help_text="whether the stored result holds the converted paper's HTML")
    html_url = LinkField(
        lambda report: document_html_url(report.corpus, report.service, report.document) if report.has_html else None,
        allow_null=True,
        help_text="the converted HTML; null when there is none",
    )


class HistogramBucketSerializer(serializers.Serializer[object]):
    lt_ms = serializers.IntegerField(allow_null=True, help_text="upper bound (exclusive); null for the last")
    count = serializers.IntegerField()


class SlowConversionSerializer(serializers.Serializer[object]):
    corpus = serializers.CharField()
    document = serializers.CharField()
    runtime_ms = serializers.IntegerField()


class RuntimeReportSerializer(serializers.Serializer[object]):
    service = serializers.CharField()
    count = serializers.IntegerField()
    mean_ms = serializers.FloatField(allow_null=True)
    p50_ms = serializers.IntegerField(allow_null=True)
    p90_ms = serializers.IntegerField(allow_null=True)
    p99_ms = serializers.IntegerField(allow_null=True)
    max_ms = serializers.IntegerField(allow_null=True)
    histogram = HistogramBucketSerializer(many=True)
    offset = serializers.IntegerField()
    page_size = serializers.IntegerField()
    slowest = SlowConversionSerializer(many=True)


class RerunAckSerializer(PairSerializer):
    severity = serializers.CharField(allow_null=True)
    category = serializers.CharField(allow_null=True)
    what = serializers.CharField(allow_null=True)
    tasks = serializers.IntegerField(help_text="tasks set back to TODO")
    run_id = serializers.IntegerField()


class ScopeRefreshSerializer(PairSerializer):
    cleared_slices = serializers.IntegerField()


class RerunParamsSerializer(serializers.Serializer[object]):
    """The slice to rerun; an empty severity, category or what means not narrowed by it."""

    severity = StrictCharField(required=False, allow_blank=True, help_text="a severity key; empty or left out: all")
    category = StrictCharField(required=False, allow_blank=True, max_length=100)
    what = StrictCharField(required=False, allow_blank=True, max_length=200)
    description = StrictCharField(required=False, allow_blank=True, max_length=2000, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in attrs.items() if value != "" or key == "description"}


# --- messages as data ------------------------------------------------------------------------------

# Each format of the messages export: its media type and file extension.
EXPORT_FORMATS: dict[str, tuple[str, str]] = {
    "csv": ("text/csv; charset=utf-8", "csv"),
    "jsonl": ("application/x-ndjson", "jsonl"),
    "parquet": ("application/vnd.apache.parquet", "parquet"),
}
# Rows of one Parquet row group: the writer holds them as Arrow columns (about 200 bytes a message)
# until the group is written and sent.
PARQUET_ROW_GROUP = 100_000


class MessagesExportParamsSerializer(serializers.Serializer[object]):
    """The slice and format of a messages export; an empty severity, category or what means not narrowed."""

    severity = StrictCharField(
        required=False, allow_blank=True, help_text="a severity key; left out: every message of the pair, info included"
    )
    category = StrictCharField(required=False, allow_blank=True, max_length=100, help_text="needs severity")
    what = StrictCharField(required=False, allow_blank=True, max_length=200, help_text="needs category")
    format = StrictCharField(required=False, default="csv", help_text=f"one of {', '.join(EXPORT_FORMATS)}")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["format"] not in EXPORT_FORMATS:
            raise BadRequest(
                f"Unknown format {attrs['format']!r}; use one of {', '.join(EXPORT_FORMATS)}.",
                errors={"format": ["unknown"]},
            )
        return {key: value for key, value in attrs.items() if value != ""}


_NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._-]+")


def export_file_name(corpus: str, service: str, scope: list[str | None], format_name: str) -> str:
    """messages-<corpus>-<service>[-<severity>[-<category>[-<what>]]].<extension>, in safe characters."""
    words = [_NOT_IN_FILE_NAMES.sub("_", part).strip("._") for part in ("messages", corpus, service, *scope) if part]
    return "-".join(word for word in words if word)[:200] + "." + EXPORT_FORMATS[format_name][1]


def export_chunks(batches: Generator[list[ExportTask]], format_name: str) -> Iterator[bytes]:
    """The bytes of an export in a format, one or a few chunks per batch of tasks. Closing this generator
    closes `batches` at once (a client gone: its cursor and transaction end there), not whenever the
    garbage collector gets to it."""
    with closing(batches):
        if format_name == "csv":
            lines = CsvLines()
            yield lines.of([EXPORT_COLUMNS]).encode()
            for tasks in batches:
                yield lines.of_tasks(tasks).encode()
        elif format_name == "jsonl":
            for tasks in batches:
                yield "".join(
                    json.dumps(dict(zip(EXPORT_COLUMNS, row, strict=True)), ensure_ascii=False) + "\n"
                    for row in export_rows(tasks)
                ).encode()
        else:
            yield from _parquet_chunks(batches)


class CsvLines:
    """CSV lines exactly as csv.writer's default (excel) dialect writes them. The writer writes every field
    that needs quoting (one holding a comma, a quote or a line break); the others are joined as they are,
    a task's document, entry and status once for all its messages, each class's severity, category and
    what once for the whole export, and a task's details are searched for anything to quote in one pass.
    The writer on every field took 3.3 µs a message of 164 bytes, most of the export's time."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.writer = csv.writer(self.out)
        self.labels: dict[tuple[str, str, str], str] = {}

    @staticmethod
    def _plain(text: str) -> bool:
        return "," not in text and '"' not in text and "\n" not in text and "\r" not in text

    def _written(self, fields: Iterable[str]) -> str:
        """Fields as one line of the writer, without its line end."""
        self.writer.writerow(fields)
        line = self.out.getvalue()[:-2]
        self.out.seek(0)
        self.out.truncate()
        return line

    def _joined(self, fields: tuple[str, ...]) -> str:
        return ",".join(fields) if all(self._plain(field) for field in fields) else self._written(fields)

    def of(self, rows: Iterable[tuple[str, ...]]) -> str:
        """Rows of fields as lines."""
        return "".join(self._joined(row) + "\r\n" for row in rows)

    def of_tasks(self, tasks: list[ExportTask]) -> str:
        """The lines of tasks' messages (corpora.queries.reports.export_rows, the same rows in the same order)."""
        if len(self.labels) > EXPORT_CLASS_CACHE:
            self.labels.clear()
        known = self.labels.get
        lines: list[str] = []
        for name, entry, status, labels, sequence, details in tasks:
            task = self._joined((name, entry, status))
            heads = [(known(label) or self._label(label)) if label else None for label in labels]
            if not self._plain("\x00".join(details)):  # PostgreSQL's text holds no NUL
                details = [text if self._plain(text) else self._written((text,)) for text in details]
            lines += [
                f"{task},{head},{text}\r\n"
                for index, text in zip(sequence, details, strict=True)
                if (head := heads[index - 1])
            ]
        return "".join(lines)

    def _label(self, label: tuple[str, str, str]) -> str:
        text = self.labels[label] = self._joined(label)
        return text


class _Chunks(io.RawIOBase):
    """A write-only stream that keeps what is written until it is taken: the Parquet writer's sink."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        self.position += len(self.parts[-1])
        return len(self.parts[-1])

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        taken = b"".join(self.parts)
        self.parts.clear()
        return taken


def _parquet_chunks(batches: Iterable[list[ExportTask]]) -> Iterator[bytes]:
    """A Parquet file written a row group at a time into a sink that is emptied after each group."""
    import pyarrow as pa  # only the Parquet export needs it: the other processes do without its memory
    import pyarrow.parquet as pq

    schema = pa.schema([pa.field(name, pa.string(), nullable=False) for name in EXPORT_COLUMNS])
    sink = _Chunks()
    pending: list[Any] = []
    pending_rows = 0
    with pq.ParquetWriter(sink, schema) as writer:
        for tasks in batches:
            if rows := export_rows(tasks):
                columns = zip(*rows, strict=True)
                pending.append(pa.record_batch([pa.array(column, pa.string()) for column in columns], schema=schema))
                pending_rows += len(rows)
            if pending_rows >= PARQUET_ROW_GROUP:
                writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=pending_rows)
                pending, pending_rows = [], 0
                yield sink.take()
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=pending_rows)
    yield sink.take()


# --- a converted paper's files -------------------------------------------------------------------

# A paper's HTML is the author's, like its TeX: it may carry script, event handlers, forms, SVG with script.
# It and every member are served so that they show and cannot act
# (docs/decisions/reading-converted-papers.md): a sandbox without allow-scripts or allow-same-origin (no
# script, no form, no navigation of the page around it, and an opaque origin, which holds no cookie and is
# no origin of this site), loads from this site only and of images, style and fonts only, no <base> and no
# form target, framed by this site only; never sniffed into another type.
PAPER_POLICY = (
    "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)
PAPER_HEADERS = {
    "Content-Security-Policy": PAPER_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
}


def paper_file_response(chunks: Iterator[bytes], member: str) -> StreamingHttpResponse:
    """One member of a result archive as the screens and the API serve it: typed by its name (HTML as
    UTF-8, which LaTeXML writes), under PAPER_HEADERS."""
    content_type = mimetypes.guess_type(member)[0] or "application/octet-stream"
    if content_type == "text/html":
        content_type += "; charset=utf-8"
    response = StreamingHttpResponse(chunks, content_type=content_type)
    for header, value in PAPER_HEADERS.items():
        response[header] = value
    return response
