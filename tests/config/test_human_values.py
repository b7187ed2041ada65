"""The screens' values for people (config.screens.human): units read off the key, never a Python repr."""

from __future__ import annotations

import pytest

from config.screens import duration, duration_ms, duration_text, human


@pytest.mark.parametrize(
    ("value", "key", "shown"),
    [
        (79258345472, "free_bytes", "73.8 GB"),
        (512, "min_free_bytes", "512 bytes"),
        (2048, "results.min_free_mb", "2.0 GB"),
        (77, "jobs.stall_seconds", "1 min 17 s"),
        (5, "reap_seconds", "5 s"),
        (10, "pool.timeout", "10 s"),
        (12.7, "p50_ms", "13 ms"),
        (142935.0, "p99_ms", "2 min 23 s"),
        (300, "timeout_seconds", "5 min"),
        (1234567, "documents", "1,234,567"),
        (51695, "dispatcher.ventilator_port", "51695"),
        (4194301, "pid", "4194301"),
        (True, "reachable", "yes"),
        (False, "", "no"),
        (None, "version", "—"),
        (["/srv/a", "/srv/b"], "directories.corpus_roots", "/srv/a, /srv/b"),
        ("15.20", "version", "15.20"),
    ],
)
def test_a_value_reads_with_the_unit_its_key_names(value, key, shown):
    assert human(value, key) == shown


def test_a_mapping_is_key_value_lines_each_read_with_its_own_key_and_escaped():
    shown = human({"tex_to_html": 1, "archive_bytes": 1024, "nested": {"ok": True}, "note": "<b>"})
    assert shown == (
        '<ul class="human"><li>tex_to_html: 1</li><li>archive_bytes: 1.0 KB</li>'
        '<li>nested: <ul class="human"><li>ok: yes</li></ul></li><li>note: &lt;b&gt;</li></ul>'
    )
    assert human({}) == "—" and human([]) == "—"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 ms"),
        (0.00042, "0.4 ms"),
        (0.0035, "3.5 ms"),
        (0.85, "850 ms"),
        (0.9996, "1 s"),
        (1, "1 s"),
        (12.34, "12.3 s"),
        (59.96, "1 min"),
        (142.935, "2 min 23 s"),
        (120, "2 min"),
        (3840, "1 h 4 min"),
        (7200, "2 h"),
        (93784, "1 d 2 h"),
        (-90, "-1 min 30 s"),
        (None, ""),
    ],
)
def test_a_duration_reads_in_at_most_two_units_as_people_read_it(seconds, shown):
    assert duration_text(seconds) == shown


def test_the_duration_filters_take_seconds_or_milliseconds_and_show_a_dash_for_none():
    assert duration(142.935) == duration_ms(142935.0) == duration_ms(142935) == "2 min 23 s"
    assert duration_ms(850) == "850 ms" and duration("4.5") == "4.5 s"
    assert duration(None) == duration_ms(None) == duration_ms("") == "—"
