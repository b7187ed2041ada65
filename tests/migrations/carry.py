"""What the migration carry test and the script that builds its fixture share: a database of their own on
the test server, the migration to given leaves, the load of the dump, the API's answers as they are
compared, and the rows and id sequences of every model.

The fixture (tests/fixtures/carry/) is a populated database at the schema of the migrations recorded in
from.json, as a data-only dump, with the reports the API served for it and the rows of its models. Loading
it at that schema and migrating to the latest must leave every report and every row as they were."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db import connection, connections

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "carry"
DUMP = FIXTURE / "dump.sql"
FROM = FIXTURE / "from.json"  # the leaf migration of each app the dump was taken at
REPORTS = FIXTURE / "reports.json"  # the API's answers for the dump: the token that asks, then URL -> answer
ROWS = FIXTURE / "rows.json"  # each model's rows, by model name
SEQUENCES = FIXTURE / "sequences.json"  # the last id of each model's id sequence, by model name
RESULTS = FIXTURE / "results"  # the result archives the dump's tasks point to (RESULTS_DIR)

# Tables the dump leaves out: the migrations that made the schema are recorded by the executor that
# migrates the fresh database, not loaded.
NOT_DUMPED = ("django_migrations",)


# --- a database of its own --------------------------------------------------------------------------------


def _admin() -> Any:
    import psycopg

    s = connection.settings_dict
    return psycopg.connect(
        dbname="postgres", user=s["USER"], password=s["PASSWORD"] or None, host=s["HOST"] or None,
        port=s["PORT"] or None, autocommit=True,
    )  # fmt: skip


def _connections_close() -> None:
    for conn in connections.all():
        conn.close()
        if conn.alias in getattr(conn, "_connection_pools", {}):  # reading conn.pool would open one
            conn.close_pool()


@contextlib.contextmanager
def database_of_its_own(name: str) -> Iterator[None]:
    """Create the empty database `name` on the server of the `default` connection, point `default` (and
    `progress`, which the tests alias to it) at it without a pool, and drop it afterwards."""
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    _connections_close()
    kept = {}
    for conn in {id(c): c for c in (connections["default"], connections["progress"])}.values():
        kept[conn.alias] = (conn.settings_dict["NAME"], conn.settings_dict["OPTIONS"])
        conn.settings_dict["NAME"] = name
        conn.settings_dict["OPTIONS"] = {k: v for k, v in conn.settings_dict["OPTIONS"].items() if k != "pool"}
    try:
        yield
    finally:
        _connections_close()
        for alias, (kept_name, options) in kept.items():
            connections[alias].settings_dict["NAME"] = kept_name
            connections[alias].settings_dict["OPTIONS"] = options
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- migrations ---------------------------------------------------------------------------------------------


def migrate(targets: list[tuple[str, str]] | None = None) -> None:
    """Migrate `default` to `targets`, or to the latest migration of every app."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def leaves() -> list[tuple[str, str]]:
    """The latest migration of every app, as the code on disk has them."""
    from django.db.migrations.loader import MigrationLoader

    return sorted(MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())


# --- the dump and its load ----------------------------------------------------------------------------------


def _user_tables(cursor: Any) -> list[str]:
    cursor.execute(
        "SELECT format('%%I', c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        " AND c.relname <> ALL(%s) ORDER BY 1",
        [list(NOT_DUMPED)],
    )
    return [row[0] for row in cursor.fetchall()]


def dump_load(sql: str) -> None:
    """Replace every row of `default`'s tables (the migrations' own rows too) with the dump's, with triggers
    off: the dump holds the rows the triggers keep (counts, tallies) as they were."""
    import psycopg

    s = connection.settings_dict
    with connection.cursor() as cursor:
        tables = _user_tables(cursor)
    _connections_close()
    with psycopg.connect(
        dbname=s["NAME"], user=s["USER"], password=s["PASSWORD"] or None, host=s["HOST"] or None,
        port=s["PORT"] or None,
    ) as load:  # fmt: skip
        # A session of its own: the dump empties its search_path, and the triggers stay off in it alone.
        load.execute("SET session_replication_role = replica")
        load.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")  # noqa: S608
        load.execute(sql)  # no parameters: psycopg sends the statements as one simple query
        load.commit()


# --- the reports --------------------------------------------------------------------------------------------

# What an answer holds that comes from the request (its id), from its clock (an open run's rate over the
# last minutes, and the ETA from it) or from the machine (the health checks), not from the data.
_NOW_KEYS = {"request_id", "rate_per_minute", "rate_since", "recent_completed", "eta_seconds", "finishes_at", "stalled"}
_MACHINE_KEYS = {"health"}


def normalised(body: Any) -> Any:
    """`body` with the values that depend on when or where it is asked replaced by a mark."""
    if isinstance(body, dict):
        return {
            key: "<now>" if key in _NOW_KEYS else "<machine>" if key in _MACHINE_KEYS else normalised(value)
            for key, value in body.items()
        }
    if isinstance(body, list):
        return [normalised(value) for value in body]
    return body


def answer(client: Any, url: str) -> dict[str, Any]:
    """A GET of `url` by the API client: its status, content type and body (JSON parsed, else text)."""
    response = client.get(url)
    kind = response.get("Content-Type", "").split(";")[0]
    content = b"".join(response.streaming_content) if response.streaming else response.content
    if kind.endswith("json"):
        body = normalised(json.loads(content)) if content else None
    else:
        body = content.decode("utf-8", "replace")
    return {"status": response.status_code, "type": kind, "body": body}


# --- the rows -----------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, dict | list | int | float | bool | str) or value is None:
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, memoryview | bytes):
        return bytes(value).hex()
    return str(value)


def model_rows() -> dict[str, list[list[Any]]]:
    """Every model's rows (concrete fields by column name, ordered by primary key), keyed by the model's
    name alone: a model that changes app keeps its rows under the same key."""
    from django.apps import apps

    rows: dict[str, list[list[Any]]] = {}
    for model in apps.get_models():
        name = model._meta.object_name
        assert name not in rows, f"two models are named {name}: key them apart"
        fields = sorted((f for f in model._meta.concrete_fields), key=lambda f: f.column)
        columns = [f.attname for f in fields]
        values = model.objects.order_by(*[f.attname for f in model._meta.pk_fields]).values_list(*columns)
        rows[name] = [[f.column for f in fields], *[[_plain(v) for v in row] for row in values]]
    return rows


def differences(recorded: Any, now: Any, path: str = "") -> Iterator[str]:
    """Where two answers differ, a line each: the path of the value and both values. A field the recorded
    answer lacks is new code's, not a change of carried data, and is no difference; a recorded field that is
    gone or holds another value is one."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in recorded:
            yield from differences(recorded[key], now.get(key, "<absent>"), f"{path}.{key}")
    elif isinstance(recorded, list) and isinstance(now, list) and len(recorded) == len(now):
        for index, (a, b) in enumerate(zip(recorded, now, strict=True)):
            yield from differences(a, b, f"{path}[{index}]")
    elif recorded != now:
        yield f"{path or '.'}: {json.dumps(recorded)[:300]} -> {json.dumps(now)[:300]}"


def sequence_positions() -> dict[str, int]:
    """The last id each model's id sequence handed out (0 for none), by model name."""
    from django.apps import apps
    from django.db.models import AutoField, BigAutoField

    positions = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            pk = model._meta.pk
            if not model._meta.managed or not isinstance(pk, AutoField | BigAutoField):
                continue
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [model._meta.db_table, pk.column])
            sequence = cursor.fetchone()[0]
            if sequence is not None:
                cursor.execute(f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {sequence}")  # noqa: S608
                positions[model._meta.object_name] = cursor.fetchone()[0]
    return positions
