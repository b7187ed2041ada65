"""`/convert`'s speed, and the other endpoints while it is saturated (target p95 < 100 ms).

The web tier starts as `manage.py up` starts it (`ops.stack.web_child`: gunicorn, gthread workers, 2
processes) on a free port of 127.0.0.1, with its own VAR_DIR and database (`ccs_convert_bench`), and with it
the warm engine (`ops.stack.convert_engine_child`, its default pools), unless --cold (CONVERT_WARM=false:
every request goes to a cold latexmlc) or --base-url names a web tier already running (127.0.0.1 or
localhost only; give --token then).

First the conversions themselves, each answer checked (status 200, an `engine` field; with the warm engine
on, every answer must come from it): --formulas formulas one at a time (p50 and p95 of the request's whole
time), then --throughput-clients (8) clients posting formulas for --seconds (answers a second; a 503 waits
as told and counts as a refusal), then --fragments 1-page fragments one at a time (p50). The formulas and
fragments are the fixture's (tests/fixtures/convert: real papers' math and text). Targets: a formula p50
<= 50 ms and p95 <= 150 ms, >= 20 formulas a second, a fragment p50 <= 300 ms.

--peer URL measures a LaTeXML server mode beside ours on the same formulas and fragments, one at a time,
right after ours: `latexmls` (LaTeXML's own, from its plugin's sources, started by the operator; it takes
the TeX in its `source` field as `literal:...`). Its answers must carry a result.

Two phases of --seconds each, the same probe in both: one client requests /healthz, /api, and the
token-gated lists /api/services and /api/corpora in turn, one request at a time (a new connection
each), and records their latencies. The first phase has nothing else running; in the second, --clients
(20) clients each post a TeX loop to /convert again and again (each loop stopped at --loop-timeout by
the server). CONVERT_CONCURRENCY of them convert; the others get 503 at once and retry after the
Retry-After the server sends (or --retry-pause). The script checks that the refusals come at once and
that nothing answers anything else, prints p50/p95/max per endpoint and phase, and stops by itself.

Run: .venv/bin/python bench/bench_convert.py [--clients 20] [--seconds 60] [--retry-pause S] [--cold]
                                              [--formulas 200] [--fragments 20] [--throughput-clients 8]
                                              [--skip-saturation] [--peer http://127.0.0.1:3354]
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
FIXTURE_DIR = harness.PROJECT_ROOT / "tests" / "fixtures" / "convert"
FORMULA_P50_TARGET_MS, FORMULA_P95_TARGET_MS = 50.0, 150.0
FORMULAS_PER_SECOND_TARGET = 20.0
FRAGMENT_P50_TARGET_MS = 300.0
# A fragment of about one printed page: the fixture's fragments of at least this many characters.
PAGE_CHARS = 2500
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


def fixture(name: str) -> list[str]:
    """The TeX of the fixture's formulas or fragments (tests/fixtures/convert/NAME.json)."""
    items = json.loads((FIXTURE_DIR / f"{name}.json").read_text())
    items = items["items"] if isinstance(items, dict) else items
    return [item["tex"] for item in items]


def convert_once(base_url: str, fields: dict, *, want_engine: str | None) -> tuple[int, float, str]:
    """(HTTP status, milliseconds, engine) of one /convert; a 200 without the wanted engine fails the run."""
    data = urllib.parse.urlencode(fields).encode()
    started = time.perf_counter()
    status, headers, body = request(f"{base_url}/convert", data=data, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if status == 503:
        return status, float(headers.get("Retry-After") or 1), ""
    if status != 200:
        harness.fail(f"/convert answered {status}: {body[:300]!r}")
    answer = json.loads(body)
    if want_engine and answer.get("engine") != want_engine:
        harness.fail(f"/convert was served by {answer.get('engine')} ({answer.get('engine_note')}), not {want_engine}")
    return status, elapsed, answer["engine"]


def one_at_a_time(base_url: str, texes: list[str], fields: dict, *, want_engine: str | None) -> list[float]:
    """Milliseconds of each conversion, one request at a time."""
    times = []
    for tex in texes:
        status, elapsed, _ = convert_once(base_url, {**fields, "tex": tex}, want_engine=want_engine)
        if status == 503:
            harness.fail("/convert refused a lone request")
        times.append(elapsed)
    return times


def throughput(
    base_url: str, texes: list[str], *, clients: int, seconds: float, want_engine: str | None
) -> tuple[int, int]:
    """(formulas converted, refusals) by `clients` clients posting formulas for `seconds`."""
    done, refused = [0], [0]
    lock = threading.Lock()
    stop = threading.Event()

    def client(offset: int) -> None:
        index = offset
        while not stop.is_set():
            tex = texes[index % len(texes)]
            index += clients
            status, value, _ = convert_once(base_url, {**MATH, "tex": tex}, want_engine=want_engine)
            if stop.is_set():
                return
            with lock:
                if status == 200:
                    done[0] += 1
                else:
                    refused[0] += 1
            if status == 503:
                stop.wait(value)

    threads = [threading.Thread(target=client, args=(offset,), daemon=True) for offset in range(clients)]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join(130)
    return done[0], refused[0]


MATH = {"whatsin": "math", "whatsout": "math"}
FRAGMENT = {"whatsin": "fragment", "whatsout": "fragment"}


def conversions(base_url: str, args: argparse.Namespace) -> bool:
    """The formula, throughput and fragment phases; True when every target was met."""
    want = None if args.base_url else ("latexmlc" if args.cold else "warm")
    formulas = fixture("formulas")
    pages = [tex for tex in fixture("fragments") if len(tex) >= PAGE_CHARS] or fixture("fragments")
    one_at_a_time(base_url, formulas[:3], MATH, want_engine=want)  # the pools answer once before measuring
    watch = harness.StealWatch().start()
    times = one_at_a_time(base_url, (formulas * 10)[: args.formulas], MATH, want_engine=want)
    p50, p95 = harness.percentile(times, 0.5), harness.percentile(times, 0.95)
    print(
        f"\nformulas one at a time: {len(times)}, p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(times):.1f} ms "
        f"(targets {FORMULA_P50_TARGET_MS:.0f} / {FORMULA_P95_TARGET_MS:.0f}); {watch.line()}; {harness.load_line()}"
    )
    watch = harness.StealWatch().start()
    done, refused = throughput(
        base_url, formulas, clients=args.throughput_clients, seconds=args.seconds, want_engine=want
    )
    rate = done / args.seconds
    print(
        f"formulas by {args.throughput_clients} clients for {args.seconds:g} s: {done} ({rate:.1f}/s, target "
        f">= {FORMULAS_PER_SECOND_TARGET:.0f}), {refused} refused; {watch.line()}; {harness.load_line()}"
    )
    watch = harness.StealWatch().start()
    page_times = one_at_a_time(base_url, (pages * 10)[: args.fragments], FRAGMENT, want_engine=want)
    page_p50 = harness.percentile(page_times, 0.5)
    sizes = sorted(len(tex) for tex in pages)
    print(
        f"fragments of {sizes[0]}-{sizes[-1]} characters one at a time: {len(page_times)}, p50 {page_p50:.1f} ms, "
        f"p95 {harness.percentile(page_times, 0.95):.1f} ms (target p50 {FRAGMENT_P50_TARGET_MS:.0f}); "
        f"{watch.line()}; {harness.load_line()}"
    )
    return (p50 <= FORMULA_P50_TARGET_MS and p95 <= FORMULA_P95_TARGET_MS and rate >= FORMULAS_PER_SECOND_TARGET
            and page_p50 <= FRAGMENT_P50_TARGET_MS)  # fmt: skip


def peer_times(peer: str, texes: list[str], fields: dict) -> list[float]:
    """Milliseconds of each conversion by a latexmls at `peer`, one request at a time."""
    times = []
    for tex in texes:
        data = urllib.parse.urlencode({**fields, "source": f"literal:{tex}", "format": "html5"}).encode()
        started = time.perf_counter()
        status, _, body = request(peer, data=data, timeout=120)
        times.append((time.perf_counter() - started) * 1000)
        if status != 200 or not json.loads(body).get("result"):
            harness.fail(f"the peer at {peer} answered {status}: {body[:300]!r}")
    return times


def peer_report(peer: str, args: argparse.Namespace) -> None:
    formulas = fixture("formulas")
    pages = [tex for tex in fixture("fragments") if len(tex) >= PAGE_CHARS] or fixture("fragments")
    peer_times(peer, formulas[:3], {**MATH, "pmml": ""})
    watch = harness.StealWatch().start()
    times = peer_times(peer, (formulas * 10)[: args.formulas], {**MATH, "pmml": ""})
    page_times = peer_times(peer, (pages * 10)[: args.fragments], FRAGMENT)
    print(f"peer {peer}: formulas p50 {harness.percentile(times, 0.5):.1f} ms, p95 "
          f"{harness.percentile(times, 0.95):.1f} ms; fragments p50 {harness.percentile(page_times, 0.5):.1f} ms; "
          f"{watch.line()}; {harness.load_line()}")  # fmt: skip


def engine_start() -> tuple[subprocess.Popen, Path]:
    """The warm engine as `manage.py up` starts it, once its pools are ready."""
    from ops import stack
    from services.queries import convert_engine_status

    child = stack.convert_engine_child()
    log = harness.LOG_DIR / "convert-engine.log"
    process = subprocess.Popen(
        child.argv, cwd=harness.PROJECT_ROOT, env=child.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        pools = convert_engine_status()
        if pools and all(pool["ready"] == pool["servers"] for pool in pools):
            return process, log
        if process.poll() is not None or time.monotonic() > deadline:
            harness.fail(f"the warm engine's pools did not become ready; see {log}")
        time.sleep(0.2)


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
    parser.add_argument("--cold", action="store_true", help="no warm engine: every /convert runs a cold latexmlc")
    parser.add_argument("--formulas", type=int, default=200, help="formulas converted one at a time (default 200)")
    parser.add_argument("--fragments", type=int, default=20, help="1-page fragments one at a time (default 20)")
    parser.add_argument("--throughput-clients", type=int, default=8, help="clients posting formulas (default 8)")
    parser.add_argument("--skip-saturation", action="store_true", help="only the conversion phases")
    parser.add_argument("--peer", help="a latexmls to measure beside ours (http://127.0.0.1:PORT/)")
    harness.quiet_arguments(parser, wait=300)
    args = parser.parse_args()
    if args.cold:
        os.environ["CONVERT_WARM"] = "false"

    process = engine = None
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
        if settings.CONVERT_WARM:
            engine, engine_log = engine_start()
            print(f"warm engine: pools {settings.CONVERT_WARM_POOLS} (log {engine_log})")
        process, base_url, log = web_start()
        slots = convert_slots_busy
        args.concurrency = settings.CONVERT_CONCURRENCY
        print(f"web tier: {base_url} (gunicorn gthread, 2 processes; log {log}); "
              f"CONVERT_CONCURRENCY={settings.CONVERT_CONCURRENCY}")  # fmt: skip
    try:
        harness.quiet_wait(args.max_load, args.wait)
        targets_met = conversions(base_url, args)
        print(f"conversion targets: {'met' if targets_met else 'NOT met'}")
        if args.peer:
            peer_report(args.peer, args)
        if args.skip_saturation:
            return
        idle = phase(base_url, token, seconds=args.seconds, clients=0, args=args, slots=slots)
        saturated = phase(base_url, token, seconds=args.seconds, clients=args.clients, args=args, slots=slots)
    finally:
        for child in (process, engine):
            if child is not None:
                web_stop(child)
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
