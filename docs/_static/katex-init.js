// Typeset the `\(...\)` / `\[...\]` spans that pymdownx.arithmatex (generic mode) emits,
// with the KaTeX vendored in docs/_static/katex (no CDN). The tutorials' notebooks,
// rendered by mkdocs-jupyter, keep Jupyter's `$...$` / `$$...$$` in their Markdown cells:
// those are typeset too, on the notebook pages only (the notebook and its table of
// contents), so that a dollar sign elsewhere on the site stays a dollar sign. Code (`pre`, `code`) is never touched.
const CONSTRAX_DELIMITERS = [
  { left: "\\[", right: "\\]", display: true },
  { left: "\\(", right: "\\)", display: false },
];
const CONSTRAX_NOTEBOOK_DELIMITERS = [
  { left: "$$", right: "$$", display: true },
  ...CONSTRAX_DELIMITERS,
  { left: "$", right: "$", display: false },
];
function constraxTypeset(root) {
  // A notebook page: its Markdown cells and its table of contents (built from the cells'
  // headings) use Jupyter's delimiters.
  if (root.querySelector(".jupyter-wrapper")) {
    for (const el of root.querySelectorAll(".jupyter-wrapper, .md-nav--secondary")) {
      renderMathInElement(el, { delimiters: CONSTRAX_NOTEBOOK_DELIMITERS, throwOnError: false });
    }
  }
  renderMathInElement(root, { delimiters: CONSTRAX_DELIMITERS, throwOnError: false });
}
// Served over HTTP, Material's `document$` fires on every page load, instant navigation
// included.
if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => constraxTypeset(body));
}
// Opened from the file system (site/index.html), `document$` does not fire: typeset once
// the page is loaded.
if (location.protocol === "file:" || typeof document$ === "undefined") {
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => constraxTypeset(document.body));
  } else {
    constraxTypeset(document.body);
  }
}
