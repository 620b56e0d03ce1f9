"""Tables as an executed lesson shows them: the rows of the HTML table a code cell displayed,
read back cell by cell (stdlib html.parser), so that a test can pin a table whole, row order
and values, from the notebook's own output rather than a regex on its text."""
from __future__ import annotations

from html.parser import HTMLParser


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def html_rows(html: str) -> list:
    """Every ``<tr>`` of ``html`` (its first table) as a list of cell texts, headers included."""
    html = html[html.index("<table"):html.index("</table>") + len("</table>")]
    p = _Rows()
    p.feed(html)
    return p.rows


def shown_table(nb, needle: str) -> list:
    """The rows of the table displayed by the first code cell whose source holds ``needle``."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)
    html = next(o["data"]["text/html"] for o in cell.outputs if "<table" in o.get("data", {}).get("text/html", ""))
    return html_rows(html)


def shown_text(nb, needle: str) -> str:
    """The stream text printed by the first code cell whose source holds ``needle``."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
