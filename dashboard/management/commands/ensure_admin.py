import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Make sure an administrator exists. The password comes from ASICMON_ADMIN_PASSWORD, "
        "or is generated and printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("ASICMON_ADMIN_USER", "admin"))

    def handle(self, *args, username, **options):
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Sign in as '{username}' (password set earlier).")
            return
        password = os.environ.get("ASICMON_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if os.environ.get("ASICMON_ADMIN_PASSWORD"):
            self.stdout.write(f"Created '{username}' with the password from ASICMON_ADMIN_PASSWORD.")
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created administrator '{username}' with password: {password}\n"
                    "It is shown only this once; change it with: python manage.py changepassword "
                    f"{username}"
                )
            )
