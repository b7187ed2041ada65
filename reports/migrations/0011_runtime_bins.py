# ruff: noqa: S608  (the SQL here is this module's own constants)
"""Runtime counts gain a coarse level: per (service, 50 ms bin), the tasks and their summed runtimes,
kept by the same statement-level triggers as the counts per millisecond. The runtime report sums a few
thousand bins instead of a row per distinct millisecond (tens of thousands at 2.8M runtimes), and reads
the millisecond rows of one bin for each percentile (docs/decisions/reports.md).
The bin width is frozen here; reports.models.RUNTIME_BIN_MS must equal it."""

import django.db.models.deletion
from django.db import migrations, models

BIN_MS = 50

# Runtimes are never negative (the log parser reads digits only), so integer division floors.
APPLY = f"""
CREATE OR REPLACE FUNCTION ccs_runtimecount_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO reports_runtimecount (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, -count(*) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = reports_runtimecount.count + EXCLUDED.count;
    INSERT INTO reports_runtimebin (service_id, bin, count, total_ms)
      SELECT service_id, runtime_ms / {BIN_MS}, -count(*), -sum(runtime_ms) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, bin) DO UPDATE SET count = reports_runtimebin.count + EXCLUDED.count,
      total_ms = reports_runtimebin.total_ms + EXCLUDED.total_ms;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO reports_runtimecount (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = reports_runtimecount.count + EXCLUDED.count;
    INSERT INTO reports_runtimebin (service_id, bin, count, total_ms)
      SELECT service_id, runtime_ms / {BIN_MS}, count(*), sum(runtime_ms) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, bin) DO UPDATE SET count = reports_runtimebin.count + EXCLUDED.count,
      total_ms = reports_runtimebin.total_ms + EXCLUDED.total_ms;
  END IF;
  RETURN NULL;
END
$$;
INSERT INTO reports_runtimebin (service_id, bin, count, total_ms)
  SELECT service_id, runtime_ms / {BIN_MS}, sum(count), sum(count * runtime_ms)
    FROM reports_runtimecount WHERE count <> 0 GROUP BY 1, 2;
"""

# Migration 0007's function, which keeps the counts per millisecond only.
RESTORE = """
CREATE OR REPLACE FUNCTION ccs_runtimecount_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO reports_runtimecount (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, -count(*) FROM old_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = reports_runtimecount.count + EXCLUDED.count;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO reports_runtimecount (service_id, runtime_ms, count)
      SELECT service_id, runtime_ms, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (service_id, runtime_ms) DO UPDATE SET count = reports_runtimecount.count + EXCLUDED.count;
  END IF;
  RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0010_messages_per_task"),
        ("services", "0003_dispatcherstate_worker"),
    ]

    operations = [
        migrations.CreateModel(
            name="RuntimeBin",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("bin", models.IntegerField()),
                ("count", models.BigIntegerField(default=0)),
                ("total_ms", models.BigIntegerField(default=0)),
                (
                    "service",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        to="services.service",
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("service", "bin"), name="runtimebin_unique_key")],
            },
        ),
        migrations.RunSQL(APPLY, RESTORE),
    ]
