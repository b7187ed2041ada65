from django.db import migrations


def create_protected(apps, schema_editor):
    Service = apps.get_model("services", "Service")
    for name, description in (
        ("init", "Infrastructure: the initial state of every document."),
        ("import", "Infrastructure: one task per imported document (no_problem, or invalid with why)."),
    ):
        Service.objects.get_or_create(
            name=name,
            defaults={"description": description, "version": "1", "inputformat": "tex", "outputformat": "tex"},
        )


class Migration(migrations.Migration):
    dependencies = [("services", "0001_initial")]
    operations = [migrations.RunPython(create_protected, migrations.RunPython.noop)]
