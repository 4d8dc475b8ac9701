/* The course site's three behaviours, offline and from file:// alike.

   1. sphinx-book-theme draws its own sidebar buttons in the article's header, while the themes'
      click handlers sit on the first .primary-toggle / .secondary-toggle of the page, a copy
      that the book theme hides: a click on any other copy is handed to that first one.
   2. A figure in the article is a link to its image, which opens it at full size.
   3. The search page opened from disk (file://), where a page may not fetch files: Sphinx's
      search fetches each page it found to show the lines around the words; those requests are
      answered from _static/search_pages.js (tools/site/search_pages.py), loaded here on that
      page only. Served over HTTP, nothing changes. */
(() => {
  if (location.protocol !== "file:" || !/(^|\/)search\.html$/.test(location.pathname)) return;
  const root = document.documentElement.dataset.content_root || "";
  const texts = new Promise((resolve) => {
    const script = document.createElement("script");
    script.src = `${root}_static/search_pages.js`;
    script.onload = () => resolve(window.convs2sSearchPages || {});
    script.onerror = () => resolve({});
    document.head.appendChild(script);
  });
  const fetchFile = window.fetch.bind(window);
  window.fetch = async (resource, options) => {
    const url = new URL(resource instanceof Request ? resource.url : String(resource),
                        location.href);
    const pages = await texts;
    const name = decodeURIComponent(url.pathname.split("/").pop());
    if (url.protocol === "file:" && Object.hasOwn(pages, name)) {
      return new Response(pages[name], {headers: {"Content-Type": "text/html; charset=utf-8"}});
    }
    return fetchFile(resource, options);
  };
})();

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
