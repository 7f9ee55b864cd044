"""``python -m fleet.agent``: register this host and poll its devices (see fleet/agent)."""

import os
import sys


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from fleet.agent.run import run

    return run()


if __name__ == "__main__":
    sys.exit(main())
