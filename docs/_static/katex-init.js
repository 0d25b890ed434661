// Typeset the `\(...\)` / `\[...\]` spans that pymdownx.arithmatex (generic mode) emits,
// with the KaTeX vendored in docs/_static/katex (no CDN). Material's `document$` fires on
// every page load, including instant navigation.
function constraxTypeset(root) {
  renderMathInElement(root, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    throwOnError: false,
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => constraxTypeset(body));
} else {
  document.addEventListener("DOMContentLoaded", () => constraxTypeset(document.body));
}
