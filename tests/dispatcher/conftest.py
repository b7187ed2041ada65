"""Fixtures of the dispatcher tests."""

from __future__ import annotations

import pytest

from tests.dispatcher.harness import DispatcherProcess


@pytest.fixture
def dispatcher(tmp_path, corpus_root):
    started: list[DispatcherProcess] = []

    def start(**settings: str) -> DispatcherProcess:
        settings.setdefault("RESULTS_DIR", str(tmp_path / "results"))
        settings.setdefault("CORPUS_ROOTS", str(corpus_root))
        process = DispatcherProcess(**settings).start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
