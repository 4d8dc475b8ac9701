/* The course site's two behaviours, offline and from file:// alike.

   1. sphinx-book-theme draws its own sidebar buttons in the article's header, while the themes'
      click handlers sit on the first .primary-toggle / .secondary-toggle of the page, a copy
      that the book theme hides: a click on any other copy is handed to that first one.
   2. A figure in the article is a link to its image, which opens it at full size. */
document.addEventListener("DOMContentLoaded", () => {
  for (const selector of [".primary-toggle", ".secondary-toggle"]) {
    const [first, ...others] = document.querySelectorAll(selector);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        first.click();
      });
    }
  }
  for (const img of document.querySelectorAll(".bd-article img")) {
    const src = img.getAttribute("src");
    if (!src || src.startsWith("data:") || img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = src;
    link.target = "_blank";
    link.className = "site-figure-full";
    link.title = "Open the figure at full size";
    img.replaceWith(link);
    link.appendChild(img);
  }
});
