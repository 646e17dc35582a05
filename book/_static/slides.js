// The book's slide decks (book/decks.py, book/_slides/): reveal.js with its speaker view ("s"),
// on a 1280×720 slide. A slide taller than that is shrunk to fit (CSS zoom); the zoom is kept in
// the slide's data-fit, which tests/test_book_slides.py reads: a slide shrunk below 0.75 is a
// defect of its marks (split the cell, or make it a sub-slide), not something to hide.
const WIDTH = 1280;
const HEIGHT = 720;

function contentHeight(section) {
  const top = section.getBoundingClientRect().top;
  let bottom = top;
  for (const child of section.children) {
    if (child.matches("aside.notes")) continue;
    bottom = Math.max(bottom, child.getBoundingClientRect().bottom);
  }
  return (bottom - top) / Reveal.getScale();
}

function fitSlide(section) {
  // The largest zoom at which the slide fits, to 1%: a zoomed slide's text also runs wider (its
  // width is the slide's, in zoomed pixels), so its height does not shrink in proportion.
  if (!section) return;
  section.style.zoom = "";
  let fit = 1;
  if (contentHeight(section) > HEIGHT) {
    let low = 0.2;
    let high = 1;
    while (high - low > 0.01) {
      const zoom = (low + high) / 2;
      section.style.zoom = zoom.toFixed(3);
      if (contentHeight(section) > HEIGHT) high = zoom;
      else low = zoom;
    }
    fit = low;
    section.style.zoom = fit.toFixed(3);
  }
  section.dataset.fit = fit.toFixed(3);
}

window.fitSlides = () => fitSlide(Reveal.getCurrentSlide());

Reveal.initialize({
  hash: true,
  controls: true,
  progress: true,
  slideNumber: "c/t",
  center: false,
  width: WIDTH,
  height: HEIGHT,
  margin: 0.02,
  transition: "none",
  plugins: [RevealNotes],
  pdfMaxPagesPerSlide: 1, // printed (?print-pdf): a page a slide, each fitted as on screen
}).then(() => {
  if (Reveal.isPrintView()) {
    document.querySelectorAll(".reveal .slides section:not(.stack)").forEach(fitSlide);
  }
  window.fitSlides();
  for (const image of document.querySelectorAll(".reveal img")) {
    image.addEventListener("load", window.fitSlides);
  }
});
Reveal.on("slidechanged", window.fitSlides);
