"""The demo corpus `up` loads on a first start holds what README.md says it holds: converted by real
latexmlc in the sandbox, under the demo service's profile (ops/stack.py), its documents end with no
problem, warnings, errors, a fatal error, and a time-out."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conversion.engine import Conversion, convert
from conversion.profiles import invocation, profile_parse
from ops import stack

EXPECTED = {  # document: (status code, timed out)
    "clean.tex": (0, False),
    "warnings.tex": (1, False),
    "errors.tex": (2, False),
    "fatal.tex": (3, False),
    "times_out.tex": (3, True),
}


def _convert(work: Path, name: str, timeout: float, memory_mb: int, options: tuple[str, ...]) -> Conversion:
    directory = work / Path(name).stem
    directory.mkdir()
    shutil.copy(stack.DEMO_SOURCE / name, directory / name)
    return convert(directory, name, timeout=timeout, memory_mb=memory_mb, extra_args=options)


def test_each_demo_document_ends_as_the_readme_says_and_the_endless_one_times_out_within_a_minute(tmp_path):
    profile = profile_parse(stack.DEMO_PROFILE, roots=[tmp_path])
    run = invocation(profile, roots=[tmp_path], timeout=300, memory_mb=2048)
    assert run.timeout <= 30  # the demo corpus shows its time-out within the first minute
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(_convert, tmp_path, name, run.timeout, run.memory_mb, run.options)
                   for name in EXPECTED}  # fmt: skip
        outcomes = {name: future.result() for name, future in futures.items()}
    for name, (status_code, timed_out) in EXPECTED.items():
        conversion = outcomes[name]
        assert (conversion.status_code, conversion.timed_out) == (status_code, timed_out), (
            name, conversion.log.decode(errors="replace")[-600:],
        )  # fmt: skip
    ended = outcomes["times_out.tex"]
    assert b"timeout" in ended.log.lower() and b"recursion" not in ended.log.lower()
    assert ended.runtime_ms >= run.timeout * 1000 * 0.9
