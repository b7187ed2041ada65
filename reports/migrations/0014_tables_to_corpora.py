"""The message, tally, runtime and grain models leave the state of reports for corpora, whose modules write
them (corpora 0014 renames their tables). Only Django's state changes here; no table is touched."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("corpora", "0014_tables_of_their_writer"),
        ("reports", "0013_taskclass_document"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="grainslice",
                    name="corpus",
                ),
                migrations.RemoveField(
                    model_name="grainslice",
                    name="service",
                ),
                migrations.DeleteModel(
                    name="MessageClass",
                ),
                migrations.DeleteModel(
                    name="MessageTally",
                ),
                migrations.RemoveField(
                    model_name="reportgrain",
                    name="corpus",
                ),
                migrations.RemoveField(
                    model_name="reportgrain",
                    name="service",
                ),
                migrations.RemoveField(
                    model_name="runtimebin",
                    name="service",
                ),
                migrations.RemoveField(
                    model_name="runtimecount",
                    name="service",
                ),
                migrations.DeleteModel(
                    name="StaleMessages",
                ),
                migrations.DeleteModel(
                    name="TaskClass",
                ),
                migrations.RemoveField(
                    model_name="taskmessages",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="taskruntime",
                    name="corpus",
                ),
                migrations.RemoveField(
                    model_name="taskruntime",
                    name="service",
                ),
                migrations.RemoveField(
                    model_name="taskruntime",
                    name="task",
                ),
                migrations.RemoveField(
                    model_name="logmessage",
                    name="corpus",
                ),
                migrations.RemoveField(
                    model_name="logmessage",
                    name="service",
                ),
                migrations.RemoveField(
                    model_name="logmessage",
                    name="task",
                ),
                migrations.DeleteModel(
                    name="GrainSlice",
                ),
                migrations.DeleteModel(
                    name="ReportGrain",
                ),
                migrations.DeleteModel(
                    name="RuntimeBin",
                ),
                migrations.DeleteModel(
                    name="RuntimeCount",
                ),
                migrations.DeleteModel(
                    name="TaskMessages",
                ),
                migrations.DeleteModel(
                    name="TaskRuntime",
                ),
                migrations.DeleteModel(
                    name="LogMessage",
                ),
            ],
        ),
    ]
