from __future__ import annotations

import pytest

from conversion.wire import DEFAULT_MESSAGE_SIZE, join_frames, payload_complete, split_frames


def test_an_empty_payload_is_one_empty_frame():
    assert split_frames(b"", 10) == [b""]


def test_a_payload_shorter_than_the_message_size_is_one_short_frame():
    assert split_frames(b"abc", 10) == [b"abc"]


def test_an_exact_multiple_is_followed_by_an_empty_frame():
    assert split_frames(b"a" * 20, 10) == [b"a" * 10, b"a" * 10, b""]


def test_a_multiple_plus_one_ends_with_a_one_byte_frame():
    frames = split_frames(b"a" * 20 + b"z", 10)
    assert frames == [b"a" * 10, b"a" * 10, b"z"]


def test_every_frame_but_the_last_is_exactly_message_size():
    frames = split_frames(bytes(range(256)) * 40, 1000)
    assert [len(frame) for frame in frames[:-1]] == [1000] * 10
    assert len(frames[-1]) == 240


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 5000, 12345])
def test_splitting_then_joining_gives_the_payload_back(size):
    data = bytes(index % 251 for index in range(size))
    frames = split_frames(data, 1000)
    assert join_frames(frames) == data
    assert payload_complete(frames, 1000)
    # Only the last frame is short: a reader stops exactly at the end.
    assert not payload_complete(frames[:-1], 1000)


def test_the_default_message_size_is_cortex_s():
    assert DEFAULT_MESSAGE_SIZE == 100_000
    assert [len(frame) for frame in split_frames(b"x" * 100_000)] == [100_000, 0]


def test_a_frame_list_without_a_short_frame_is_incomplete():
    assert not payload_complete([], 10)
    assert not payload_complete([b"a" * 10], 10)
    assert payload_complete([b"a" * 10, b""], 10)


def test_a_non_positive_message_size_is_refused():
    with pytest.raises(ValueError, match="message_size"):
        split_frames(b"abc", 0)
