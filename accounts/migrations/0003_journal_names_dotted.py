"""Every journal name is spelled app.operation: the maintenance entries already stored take the dotted
names too, in one UPDATE each way."""

from django.db import migrations
from django.db.models import Case, Value, When

DOTTED = {"maintenance_reindex": "maintenance.reindex", "maintenance_analyze": "maintenance.analyze"}


def _rename(apps, names: dict[str, str]) -> None:
    entries = apps.get_model("accounts", "AuditEntry").objects.filter(action__in=list(names))
    entries.update(action=Case(*(When(action=old, then=Value(new)) for old, new in names.items())))


def forward(apps, schema_editor) -> None:
    _rename(apps, DOTTED)


def backward(apps, schema_editor) -> None:
    _rename(apps, {new: old for old, new in DOTTED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_screensession"),
    ]

    operations = [migrations.RunPython(forward, backward)]
