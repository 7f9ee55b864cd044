from django.db import migrations

from fleet import partitions

# On PostgreSQL, samples and 1-minute rollups become time-partitioned tables (raw SQL:
# Django's model stays the plain table it declares, so `makemigrations` sees no change).
# SQLite keeps plain tables.
TABLES = [("fleet_sample", "sample_ts_idx"), ("fleet_sample_minute", "sample_minute_ts_idx")]
KEY = "device_id, counter_id, ts"


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, ts_index in TABLES:
            partitions.partition_table(cursor.cursor, table, KEY, ts_index)


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for table, ts_index in TABLES:
            partitions.unpartition_table(cursor.cursor, table, KEY, ts_index)


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0007_sample_rollups"),
    ]

    operations = [
        migrations.RunPython(partition, unpartition),
    ]
