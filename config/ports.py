"""The TCP ports `manage.py up` listens on, and the check that they are free before anything starts.

Django-free, so that `manage.py up` can check the ports before the settings load: loading them starts (and on
a first start creates) the embedded PostgreSQL, which a refusal must not leave behind. The embedded
PostgreSQL and Redis listen on unix sockets only; their TCP ports are none.

A port that cannot be bound while no socket listens on it is held by a connection, most often one closed a
moment ago and left in TIME-WAIT (60 s on Linux): another program's outgoing connection that had the port as
its ephemeral source port. The dispatcher's default ports lie in Linux's ephemeral range (32768-60999); the
sysctl net.ipv4.ip_local_reserved_ports keeps the kernel from handing them out."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable

WEB_HOST = "127.0.0.1"
WEB_PORT = 8000
DISPATCHER_BIND = "127.0.0.1"
DISPATCHER_VENTILATOR_PORT = 51695
DISPATCHER_SINK_PORT = 51696
# Longer than Linux's TIME-WAIT (60 s, fixed in the kernel), so that a port held by one is waited out.
HELD_WAIT_SECONDS = 65.0

RESERVE_HINT = "sysctl -w net.ipv4.ip_local_reserved_ports={ports} keeps other programs' connections off them"


class PortTaken(Exception):
    """A port `up` needs is taken; the message names it and says what to do."""


def wanted(*, web_host: str, web_port: int, bind: str, ventilator: int, sink: int) -> list[tuple[str, str, int]]:
    """(what, address, port) of every port `up` listens on: the web server and the dispatcher's two."""
    address = "0.0.0.0" if bind in ("", "*") else bind  # noqa: S104
    return [
        ("web server (--port)", web_host, web_port),
        ("dispatcher ventilator (DISPATCHER_VENTILATOR_PORT)", address, ventilator),
        ("dispatcher sink (DISPATCHER_SINK_PORT)", address, sink),
    ]


def _bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not bind host:port now (None: it could), probing as the servers bind: with
    SO_REUSEADDR, so a TIME-WAIT of the port's own earlier listener does not count."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc
    return None


def port_states(port: int) -> set[str]:
    """The TCP states (psutil's names: LISTEN, TIME_WAIT, ESTABLISHED...) of this machine's sockets whose
    local port is `port`; read from /proc/net/tcp*, which shows every process's sockets."""
    import psutil

    return {conn.status for conn in psutil.net_connections(kind="tcp") if conn.laddr and conn.laddr.port == port}


def ports_check(
    ports: list[tuple[str, str, int]],
    *,
    wait: float = HELD_WAIT_SECONDS,
    say: Callable[[str], None] = print,
) -> None:
    """Return once every port can be bound; raise PortTaken naming the first that cannot.

    A port with a listener (another program, another stack) is refused at once. A port held without one (a
    connection in TIME-WAIT, most often) is waited for, up to `wait` seconds, with one line through `say`."""
    seen: dict[int, str] = {}
    for what, _host, port in ports:
        if port in seen:
            raise PortTaken(f"port {port} is wanted twice: for the {seen[port]} and the {what}")
        seen[port] = what
    deadline = time.monotonic() + wait
    for what, host, port in ports:
        said = False
        while (error := _bind_error(host, port)) is not None:
            states = port_states(port)
            # A listener, or a refusal of another kind (no such address, a privileged port): nothing to wait for.
            if "LISTEN" in states or error.errno != errno.EADDRINUSE:
                raise PortTaken(
                    f"port {port} for the {what} on {host} is not free ({error.strerror}): stop what holds it"
                    " or choose another port"
                )
            held = ", ".join(sorted(states)) or "closing"
            if time.monotonic() > deadline:
                raise PortTaken(
                    f"port {port} for the {what} on {host} is still held by a connection ({held}) after {wait:.0f} s:"
                    f" choose another port, or {reserve_hint(ports)}"
                )
            if not said:
                say(
                    f"Port {port} for the {what} is held by a connection ({held}), not a listener: another program's"
                    f" connection used it as its own port. Waiting up to {wait:.0f} s for it to close."
                    f" To prevent it: {reserve_hint(ports)} (docs/deploy.md#ports)."
                )
                said = True
            time.sleep(0.5)


def reserve_hint(ports: list[tuple[str, str, int]]) -> str:
    """The sysctl that reserves the dispatcher's ports (the web port lies below the ephemeral range)."""
    dispatcher = sorted({port for what, _, port in ports if what.startswith("dispatcher")})
    return RESERVE_HINT.format(ports=",".join(str(port) for port in dispatcher))


def up_preflight(argv: list[str]) -> None:
    """`manage.py up`'s port check before the settings load (and with them the embedded PostgreSQL): from its
    --host and --port and the environment's dispatcher ports. `up` checks again once the settings, and the
    ports stored through PUT /api/config, are known."""
    import argparse

    from config.env import env_int, env_str

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host", default=WEB_HOST)
    parser.add_argument("--port", type=int, default=WEB_PORT)
    parser.add_argument("-h", "--help", action="store_true")
    try:
        options, _ = parser.parse_known_args(argv)
    except SystemExit:  # a malformed --port: the command's own parser says so
        return
    if options.help:
        return
    ports_check(
        wanted(
            web_host=options.host,
            web_port=options.port,
            bind=env_str("DISPATCHER_BIND", DISPATCHER_BIND),
            ventilator=env_int("DISPATCHER_VENTILATOR_PORT", DISPATCHER_VENTILATOR_PORT, minimum=1),
            sink=env_int("DISPATCHER_SINK_PORT", DISPATCHER_SINK_PORT, minimum=1),
        )
    )
