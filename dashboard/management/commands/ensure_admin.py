import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Make sure an administrator exists. The password comes from ASICMON_ADMIN_PASSWORD "
        "(which must pass the password validators), or is generated and printed once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("ASICMON_ADMIN_USER", "admin"))

    def handle(self, *args, username, **options):
        User = get_user_model()
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Sign in as '{username}' (password set earlier).")
            return
        given = os.environ.get("ASICMON_ADMIN_PASSWORD")
        if given:
            try:
                validate_password(given, User(username=username))
            except ValidationError as rejected:
                reasons = " ".join(rejected.messages)
                raise CommandError(f"ASICMON_ADMIN_PASSWORD is refused by the password validators: {reasons} "
                                   "Choose a stronger one, or unset it to have one generated.") from None
        password = given or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if given:
            self.stdout.write(f"Created '{username}' with the password from ASICMON_ADMIN_PASSWORD.")
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created administrator '{username}' with password: {password}\n"
                    "It is shown only this once; change it with: python manage.py changepassword "
                    f"{username}"
                )
            )
