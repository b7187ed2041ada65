"""The screens' values for people (config.screens.human): units read off the key, never a Python repr."""

from __future__ import annotations

import pytest

from config.screens import human


@pytest.mark.parametrize(
    ("value", "key", "shown"),
    [
        (79258345472, "free_bytes", "73.8 GB"),
        (512, "min_free_bytes", "512 bytes"),
        (2048, "results.min_free_mb", "2.0 GB"),
        (77, "jobs.stall_seconds", "1 min 17 s"),
        (5, "reap_seconds", "5 s"),
        (10, "pool.timeout", "10 s"),
        (12.5, "p50_ms", "12.5 ms"),
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
