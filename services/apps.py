from django.apps import AppConfig


class ServicesConfig(AppConfig):
    name = "services"
    verbose_name = "Services, workers and the dispatcher"
