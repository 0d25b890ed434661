"""The documentation site: every public symbol has an API entry and a docstring, the site
builds with `mkdocs build --strict`, its pages typeset their mathematics in a browser, and
the examples in the docstrings run.

The build and browser tests skip cleanly when mkdocs (the `.[docs]` extra) or Chromium is
not installed.
"""

import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NAMESPACES = ("constrax", "constrax.rigid", "constrax.affine", "constrax.models", "constrax.fit")


# ---------------------------------------------------------------------------------------
# Coverage: every public symbol has a `::: name` entry and a docstring of its own.
# ---------------------------------------------------------------------------------------


def public_names(module: types.ModuleType) -> list[str]:
    """The public symbols of `module`: its `__all__`, else its re-exports (every
    non-underscore attribute that is not a module)."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, obj in vars(module).items()
            if not n.startswith("_") and not isinstance(obj, types.ModuleType)
        ]
    return sorted(names)


def _has_own_docstring(name: str, obj) -> bool:
    doc = getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return False
    if isinstance(obj, type):
        if "__doc__" not in vars(obj) or vars(obj)["__doc__"] is None:
            return False
        # dataclasses (and so equinox Modules) write `Name(field, ...)` when there is none.
        if doc.startswith(f"{name}("):
            return False
    return True


def api_entries(docs_dir: pathlib.Path = DOCS) -> set[str]:
    """Every `::: dotted.name` directive in the Markdown sources under `docs_dir`."""
    entries = set()
    for page in docs_dir.rglob("*.md"):
        entries.update(re.findall(r"^:::\s+([\w.]+)", page.read_text(), flags=re.M))
    return entries


def coverage_problems(modules, entries: set[str]) -> list[str]:
    """One message per public symbol of `modules` that has no API entry or no docstring,
    each naming the symbol as users write it (`constrax.rigid.hat`)."""
    problems = []
    for module in modules:
        for name in public_names(module):
            qualified = f"{module.__name__}.{name}"
            obj = getattr(module, name)
            if qualified not in entries:
                problems.append(f"{qualified}: no API entry (`::: {qualified}` in docs/api/)")
            if not _has_own_docstring(name, obj):
                problems.append(f"{qualified}: no docstring")
    return problems


def test_every_public_symbol_has_an_api_entry_and_a_docstring():
    modules = [importlib.import_module(m) for m in NAMESPACES]
    problems = coverage_problems(modules, api_entries())
    assert not problems, "undocumented public symbols:\n" + "\n".join(problems)


def test_api_entries_name_only_public_symbols():
    """A `::: name` for something that is not (or no longer) public is a stale entry."""
    public = set()
    for m in NAMESPACES:
        public.update(f"{m}.{n}" for n in public_names(importlib.import_module(m)))
    stale = sorted(e for e in api_entries() if e not in public)
    assert not stale, f"API entries for non-public symbols: {stale}"


def test_coverage_checker_names_the_undocumented_symbol():
    fake = types.ModuleType("fakepkg")

    def documented():
        """Has a docstring."""

    def undocumented():
        pass

    class Bare:
        pass

    fake.documented, fake.undocumented, fake.Bare = documented, undocumented, Bare
    fake._private = undocumented
    problems = coverage_problems([fake], {"fakepkg.documented", "fakepkg.undocumented"})
    assert problems == [
        "fakepkg.Bare: no API entry (`::: fakepkg.Bare` in docs/api/)",
        "fakepkg.Bare: no docstring",
        "fakepkg.undocumented: no docstring",
    ]
    fake.__all__ = ["documented"]
    assert coverage_problems([fake], {"fakepkg.documented"}) == []


def test_no_page_or_docstring_cites_internal_notes():
    """Users have the docs and the published literature, not the project's internal notes."""
    pattern = re.compile(r"DESIGN\.md|seed [0-9]{3}|seeds/|shared/|\bthe seed\b", re.I)
    offenders = []
    files = [ROOT / "README.md", *DOCS.rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# ---------------------------------------------------------------------------------------
# The site builds strictly.
# ---------------------------------------------------------------------------------------


def _mkdocs_build(config: pathlib.Path, site: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("mkdocs_jupyter")
    site = tmp_path_factory.mktemp("site")
    result = _mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stdout + result.stderr
    return site


def test_site_builds_strictly_with_every_api_page(built_site):
    assert (built_site / "index.html").exists()
    page = (built_site / "api" / "system" / "index.html").read_text()
    assert 'id="constrax.Holonomic"' in page
    # Signatures show the short aliases of the jaxtyping types.
    assert "HolonomicFn" in page and "jaxlib" not in page
    assert (built_site / "notebooks" / "01_first_system" / "index.html").exists()
    assert (built_site / "experiments" / "figures" / "dalembert_vs_vakonomic.png").exists()
    for f in (built_site / "_static").rglob("*"):
        assert f.stat().st_size < 2 * 2**20, f


def test_strict_build_fails_naming_a_missing_symbol_and_a_broken_link(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(
        "# Bad\n\nSee [a page](no_such_page.md).\n\n::: constrax.no_such_symbol\n"
    )
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        textwrap.dedent(f"""\
            site_name: bad
            strict: true
            plugins:
              - mkdocstrings:
                  handlers:
                    python:
                      paths: [{ROOT / "src"}]
            """)
    )
    result = _mkdocs_build(config, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "constrax.no_such_symbol" in out or "no_such_page.md" in out, out


# ---------------------------------------------------------------------------------------
# The math is typeset in a browser, with no network.
# ---------------------------------------------------------------------------------------


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _dump_dom(browser: str, url: str, profile: pathlib.Path) -> str:
    args = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        url,
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("page", ["concepts/prescriptions/index.html", "api/system/index.html"])
def test_pages_typeset_their_math_in_headless_chromium(built_site, page, tmp_path):
    """Run with Debian's Chromium installed (`apt-get install -y chromium`)."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium installed")
    dom = _dump_dom(browser, (built_site / page).as_uri(), tmp_path / "profile")
    n_katex = dom.count('class="katex"')
    assert n_katex > 5, f"{page}: math not typeset ({n_katex} KaTeX elements)"
    assert 'class="katex-error"' not in dom, f"{page}: KaTeX reported an error"
    # Every arithmatex span was rendered: no raw \( ... \) left in the text.
    text = re.sub(r"<annotation[^>]*>.*?</annotation>", "", dom, flags=re.S)
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"<[^>]+>", "", text)
    assert "\\(" not in text and "\\[" not in text, f"{page}: raw math delimiters remain"


def test_landing_page_renders_in_headless_chromium(built_site, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium installed")
    dom = _dump_dom(browser, (built_site / "index.html").as_uri(), tmp_path / "profile")
    assert "constrax" in dom and 'class="katex"' in dom
