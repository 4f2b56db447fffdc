"""The audit's checks, one module per concern (docs/audit.md)."""
