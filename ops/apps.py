from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations: health, configuration, status, the process supervisor"

    def ready(self) -> None:
        # The configuration overrides live in this app's table: read once, before any request, task or database
        # connection of the process, they give the keys read only at start their stored values and prime the live
        # configuration (config.overrides.apply_stored). Without a database that answers, or before the first
        # migration made the table, the process runs on the environment's values.
        from django.conf import settings

        from config.live import config_prime
        from config.overrides import apply_stored

        config_prime(apply_stored(settings))
