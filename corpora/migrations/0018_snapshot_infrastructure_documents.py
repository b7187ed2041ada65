"""A snapshot keeps the documents whose task ended as an infrastructure failure, and a diff of two snapshots the
transitions of those documents, so that a run diff's status matrix can leave them out
(docs/decisions/infrastructure-failures.md). Both columns have a constant default, so adding them changes only
the catalog. The snapshots that froze their message classes already list those documents among the members of
the infrastructure classes (SnapshotMembers): they are filled from there, and the diffs already computed of
such snapshots get their infrastructure transitions from the two snapshots' arrays (9 is the diffs' absent
bucket, corpora.statuses.ABSENT_BUCKET)."""

# ruff: noqa: S608  (the SQL here is this module's own constants)
import django.contrib.postgres.fields
from django.db import migrations, models

# corpora.statuses.infrastructure_class_sql, as it is when this migration is written.
INFRASTRUCTURE = (
    "(k.severity = 'fatal' AND (k.category = 'infrastructure'"
    " OR (k.category = 'cortex' AND k.what = 'never_completed_with_retries')))"
)

SNAPSHOTS_FILL = (
    "UPDATE corpora_snapshot s SET infrastructure_document_ids = m.ids"
    " FROM (SELECT x.snapshot_id, array_agg(DISTINCT u.d ORDER BY u.d) AS ids FROM corpora_snapshotmembers x"
    f" JOIN corpora_messageclass k ON k.id = x.message_class_id AND k.level = 0 AND {INFRASTRUCTURE}"
    " CROSS JOIN unnest(x.document_ids) AS u(d) GROUP BY x.snapshot_id) m"
    " WHERE s.id = m.snapshot_id"
)


def _side(which: str) -> str:
    return (
        "SELECT u.d, u.s FROM corpora_snapshot x, unnest(x.document_ids, x.statuses) AS u(d, s)"
        f" WHERE x.id = f.{which}_id AND u.d = ANY(i.ids)"
    )


DIFFS_FILL = (
    "UPDATE corpora_snapshotdiff f SET infrastructure_matrix = coalesce(("
    "  SELECT jsonb_agg(jsonb_build_array(m.ps, m.cs, m.n) ORDER BY m.ps DESC, m.cs DESC) FROM ("
    "   SELECT coalesce(p.s, 9) AS ps, coalesce(c.s, 9) AS cs, count(*) AS n"
    f"   FROM ({_side('previous')}) p FULL JOIN ({_side('current')}) c ON p.d = c.d GROUP BY 1, 2) m), '[]'::jsonb)"
    " FROM (SELECT g.id, ARRAY(SELECT unnest(a.infrastructure_document_ids)"
    "   UNION SELECT unnest(b.infrastructure_document_ids)) AS ids"
    "  FROM corpora_snapshotdiff g JOIN corpora_snapshot a ON a.id = g.previous_id"
    "  JOIN corpora_snapshot b ON b.id = g.current_id"
    "  WHERE a.infrastructure_document_ids <> '{}' OR b.infrastructure_document_ids <> '{}') i"
    " WHERE f.id = i.id"
)


class Migration(migrations.Migration):
    dependencies = [("corpora", "0017_cost_and_schedule")]

    operations = [
        migrations.AddField(
            model_name="snapshot",
            name="infrastructure_document_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(),
                db_default=models.Value(
                    [], output_field=django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField())
                ),
                default=list,
            ),
        ),
        migrations.AddField(
            model_name="snapshotdiff",
            name="infrastructure_matrix",
            field=models.JSONField(db_default=models.Value([], output_field=models.JSONField()), default=list),
        ),
        migrations.RunSQL(SNAPSHOTS_FILL, migrations.RunSQL.noop),
        migrations.RunSQL(DIFFS_FILL, migrations.RunSQL.noop),
    ]
