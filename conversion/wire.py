"""CorTeX framing: a payload travels as frames of `message_size` bytes and ends at a shorter frame.

Existing CorTeX workers and dispatchers find the end of a payload by that short frame, not by the
ZeroMQ more-flag, so the framing must hold exactly: an exact multiple gets an empty last frame.

A CorTeX worker asks with one frame, `[service]`, and gets `[task_id, payload...]` (`["0", ""]`: no
work). Our worker asks with two, `[service, PROFILE_TAG]`, and gets the service's converter profile
(conversion.profiles, canonical JSON) in a frame of its own after the task id:
`[task_id, profile, payload...]`, and `["0", "", ""]` when there is no work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

DEFAULT_MESSAGE_SIZE = 100_000
# The first frame of a worker's heartbeat (conversion.worker.Heartbeat), sent to the ventilator with a JSON
# frame after it. A CorTeX request is one frame, the service name; no service is named this.
HEARTBEAT_TAG = b"cortex-heartbeat"
HEARTBEAT_MAX_BYTES = 64 * 1024
# The second frame of a request that wants the service's profile with its task.
PROFILE_TAG = b"cortex-profile"
NO_WORK = [b"0", b""]
NO_WORK_WITH_PROFILE = [b"0", b"", b""]


def split_frames(data: bytes, message_size: int = DEFAULT_MESSAGE_SIZE) -> list[bytes]:
    """Every frame but the last is exactly message_size bytes; when len(data) is an exact multiple
    (including 0) an empty last frame follows, so a reader ends at the first frame shorter than message_size."""
    if message_size < 1:
        raise ValueError("message_size must be positive")
    view = memoryview(data)
    frames = [bytes(view[start : start + message_size]) for start in range(0, len(data), message_size)]
    if not frames or len(frames[-1]) == message_size:
        frames.append(b"")
    return frames


def join_frames(frames: list[bytes]) -> bytes:
    """The payload carried by a list of frames (the inverse of split_frames)."""
    return b"".join(frames)


def payload_complete(frames: list[bytes], message_size: int) -> bool:
    """True once a frame shorter than message_size was seen: the sender has nothing more to add."""
    return any(len(frame) < message_size for frame in frames)


def heartbeat_encode(message: Mapping[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def heartbeat_decode(data: bytes) -> dict[str, Any]:
    """The heartbeat's JSON object (its values as the worker wrote them: the reader checks each); ValueError when
    it is too big, not JSON or not an object."""
    if len(data) > HEARTBEAT_MAX_BYTES:
        raise ValueError(f"a heartbeat of {len(data)} bytes passes {HEARTBEAT_MAX_BYTES}")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a heartbeat is a JSON object")
    return message
