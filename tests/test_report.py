"""Scorecards rendered for the HTML report (recrepro.reporting.html)."""

from __future__ import annotations

from recrepro.reporting.html import markdown_to_html, scorecard_html, verdict_counts

MD = """# Scorecard: demo

paper: `demo` · **NOT comparable**

## Published vs ours

| metric | published | verdict | note |
|---|---|---|---|
| ndcg@20 | 0.1 | within | see [dev](docs/deviations.md#x) |
| recall@20 | 0.2 | deviates | a \\| b |
| hr@10 |  |  | <script> |
"""

CSV = """paper,metric,published,verdict
demo,ndcg@20,0.1,within
demo,recall@20,0.2,deviates
demo,hr@10,,
"""


def test_markdown_subset():
    out = markdown_to_html(MD)
    assert "<h1>Scorecard: demo</h1>" in out
    assert "<h2>Published vs ours</h2>" in out
    assert "<p>paper: <code>demo</code> · <b>NOT comparable</b></p>" in out
    assert out.count("<tr>") == 4  # header + 3 rows; the |---| line is no row
    assert '<td class="within">within</td>' in out and '<td class="deviates">deviates</td>' in out
    assert '<a href="docs/deviations.md#x">dev</a>' in out
    assert "<td>a | b</td>" in out  # escaped pipe stays inside its cell
    assert "<script>" not in out and "&lt;script&gt;" in out


def test_scorecard_page_counts_verdicts(tmp_path):
    (tmp_path / "s.md").write_text(MD)
    (tmp_path / "s.csv").write_text(CSV)
    assert verdict_counts(tmp_path / "s.csv") == {"within": 1, "deviates": 1, "not judged": 1}
    scorecard_html(tmp_path / "s.md", tmp_path / "s.csv", tmp_path / "out" / "s.html")
    page = (tmp_path / "out" / "s.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<b>within</b>: 1" in page and "<b>deviates</b>: 1" in page and "<b>not judged</b>: 1" in page
    counts = page.split('<div class="counts">')[1].split("</div>")[0]
    assert "not_run" not in counts  # zero counts are not listed


def test_table_page(tmp_path):
    from recrepro.reporting.html import table_html

    (tmp_path / "t.md").write_text("# Table 4\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    table_html(tmp_path / "t.md", tmp_path / "t.html")
    page = (tmp_path / "t.html").read_text()
    assert "<h1>Table 4</h1>" in page and '<tr><td class="num">1</td><td class="num">2</td></tr>' in page


def test_wide_tables_wrap_and_smoke_verdicts_are_coloured(tmp_path):
    md = ("| check | claim | verdict |\n|---|---|---|\n| ran | every method ran | pass |\n"
          "| greater | a long claim | **fail**: x 0.1 < y 0.2 |\n| greater | b | **deviates** |\n")
    out = markdown_to_html(md)
    assert '<td class="pass">pass</td>' in out
    assert '<td class="fail"><b>fail</b>: x 0.1 &lt; y 0.2</td>' in out
    assert '<td class="deviates"><b>deviates</b></td>' in out  # bold verdicts keep their colour
    (tmp_path / "s.md").write_text(md)
    (tmp_path / "s.csv").write_text("paper,verdict\ndemo,pass\ndemo,fail\ndemo,not_run\n")
    scorecard_html(tmp_path / "s.md", tmp_path / "s.csv", tmp_path / "s.html")
    page = (tmp_path / "s.html").read_text()
    assert "overflow-wrap: break-word" in page and "width: 100%" in page  # the note column wraps
    counts = page.split('<div class="counts">')[1].split("</div>")[0]
    assert counts.index("pass") < counts.index("fail") < counts.index("not_run")


def test_report_captions_render_without_mailto_links(repo_root):
    """Captions are reStructuredText: a bare ``NDCG@20`` would become a mailto: link (issue 26)."""
    import warnings
    from types import SimpleNamespace

    import jinja2
    from docutils.core import publish_parts

    captions = sorted((repo_root / "workflow" / "report").glob("*.rst"))
    assert len(captions) >= 15
    for fig in ("fig3_batched_wd", "fig4_epochs", "fig5_alpha", "fig9_debias", "fig11_nlmf"):
        for tier, paper in (("smoke", "prism"), ("paper", "exadmm")):
            wildcards = SimpleNamespace(fig=fig, dataset="gowalla", tier=tier, paper=paper, table="tables/results")
            for caption in captions:
                # config as Snakemake gives it (the landing text, workflow.rst, chooses its text by tier)
                text = jinja2.Environment().from_string(caption.read_text()).render(
                    snakemake=SimpleNamespace(wildcards=wildcards, config={"tier": tier}))
                with warnings.catch_warnings():  # writer_name: what Snakemake calls (docutils plans to rename it)
                    warnings.simplefilter("ignore", PendingDeprecationWarning)
                    body = publish_parts(text, writer_name="html", settings_overrides={"report_level": 5})["body"]
                assert "mailto:" not in body, (caption.name, fig)


def test_a_bullet_list_becomes_a_list_not_one_run_on_paragraph():
    out = markdown_to_html("Checks:\n\n- a: `x` *holds*\n- b: does not\n\nAfter.")
    assert out == "<p>Checks:</p>\n<ul>\n<li>a: <code>x</code> *holds*</li>\n<li>b: does not</li>\n</ul>\n<p>After.</p>"
