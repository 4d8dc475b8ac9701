/* The course site's three behaviours, offline and from file:// alike.

   1. sphinx-book-theme draws its own sidebar buttons in the article's header, while the themes'
      click handlers sit on the first .primary-toggle / .secondary-toggle of the page, a copy
      that the book theme hides: a click on any other copy is handed to that first one.
   2. A figure in the article is a link to its image, which opens it at full size (a
      <picture>'s: its wide drawing).
   3. The search page opened from disk (file://), where a page may not fetch files: Sphinx's
      search fetches each page it found to show the lines around the words; those requests are
      answered from _static/search_pages.js (tools/site/search_pages.py), loaded here on that
      page only. Served over HTTP, nothing changes.
   4. The search's lines of a page come from its article only: Sphinx's search summarises the
      page's [role="main"] element, which in this theme also holds the article's header
      (its buttons' "Light", "Dark"...), the page's contents list and the footer. */
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

// Sphinx's searchtools.js (on the search page only) is loaded after this file and starts the
// search when the page is loaded: its page-to-text step is wrapped then, before it runs.
const SEARCHED_TEXT = ".bd-article";
document.addEventListener("DOMContentLoaded", () => {
  // searchtools.js declares Search with const: a global binding, not a property of window
  const search = typeof Search === "undefined" ? null : Search;  // eslint-disable-line no-undef
  if (search && typeof search.htmlToText === "function" && !search.convs2sArticleOnly) {
    const toText = search.htmlToText;
    search.htmlToText = (htmlString, anchor) => {
      const page = new DOMParser().parseFromString(htmlString, "text/html");
      const main = page.querySelector('[role="main"]');
      const article = main && main.querySelector(SEARCHED_TEXT);
      if (!article) return toText(htmlString, anchor);
      main.replaceChildren(...article.childNodes);
      return toText(page.documentElement.outerHTML, anchor);
    };
    search.convs2sArticleOnly = true;
  }
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
    // a <picture>'s image stays its child, or the browser no longer picks among its sources
    const figure = img.parentElement.tagName === "PICTURE" ? img.parentElement : img;
    figure.replaceWith(link);
    link.appendChild(figure);
  }
});
