"""The chart geometry every screen draws with (config.charts): pure functions of typed inputs, no database."""

from __future__ import annotations

import pytest

from config.charts import (
    AXIS_GUTTER,
    HEAT_LEVELS,
    LABELS,
    Count,
    Frame,
    Part,
    Spacing,
    Stack,
    bar_chart,
    columns,
    count_axis,
    heat_level,
    share_bar,
    stacked_chart,
)

FRAME = Frame(width=100, height=60, top=10, plot=40)


def test_a_frame_reads_a_template_size_and_stands_its_bars_at_the_bottom_of_its_plot():
    frame = Frame.of({"width": 100, "height": 60, "top": 10, "plot": 40, "axis_y": 50, "label_y": 58})
    assert frame == FRAME
    assert frame.axis_y == 50


def test_columns_share_the_width_in_equal_slots_no_wider_than_the_widest():
    first, second = columns(2, 100, Spacing(inset=0.1, fill=0.8))
    assert (first.x, first.width, first.center) == (5, 40, 25)
    assert (second.x, second.center) == (55, 75)
    (alone,) = columns(1, 100, Spacing(inset=0, fill=1, gap=2), widest=30)
    assert (alone.x, alone.width, alone.center) == (0, 28, 15)
    assert type(alone.width) is int  # a slot of whole units keeps whole sizes (the templates print them)
    assert columns(0, 100, Spacing(inset=0, fill=1)) == ()


def test_at_most_so_many_columns_are_labelled_the_first_among_them():
    for count in (1, LABELS, LABELS + 1, 10 * LABELS + 3):
        labelled = [index for index, column in enumerate(columns(count, 100, Spacing(0, 1))) if column.labelled]
        assert labelled[0] == 0 and len(labelled) <= LABELS


def test_a_bar_chart_leaves_slots_without_counts_empty_and_fills_the_plot_with_the_peak():
    chart = bar_chart([Count(0, 2), Count(3, 4)], 4, FRAME, Spacing(inset=0.1, fill=0.8, narrowest=0.5))
    low, high = chart.bars
    assert chart.peak == 4
    assert (low.x, high.x) == (2.5, 77.5)
    assert (high.y, high.height) == (FRAME.top, FRAME.plot)
    assert (low.y, low.height) == (30, 20) and low.y + low.height == FRAME.axis_y
    assert high.count == 4
    narrow = bar_chart([Count(0, 1)], 1000, FRAME, Spacing(inset=0.1, fill=0.8, narrowest=0.5))
    assert narrow.bars[0].width == 0.5


def test_a_bar_chart_of_zeros_or_of_nothing_is_flat_and_scaled_as_if_its_peak_were_one():
    assert bar_chart([], 3, FRAME, Spacing(0.1, 0.8)).peak == 1
    flat = bar_chart([Count(0, 0), Count(1, 0)], 2, FRAME, Spacing(0.1, 0.8))
    assert [bar.height for bar in flat.bars] == [0, 0]


def test_a_stacked_chart_stacks_the_first_part_at_the_bottom_skips_empty_parts_and_scales_to_the_largest_total():
    small = Stack(parts=(Part("ok", 1), Part("none", 0), Part("bad", 1)), total=2)
    large = Stack(parts=(Part("ok", 4),), total=4)
    chart = stacked_chart([small, large], FRAME, Spacing(inset=0.15, fill=0.7))
    assert chart.peak == 4
    bottom, top = chart.bars[0].segments
    assert (bottom.key, bottom.y, bottom.height) == ("ok", 40, 10)
    assert (top.key, top.y, top.height) == ("bad", 30, 10)
    (full,) = chart.bars[1].segments
    assert (full.y, full.height) == (FRAME.top, FRAME.plot)
    assert stacked_chart([], FRAME, Spacing(0.15, 0.7)).bars == ()


def test_a_stacked_chart_keeps_its_slots_no_wider_than_the_widest():
    chart = stacked_chart([Stack((Part("ok", 1),), 1)], FRAME, Spacing(inset=0.15, fill=0.7), widest=20)
    assert (chart.bars[0].x, chart.bars[0].width, chart.bars[0].center) == (3, 14, 10)


def test_a_stack_of_tallies_takes_the_keys_in_their_order_and_counts_a_missing_one_as_zero():
    stack = Stack.of({"error": 2, "no_problem": 5, "todo": None, "total": 7}, ("no_problem", "error", "todo", "queued"))
    assert stack == Stack(
        parts=(Part("no_problem", 5), Part("error", 2), Part("todo", 0), Part("queued", 0)),
        total=7,
    )
    assert Stack.of({}, ("no_problem",)).total == 0


def test_a_share_bar_lays_the_non_empty_parts_end_to_end_one_unit_per_count_with_their_shares():
    bar = share_bar(Stack(parts=(Part("no_problem", 3), Part("todo", 0), Part("fatal", 1)), total=4))
    assert bar.width == 4
    assert [(share.key, share.x, share.count, share.percent) for share in bar.segments] == [
        ("no_problem", 0, 3, 75),
        ("fatal", 3, 1, 25),
    ]
    assert bar.segments[0].label == "no problem"
    empty = share_bar(Stack(parts=(Part("todo", 0),), total=0))
    assert (empty.width, empty.segments) == (1, ())


def test_a_share_of_a_zero_total_is_zero_percent():
    (share,) = share_bar(Stack(parts=(Part("todo", 2),), total=0)).segments
    assert share.percent == 0


@pytest.mark.parametrize(
    ("peak", "values"),
    [(0, [0, 1]), (1, [0, 1]), (3, [0, 1, 2, 3]), (37, [0, 10, 20, 30]), (5000, [0, 2000, 4000])],
)
def test_a_count_axis_ticks_round_numbers_from_zero_to_the_peak(peak, values):
    assert [tick.value for tick in count_axis(peak, FRAME, "tasks").ticks] == values


def test_a_count_axis_puts_each_tick_at_its_height_and_widens_the_view_box_for_its_labels():
    axis = count_axis(40, FRAME, "tasks")
    assert [(tick.value, tick.y) for tick in axis.ticks] == [(0, 50), (10, 40), (20, 30), (30, 20), (40, 10)]
    assert axis.view_box == f"-{AXIS_GUTTER} 0 {100 + AXIS_GUTTER} 60"
    assert axis.top == FRAME.top and axis.label == "tasks"
    assert axis.label_x == -30  # the plot's mid-height, turned upright


def test_heat_levels_rise_with_the_count_from_one_to_the_top_level_at_the_peak_and_zero_only_when_empty():
    for peak in (1, 2, 7, 1000):
        levels = [heat_level(count, peak) for count in range(peak + 1)]
        assert levels[0] == 0 and levels[-1] == HEAT_LEVELS
        assert all(1 <= level <= HEAT_LEVELS for level in levels[1:])
        assert levels == sorted(levels)
