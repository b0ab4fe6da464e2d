"""The one list of the papers recrepro reproduces: every other place that names them all reads it.

One :class:`Paper` per paper, in the papers' order (the order of the front page, the summary, the
command line's help and the HTML report): the command line (``recrepro <paper>``, :mod:`recrepro.cli.main`),
the front page (:mod:`recrepro.reporting.front_page`), the summary (:mod:`recrepro.scorecard.summary`), the
Snakefile's includes and the rules' wildcards (``workflow/rules/report.smk``, ``strong.smk``), the
preprocessing's time-ordered protocols and the tests all take the papers from here.
``tests/test_paper_registry.py`` fails when a list of two or more paper keys is typed anywhere else,
and when this list and the packages under ``src/recrepro/papers/`` differ. Adding a paper:
docs/adding-a-paper.md.

It sits in the infrastructure layer and imports nothing from recrepro, so every layer (and the
Snakefile, before any rule) may read it without importing a paper's code.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPERS", "Paper", "data_protocol_keys", "get_paper", "paper_keys", "summary_keys"]


@dataclass(frozen=True)
class Paper:
    """One reproduced paper.

    Attributes
    ----------
    key:
        The paper's name everywhere: ``recrepro <key>``, ``src/recrepro/papers/<key>/``,
        ``workflow/rules/<key>.smk`` and ``<key>_runs.smk``, the ``<key>:`` block of ``config.yaml``,
        ``results/<tier>/<key>/``.
    title:
        The long title, the heading of the paper's section on the front page (``results/<tier>/README.md``).
    short_title:
        The paper's short name: the HTML report's category and labels.
    cli_help:
        The one-line description of ``recrepro <key>`` in ``recrepro --help``.
    cli_module:
        The module whose ``register(verbs)`` adds the paper's verbs (imported only when they are needed).
    in_summary:
        Whether the summary (``recrepro scorecard --summary``), the front page and the claims pages count
        the paper.
    data_protocol:
        Whether the paper has a preprocessing protocol of its own, named by its key (``protocol: <key>`` in
        ``config.yaml``'s data entries, splits under ``data/splits/<dataset>/<key>/``): the tuned strong
        baselines and the leak audit work on those splits.
    time_ordered:
        Whether that protocol's splits order each user's rows by time (they need the release's
        timestamps, which a reconstructed form of a dataset may lack).
    gpu_tolerance:
        The largest |score on CUDA − score on the CPU| allowed after the paper's small run
        (``tests/test_gpu.py``; float32 trainers drift by rounding, a float64 one hardly at all).
    """

    key: str
    title: str
    short_title: str
    cli_help: str
    cli_module: str
    in_summary: bool = True
    data_protocol: bool = True
    time_ordered: bool = False
    gpu_tolerance: float = 1e-3

    @property
    def package(self) -> str:
        """The paper's package, ``recrepro.papers.<key>``."""
        return f"recrepro.papers.{self.key}"

    @property
    def expected_file(self) -> str:
        """The file name of its published numbers under ``src/recrepro/expected/``."""
        return f"{self.key}.yaml"

    @property
    def rule_files(self) -> tuple[str, str]:
        """Its rule files, relative to the repository: figures, tables and scorecard; training runs."""
        return f"workflow/rules/{self.key}.smk", f"workflow/rules/{self.key}_runs.smk"


#: Every paper, in the papers' order.
PAPERS: tuple[Paper, ...] = (
    Paper(
        key="exadmm",
        title="exADMM — Togashi et al. 2024, fair exposure control for iALS",
        short_title="exADMM",
        cli_help="Togashi et al. 2024, fair exposure control for iALS (exADMM)",
        cli_module="recrepro.papers.exadmm.cli",
        gpu_tolerance=1e-6,
    ),
    Paper(
        key="prism",
        title="PRISM — Loveland et al. 2025, weight decay and popularity",
        short_title="PRISM",
        cli_help="Loveland et al. 2025, weight decay encodes popularity (PRISM init)",
        cli_module="recrepro.papers.prism.cli",
    ),
    Paper(
        key="lambdaopt",
        title="λOpt — Chen et al. 2019, learned fine-grained regularisation",
        short_title="λOpt",
        cli_help="Chen et al. 2019, λOpt: learning fine-grained regularisation",
        cli_module="recrepro.papers.lambdaopt.cli",
        time_ordered=True,
    ),
    Paper(
        key="fedrap",
        title="FedRAP — Li et al. 2024, federated additive personalisation",
        short_title="FedRAP",
        cli_help="Li et al. 2024, federated recommendation with additive personalisation (FedRAP)",
        cli_module="recrepro.papers.fedrap.cli",
        time_ordered=True,
    ),
    Paper(
        key="lrs",
        title="AMHT-LRS — Pal et al. 2023, low-rank + sparse personalisation",
        short_title="AMHT-LRS",
        cli_help="Pal et al. 2023, low-rank + sparse personalisation (AMHT-LRS)",
        cli_module="recrepro.papers.lrs.cli",
        data_protocol=False,
        gpu_tolerance=1e-8,
    ),
)

_BY_KEY = {paper.key: paper for paper in PAPERS}
if len(_BY_KEY) != len(PAPERS):
    raise ValueError("recrepro.paperlist: two papers share a key")


def paper_keys() -> tuple[str, ...]:
    """Every paper's key, in the papers' order."""
    return tuple(_BY_KEY)


def summary_keys() -> tuple[str, ...]:
    """The papers the summary, the front page and the claims pages count, in order."""
    return tuple(paper.key for paper in PAPERS if paper.in_summary)


def data_protocol_keys() -> tuple[str, ...]:
    """The papers with a preprocessing protocol (and splits) of their own, in order."""
    return tuple(paper.key for paper in PAPERS if paper.data_protocol)


def get_paper(key: str) -> Paper:
    """The paper named ``key``; a ``KeyError`` naming the known keys otherwise."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no paper {key!r} (known: {', '.join(_BY_KEY)})") from None
