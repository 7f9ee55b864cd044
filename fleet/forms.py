from django import forms

from fleet.choices import DeviceState, Health
from fleet.reading.queries import PAGE_SIZES, SORTS, TableQuery


class FleetFilterForm(forms.Form):
    """The fleet table's filters, sort and page, from the query string; every field may be empty."""

    host = forms.CharField(required=False, max_length=128)
    type = forms.CharField(required=False, max_length=32)
    health = forms.ChoiceField(required=False, choices=[("", "any"), *Health.choices])
    state = forms.ChoiceField(required=False, choices=[("", "any"), *DeviceState.choices])
    q = forms.CharField(required=False, max_length=128)
    sort = forms.ChoiceField(required=False, choices=[(name, name) for name in SORTS])
    page = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)
    per_page = forms.TypedChoiceField(required=False, coerce=int, choices=[(str(n), n) for n in PAGE_SIZES])

    def table_query(self) -> TableQuery:
        data = self.cleaned_data
        return TableQuery(
            host=data["host"], device_type=data["type"], health=data["health"], state=data["state"],
            search=data["q"].strip(), sort=data["sort"] or "host", page=data["page"] or 1,
            per_page=data["per_page"] or PAGE_SIZES[1],
        )
