"""Importing an adapter without its framework says which extra to install."""

import textwrap

import pytest

from conftest import run_python

BLOCK = textwrap.dedent(
    """
    import sys, importlib.abc, importlib.machinery
    blocked = set(sys.argv[1].split(","))
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Block())
    import importlib.util
    real_find_spec = importlib.util.find_spec
    importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in blocked else real_find_spec(name, *a)
    try:
        __import__(sys.argv[2])
    except ModuleNotFoundError as e:
        print(type(e).__name__, e.name, str(e))
    else:
        print("imported")
    """
)


@pytest.mark.parametrize(
    "module, framework, extra",
    [
        ("somna.pure_agents", "pure_agents", "pure-agents"),
        ("somna.openai_agents", "agents", "openai-agents"),
        ("somna.langchain", "langchain_core", "langchain"),
        ("somna.langgraph", "langgraph", "langgraph"),
        ("somna.optillm", "optillm", "optillm"),
        ("somna.anthropic", "anthropic", "anthropic"),
    ],
)
def test_missing_framework_names_the_extra(module, framework, extra):
    p = run_python(BLOCK, framework, module)
    assert p.returncode == 0, p.stderr
    assert f"pip install 'somna[{extra}]'" in p.stdout, p.stdout
    assert p.stdout.startswith(f"ModuleNotFoundError {framework} ")


def test_core_needs_no_framework():
    p = run_python(BLOCK, "pure_agents,agents,langchain_core,optillm,numpy,sklearn,anthropic", "somna")
    assert p.stdout.strip() == "imported", p.stdout + p.stderr
