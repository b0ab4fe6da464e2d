"""The `recrepro` command line: the entry points the rules call, and its error reporting."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from recrepro.cli.main import main
from recrepro.paperlist import paper_keys


def test_synth_preprocess_split_round_trip(tmp_path, repo_root):
    raw = tmp_path / "raw" / "synthetic"
    assert main(["data", "synth", "--raw-dir", str(raw), "--spec", '{"users": 40, "items": 200}']) == 0
    assert main(["data", "preprocess", "synthetic", "--protocol", "fedrap", "--config", str(repo_root / "config.yaml"),
                 "--raw-dir", str(raw), "--out-dir", str(tmp_path / "proc")]) == 0
    stats = json.loads((tmp_path / "proc" / "stats.json").read_text())
    assert stats["users"] == 40 and stats["recipe"]["user_min"] == 10
    assert main(["data", "split", "--processed-dir", str(tmp_path / "proc"), "--split", "leave_one_out",
                 "--seed", "3", "--out-dir", str(tmp_path / "split")]) == 0
    manifest = json.loads((tmp_path / "split" / "manifest.json").read_text())
    assert manifest["files"]["test.parquet"]["rows"] == 40
    assert len(pd.read_parquet(tmp_path / "split" / "negatives.parquet")) == 40 * 99


def test_unknown_dataset_is_one_clear_line(capsys):
    assert main(["data", "describe", "movielens-99"]) == 1
    err = capsys.readouterr().err
    assert "movielens-99" in err and "ml-100k" in err and "Traceback" not in err


def test_unknown_protocol_is_one_clear_line(tmp_path, capsys, repo_root):
    raw = tmp_path / "raw"
    main(["data", "synth", "--raw-dir", str(raw), "--spec", '{"users": 20, "items": 20}'])
    assert main(["data", "preprocess", "synthetic", "--protocol", "nope", "--config", str(repo_root / "config.yaml"),
                 "--raw-dir", str(raw), "--out-dir", str(tmp_path / "p")]) == 1
    assert "unknown protocol 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_describe_lists_urls_and_licence(capsys):
    assert main(["data", "describe", "ml-100k"]) == 0
    out = capsys.readouterr().out
    assert "ml-100k.zip" in out and "licence" in out


# ----------------------------------------------------------------------------- one command line
def _subcommands(parser) -> dict:
    """The choices of ``parser``'s subcommand (name -> parser)."""
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _rule_commands(repo_root) -> list[list[str]]:
    """The words after ``recrepro`` up to the first option, of every rule's shell line."""
    import re

    commands = []
    for path in sorted((repo_root / "workflow").rglob("*.smk")):
        for line in path.read_text().splitlines():
            match = re.search(r'"(?:OMP_NUM_THREADS=\S+ )?recrepro ([a-z0-9 -]+?)(?: --| \{|"|$)', line)
            if match:
                commands.append(match.group(1).split())
    return commands


def test_help_lists_the_papers_and_each_paper_its_verbs(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("data", "baseline", "scorecard", "report", *paper_keys()):
        assert f"\n    {command} " in out, command
    with pytest.raises(SystemExit):
        main(["prism", "--help"])
    out = capsys.readouterr().out
    assert "usage: recrepro prism" in out
    for verb in ("train", "figure-wd", "figure-magnitudes", "select-wd", "table", "figure", "figure-theory"):
        assert f"\n    {verb}" in out, verb


def test_every_rule_calls_a_verb_the_parser_knows(repo_root):
    from recrepro.cli.main import build_parser

    smk = "".join(p.read_text() for p in (repo_root / "workflow").rglob("*.smk"))
    assert "recrepro_module" not in smk and "python -m recrepro" not in smk
    commands = _rule_commands(repo_root)
    assert len(commands) > 30
    parser = build_parser()
    for words in commands:
        level = parser
        for word in words:
            choices = _subcommands(level)
            assert word in choices, (words, sorted(choices))
            level = choices[word]
            if not any(a.__class__.__name__ == "_SubParsersAction" for a in level._actions):
                break
    papers = {words[0] for words in commands}
    assert {*paper_keys(), "report", "data"} <= papers


def test_verbs_share_the_spelling_of_common_options():
    """Every figure verb takes --tier, --out-pdf and --out-png; every training verb the run options."""
    from recrepro.cli.main import PAPERS, build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    verbs = {(paper, verb): p for paper in PAPERS for verb, p in _subcommands(commands[paper]).items()}
    verbs[("baseline", "")] = commands["baseline"]
    options = {key: {s for a in p._actions for s in a.option_strings} for key, p in verbs.items()}
    figure_verbs = [key for key, opts in options.items() if "--out-pdf" in opts]
    assert len(figure_verbs) >= 12
    for key in figure_verbs:
        assert {"--tier", "--out-png"} <= options[key], key
    run = {"--split-dir", "--seed", "--out-dir", "--meta", "--device", "--benchmark-file"}
    for key in (("baseline", ""), ("prism", "train"), ("lambdaopt", "train"), ("exadmm", "train"), ("fedrap", "train")):
        assert run <= options[key], (key, run - options[key])


def test_a_data_command_imports_no_paper_code_and_no_torch(fresh_python):
    script = ("import sys; from recrepro.cli.main import main; main(['data', 'describe', 'ml-100k']); "
              "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('recrepro.papers')))")
    assert fresh_python(script) == "[]"


def test_report_table_html(tmp_path):
    md = tmp_path / "results.md"
    md.write_text("# Table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert main(["report", "table-html", "--md", str(md), "--out", str(tmp_path / "results.html")]) == 0
    assert "<table" in (tmp_path / "results.html").read_text()


def test_a_json_option_that_is_not_json_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["exadmm", "table", "--tier", "smoke", "--out-md", "t.md", "--out-csv", "t.csv", "--ks", "[20,",
              "runs"])
    assert info.value.code == 2
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.workflow
@pytest.mark.parametrize("tier", ["smoke", "paper"])
def test_every_planned_job_command_parses(tier, tmp_path):
    """Each job's shell line of a dry run, options and all, is a command the parser accepts."""
    import re
    import shlex

    from test_workflow import REPO, snakemake

    from recrepro.cli.main import build_parser

    proc = snakemake("-n", "-p", "--directory", str(tmp_path), "--configfile", str(REPO / "config.yaml"),
                     "--config", f"tier={tier}")
    lines = [line.split("Shell command: ", 1)[1] for line in proc.stdout.splitlines() if "Shell command: " in line]
    lines = [line for line in lines if line != "None"]  # the target rule
    assert len(lines) > 20
    parser = build_parser()
    seen = set()
    for line in lines:
        # a list handed on through a pipe (`--expected-runs <(printf '%s' '[...]')`) reads as a file
        words = shlex.split(re.sub(r"<\(printf '%s' '[^']*'\)", "/dev/fd/63", line))
        while "=" in words[0]:  # OMP_NUM_THREADS=1
            words.pop(0)
        assert words[0] == "recrepro", line[:200]
        # the command ends at its redirection or pipe (`> log 2>&1`; the data rules: `2>&1 | tee log | grep ...`)
        ends = [i for i, w in enumerate(words) if w in (">", "2>&1", "|")]
        words = words[1:ends[0]] if ends else words[1:]
        args = parser.parse_args(words)  # a usage error exits
        seen.add((args.command, getattr(args, "verb", None)))
    assert {command for command, _ in seen} >= {"data", "baseline", "scorecard", *paper_keys()}


def test_a_figure_with_no_run_records_is_one_clear_line(tmp_path, capsys):
    # a redraw from records asks for a PRISM figure none of whose runs has a record yet
    spec = '{"kind": "debias", "groups": {"BPR": ["mf_bpr_wd0"]}}'
    code = main(["prism", "figure", "--spec", spec, "--tier", "paper", "--dataset", "gowalla",
                 "--out-pdf", str(tmp_path / "f.pdf"), "--out-png", str(tmp_path / "f.png")])
    err = capsys.readouterr().err
    assert code == 1 and "no run records to draw from" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_normalising_a_folder_that_is_not_there_is_one_clear_line(tmp_path, capsys):
    # a typo used to check no record and exit 0 ("0 run records checked")
    with pytest.raises(SystemExit) as exc:
        main(["records", "normalise", str(tmp_path), str(tmp_path / "results/papr")])
    assert "no such folder" in str(exc.value) and "results/papr" in str(exc.value)
    main(["records", "normalise", str(tmp_path)])  # an existing folder with no record is fine
    assert "0 run records checked" in capsys.readouterr().out
