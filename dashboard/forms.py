from django import forms

from fleet.choices import Health


class FleetFilterForm(forms.Form):
    """The fleet page's filters, from the query string; every field may be empty."""

    host = forms.CharField(required=False, max_length=128)
    type = forms.CharField(required=False, max_length=32)
    health = forms.ChoiceField(required=False, choices=[("", "any"), *Health.choices])
