"""The inventory's `monitoring` group: its hosts run Prometheus, which scrapes every database host
of the inventory and evaluates the alert rules (roles/monitoring.py)."""

prometheus_server = True
