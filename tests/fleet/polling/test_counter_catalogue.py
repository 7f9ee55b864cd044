"""The Asicmon counter catalogue mirrored into the Counter table, and the name -> id map the
poll uses."""

import pytest

from fleet.asicmon import CATALOGUE
from fleet.models import Counter
from fleet.polling.counter_catalogue import counter_ids, mirror_catalogue


@pytest.mark.django_db
def test_every_counter_of_the_catalogue_is_in_the_table_with_its_unit_and_kind():
    rows = {c.name: c for c in Counter.objects.all()}
    assert set(rows) == set(CATALOGUE)
    temperature = rows["temperature_c"]
    assert (temperature.unit, temperature.kind) == (
        CATALOGUE["temperature_c"].unit,
        CATALOGUE["temperature_c"].kind,
    )


@pytest.mark.django_db
def test_mirroring_again_changes_nothing_and_a_missing_counter_comes_back():
    before = counter_ids()
    mirror_catalogue()
    assert counter_ids() == before
    Counter.objects.filter(name="power_w").delete()
    ids = counter_ids()
    assert set(ids) == set(CATALOGUE) and ids["power_w"] != before["power_w"]
