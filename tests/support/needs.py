"""What a test needs from the machine (PostgreSQL, RabbitMQ, a server binary): without it the
test is skipped on a developer's machine, saying why, and fails under CI (CI=true), where
everything must be there and a silent skip would hide that it is not."""

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def missing(what: str) -> NoReturn:
    """Skip the test for lack of `what` (a sentence saying what is missing), or fail it under CI."""
    if in_ci():
        pytest.fail(f"{what} (CI=true: a test that needs it fails instead of skipping)", pytrace=False)
    pytest.skip(what)


def needs_postgres(why: str) -> None:
    """Go on only on PostgreSQL; `why` says what of PostgreSQL the test needs."""
    from django.db import connection

    if connection.vendor != "postgresql":
        missing(f"{why} needs PostgreSQL; this run uses {connection.vendor} (DATABASE_URL is not PostgreSQL)")
