"""Each log message carries its task's status (see LogMessage.task_status), and the report index leads
with it, so one status's report, entry list and rerun scope are one range of that index.

Existing messages take their task's current status; a message whose task no longer exists (none
should, every delete removes messages first) could never be reported and is removed. On a large
table the backfill rewrites every message once; it runs in the migration's transaction."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0006_task_pair_status_id_index"),
        ("reports", "0007_runtime_counts"),
    ]

    operations = [
        migrations.AddField(model_name="logmessage", name="task_status", field=models.SmallIntegerField(null=True)),
        migrations.RunSQL(
            "UPDATE reports_logmessage m SET task_status = t.status FROM corpora_task t WHERE t.id = m.task_id;"
            " DELETE FROM reports_logmessage WHERE task_status IS NULL;",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(model_name="logmessage", name="task_status", field=models.SmallIntegerField()),
        migrations.RemoveIndex(model_name="logmessage", name="logmessage_report_task"),
        migrations.AddIndex(
            model_name="logmessage",
            index=models.Index(
                fields=["corpus", "service", "task_status", "severity", "category", "what", "task"],
                name="logmessage_report_status",
            ),
        ),
    ]
