"""The report as a small document model, rendered to Markdown and HTML.

Sections hold paragraphs, tables (with links to their Parquet and CSV files) and
figures (PNG shown, SVG linked). Both renderers walk the same document, so
report.md and index.html always say the same thing.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

from courier.analysis import tables

MAX_ROWS_SHOWN = 200


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class TableBlock:
    table: tables.Table
    parquet: str  # paths relative to the report directory
    csv: str


@dataclass(frozen=True)
class FigureBlock:
    caption: str
    png: str
    svg: str


Block = Paragraph | Code | TableBlock | FigureBlock


@dataclass
class Section:
    anchor: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section] = field(default_factory=list)


def format_value(value: Any) -> str:
    """Numbers to four significant digits, booleans as yes/no, missing as '-'."""
    if _missing(value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def cell_texts(table: tables.Table, row: tuple[Any, ...]) -> list[str]:
    """A row's cells as text; empty cells read n/a where the table does not apply."""
    not_applicable = bool(table.applies) and not row[table.columns.index(table.applies)]
    return ["n/a" if not_applicable and _missing(v) else format_value(v) for v in row]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _shown_rows(table: tables.Table) -> tuple[list[tuple[Any, ...]], str]:
    if len(table) <= MAX_ROWS_SHOWN:
        return table.rows, ""
    return table.rows[:MAX_ROWS_SHOWN], f"First {MAX_ROWS_SHOWN} of {len(table)} rows."


# Markdown


def render_markdown(document: Document) -> str:
    lines = [f"# {document.title}", ""]
    lines += [f"- [{s.title}](#{s.anchor})" for s in document.sections]
    for section in document.sections:
        lines += ["", f'<a id="{section.anchor}"></a>', "", f"## {section.title}", ""]
        for block in section.blocks:
            lines += [*_markdown_block(block), ""]
    return "\n".join(lines).rstrip() + "\n"


def _markdown_block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Code):
        return ["```", block.text, "```"]
    if isinstance(block, FigureBlock):
        return [f"![{block.caption}]({block.png})", "", f"*{block.caption}* ([SVG]({block.svg}))"]
    return _markdown_table(block)


def _markdown_table(block: TableBlock) -> list[str]:
    table = block.table
    rows, cut = _shown_rows(table)
    lines = [f"**{table.title}** ([CSV]({block.csv}), [Parquet]({block.parquet}))", ""]
    lines.append("| " + " | ".join(table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    for row in rows:
        cells = (text.replace("|", "\\|") for text in cell_texts(table, row))
        lines.append("| " + " | ".join(cells) + " |")
    if not table.rows:
        lines.append("| " + " | ".join("-" for _ in table.columns) + " |")
    for text in (cut, table.note):
        if text:
            lines += ["", text]  # the blank line ends the table: no stray table row
    return lines


# HTML

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1200px; color: #222;
       padding: 0 1rem; }
h1 { margin: 0 0 0.3rem; font-size: 1.6rem; }
nav ul { display: flex; flex-wrap: wrap; gap: 0.2rem 1rem; list-style: none; padding: 0;
         margin: 0 0 1rem; font-size: 0.9rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
#summary table { font-size: 1rem; } #summary td, #summary th { padding: 0.35rem 0.7rem; }
#summary .scroll { max-height: none; } #summary td:nth-child(2) { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; }
.scroll { max-height: 28rem; overflow: auto; }
"""


def render_html(document: Document) -> str:
    title = html.escape(document.title)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        "<nav><ul>",
        *[f'<li><a href="#{s.anchor}">{html.escape(s.title)}</a></li>' for s in document.sections],
        "</ul></nav>",
    ]
    for section in document.sections:
        parts.append(f'<section id="{section.anchor}"><h2>{html.escape(section.title)}</h2>')
        parts += [_html_block(block) for block in section.blocks]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Code):
        return f"<pre>{html.escape(block.text)}</pre>"
    if isinstance(block, FigureBlock):
        caption = html.escape(block.caption)
        return (
            f'<figure><img src="{html.escape(block.png)}" alt="{caption}">'
            f'<figcaption>{caption} (<a href="{html.escape(block.svg)}">SVG</a>)'
            "</figcaption></figure>"
        )
    return _html_table(block)


def _html_table(block: TableBlock) -> str:
    table = block.table
    rows, cut = _shown_rows(table)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(text)}</td>" for text in cell_texts(table, row))
        + "</tr>"
        for row in rows
    )
    csv, parquet = html.escape(block.csv), html.escape(block.parquet)
    links = f'(<a href="{csv}">CSV</a>, <a href="{parquet}">Parquet</a>)'
    notes = "".join(f"<p>{html.escape(text)}</p>" for text in (cut, table.note) if text)
    return (
        f"<h3>{html.escape(table.title)} {links}</h3>"
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        f"</div>{notes}"
    )
