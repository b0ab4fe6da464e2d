"""The one list of the papers recrepro reproduces: every other place that names them all reads it.

The list is data, ``paperlist.yaml`` beside this module; this module loads and checks it at import.
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

from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import yaml

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
    in_summary: bool = True
    data_protocol: bool = True
    time_ordered: bool = False
    gpu_tolerance: float = 1e-3

    @property
    def package(self) -> str:
        """The paper's package, ``recrepro.papers.<key>``."""
        return f"recrepro.papers.{self.key}"

    @property
    def cli_module(self) -> str:
        """The module whose ``register(verbs)`` adds the paper's verbs, ``recrepro.papers.<key>.cli``
        (imported only when they are needed)."""
        return f"{self.package}.cli"

    @property
    def expected_file(self) -> str:
        """The file name of its published numbers under ``src/recrepro/expected/``."""
        return f"{self.key}.yaml"

    @property
    def rule_files(self) -> tuple[str, str]:
        """Its rule files, relative to the repository: figures, tables and scorecard; training runs."""
        return f"workflow/rules/{self.key}.smk", f"workflow/rules/{self.key}_runs.smk"


_LIST_FILE = Path(__file__).with_name("paperlist.yaml")


def _load(path: Path) -> tuple[Paper, ...]:
    """The papers of ``path`` (a YAML list of :class:`Paper` fields), checked: a short ``ValueError``
    naming the entry for an unknown or missing field, a value of the wrong type or a repeated key."""
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path.name}: expected a non-empty list of papers")
    known = {f.name: f for f in fields(Paper)}
    papers = []
    for number, entry in enumerate(entries, 1):
        where = f"{path.name}, paper {number}" + (f" ({entry.get('key')})" if isinstance(entry, dict) else "")
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a mapping of fields")
        unknown = sorted(set(entry) - set(known))
        missing = sorted(n for n, f in known.items() if f.default is MISSING and n not in entry)
        if unknown or missing:
            raise ValueError(f"{where}: " + "; ".join(
                ([f"unknown field(s) {unknown} (known: {sorted(known)})"] if unknown else [])
                + ([f"missing field(s) {missing}"] if missing else [])))
        for name, value in entry.items():
            kind = _FIELD_TYPES[name]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise ValueError(f"{where}: {name} must be {' or '.join(k.__name__ for k in _tuple(kind))}, "
                                 f"got {value!r}")
        papers.append(Paper(**{name: float(v) if name == "gpu_tolerance" else v for name, v in entry.items()}))
    return tuple(papers)


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


#: The Python types a field of ``paperlist.yaml`` may take (YAML reads ``1.0e-6`` as a float, ``1e-6``
#: as a string: the check names the field rather than failing later).
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "key": str, "title": str, "short_title": str, "cli_help": str,
    "in_summary": bool, "data_protocol": bool, "time_ordered": bool, "gpu_tolerance": (float, int),
}

#: Every paper, in the papers' order.
PAPERS: tuple[Paper, ...] = _load(_LIST_FILE)

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
