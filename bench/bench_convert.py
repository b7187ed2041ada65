"""Other endpoints while `/convert` is saturated (issue 13, High 1): target p95 < 100 ms.

The web tier starts as `manage.py up` starts it (`ops.stack.web_child`: gunicorn, gthread workers, 2
processes) on a free port of 127.0.0.1, with its own VAR_DIR and database (`ccs_convert_bench`), unless
--base-url names one already running (127.0.0.1 or localhost only; give --token then).

Two phases of --seconds each, the same probe in both: one client requests /healthz, /api, and the
token-gated lists /api/services and /api/corpora in turn, one request at a time (a new connection
each), and records their latencies. The first phase has nothing else running; in the second, --clients
(20) clients each post a TeX loop to /convert again and again (each loop stopped at --loop-timeout by
the server). CONVERT_CONCURRENCY of them convert; the others get 503 at once and retry after the
Retry-After the server sends (or --retry-pause). The script checks that the refusals come at once and
that nothing answers anything else, prints p50/p95/max per endpoint and phase, and stops by itself.

Run: .venv/bin/python bench/bench_convert.py [--clients 20] [--seconds 60] [--retry-pause S]
                                              [--base-url http://127.0.0.1:PORT --token T]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import harness

# Ours alone, set before harness.setup() runs django.setup(): settings read them once, at import.
harness.configure("ccs_convert_bench", 13, Path("/tmp/ccs-convert-bench"))
VAR_DIR = harness.VAR_DIR
P95_TARGET_MS = 100.0
# A TeX loop that keeps latexmlc busy on one CPU at constant memory until it is stopped
# (LaTeXML refuses `\def\x{\x}\x` at once as a macro that "expands into itself").
TEX_LOOP = "\\documentclass{article}\\begin{document}\\loop\\iftrue\\repeat\\end{document}"
PROBES = ("/healthz", "/api", "/api/services", "/api/corpora")
# A refusal slower than this was not "at once".
REFUSAL_LIMIT_MS = 500.0


@dataclass
class Tally:
    """What the probe and the /convert clients saw in one phase."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    refusals: list[float] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    slots_busy: list[int] = field(default_factory=list)
    steal: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def request(
    url: str, *, data: bytes | None = None, token: str | None = None, timeout: float = 30.0
) -> tuple[int, Message, bytes]:
    """(status, headers, body bytes) of one request on a new connection; HTTP errors are answers too."""
    headers = {"X-Service-Token": token} if token else {}
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:  # noqa: S310
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


Slots = Callable[[], int] | None


def probe(base_url: str, token: str, tally: Tally, stop: threading.Event, slots: Slots) -> None:
    """Request each probed endpoint in turn until `stop`, recording milliseconds per endpoint."""
    while not stop.is_set():
        for path in PROBES:
            started = time.perf_counter()
            try:
                status, _, _ = request(base_url + path, token=token if path.startswith("/api/") else None)
            except OSError as exc:
                status = f"{type(exc).__name__}: {exc}"
            elapsed = (time.perf_counter() - started) * 1000
            with tally.lock:
                if status == 200:
                    tally.latencies[path].append(elapsed)
                else:
                    tally.unexpected.append(f"{path}: {status}")
            if slots is not None:
                tally.slots_busy.append(slots())
            stop.wait(0.02)


def convert_client(
    base_url: str, tally: Tally, stop: threading.Event, *, loop_timeout: int, retry_pause: float | None
) -> None:
    """Post a TeX loop again and again until `stop`; on a 503 wait as told (or `retry_pause`) and retry."""
    data = urllib.parse.urlencode({"tex": TEX_LOOP, "timeout": loop_timeout}).encode()
    while not stop.is_set():
        started = time.perf_counter()
        try:
            status, headers, body = request(f"{base_url}/convert", data=data, timeout=loop_timeout + 60)
        except OSError as exc:
            if stop.is_set():
                return  # cut off by the end of the phase (the web tier stopping), not an answer
            with tally.lock:
                tally.unexpected.append(f"/convert: {type(exc).__name__}: {exc}")
            stop.wait(1)
            continue
        elapsed = (time.perf_counter() - started) * 1000
        if stop.is_set():
            return  # the figures are the phase's: a conversion finishing after it is not counted
        with tally.lock:
            if status == 503 and headers.get("Retry-After"):
                tally.refusals.append(elapsed)
            elif status == 200:
                tally.conversions.append(json.loads(body)["status"])
            else:
                tally.unexpected.append(f"/convert: {status} {body[:200]!r}")
        if status == 503:
            stop.wait(retry_pause if retry_pause is not None else float(headers.get("Retry-After") or 1))


def phase(base_url: str, token: str, *, seconds: float, clients: int, args: argparse.Namespace, slots: Slots) -> Tally:
    """One measured phase: the probe for `seconds`, beside `clients` /convert clients."""
    tally = Tally()
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=convert_client,
            args=(base_url, tally, stop),
            kwargs={"loop_timeout": args.loop_timeout, "retry_pause": args.retry_pause},
            daemon=True,
        )
        for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    if clients:
        # Measure once the loops hold every slot, not while the clients first connect.
        deadline = time.monotonic() + 30
        while slots is not None and slots() < args.concurrency and time.monotonic() < deadline:
            time.sleep(0.05)
    prober = threading.Thread(target=probe, args=(base_url, token, tally, stop, slots), daemon=True)
    watch = harness.StealWatch().start()
    prober.start()
    stop.wait(seconds)
    stop.set()
    prober.join(30)
    tally.steal = watch.line()
    return tally


def report(name: str, tally: Tally) -> bool:
    """Print the phase's figures; True when every probed endpoint met the p95 target."""
    print(f"\n{name}: {tally.steal}; {harness.load_line()}")
    met = True
    for path in PROBES:
        values = tally.latencies.get(path, [])
        if not values:
            print(f"  {path:<14} no answers")
            met = False
            continue
        p95 = harness.percentile(values, 0.95)
        met &= p95 < P95_TARGET_MS
        print(
            f"  {path:<14} {len(values):5d} requests  p50 {harness.percentile(values, 0.5):6.1f} ms"
            f"  p95 {p95:6.1f} ms  max {max(values):7.1f} ms"
        )
    if tally.refusals or tally.conversions:
        refused = tally.refusals
        print(
            f"  /convert       {len(refused)} refused with 503 + Retry-After (p50 "
            f"{harness.percentile(refused, 0.5):.1f} ms, p95 {harness.percentile(refused, 0.95):.1f} ms, "
            f"max {max(refused):.1f} ms); {len(tally.conversions)} loops ran to their timeout "
            f"within the phase ({', '.join(sorted(set(tally.conversions))) or 'none'})"
            if refused
            else f"  /convert       no refusals; {len(tally.conversions)} conversions"
        )
    if tally.slots_busy:
        busy = sorted(tally.slots_busy)
        print(f"  slots busy while probing: min {busy[0]}, median {busy[len(busy) // 2]}, max {busy[-1]}")
    return met


def web_start() -> tuple[subprocess.Popen, str, Path]:
    """gunicorn as `manage.py up` starts it, on a free port of 127.0.0.1."""
    from ops import stack

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    child = stack.web_child(host="127.0.0.1", port=port, processes=2)
    log = harness.LOG_DIR / "gunicorn.log"
    process = subprocess.Popen(
        child.argv, cwd=harness.PROJECT_ROOT, env=child.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if request(f"{base_url}/healthz", timeout=2)[0] == 200:
                return process, base_url, log
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            harness.fail(f"gunicorn did not answer on {base_url}; see {log}")
        time.sleep(0.2)


def web_stop(process: subprocess.Popen) -> None:
    """SIGTERM to the group; its conversions die with their workers (parent-death signal)."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20, help="concurrent /convert clients (default 20)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each phase (default 60)")
    parser.add_argument("--loop-timeout", type=int, default=20, help="the timeout field of each TeX loop (default 20)")
    parser.add_argument("--retry-pause", type=float, help="seconds between a 503 and the retry (default Retry-After)")
    parser.add_argument("--base-url", help="a running web tier on 127.0.0.1 instead of starting one")
    parser.add_argument("--token", help="an API token for --base-url")
    harness.quiet_arguments(parser, wait=300)
    args = parser.parse_args()

    process = None
    slots = None
    args.concurrency = 1
    if args.base_url:
        host = urllib.parse.urlsplit(args.base_url).hostname
        if host not in ("127.0.0.1", "localhost") or not args.token:
            parser.error("--base-url must be on 127.0.0.1 or localhost, and needs --token")
        base_url, token = args.base_url.rstrip("/"), args.token
    else:
        shutil.rmtree(VAR_DIR, ignore_errors=True)
        VAR_DIR.mkdir(parents=True)
        harness.setup()
        from django.conf import settings

        from services.convert_slots import convert_slots_busy

        token = harness.bench_token()
        process, base_url, log = web_start()
        slots = convert_slots_busy
        args.concurrency = settings.CONVERT_CONCURRENCY
        print(f"web tier: {base_url} (gunicorn gthread, 2 processes; log {log}); "
              f"CONVERT_CONCURRENCY={settings.CONVERT_CONCURRENCY}")  # fmt: skip
    try:
        harness.quiet_wait(args.max_load, args.wait)
        idle = phase(base_url, token, seconds=args.seconds, clients=0, args=args, slots=slots)
        saturated = phase(base_url, token, seconds=args.seconds, clients=args.clients, args=args, slots=slots)
    finally:
        if process is not None:
            web_stop(process)
    report("idle", idle)
    met = report(f"/convert saturated by {args.clients} TeX loops", saturated)
    problems = idle.unexpected + saturated.unexpected
    if problems:
        harness.fail(f"{len(problems)} unexpected answers, e.g. {problems[:5]}")
    if not saturated.refusals or harness.percentile(saturated.refusals, 0.95) > REFUSAL_LIMIT_MS:
        harness.fail(f"/convert was not refused at once (p95 of refusals over {REFUSAL_LIMIT_MS:.0f} ms, or none)")
    print(
        f"\ntarget p95 < {P95_TARGET_MS:.0f} ms on every probed endpoint while saturated: {'met' if met else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
