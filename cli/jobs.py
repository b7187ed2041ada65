"""Following a background job to its end: GET /api/jobs/{uuid} polled, its progress (current of total,
jobs/serializers.py) drawn as a Rich progress bar on stderr."""

from __future__ import annotations

import time
from typing import Any

import httpx
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cli.client import Client
from cli.output import err

ACTIVE_STATES = ("queued", "running")
POLL_SECONDS = 0.5  # how often the job is read while it runs


def job_follow(client: Client, uuid: str) -> tuple[dict[str, Any], httpx.Response]:
    """The job as it ended, and the response that said so."""
    columns = (
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
    )  # fmt: skip
    with Progress(*columns, console=err, transient=False) as progress:
        bar = progress.add_task("job", total=None)
        while True:
            response = client.send("GET", f"/api/jobs/{uuid}")
            job = response.json()
            current, total = job["progress"]["current"], job["progress"]["total"]
            words = f"{job['kind']} {job['state']}" + (f": {job['message']}" if job.get("message") else "")
            progress.update(bar, description=words[:60], total=total or None, completed=current)
            if job["state"] not in ACTIVE_STATES:
                if job["state"] == "succeeded" and total:
                    progress.update(bar, completed=total)
                return job, response
            time.sleep(POLL_SECONDS)


def job_uuid(kind: str | None, body: Any, headers: httpx.Headers) -> str | None:
    """The job a write's answer names (cli/spec.py's JOB_BODY, JOB_ACK, JOB_HEADER), if any."""
    if kind == "body" and isinstance(body, dict):
        uuid = body.get("uuid")
        return uuid if isinstance(uuid, str) else None
    if kind == "ack" and isinstance(body, dict) and isinstance(body.get("job"), dict):
        uuid = body["job"].get("uuid")
        return uuid if isinstance(uuid, str) else None
    if kind == "header":
        job: str | None = headers.get("X-Result-Files-Job")
        return job
    return None
