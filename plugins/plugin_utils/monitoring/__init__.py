"""What is watched, and when does it alert? Prometheus scrape jobs and Alertmanager routes
(``prometheus``), alert rules and their promtool tests (``alerts``)."""
