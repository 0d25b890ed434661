// Typeset the `\(...\)` / `\[...\]` spans that pymdownx.arithmatex (generic mode) emits,
// with the KaTeX vendored in docs/_static/katex (no CDN).
function constraxTypeset(root) {
  renderMathInElement(root, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    throwOnError: false,
  });
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
