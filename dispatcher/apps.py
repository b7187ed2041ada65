from django.apps import AppConfig


class DispatcherConfig(AppConfig):
    name = "dispatcher"
    verbose_name = "The ZeroMQ dispatcher: ventilator, sink and result ingestion"
