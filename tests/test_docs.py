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
NAMESPACES = (
    "constrax",
    "constrax.rigid",
    "constrax.affine",
    "constrax.models",
    "constrax.fit",
    "constrax.interop",
)


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
    """Users have the docs and the published literature, not the project's internal notes
    (README, docs pages, the docstrings and comments of the package, its tests, benchmarks and
    experiments, and the notebooks the site renders)."""
    pattern = re.compile(r"DESIGN\.md|seed [0-9]{3}|seeds/|shared/|\bthe seed\b", re.I)
    offenders = []
    files = [ROOT / "README.md", *DOCS.rglob("*.md")]
    for folder in ("src", "tests", "benchmarks", "experiments"):
        files += [p for p in (ROOT / folder).rglob("*.py") if p != pathlib.Path(__file__)]
    files += sorted((ROOT / "notebooks").glob("*.ipynb"))  # rendered as the tutorials
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# ---------------------------------------------------------------------------------------
# The site builds strictly.
# ---------------------------------------------------------------------------------------


def _mkdocs_build(
    config: pathlib.Path, site: pathlib.Path, execute: bool = False
) -> subprocess.CompletedProcess:
    """`mkdocs build --strict`; the tutorials executed only with `execute` (minutes, not
    seconds: README, "Documentation"), as the published build does."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env["CONSTRAX_DOCS_EXECUTE"] = "true" if execute else "false"
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
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


_EMPTY_PROMPT = re.compile(r"In(?:\s|&nbsp;|\xa0)*\[(?:\s|&nbsp;|\xa0)*\]:")
_FIGURE = re.compile(r'<img[^>]*src="(?:data:image/png;base64,|[^"]+\.png")')


def tutorial_problems(page: str, html: str) -> list[str]:
    """What a tutorial page of an executed build lacks: a figure (an `<img>` of a PNG,
    inline or a file) and outputs (a code cell left as `In [ ]:` was not executed)."""
    problems = []
    if not _FIGURE.search(html):
        problems.append(f"{page}: no figure")
    n = len(_EMPTY_PROMPT.findall(html))
    if n:
        problems.append(f"{page}: {n} code cell(s) not executed (In [ ]:)")
    return problems


def test_tutorial_checker_names_what_is_missing():
    shown = '<div>In\xa0[1]:</div><img src="data:image/png;base64,iVBOR">'
    assert tutorial_problems("n", shown) == []
    assert tutorial_problems("n", "<div>In&nbsp;[&nbsp;]:</div><div>In\xa0[\xa0]:</div>") == [
        "n: no figure",
        "n: 2 code cell(s) not executed (In [ ]:)",
    ]


@pytest.mark.slow
def test_executed_site_shows_every_tutorials_outputs_and_figures(
    tmp_path, subprocess_xla_flags, monkeypatch
):
    """The published build executes the tutorials (mkdocs.yml; the notebooks are committed
    without outputs): every tutorial page shows its outputs and at least one figure, and
    a failing cell fails the build (`allow_errors: false`). The default suite's build
    skips the execution (minutes on a 2-core CPU).

    With `CONSTRAX_EXECUTED_SITE` set, the site there is checked instead of a new build:
    .ci/run sets it to the site the README's documentation command built (executed, in a
    fresh virtual environment) just before, so that CI executes the tutorials once."""
    prebuilt = os.environ.get("CONSTRAX_EXECUTED_SITE")
    if prebuilt:
        site = pathlib.Path(prebuilt)
        assert (site / "index.html").exists(), f"CONSTRAX_EXECUTED_SITE={prebuilt}: no site"
    else:
        pytest.importorskip("mkdocs")
        pytest.importorskip("mkdocstrings_handlers.python")
        pytest.importorskip("mkdocs_jupyter")
        site = tmp_path / "site"
        monkeypatch.setenv("XLA_FLAGS", subprocess_xla_flags)  # the kernels inherit it
        result = _mkdocs_build(ROOT / "mkdocs.yml", site, execute=True)
        assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    problems = []
    for nb in notebooks:
        html = (site / "notebooks" / nb.stem / "index.html").read_text()
        problems += tutorial_problems(nb.stem, html)
        assert "Traceback" not in html, f"{nb.stem}: a traceback on the page"
    assert notebooks and not problems, "\n".join(problems)


def _pyproject_version() -> str:
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1]
    return re.search(r'^version\s*=\s*"([^"]+)"', project, flags=re.M).group(1)


def test_site_shows_version_and_licence_and_whole_signatures(built_site):
    """The header and titles carry the version of pyproject.toml, the footer the licence;
    a long signature is formatted one parameter a line, none left out."""
    import html
    import inspect

    import constrax as cx

    version = _pyproject_version()
    index = (built_site / "index.html").read_text()
    assert f"<title>constrax {version}</title>" in index
    assert re.search(rf"constrax {re.escape(version)} · Apache-2.0", index)
    page = (built_site / "api" / "simulate" / "index.html").read_text()
    start = page.index('id="constrax.simulate"')
    sig = page[page.index("doc-signature", start) :]
    sig = html.unescape(re.sub(r"<[^>]+>", "", sig[: sig.index("</code>")]))
    for name in inspect.signature(cx.simulate).parameters:
        assert re.search(rf"^\s+{name}\b", sig, flags=re.M), f"{name} not on a line of its own"
    assert ") -> Trajectory" in sig
    assert max(len(line) for line in sig.splitlines()) <= 90, sig


def test_changelog_and_citation_name_the_current_version():
    version = _pyproject_version()
    citation = (ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and f"version: {version}" in citation
    assert "license: Apache-2.0" in citation and "title: constrax" in citation
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.parametrize(
    "page, culprit",
    [
        ("# Bad\n\n::: constrax.no_such_symbol\n", "constrax.no_such_symbol"),
        ("# Bad\n\nSee [a page](no_such_page.md).\n", "no_such_page.md"),
        ("# Bad\n\nSee [the solver](index.md#no-such-heading).\n", "no-such-heading"),
    ],
    ids=["missing-symbol", "broken-link", "broken-anchor"],
)
def test_strict_build_fails_naming_what_is_broken(tmp_path, page, culprit):
    """The settings the site uses (strict, link and anchor validation, mkdocstrings) turn a
    missing API symbol or a broken cross-reference into a failed build that names it."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page)
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        textwrap.dedent(f"""\
            site_name: bad
            strict: true
            validation:
              anchors: warn
            markdown_extensions:
              - toc
            plugins:
              - mkdocstrings:
                  handlers:
                    python:
                      paths: [{ROOT / "src"}]
            """)
    )
    result = _mkdocs_build(config, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert culprit in out, out


# ---------------------------------------------------------------------------------------
# The math is typeset in a browser, with no network.
# ---------------------------------------------------------------------------------------


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _dump_dom(browser: str, url: str, profile: pathlib.Path, budget_ms: int = 10000) -> str:
    """The DOM of `url` after its scripts ran (`budget_ms` of virtual time), from one
    headless Chromium process."""
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
        f"--virtual-time-budget={budget_ms}",
        "--dump-dom",
        url,
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def served_site(built_site):
    """The built site over HTTP on the loopback interface (as `mkdocs serve` would), for the
    length of this module's tests."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# TeX left as text: a dollar sign in the prose (outside code blocks and typeset formulas) is
# a formula the Markdown did not hand to KaTeX (`$...\\command...$`, `$6 - $`), or one KaTeX
# was not run on (a notebook's `$...$`); `\\(`, `\\[` are arithmatex delimiters left
# unrendered. A Markdown table the parser did not recognise shows its `|---|` rule.
_RAW_TEX = re.compile(r".{0,30}(?:\$|\\\(|\\\[).{0,30}")
_RAW_TABLE = re.compile(r"\|\s*:?-{3,}:?\s*\|")


def math_problems(page: str, n_katex: int, errors: list[str], text: str) -> list[str]:
    """What is wrong with the maths and tables of one rendered page, from its DOM after the
    scripts ran: `n_katex` typeset formulas, the KaTeX errors' messages, and the page's
    visible text outside code blocks and typeset formulas."""
    problems = [f"{page}: KaTeX error: {e}" for e in errors]
    if page.startswith("notebooks/") and n_katex == 0:
        problems.append(f"{page}: no typeset maths in a tutorial")
    raw = dict.fromkeys(m.strip() for m in _RAW_TEX.findall(text))
    problems += [f"{page}: untypeset TeX in {r!r}" for r in raw]
    if _RAW_TABLE.search(text):
        problems.append(f"{page}: a Markdown table left as text")
    return problems


def test_math_checker_names_the_page_and_the_formula():
    assert math_problems("api/x/", 3, [], "the norm is small") == []
    assert math_problems("api/x/", 3, ["ParseError: x"], "") == [
        "api/x/: KaTeX error: ParseError: x"
    ]
    assert math_problems("rigid/", 1, [], r"the rows $(u_j\times\Delta_j)$ are") == [
        r"rigid/: untypeset TeX in 'the rows $(u_j\\times\\Delta_j)$ are'"
    ]
    assert math_problems("a/", 1, [], "dimension: $6 - $ rank") == [
        "a/: untypeset TeX in 'dimension: $6 - $ rank'"
    ]
    assert math_problems("a/", 1, [], r"raw \(x\)") == [r"a/: untypeset TeX in 'raw \\(x\\)'"]
    assert math_problems("notebooks/n/", 0, [], "") == [
        "notebooks/n/: no typeset maths in a tutorial"
    ]
    assert math_problems("b/", 1, [], "| a | b |\n|---|---|\n| 1 | 2 |") == [
        "b/: a Markdown table left as text"
    ]


# The driver: one page of the served site that loads every other page in turn in an
# iframe (same origin, so it can read the DOM after the page's own scripts ran) and writes
# what it found as JSON. One browser process for the whole site.
_DRIVER = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="frame" style="width:1200px;height:900px"></iframe>
<script>
const PAGES = %s;
const SKIP = "pre, code, script, style, textarea, .katex, .katex-display, .katex-error";
const frame = document.getElementById("frame");
const out = {};
function inspect(page) {
  const doc = frame.contentDocument;
  const errors = [...doc.querySelectorAll(".katex-error")].map(
    (e) => (e.getAttribute("title") || "") + " in " + e.textContent.slice(0, 200));
  const clone = doc.body.cloneNode(true);  // navigation and table of contents included
  clone.querySelectorAll(SKIP).forEach((e) => e.remove());
  out[page] = {n_katex: doc.querySelectorAll(".katex").length, errors: errors,
               text: clone.textContent, title: doc.title};
}
function next(i) {
  if (i === PAGES.length) {
    document.getElementById("result").textContent = JSON.stringify(out);
    return;
  }
  let done = false;
  const finish = () => { if (!done) { done = true; inspect(PAGES[i]); next(i + 1); } };
  // The page's scripts typeset on load; give them a moment of (virtual) time.
  frame.onload = () => setTimeout(finish, 300);
  setTimeout(finish, 15000);
  frame.src = PAGES[i];
}
next(0);
</script></body></html>
"""


def _site_pages(site: pathlib.Path) -> list[str]:
    """Every page of the built site as its URL path (`""` for the landing page)."""
    pages = [p.parent.relative_to(site).as_posix() + "/" for p in site.rglob("index.html")]
    return sorted("" if p == "./" else p for p in pages)


@pytest.fixture(scope="module")
def rendered_pages(built_site, served_site, tmp_path_factory):
    """`{page: {"n_katex", "errors", "text", "title"}}` for every page of the site, read
    from the DOM after its scripts ran in headless Chromium. Needs Chromium (Debian:
    `apt-get install -y chromium`); skipped without it."""
    import html
    import json

    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium installed")
    pages = _site_pages(built_site)
    driver = built_site / "_math_check.html"
    driver.write_text(_DRIVER % json.dumps(["/" + p for p in pages]))
    profile = tmp_path_factory.mktemp("profile")
    dom = _dump_dom(browser, f"{served_site}/_math_check.html", profile, budget_ms=600_000)
    match = re.search(r'<pre id="result">(.*?)</pre>', dom, flags=re.S)
    assert match and match.group(1) != "pending", "the driver page did not finish"
    found = json.loads(html.unescape(match.group(1)))
    return {p: found["/" + p] for p in pages}


def test_every_page_typesets_its_math_in_headless_chromium(rendered_pages):
    """Every page of the built site, tutorials and API pages included, served over HTTP:
    no KaTeX error and no TeX left as text outside code blocks."""
    assert len(rendered_pages) > 40 and "notebooks/01_first_system/" in rendered_pages
    problems = []
    for page, r in rendered_pages.items():
        assert "constrax" in r["title"], f"{page or 'index'}: not loaded ({r['title']!r})"
        problems += math_problems(page or "index", r["n_katex"], r["errors"], r["text"])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "page, minimum",
    [("", 1), ("concepts/prescriptions/", 5), ("api/system/", 5), ("benchmarks/", 5)]
    + [(f"notebooks/{n}/", 5) for n in ("01_first_system", "02_dalembert_vs_vakonomic")]
    + [("notebooks/03_fitting_parameters/", 1)],
)
def test_pages_with_math_typeset_it(rendered_pages, page, minimum):
    n = rendered_pages[page]["n_katex"]
    assert n >= minimum, f"{page or 'index'}: math not typeset ({n} KaTeX elements)"


def _assert_math_typeset(dom: str, page: str, minimum: int = 5):
    n_katex = dom.count('class="katex"')
    assert n_katex >= minimum, f"{page}: math not typeset ({n_katex} KaTeX elements)"
    assert 'class="katex-error"' not in dom, f"{page}: KaTeX reported an error"
    # Every arithmatex span was rendered: no raw \( ... \) left in the visible text.
    text = re.sub(r"<annotation[^>]*>.*?</annotation>", "", dom, flags=re.S)
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", text, flags=re.S)
    text = re.sub(r"<[^>]+>", "", text)
    assert "\\(" not in text and "\\[" not in text, f"{page}: raw math delimiters remain"


def test_site_opened_from_the_file_system_typesets_its_math(built_site, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium installed")
    page = built_site / "concepts" / "solve" / "index.html"
    _assert_math_typeset(_dump_dom(browser, page.as_uri(), tmp_path / "profile"), "solve")


# ---------------------------------------------------------------------------------------
# The examples in the docstrings run.
# ---------------------------------------------------------------------------------------

# Examples that integrate, optimise or solve for accelerations compile large programs
# (seconds to tens of seconds each on a 2-core CPU): they run with `-m slow`; the others
# run in the default suite.
_SLOW_EXAMPLE = re.compile(
    r"simulate|rollout_batch|sharded_vmap|compare_prescriptions|fit\.solve|uncertainty"
    r"|accelerations|is_integrable|distribution_fields|accessibility_rank|singular_config"
    r"|consistent_initial_state|reaction_power|frobenius_residual|primary_constraint|tvlqr"
)


def _docstring_examples():
    """`(id, namespace, code)` for every ```python block in a public docstring."""
    out = []
    for ns in NAMESPACES:
        module = importlib.import_module(ns)
        for name in public_names(module):
            doc = getattr(module, name).__doc__ or ""
            for k, block in enumerate(re.findall(r"```python\n(.*?)```", doc, flags=re.S)):
                out.append((f"{ns}.{name}" + (f"[{k}]" if k else ""), ns, textwrap.dedent(block)))
    return out


def _example_namespace(ns: str, heavy: bool) -> dict:
    """What an example may use without defining it: `cx`, `jax`, `jnp`, `np`, `diffrax`,
    the public names of its own namespace (`hat` in a `cx.rigid` docstring), and a small
    system — the Chaplygin sleigh of the README — as `system`, `q`/`q0`, `qd`/`qd0`, `p`,
    `t`, `mu`; for the `cx.fit` examples also `optax`, `ts`, `ys` (its simulated positions),
    `params`, `guess`, `problem`, and a knife edge steered by `p["u"]` for `knots0`."""
    import diffrax
    import jax
    import jax.numpy as jnp
    import numpy as np

    import constrax as cx

    env = {"cx": cx, "jax": jax, "jnp": jnp, "np": np, "diffrax": diffrax}
    module = importlib.import_module(ns)
    env.update({n: getattr(module, n) for n in public_names(module)})

    def L(t, q, qd, p):
        th = q[2]
        vx = qd[0] - p["a"] * jnp.sin(th) * qd[2]
        vy = qd[1] + p["a"] * jnp.cos(th) * qd[2]
        return 0.5 * p["m"] * (vx**2 + vy**2) + 0.5 * p["I"] * qd[2] ** 2

    def knife(t, q, p):
        return jnp.array([-jnp.sin(q[2]), jnp.cos(q[2]), 0.0])

    system = cx.System(L, [cx.Pfaffian(knife)])
    p = {"m": jnp.array(1.0), "I": jnp.array(0.2), "a": jnp.array(0.5)}
    q, qd = jnp.zeros(3), jnp.array([1.0, 0.0, 2.0])
    env.update(system=system, L=L, p=p, q=q, qd=qd, q0=q, qd0=qd, t=0.0, mu=jnp.zeros(1))
    if ns == "constrax.fit":
        env.update(ts=jnp.linspace(0.0, 2.0, 21), ys=jnp.zeros((21, 3)))
        env["optax"] = pytest.importorskip("optax")
    if heavy and ns == "constrax.fit":
        ts = jnp.linspace(0.0, 2.0, 21)
        ys = cx.simulate(system, q, qd, p, t1=2.0, saveat=diffrax.SaveAt(ts=ts)).q
        guess = {**p, "m": jnp.array(1.3), "I": jnp.array(0.3)}
        obs = cx.fit.Observations(ts, ys, coordinates=(0, 1, 2), sigma=1e-3)
        problem = cx.fit.IdentificationProblem(
            system, obs, q, qd, p, free=lambda p: (p["m"], p["I"]), transforms=cx.fit.Positive()
        )

        def steered(t, q, qd, p):
            u = p["u"](t)
            return jnp.stack([u[0] * jnp.cos(q[2]), u[0] * jnp.sin(q[2]), u[1]])

        def L_knife(t, q, qd, p):
            return 0.5 * p["m"] * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * p["I"] * qd[2] ** 2

        env.update(ts=ts, ys=ys, params=p, guess=guess, problem=problem, obs=obs)
        if "TrajectoryProblem" in env:
            env["knots0"] = jnp.zeros((9, 2))
            env["steered_system"] = cx.System(L_knife, [cx.Pfaffian(knife)], force=steered)
    return env


_EXAMPLES = _docstring_examples()


@pytest.mark.parametrize(
    "name, ns, code",
    [
        pytest.param(*e, id=e[0], marks=[pytest.mark.slow] if _SLOW_EXAMPLE.search(e[2]) else [])
        for e in _EXAMPLES
    ],
)
def test_docstring_example_runs(name, ns, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files (checkpoints) write them here
    if "from_mjcf" in code:  # the MJCF bridge's examples need the optional `mjcf` extra
        pytest.importorskip("mujoco", reason="pip install 'constrax[mjcf]' (.ci/run does)")
    env = _example_namespace(ns, heavy=bool(_SLOW_EXAMPLE.search(code)))
    if name == "constrax.fit.TrajectoryProblem":
        env["system"] = env["steered_system"]
    exec(compile(code, f"<docstring of {name}>", "exec"), env)


def test_every_top_level_function_has_a_runnable_example():
    import constrax as cx

    with_example = {name for name, _, _ in _EXAMPLES}
    missing = [
        f"constrax.{n}"
        for n in public_names(cx)
        if callable(getattr(cx, n))
        and not isinstance(getattr(cx, n), type)
        and f"constrax.{n}" not in with_example
    ]
    assert not missing, f"public functions without a ```python example: {missing}"


def test_sharp_bits_quote_the_messages_the_library_raises():
    """Each constrax message quoted on the sharp-bits page (a ```text block) is the start of
    a message the library raises, word for word."""
    from constrax import _checks, _simulate, _solve

    norm = lambda s: re.sub(r"\s+", " ", s).strip()
    messages = [
        norm(m)
        for m in (_solve._SINGULAR_KKT, _simulate._MAX_STEPS, _solve._INCONSISTENT)
        + (_checks._FORWARD_HINT,)
    ]
    page = (DOCS / "sharp-bits.md").read_text()
    quoted = [
        norm(block.split("Error: ", 1)[1]).removesuffix("...").strip()
        for block in re.findall(r"```text\n(.*?)```", page, flags=re.S)
        if "Error: constrax" in block
    ]
    assert len(quoted) >= 4
    for q in quoted:
        assert any(m.startswith(q) for m in messages), f"not a message of constrax: {q!r}"


# Pages whose snippets cannot run in this process, and what tests them instead.
_NOT_RUNNABLE_HERE = {
    # jax.distributed.initialize must precede every JAX call: tests/test_distributed.py
    # runs the same script in two fresh processes.
    "distributed.md",
    # reads the user's own MJCF files (robot.xml, ...): tests/rigid/test_mjcf.py runs
    # the same calls on the installed gymnasium models.
    "interop/mjcf.md",
}
_PAGES_WITH_CODE = sorted(
    str(p.relative_to(DOCS))
    for p in DOCS.rglob("*.md")
    if "```python" in p.read_text()
    and not p.name.startswith("_")
    and str(p.relative_to(DOCS)) not in _NOT_RUNNABLE_HERE
)


@pytest.mark.slow
@pytest.mark.parametrize("page", _PAGES_WITH_CODE)
def test_docs_page_snippets_run(page, tmp_path, monkeypatch):
    """The ```python blocks of a page run in order, in one namespace, as a reader would."""
    monkeypatch.chdir(tmp_path)
    text = (DOCS / page).read_text()
    env: dict = {}
    for k, block in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.S)):
        exec(compile(block, f"<docs/{page} block {k}>", "exec"), env)
