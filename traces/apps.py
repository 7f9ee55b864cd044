from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"

    def ready(self):
        from traces import signals  # noqa: F401  (connects the file clean-up and automatic captures)
