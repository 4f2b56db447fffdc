"""The audit: the running cluster against its plan (issue 29, docs/audit.md)."""
