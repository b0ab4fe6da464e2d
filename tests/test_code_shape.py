"""The shape of the package (docs/architecture.md): few top-level modules, no long module, no long function.

A module over 600 lines or a function over 100 is split at a seam; the top of the package holds only the
entry point, the configuration, the file helpers and the registry of papers, everything else sits in a
package by concern.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "recrepro"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_TOP_LEVEL_MODULES = 600, 100, 6


def test_the_package_top_holds_at_most_six_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_module_over_600_lines_and_no_function_over_100(module):
    text = module.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{module.name}: {text.count(chr(10))} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


def test_the_shape_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    tree = ast.parse(f"def f():\n{body}\n")
    node = tree.body[0]
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
