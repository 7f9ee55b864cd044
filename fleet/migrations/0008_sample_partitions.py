from django.db import migrations

# This migration made the samples and 1-minute rollups time-partitioned tables on PostgreSQL
# (issue 12). Samples moved to the time-series store (issue 17) and migration 0009 drops those
# tables, so there is nothing left to do here: a database that ran it keeps its partitioned
# tables until 0009, a new one keeps the plain tables 0007 made until 0009.


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0007_sample_rollups"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop),
    ]
