from django.apps import AppConfig


class CorporaConfig(AppConfig):
    name = "corpora"
    verbose_name = "Corpora, documents and tasks"

    def ready(self) -> None:
        from corpora import receivers
        from services.signals import service_deleting, service_profile_changed

        service_deleting.connect(receivers.service_data_purge, dispatch_uid="corpora.service_data_purge")
        service_profile_changed.connect(receivers.service_profile_note, dispatch_uid="corpora.service_profile_note")
