"""The geometry of every chart the screens draw: pure functions from typed inputs (frozen dataclasses) to the
positions and sizes of bars, stacked segments, cells and axis ticks, in SVG user units. Sizes are SVG attributes,
not styles, so the pages keep a strict Content-Security-Policy; the templates only draw what these return.

The apps' chart code turns its records into these inputs and adds what only it knows (the run or minute a bar
stands for, its label): runs/charts.py, reports/charts.py, ops/views.py's trend chart and
corpora/templatetags/statusbar.py's status bar."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Generic, TypeVar

LABELS = 8  # at most this many labels under a row of bars or cells
HEAT_LEVELS = 5  # shades of a heat map's non-empty cells
# A count axis: at most this many steps between round numbers, in a gutter left of the plot.
AXIS_STEPS = 4
AXIS_GUTTER = 48


@dataclass(frozen=True)
class Frame:
    """A chart's view box (`width` by `height`) and its plot: bars stand on the axis at `top + plot`, and the
    tallest is `plot` high."""

    width: int
    height: int
    top: int
    plot: int

    @property
    def axis_y(self) -> int:
        """Where the bars stand."""
        return self.top + self.plot

    @classmethod
    def of(cls, size: Mapping[str, int]) -> Frame:
        """The frame of a chart's size as its template reads it (a dict that may hold more keys)."""
        return cls(width=size["width"], height=size["height"], top=size["top"], plot=size["plot"])


@dataclass(frozen=True)
class Spacing:
    """Where a bar sits in its slot: its left edge `inset` and its width `fill`, as fractions of the slot's width;
    the width less `gap` units, and never below `narrowest`."""

    inset: float
    fill: float
    gap: float = 0
    narrowest: float = 0


@dataclass(frozen=True)
class Column:
    """A bar's or a cell's place across the chart: its left edge, width and centre, and whether it carries one of
    the labels under the row (every so many, so that at most LABELS show)."""

    x: float
    width: float
    center: float
    labelled: bool


@dataclass(frozen=True)
class Count:
    """A count in its slot (slots are numbered from 0 on the left; a slot without a count stays empty)."""

    slot: int
    count: int


@dataclass(frozen=True)
class Bar(Column):
    """A bar of a count: its top edge and height, scaled so that the chart's peak fills the plot."""

    count: int
    y: float
    height: float


@dataclass(frozen=True)
class Part:
    """One key's count in a stack (a status and its number of tasks)."""

    key: str
    count: int


@dataclass(frozen=True)
class Stack:
    """Counts stacked in the order of their parts, the first at the bottom (or on the left), out of `total`."""

    parts: tuple[Part, ...]
    total: int

    @classmethod
    def of(cls, tallies: Mapping[str, int | None], keys: Sequence[str]) -> Stack:
        """The stack of a tally's `keys`, in their order (a missing or empty key counts 0), out of its "total"."""
        return cls(parts=tuple(Part(key, tallies.get(key) or 0) for key in keys), total=tallies.get("total") or 0)


@dataclass(frozen=True)
class Segment(Part):
    """A part of a stacked bar: its top edge and height."""

    y: float
    height: float


@dataclass(frozen=True)
class StackedBar(Column):
    segments: tuple[Segment, ...]  # the non-empty parts, bottom first


Drawn = TypeVar("Drawn", Bar, StackedBar)


@dataclass(frozen=True)
class Chart(Generic[Drawn]):
    bars: tuple[Drawn, ...]
    peak: int  # the count (or a stack's total) a full-height bar stands for


@dataclass(frozen=True)
class Share(Part):
    """A part of a one-line bar whose unit is one count: its offset from the left, and its share of the total."""

    x: int
    percent: int

    @property
    def label(self) -> str:
        """The key in words."""
        return self.key.replace("_", " ")


@dataclass(frozen=True)
class ShareBar:
    width: int  # the sum of the counts (at least 1), the view box's width
    segments: tuple[Share, ...]  # the non-empty parts, left first


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class CountAxis:
    """A count axis left of a plot: its ticks, the view box widened by a gutter for their labels (the bars keep
    their coordinates), the plot's top, and the axis's title turned upright along it at (`label_x`, `label_y`)."""

    ticks: tuple[Tick, ...]
    view_box: str
    top: int
    label: str
    label_x: float
    label_y: int


def _slot(count: int, width: float, widest: float | None) -> float:
    """The width of each of `count` equal slots across `width`, at most `widest`."""
    slot = width / max(count, 1)
    return slot if widest is None else min(slot, widest)


def _column(index: int, slot: float, spacing: Spacing, every: int) -> Column:
    return Column(
        x=round(index * slot + slot * spacing.inset, 2),
        width=round(max(slot * spacing.fill - spacing.gap, spacing.narrowest), 2),
        center=round(index * slot + slot / 2, 2),
        labelled=index % every == 0,
    )


def _every(count: int) -> int:
    """Every how many slots a label shows, so that at most LABELS do."""
    return math.ceil(count / LABELS) or 1


def columns(count: int, width: float, spacing: Spacing, widest: float | None = None) -> tuple[Column, ...]:
    """`count` bars or cells in equal slots across `width` (each slot at most `widest`), the first on the left."""
    slot, every = _slot(count, width, widest), _every(count)
    return tuple(_column(index, slot, spacing, every) for index in range(count))


def bar_chart(counts: Sequence[Count], slots: int, frame: Frame, spacing: Spacing) -> Chart[Bar]:
    """A bar per count in its slot, out of `slots` equal slots across the frame; the largest count fills the
    plot (a chart of no count, or of zeros, is scaled as if it were 1)."""
    peak = max((count.count for count in counts), default=0) or 1
    slot, every = _slot(slots, frame.width, None), _every(slots)
    bars = []
    for count in counts:
        height = frame.plot * count.count / peak
        column = _column(count.slot, slot, spacing, every)
        bars.append(
            Bar(**asdict(column), count=count.count, y=round(frame.axis_y - height, 2), height=round(height, 2))
        )
    return Chart(bars=tuple(bars), peak=peak)


def stacked_chart(
    stacks: Sequence[Stack], frame: Frame, spacing: Spacing, widest: float | None = None
) -> Chart[StackedBar]:
    """A stacked bar per stack, the first on the left, each slot at most `widest`; the largest total fills the plot."""
    peak = max((stack.total for stack in stacks), default=0) or 1
    bars = []
    for column, stack in zip(columns(len(stacks), frame.width, spacing, widest), stacks, strict=True):
        top: float = frame.axis_y
        segments = []
        for part in stack.parts:
            if part.count:
                height = frame.plot * part.count / peak
                top -= height
                segments.append(Segment(key=part.key, count=part.count, y=round(top, 2), height=round(height, 2)))
        bars.append(StackedBar(**asdict(column), segments=tuple(segments)))
    return Chart(bars=tuple(bars), peak=peak)


def share_bar(stack: Stack) -> ShareBar:
    """A one-line bar of the stack's non-empty parts, one unit per count, each with its share of the total in
    percent (0 when the total is 0)."""
    segments, offset = [], 0
    for part in stack.parts:
        if part.count:
            percent = round(100 * part.count / stack.total) if stack.total else 0
            segments.append(Share(key=part.key, count=part.count, x=offset, percent=percent))
            offset += part.count
    return ShareBar(width=max(offset, 1), segments=tuple(segments))


def count_axis(peak: int, frame: Frame, label: str) -> CountAxis:
    """The count axis of a chart whose tallest bar (`peak`) fills the frame's plot: ticks at round numbers from 0
    up to the peak, each at its height."""
    peak = max(peak, 1)
    raw = peak / AXIS_STEPS
    magnitude = 10 ** math.floor(math.log10(raw))
    step = max(1, math.ceil(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)))
    ticks = tuple(Tick(value, round(frame.axis_y - frame.plot * value / peak, 2)) for value in range(0, peak + 1, step))
    return CountAxis(
        ticks=ticks,
        view_box=f"{-AXIS_GUTTER} 0 {frame.width + AXIS_GUTTER} {frame.height}",
        top=frame.top,
        label=label,
        # rotate(-90) maps (x, y) to (y, -x): the title's centre sits at the plot's mid-height, near the left edge.
        label_x=-round(frame.axis_y - frame.plot / 2, 2),
        label_y=-AXIS_GUTTER + 12,
    )


def heat_level(count: int, peak: int) -> int:
    """0 for an empty cell, else 1..HEAT_LEVELS on a log scale up to the largest cell (`peak`)."""
    if count == 0:
        return 0
    if peak <= 1:
        return HEAT_LEVELS
    return 1 + round((HEAT_LEVELS - 1) * math.log(count) / math.log(peak))
