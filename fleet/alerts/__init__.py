"""Alerts that reach a person: what of the fleet needs one (rules), sent to Alertmanager
(alertmanager), which routes, groups, silences and delivers them (webhook, e-mail...).

Owns the alert rules read from the fleet's own records and their delivery. Prometheus users
who scrape /metrics have the same alerts as rules in docs/prometheus/.

May import: fleet.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
