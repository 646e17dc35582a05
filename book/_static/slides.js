// The book's slide decks (book/decks.py, book/_slides/): reveal.js with its speaker view ("s"),
// on a 1280×720 slide. A slide taller than that is shrunk to fit (CSS zoom); the zoom is kept in
// the slide's data-fit, which tests/test_book_slides.py reads: a slide shrunk below 0.75 is a
// defect of its marks (split the cell, or make it a sub-slide), not something to hide. A slide
// with room to spare gives it to its figures (growFigures), kept in data-grown.
const WIDTH = 1280;
const HEIGHT = 720;
const ROOM = HEIGHT - 8; // the slide's height less the strip along its bottom the number sits in
const MOST_GROWN = 1.6; // figures are drawn at 100 dots an inch: larger, their labels blur

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
  for (const image of section.querySelectorAll("img")) {
    image.style.width = image.style.maxHeight = ""; // as drawn, before growFigures
  }
  let fit = 1;
  if (contentHeight(section) > ROOM) {
    let low = 0.2;
    let high = 1;
    while (high - low > 0.01) {
      const zoom = (low + high) / 2;
      section.style.zoom = zoom.toFixed(3);
      if (contentHeight(section) > ROOM) high = zoom;
      else low = zoom;
    }
    fit = low;
    section.style.zoom = fit.toFixed(3);
  } else {
    growFigures(section);
  }
  section.dataset.fit = fit.toFixed(3);
}

function growFigures(section) {
  // A figure is drawn at the size its notebook asked for, which leaves half a 1280×720 slide
  // empty beside it. Every figure of the slide grows by one factor from the size it is shown at,
  // the largest at which the slide still fits, up to each figure's column and MOST_GROWN times
  // the size it was drawn at.
  const figures = [...section.querySelectorAll("img")]
    .filter((image) => image.naturalWidth && !image.closest("aside.notes"))
    .map((image) => ({image, shown: image.clientWidth}));
  if (!figures.length) return;
  const grow = (factor) => {
    for (const {image, shown} of figures) {
      const column = image.parentElement.clientWidth || WIDTH;
      const most = Math.max(shown, Math.min(image.naturalWidth * MOST_GROWN, column));
      image.style.maxHeight = "none";
      image.style.width = `${Math.min(shown * factor, most)}px`;
    }
  };
  let low = 1;
  let high = MOST_GROWN * 2;
  while (high - low > 0.01) {
    const factor = (low + high) / 2;
    grow(factor);
    if (contentHeight(section) > ROOM) high = factor;
    else low = factor;
  }
  grow(low);
  section.dataset.grown = low.toFixed(2);
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
