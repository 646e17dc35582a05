/* The menu button (the chapter list) and the contents button (the page's sections), on every
 * screen.
 *
 * pydata-sphinx-theme (0.17 to 0.24 at least) opens its sidebars' dialogs from the *first*
 * `.primary-toggle` and `.secondary-toggle` of a page (`document.querySelector`). Since 0.17 the
 * first ones are in its own header, which sphinx-book-theme 1.4 hides; the buttons a reader sees
 * are sphinx-book-theme's, in the article's header, and nothing listens to them: below the
 * width at which the sidebars sit beside the text, the menu and the contents cannot be opened,
 * and on a wide screen the menu button does not hide the chapter list either.
 * Upstream: pydata/pydata-sphinx-theme#2451, executablebooks/sphinx-book-theme#988.
 *
 * Here each visible toggle does what its icon says: where its sidebar sits beside the text, it
 * hides or shows it; where it does not, it opens the theme's dialog (by clicking the toggle the
 * theme listens to). Remove this file (and its line in conf.py) once the pinned themes bind every
 * toggle: tests/test_book_screens.py opens both at 390, 800 and 1280 pixels.
 */
(function () {
  "use strict";

  function shownBeside(sidebar) {
    // Beside the text: on the screen. Below the desktop layout the theme keeps the sidebar laid
    // out but hidden, off the screen's left edge.
    const box = sidebar.getBoundingClientRect();
    return getComputedStyle(sidebar).visibility === "visible" && box.width > 0 && box.right > 0;
  }

  function wire(kind, sidebarId) {
    const toggles = Array.from(document.querySelectorAll(`.${kind}-toggle`));
    const bound = toggles[0]; // the one the theme listens to
    const sidebar = document.getElementById(sidebarId);
    if (!bound || !sidebar) return;
    toggles.slice(1).forEach((button) => {
      button.setAttribute("aria-controls", sidebarId);
      button.addEventListener("click", (event) => {
        event.preventDefault();
        const hidden = document.documentElement.classList.contains(`vitcourse-hide-${kind}`);
        if (hidden || shownBeside(sidebar)) {
          document.documentElement.classList.toggle(`vitcourse-hide-${kind}`);
          button.setAttribute("aria-expanded", String(hidden));
        } else {
          bound.click();
        }
      });
    });
  }

  // The chapter list's expanders (a module's pages in the reference) carry only an icon: named
  // here for screen readers, in the page's language (axe-core: summary-name). The sidebar is a
  // landmark of its own, so nothing on the page sits outside one (axe-core: region).
  const WORDS = {
    en: { expand: "Show or hide the pages of", chapters: "Chapters" },
    es: { expand: "Mostrar u ocultar las páginas de", chapters: "Capítulos" },
  };

  function name() {
    const words = WORDS[(document.documentElement.lang || "en").slice(0, 2)] || WORDS.en;
    document.querySelectorAll("nav.bd-docs-nav details > summary").forEach((summary) => {
      if (summary.textContent.trim() || summary.getAttribute("aria-label")) return;
      const link = summary.parentElement.parentElement.querySelector(":scope > a");
      const title = link ? link.textContent.trim() : "";
      summary.setAttribute("aria-label", `${words.expand} ${title}`.trim());
    });
    const sidebar = document.getElementById("pst-primary-sidebar");
    if (sidebar && !sidebar.getAttribute("role")) {
      sidebar.setAttribute("role", "navigation");
      sidebar.setAttribute("aria-label", words.chapters);
    }
  }

  function start() {
    wire("primary", "pst-primary-sidebar");
    wire("secondary", "pst-secondary-sidebar");
    name();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
