"""`manage.py ensure_admin`: an administrator exists after it, with the password from
ASICMON_ADMIN_PASSWORD (which must pass the validators) or one generated and shown once."""

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command


@pytest.mark.django_db
def test_a_weak_admin_password_from_the_environment_is_refused_with_the_validators_reasons(
    monkeypatch,
):
    monkeypatch.setenv("ASICMON_ADMIN_PASSWORD", "secret")
    with pytest.raises(CommandError) as refused:
        call_command("ensure_admin", "--username", "weak-admin", stdout=StringIO())
    message = str(refused.value)
    assert "ASICMON_ADMIN_PASSWORD is refused by the password validators" in message
    assert "too common" in message and "too short" in message
    assert not User.objects.filter(username="weak-admin").exists()


@pytest.mark.django_db
def test_a_strong_admin_password_from_the_environment_is_used_and_not_printed(monkeypatch):
    monkeypatch.setenv("ASICMON_ADMIN_PASSWORD", "correct-horse-battery-77")
    out = StringIO()
    call_command("ensure_admin", "--username", "strong-admin", stdout=out)
    assert "with the password from ASICMON_ADMIN_PASSWORD" in out.getvalue()
    assert "correct-horse-battery-77" not in out.getvalue()
    assert authenticate(username="strong-admin", password="correct-horse-battery-77") is not None


@pytest.mark.django_db
def test_without_a_password_given_one_is_generated_shown_once_and_works(monkeypatch):
    monkeypatch.delenv("ASICMON_ADMIN_PASSWORD", raising=False)
    out = StringIO()
    call_command("ensure_admin", "--username", "first-admin", stdout=out)
    password = re.search(
        r"Created administrator 'first-admin' with password: (\S+)", out.getvalue()
    ).group(1)
    user = authenticate(username="first-admin", password=password)
    assert user is not None and user.is_superuser and user.is_staff
    again = StringIO()
    call_command("ensure_admin", "--username", "first-admin", stdout=again)
    assert again.getvalue() == "Sign in as 'first-admin' (password set earlier).\n"
    assert User.objects.filter(username="first-admin").count() == 1
    assert authenticate(username="first-admin", password=password) is not None  # not changed


@pytest.mark.django_db
def test_the_user_name_comes_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv("ASICMON_ADMIN_USER", "ops-admin")
    monkeypatch.setenv("ASICMON_ADMIN_PASSWORD", "correct-horse-battery-77")
    call_command("ensure_admin", stdout=StringIO())
    assert User.objects.get(username="ops-admin").is_superuser
