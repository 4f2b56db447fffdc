"""report.md as one self-contained HTML page (the plan play writes it to report.html).

Rendered by markdown-it-py (CommonMark plus GFM tables, which report.md's settings rows use):
raw HTML in the Markdown is escaped, never passed through, so a value from the inventory cannot
inject markup. Pure: text in, text out.
"""

from __future__ import annotations

from html import escape

#: CommonMark with tables; html off (raw HTML is text), HTML5 void tags (``<img ...>``, no ``/>``).
_MD: MarkdownIt | None
try:
    from markdown_it import MarkdownIt
except ImportError as exc:  # a controller without markdown-it-py: markdown_html says so when it runs
    _MD = None
    MARKDOWN_IT_IMPORT_ERROR: ImportError | None = exc
else:
    _MD = MarkdownIt("commonmark", {"html": False, "xhtmlOut": False}).enable("table")
    MARKDOWN_IT_IMPORT_ERROR = None

_STYLE = (
    "body{font-family:Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;"
    "text-align:left;vertical-align:top}th{background:#f2f2f2}code{background:#f5f5f5;padding:0 3px}"
    "img{max-width:100%;border:1px solid #eee}"
)


def markdown_html(markdown: str, title: str = "Cluster plan") -> str:
    """report.md (CommonMark: headings, paragraphs, lists, code, images, links, emphasis; and
    tables) as one self-contained HTML page titled ``title``."""
    if _MD is None:  # declared in pyproject.toml and execution-environment.yml
        raise ImportError("report.html needs the Python package markdown-it-py on the controller") from (
            MARKDOWN_IT_IMPORT_ERROR
        )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + _MD.render(markdown)
        + "</body>\n</html>\n"
    )
