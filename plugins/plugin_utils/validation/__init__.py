"""Does the built cluster perform as planned? Acceptance floors per tier (``floors``), what the
validate play runs (``acceptance``), the gates over its results (``gates``) and the parsers of the
tools' output (``parsers``)."""
