/* The course's site, two small things the theme does not do.

   1. A figure opens at full size on click: each picture of an output is wrapped in a link to its own file
      (a multi-panel figure is drawn wider than the column, so the page shows it scaled down).
   2. Search results quote the pages without raw TeX: Sphinx's search fetches each page's HTML, in which a formula
      is still its TeX source (MathJax typesets it only on the page itself), so the formula is written as text,
      without backslashes and braces, before Sphinx cuts its snippet. */

"use strict";

function linkFiguresToTheirFiles() {
  document.querySelectorAll("div.cell_output img").forEach((img) => {
    if (img.closest("a")) {
      return;
    }
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.className = "figure-full";
    link.title = "Open the figure at full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
}

const GREEK = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", theta: "θ", lambda: "λ",
  mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", Delta: "Δ", nabla: "∇", sum: "Σ",
  cdot: "·", times: "×", approx: "≈", le: "≤", leq: "≤", ge: "≥", geq: "≥", neq: "≠", infty: "∞", to: "→",
  mid: "|", log: "log", exp: "exp", min: "min", max: "max", mathbb: "", mathrm: "", text: "", operatorname: "",
};

function texAsText(tex) {
  return tex
    .replace(/\\[()[\]]/g, " ")
    .replace(/\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}/g, "$1/$2")
    .replace(/\\([A-Za-z]+)/g, (_, name) => (name in GREEK ? GREEK[name] : name))
    .replace(/\\[,;:! ]/g, " ")
    .replace(/[{}]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

function withoutTex(htmlString) {
  const page = new DOMParser().parseFromString(htmlString, "text/html");
  page.querySelectorAll(".math").forEach((el) => {
    el.textContent = texAsText(el.textContent);
  });
  return page.documentElement.outerHTML;
}

function searchWithoutTex() {
  if (typeof Search === "undefined" || !Search.htmlToText || Search.htmlToText.withoutTex) {
    return;
  }
  const original = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => original(withoutTex(htmlString), anchor);
  Search.htmlToText.withoutTex = true;
}

searchWithoutTex();
document.addEventListener("DOMContentLoaded", () => {
  searchWithoutTex();
  linkFiguresToTheirFiles();
});
