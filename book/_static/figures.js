/* Every figure a notebook draws opens at full size: on a phone a wide figure is shrunk to the
 * screen's width and its labels are too small to read, so each one is a link to its image file
 * (the reader's browser can zoom it). The link's words are in the page's language. */
(function () {
  "use strict";
  const WORDS = { en: "Open this figure at full size", es: "Abrir esta figura a tamaño completo" };

  function start() {
    const lang = (document.documentElement.lang || "en").slice(0, 2);
    const label = WORDS[lang] || WORDS.en;
    document.querySelectorAll("div.cell_output img").forEach((img) => {
      if (img.closest("a")) return;
      const link = document.createElement("a");
      link.href = img.currentSrc || img.src;
      link.className = "vitcourse-figure-link";
      link.title = label;
      link.setAttribute("aria-label", `${label}: ${img.alt || ""}`.trim());
      img.replaceWith(link);
      link.appendChild(img);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
