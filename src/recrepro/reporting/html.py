"""Scorecards as self-contained HTML pages for ``snakemake --report`` (issue 9).

Snakemake's report shows HTML inline but offers Markdown only as a download, so each paper's
``scorecard.md`` is rendered here (the small Markdown subset :mod:`recrepro.scorecard` writes:
headings, paragraphs, pipe tables, bold, code spans, links), headed by the verdict counts from
``scorecard.csv``.

    recrepro report scorecard-html --md scorecard.md --csv scorecard.csv --out scorecard.html
    recrepro report table-html --md tables/results.md --out tables/results.html
"""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

import pandas as pd

from recrepro.io import write_text

__all__ = ["markdown_to_html", "scorecard_html", "table_html", "verdict_counts"]

# Wide tables (scorecards with long notes) wrap inside the page instead of running off its right
# edge: the report shows these pages in a frame as wide as its content column.
_STYLE = """
body { font-family: sans-serif; font-size: 13px; margin: 1em; max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0; width: 100%; table-layout: auto; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; word-break: normal; }
th { background: #f0f0f0; }
td.num { white-space: nowrap; text-align: right; }
td:last-child { min-width: 12em; }
td.within, td.pass { background: #e3f6e3; } td.deviates, td.fail { background: #fbe3e3; }
td.not_run { background: #eee; }
.counts span { margin-right: 1.5em; }
code { overflow-wrap: break-word; }
"""
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?%?$")
#: Verdict cells are coloured by their first word (``**fail**: ...`` is ``fail``).
_VERDICT_WORD = re.compile(r"^\**([a-z_]+)\**")


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', out)
    return out


def _breakable(cell_html: str) -> str:
    """Let long names wrap inside a narrow table column: a break opportunity (``<wbr>``) after ``_``,
    ``/`` and ``#`` and before ``@``, in the text only (never inside a tag or its attributes)."""
    parts = re.split(r"(<[^>]+>)", cell_html)
    return "".join(part if part.startswith("<") else re.sub(r"([_/#])(?=\w)", r"\1<wbr>", part).replace("@", "<wbr>@")
                   for part in parts)


def _cells(line: str) -> list[str]:
    body = line.strip().strip("|")
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def markdown_to_html(md: str) -> str:
    """The body HTML of ``md`` (headings, paragraphs, bullet lists, pipe tables, bold, code spans, links)."""
    parts: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", line)
        if heading:
            level = len(heading.group(1))
            parts.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        if line.lstrip().startswith("|"):
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(lines[i])
                i += 1
            header = _cells(rows[0])
            body = [r for r in rows[1:] if not re.fullmatch(r"\s*\|?[\s:\-|]+\|?\s*", r)]
            verdict_col = header.index("verdict") if "verdict" in header else None
            out = ["<table>", "<tr>" + "".join(f"<th>{_breakable(_inline(h))}</th>" for h in header) + "</tr>"]
            for row in body:
                cells = _cells(row)
                tds = []
                for k, cell in enumerate(cells):
                    word = _VERDICT_WORD.match(cell) if k == verdict_col else None
                    if word:
                        cls = f' class="{html.escape(word.group(1))}"'
                    elif _NUMBER.match(cell):
                        cls = ' class="num"'
                    else:
                        cls = ""
                    tds.append(f"<td{cls}>{_breakable(_inline(cell))}</td>")
                out.append("<tr>" + "".join(tds) + "</tr>")
            out.append("</table>")
            parts.append("\n".join(out))
            continue
        if line.lstrip().startswith("- "):
            items = []
            while i < len(lines) and lines[i].lstrip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].lstrip()[2:].strip())}</li>")
                i += 1
            parts.append("<ul>\n" + "\n".join(items) + "\n</ul>")
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(("|", "#", "- ")):
            para.append(lines[i].strip())
            i += 1
        parts.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(parts)


def verdict_counts(csv_path: str | Path) -> Counter:
    """Rows per verdict (``within``, ``deviates``, ``not_run``; ``not judged`` for an empty one)."""
    card = pd.read_csv(csv_path, keep_default_na=True)
    if "verdict" not in card.columns:
        return Counter()
    return Counter("not judged" if pd.isna(v) or v == "" else str(v) for v in card["verdict"])


def scorecard_html(md_path: str | Path, csv_path: str | Path, out_path: str | Path) -> None:
    """Write ``out_path``: the verdict counts, then ``md_path`` rendered.

    Smoke checks (``pass`` / ``fail``, smoke tier) are counted first, then the verdicts on
    published values.
    """
    counts = verdict_counts(csv_path)
    order = ["pass", "fail", "within", "deviates", "not_run", "not judged"]
    summary = "".join(f"<span><b>{html.escape(k)}</b>: {counts[k]}</span>"
                      for k in order + sorted(set(counts) - set(order)) if counts.get(k))
    body = markdown_to_html(Path(md_path).read_text())
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(Path(md_path).stem)}"
            f"</title><style>{_STYLE}</style></head><body>\n<div class=\"counts\">Verdicts: "
            f"{summary or 'none'}</div>\n{body}\n</body></html>\n")
    write_text(out_path, page)


def table_html(md_path: str | Path, out_path: str | Path) -> None:
    """Write ``out_path``: ``md_path`` (a paper's Markdown table) rendered as one HTML page."""
    body = markdown_to_html(Path(md_path).read_text())
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(Path(md_path).stem)}"
            f"</title><style>{_STYLE}</style></head><body>\n{body}\n</body></html>\n")
    write_text(out_path, page)
