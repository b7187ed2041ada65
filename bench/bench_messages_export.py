"""Messages as data (issue #26): every message of a 10M-message pair as CSV through a real web process.

The data are bench_reports' (bench/reports_data.py: 1,000,000 tasks, 10 messages each, in the message
writer's layout), generated into this script's own database once and reused. The web process is
gunicorn as `manage.py up` starts it (ops.stack.web_child: gthread workers), here with one worker, so
its peak RSS is the export's. The client reads `GET /api/reports/<corpus>/<service>/messages?format=csv`
over a socket and counts lines and bytes; the script reports rows/s over the whole download and the
worker's peak RSS (VmHWM, which the kernel keeps for the process's life, so nothing between two samples
is missed), and checks that every message came.

    .venv/bin/python bench/bench_messages_export.py            # generates ccs_messages_export_bench once
    .venv/bin/python bench/bench_messages_export.py --drop     # the same, then drops the database
    .venv/bin/python bench/bench_messages_export.py --profile  # and a second download under py-spy

--profile samples the web worker with py-spy during a second download (slowed by the sampling, so not
measured) and prints where its time goes: the share of samples in each innermost function, waiting
included (on PostgreSQL: psycopg's wait; on the client: the socket's send).

Targets: >= 300,000 rows/s and < 200 MB peak RSS of the web process.
"""

from __future__ import annotations

import argparse
import http.client
import re
import time
from pathlib import Path

import harness
import reports_data

harness.configure("ccs_messages_export_bench", 7, Path("/tmp/ccs-messages-export-bench"))

ACTOR = "bench"
ROWS_PER_SECOND_TARGET = 300_000
PEAK_RSS_TARGET_MB = 200
READ_BYTES = 1 << 20
SPY_RATE = 200
TOP_FUNCTIONS = 15
LINE_NUMBER = re.compile(r":\d+\)$")


def worker_pid(master_pid: int) -> int | None:
    """The one gunicorn worker under the master, once it is there."""
    import psutil

    children = psutil.Process(master_pid).children()
    return children[0].pid if children else None


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def answered(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", f"/api/reports/{reports_data.CORPUS}/{reports_data.SERVICE}")
        return connection.getresponse().status == 200
    except OSError:
        return False


def download(port: int, query: str) -> tuple[int, int, float, float, dict[str, str]]:
    """GET the export and read it to the end: (lines, bytes, seconds to the first byte, seconds in all,
    headers)."""
    began = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request("GET", f"/api/reports/{reports_data.CORPUS}/{reports_data.SERVICE}/messages?{query}")
    response = connection.getresponse()
    if response.status != 200:
        harness.fail(f"the export answered {response.status}: {response.read()[:500]!r}")
    first = None
    lines = size = 0
    while chunk := response.read1(READ_BYTES):
        if first is None:
            first = time.perf_counter() - began
        lines += chunk.count(b"\n")
        size += len(chunk)
    connection.close()
    return lines, size, first or 0.0, time.perf_counter() - began, dict(response.getheaders())


def where_time_goes(collapsed: Path) -> list[str]:
    """The innermost functions of the request's thread in py-spy's collapsed stacks, with their share of
    its samples (the worker's other threads wait for requests); and the same samples by the innermost
    function of reports/ on the stack, whatever it called."""
    leaves: dict[str, int] = {}
    ours: dict[str, int] = {}
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any("handle_request (" in frame for frame in frames):
            continue
        total += int(count)
        leaf = LINE_NUMBER.sub(")", frames[-1])  # "function (path/file.py)"
        leaves[leaf] = leaves.get(leaf, 0) + int(count)
        own = [frame for frame in frames if "reports/" in frame]
        if own:
            name = LINE_NUMBER.sub(")", own[-1])
            ours[name] = ours.get(name, 0) + int(count)

    def shares(counts: dict[str, int]) -> list[str]:
        ranked = sorted(counts.items(), key=lambda item: -item[1])
        return [f"  {100 * count / total:5.1f}%  {name}" for name, count in ranked[:TOP_FUNCTIONS]]

    return [f"  {total:,} samples of the request's thread", *shares(leaves),
            "  by the innermost function of reports/ on the stack:", *shares(ours)]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000, help="documents (10 messages each)")
    parser.add_argument("--drop", action="store_true", help="drop the benchmark database at the end")
    parser.add_argument("--profile", action="store_true", help="a second download under py-spy")
    harness.quiet_arguments(parser, wait=1800)
    args = parser.parse_args()

    harness.setup()
    from django.db import connection

    from ops.stack import web_child

    state = reports_data.generated_state()
    if state and state["tasks"] != args.tasks:
        harness.fail(f"the database holds {state['tasks']:,} tasks, not {args.tasks:,}: drop it first (--drop)")
    if not state:
        print(f"data: generating {args.tasks:,} tasks and {args.tasks * reports_data.MESSAGES_PER_TASK:,} messages")
        began = time.perf_counter()
        reports_data.data_generate(args.tasks, ACTOR)
        print(f"data: generated in {time.perf_counter() - began:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(cardinality(x.sequence)), 0) FROM corpora_taskmessages x"
            " JOIN corpora_corpus c ON c.id = x.corpus_id JOIN services_service s ON s.id = x.service_id"
            " WHERE c.name = %s AND s.name = %s",
            [reports_data.CORPUS, reports_data.SERVICE],
        )
        messages = cursor.fetchone()[0]
    connection.close()  # the web process is the only one reading while it is measured
    print(f"data: {messages:,} messages of {reports_data.SERVICE} on {reports_data.CORPUS}")

    harness.quiet_wait(args.max_load, args.wait)
    with harness.children_owned() as children:
        port = harness.free_port()
        web = web_child(host="127.0.0.1", port=port, processes=1)
        child = children.start("web", web.argv, env=harness.child_env())
        harness.wait_for(lambda: answered(port), timeout=120, what="gunicorn")
        worker = worker_pid(child.process.pid)
        if worker is None:
            harness.fail("gunicorn has no worker")
        before = peak_rss_mb(worker)
        steal = harness.StealWatch().start()
        lines, size, first, seconds, headers = download(port, "format=csv")
        peak = peak_rss_mb(worker)
        print(f"web worker {worker}: peak RSS {before:.0f} MB after its first requests, {peak:.0f} MB after the export")
        if args.profile:
            output = harness.LOG_DIR / "web-spy.txt"
            spy = harness.spy_start(children, worker, output, SPY_RATE)
            profiled = download(port, "format=csv")
            harness.spy_stop(spy)
            print(f"profile: a second download under py-spy, {profiled[3]:.1f} s; samples of the web worker:")
            print("\n".join(where_time_goes(output)))
    rows = lines - 1  # the header line; the generated details hold no line breaks
    rate = rows / seconds
    print(f"export: {rows:,} rows, {size / 1e6:,.0f} MB in {seconds:.1f} s (first byte after {first:.2f} s)")
    print(f"headers: {headers.get('Content-Type')}; {headers.get('Content-Disposition')}")
    print(f"  {steal.line()}; {harness.load_line()}")
    rate_met = "met" if rate >= ROWS_PER_SECOND_TARGET else "missed"
    print(f"rows/s: {rate:,.0f} (target >= {ROWS_PER_SECOND_TARGET:,}: {rate_met})")
    rss_met = "met" if peak < PEAK_RSS_TARGET_MB else "missed"
    print(f"peak RSS: {peak:.0f} MB (target < {PEAK_RSS_TARGET_MB} MB: {rss_met})")
    if rows != messages:
        harness.fail(f"the export had {rows:,} rows, the pair {messages:,} messages")
    if args.drop:
        import psycopg

        with psycopg.connect(f"{harness.PG_SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{harness.BENCH_DB}" WITH (FORCE)')
        print(f"dropped database {harness.BENCH_DB}")


if __name__ == "__main__":
    main()
