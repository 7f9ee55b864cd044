"""Samples live in the time-series store (issue 17): their PostgreSQL tables go.

Before dropping them this refuses, with what to do, while they hold rows that
`manage.py export_samples` has not copied to the store: the export leaves a marker per
table in fleet_sample_batch (scope "export:<table>", the time of the newest row it
covered), and a table counts as exported when it has no row newer than its marker. Setting
ASICMON_DROP_SAMPLES=1 drops the tables whatever they hold (docs/deploy.md, "Moving history
out of PostgreSQL"). Going back recreates the tables empty.
"""

from django.conf import settings
from django.core.management.base import CommandError
from django.db import migrations

TABLES = ("fleet_sample", "fleet_sample_minute", "fleet_sample_hour")


def unexported(connection) -> list[str]:
    """The samples tables holding rows newer than the export's marker (any row, without one)."""
    left = []
    with connection.cursor() as cursor:
        present = set(connection.introspection.table_names(cursor))
        for table in TABLES:
            if table not in present:
                continue
            cursor.execute("SELECT max(ts) FROM fleet_sample_batch WHERE scope = %s", [f"export:{table}"])
            marker = cursor.fetchone()[0]
            if marker is None:
                cursor.execute(f"SELECT 1 FROM {table} LIMIT 1")  # noqa: S608 (names of ours)
            else:
                cursor.execute(f"SELECT 1 FROM {table} WHERE ts > %s LIMIT 1", [marker])  # noqa: S608
            if cursor.fetchone() is not None:
                left.append(table)
    return left


def refuse_unexported(apps, schema_editor):
    if settings.ASICMON_DROP_SAMPLES:
        return
    left = unexported(schema_editor.connection)
    if left:
        raise CommandError(
            f"Migration fleet.0009 drops the PostgreSQL samples tables, and {', '.join(left)} "
            f"{'holds' if len(left) == 1 else 'hold'} history not copied to the time-series store. "
            "Copy it first with `python manage.py export_samples` (TSDB_WRITE_URL names the store), "
            "then migrate again; or set ASICMON_DROP_SAMPLES=1 to drop that history. "
            "See docs/deploy.md, \"Moving history out of PostgreSQL\"."
        )


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0008_sample_partitions"),
    ]

    operations = [
        migrations.RunPython(refuse_unexported, migrations.RunPython.noop),
        migrations.DeleteModel(name="SampleBatch"),
        migrations.DeleteModel(name="SampleMinute"),
        migrations.DeleteModel(name="SampleHour"),
        migrations.DeleteModel(name="Sample"),
    ]
