"""The package structure holds at run time too: a rerun, the write that used to cross apps most
(docs/architecture.md, "The pair and its runs"), runs code of at most three apps, besides the journal
entry that every write action records (accounts.actions.journaled)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from corpora.actions.reports import rerun
from tests.corpora.helpers import activated, imported

ROOT = Path(__file__).resolve().parent.parent
APPS = {"accounts", "corpora", "dispatcher", "jobs", "ops", "reports", "runs", "services"}
# Where the journal is written: the decorator of every write action, the names and the entry's model.
JOURNAL = {ROOT / "accounts" / name for name in ("actions.py", "choices.py", "models.py")}


def _apps_run_by(call) -> tuple[list[str], set[str]]:
    """The apps whose functions run while `call()` runs, in the order they are first entered, without
    the journal; and the names of the journal's functions that ran."""
    seen: list[str] = []
    journal: set[str] = set()

    def profile(frame, event, _arg) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename).resolve()
        if path in JOURNAL:
            journal.add(frame.f_code.co_name)
            return
        try:
            package = path.relative_to(ROOT).parts[0]
        except ValueError:  # the standard library, Django, psycopg, ...
            return
        if package in APPS and package not in seen:
            seen.append(package)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen, journal


@pytest.mark.django_db(transaction=True)
def test_a_rerun_runs_code_of_at_most_three_apps(corpus_root):
    imported(corpus_root, "a", documents=3)
    activated("a")
    apps, journal = _apps_run_by(lambda: rerun(corpus_name="a", service_name="tex_to_html", actor="tester"))
    assert apps[0] == "corpora", apps
    assert set(apps) <= {"corpora", "services"}, apps
    assert "record" in journal, journal  # the rerun journaled itself


def _product_modules() -> list[Path]:
    return sorted(
        path
        for package in (*APPS, "config", "conversion", "wiring", "cli")
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_no_module_defines_a_name_it_imports():
    """A class or function defined under a name the module imports hides the import for the rest of the
    module (a DTO named as the vocabulary it uses makes `ClassChange.SHRANK` fail at run time)."""
    hidden = []
    for path in _product_modules():
        tree = ast.parse(path.read_text())
        imported = {
            alias.asname or alias.name.split(".")[0]
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        hidden += [
            f"{path.relative_to(ROOT)}: {node.name}"
            for node in tree.body
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in imported
        ]
    assert hidden == []


def _import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module of the import graph `imports` (module ->
    the modules it imports): each a set of modules that import each other, directly or in a loop (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports[target]))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_import_cycles_are_found():
    assert _import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other():
    """No module imports another that imports it back, directly or in a loop, imports inside functions
    included (pyproject.toml's contracts order the packages; this orders the modules within them)."""
    import grimp

    packages = (*APPS, "config", "conversion", "wiring", "cli")
    graph = grimp.build_graph(*packages, cache_dir=None)
    modules = {module for module in graph.modules if module.split(".")[0] in packages and ".migrations" not in module}
    imports = {module: graph.find_modules_directly_imported_by(module) & modules for module in modules}
    assert _import_cycles(imports) == []


# corpora's presenting modules: its screens, API views, serializers, route tables, template tags and links.
PRESENTING = {"views", "api", "serializers", "urls", "templatetags", "links"}


def _domain_modules_of_corpora() -> list[Path]:
    return sorted(
        path
        for path in (ROOT / "corpora").rglob("*.py")
        if "migrations" not in path.parts and not PRESENTING & {part.removesuffix(".py") for part in path.parts}
    )


def test_corpora_domain_names_no_screen():
    """corpora's domain (its models, queries, actions, tasks, ...) returns names and keys; the app that shows
    them builds their URLs (reports/links.py, runs/links.py, corpora/links.py): no domain module imports
    django.urls or a links module, at the top or inside a function."""
    assert _domain_modules_of_corpora()
    offenders = []
    for path in _domain_modules_of_corpora():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            offenders += [
                f"{path.relative_to(ROOT)}: {name}"
                for name in names
                if name == "django.urls" or name.startswith("django.urls.") or name.split(".")[-1] == "links"
            ]
    assert offenders == []
