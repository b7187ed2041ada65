from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Background jobs"

    def ready(self) -> None:
        # Job kinds register themselves in each app's tasks.py; import them all so that the web
        # process knows every kind (and whether it is debounced) before it enqueues one.
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("tasks")
