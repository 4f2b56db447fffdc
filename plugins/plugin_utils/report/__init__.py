"""How is the plan shown to a person? The report's sections and warnings (``report``), the fabric
DOT and rack power SVG (``diagram``) and report.md as HTML (``html``)."""
