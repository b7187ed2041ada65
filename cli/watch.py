"""Following a run to its close: GET /api/runs/{corpus}/{service}/current polled (the open run with its live
tallies and the server's ETA, runs/serializers.py), drawn on stderr as a Rich progress bar on a terminal
and as a plain line at most every PLAIN_SECONDS elsewhere: done of total, failures, rate and ETA. When the
run is no longer open, the closed run comes from the pair's runs, and its new failures from the diff of
its snapshot with the one before (GET .../diff?current=): documents that went to error, fatal or invalid
from a better status. `ccs watch`, and --wait on activate and rerun, end here."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cli.client import Client, CliError
from cli.layouts import FAILED, done_of, tallies_words
from cli.output import duration, err, out
from cli.spec import segment

EXIT_NEW_FAILURES = 3  # the run closed with new failures and they were asked to fail the command
PLAIN_SECONDS = 5.0  # at most one plain progress line this often when stderr is not a terminal
RATE_WINDOW_SECONDS = 60.0  # the rate ccs measures itself, when the server has none yet: over this long
RUNS_LOOKED_AT = 20  # the pair's latest runs searched for the run that closed


class RateMeter:
    """Tasks per second as ccs saw them done, over the last RATE_WINDOW_SECONDS."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, done: int, now: float) -> float | None:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()
        (start, first), (end, last) = self.samples[0], self.samples[-1]
        if end <= start or last <= first:
            return None
        return (last - first) / (end - start)


def progress_words(run: dict[str, Any], rate: float | None) -> tuple[str, str, str]:
    """The run's failures, rate and ETA in words, the server's rate first, else the one measured here."""
    tallies = run.get("tallies") or {}
    eta = run.get("eta") or {}
    failed = sum(tallies.get(key, 0) for key in FAILED)
    extra = [f"{failed:,} failed"]
    if tallies.get("blocked"):
        extra.append(f"{tallies['blocked']:,} paused")
    if eta.get("rate_per_minute") is not None:
        rate = eta["rate_per_minute"] / 60
    remaining = eta.get("remaining", tallies.get("in_progress", 0))
    rate_words = f"{rate:.3g} tasks/s" if rate else "rate -"
    if eta.get("stalled"):
        eta_words = f"ETA - (stalled: {eta['stalled']})"
    elif remaining == 0:
        eta_words = "ETA 0 s"
    elif rate:
        eta_words = f"ETA {duration(remaining / rate)}"
    else:
        eta_words = "ETA -"
    return ", ".join(extra), rate_words, eta_words


class Display:
    """The progress of one run: a bar on a terminal, else plain lines, both on stderr."""

    def __init__(self, pair: str) -> None:
        self.pair = pair
        self.meter = RateMeter()
        self.live = err.is_terminal
        self.last_line = 0.0
        self.last_done: int | None = None
        self.progress: Progress | None = None
        self.bar: Any = None

    def __enter__(self) -> Display:
        if self.live:
            columns = (
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}, {task.fields[rate]}, {task.fields[eta]}"), TimeElapsedColumn(),
            )  # fmt: skip
            self.progress = Progress(*columns, console=err, transient=False)
            self.progress.__enter__()
            self.bar = self.progress.add_task(self.pair, total=None, failed="", rate="", eta="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)

    def show(self, run: dict[str, Any], last: bool = False) -> None:
        done, total = done_of(run.get("tallies"))
        now = time.monotonic()
        failed, rate, eta = progress_words(run, self.meter.add(done, now))
        if self.progress is not None:
            description = f"{self.pair} run #{run['id']}"
            self.progress.update(self.bar, description=description, total=total or None, completed=done,
                                 failed=failed, rate=rate, eta=eta)  # fmt: skip
            return
        changed = done != self.last_done
        due = self.last_done is None or (changed and now - self.last_line >= PLAIN_SECONDS)
        if not (due or (last and changed)):
            return
        self.last_line, self.last_done = now, done
        percent = f" ({100 * done / total:.0f}%)" if total else ""
        line = f"{self.pair} run #{run['id']}: {done:,}/{total:,} done{percent}, {failed}, {rate}, {eta}"
        err.print(line, markup=False, soft_wrap=True)


def _closed(api: Client, path: str, run_id: int | None) -> dict[str, Any]:
    runs = api.json("GET", path, params={"limit": RUNS_LOOKED_AT})
    if run_id is None:
        if not runs:
            raise CliError(f"no run of {path.removeprefix('/api/runs/')} yet: activate the service first")
        first: dict[str, Any] = runs[0]
        return first
    found: dict[str, Any] | None = next((run for run in runs if run["id"] == run_id), None)
    if found is None:
        raise CliError(f"run #{run_id} is not among the latest {RUNS_LOOKED_AT} runs of the pair")
    return found


def new_failures(api: Client, path: str, run: dict[str, Any]) -> int | None:
    """Documents the run's close left failed (error, fatal, invalid) that the snapshot before was better
    at; None without a snapshot before to compare with."""
    if not run.get("snapshot_at"):
        return None
    diff = api.json("GET", f"{path}/diff", params={"current": run["snapshot_at"]})
    if diff.get("previous") is None:
        return None
    return sum(int(cell["count"]) for cell in diff["matrix"] if cell["regression"] and cell["current"] in FAILED)


def run_watch(
    api: Client, corpus: str, service: str, *, run_id: int | None = None, interval: float = 1.0,
    fail_on_new_failures: bool = False, summary_to_stderr: bool = False,
) -> int:  # fmt: skip
    """Follow the pair's open run (or `run_id`) until it closes; the exit code: 0, or EXIT_NEW_FAILURES
    when asked and the run closed with new failures. Without an open run, the latest run is reported."""
    path = f"/api/runs/{segment(corpus)}/{segment(service)}"
    pair = f"{corpus}/{service}"
    shown = err if summary_to_stderr else out
    followed = False
    with Display(pair) as display:
        while True:
            current = api.json("GET", f"{path}/current")
            if current and (run_id is None or current["id"] == run_id):
                run_id, followed = current["id"], True
                display.show(current)
                time.sleep(interval)
                continue
            break
        run = _closed(api, path, run_id)
        if followed and run.get("tallies"):
            display.show({**run, "eta": {"remaining": 0}}, last=True)
    if not followed:
        shown.print(f"no open run of {pair}; its latest run:", markup=False)
    done, total = done_of(run.get("tallies"))
    took = duration(run["duration_seconds"]) if run.get("duration_seconds") is not None else "-"
    counts = tallies_words(run.get("tallies"))
    shown.print(f"run #{run['id']} of {pair} closed after {took}: {done:,}/{total:,} done ({counts})",
                markup=False, soft_wrap=True)  # fmt: skip
    fresh = new_failures(api, path, run)
    if fresh is None:
        shown.print("new failures: none to tell (no earlier snapshot to compare with)", markup=False)
        return 0
    if fresh:
        shown.print(f"new failures: {fresh:,} since the snapshot before "
                    f"(ccs tasks {corpus} {service} --change regressed)", markup=False, soft_wrap=True)  # fmt: skip
        return EXIT_NEW_FAILURES if fail_on_new_failures else 0
    shown.print("new failures: none since the snapshot before", markup=False)
    return 0
