/* A table wider than its column reads as one card per row (a phone: notation tables,
   notebook 06's tables of settings).

   A markdown table on the site keeps its columns and, when they do not fit, scrolls sideways
   inside its box: on a 375 px phone nearly every notation table (paper / fairseq / this course
   / meaning) and notebook 06's six-column tables of settings were read by swiping back and
   forth, a row's first cells out of sight by the time its figures came into view. Here, a
   table that does not fit its box is shown as cards: one per row, each cell on its own line
   after its column's heading (static/site.css: table.table-cards). A table that fits stays a
   table; the choice is made again when the window's width changes.

   The cells keep their table roles for a screen reader (a table shown as blocks loses them in
   some browsers), and the headings stay in the page, out of sight, for it to read. A table
   whose header row does not name every column (no <thead>, or cells spanning columns) is left
   as it is, scrolling. */
(() => {
  const CARDS = "table-cards";

  // the headings of a table's columns, or null when they do not name each cell of every row
  const headings = (table) => {
    const head = table.tHead && table.tHead.rows.length === 1 ? table.tHead.rows[0] : null;
    if (!head || [...head.cells].some((c) => c.colSpan !== 1)) return null;
    const names = [...head.cells].map((c) => c.textContent.trim());
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        if (row.cells.length !== names.length ||
            [...row.cells].some((c) => c.colSpan !== 1 || c.rowSpan !== 1)) return null;
      }
    }
    return names;
  };

  // the box the table is drawn in: the nearest that scrolls sideways, else the article
  const holder = (table) => {
    const article = table.closest(".bd-article");
    for (let e = table.parentElement; e && e !== article; e = e.parentElement) {
      if (["auto", "scroll"].includes(getComputedStyle(e).overflowX)) return e;
    }
    return article || table.parentElement;
  };

  const prepare = (table, names) => {
    table.setAttribute("role", "table");
    for (const group of [table.tHead, ...table.tBodies]) group.setAttribute("role", "rowgroup");
    for (const row of table.rows) row.setAttribute("role", "row");
    for (const cell of table.tHead.rows[0].cells) cell.setAttribute("role", "columnheader");
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        [...row.cells].forEach((cell, i) => {
          cell.setAttribute("role", "cell");
          cell.dataset.heading = names[i];
        });
      }
    }
  };

  const tables = [];

  const fit = () => {
    // every table as a table first, then measured: a width read as cards says nothing
    for (const table of tables) table.classList.remove(CARDS);
    const wide = tables.filter((t) => t.offsetWidth > holder(t).clientWidth + 1);
    for (const table of wide) table.classList.add(CARDS);
  };

  let pending = false;
  const refit = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; fit(); });
  };

  document.addEventListener("DOMContentLoaded", () => {
    for (const table of document.querySelectorAll(".bd-article table")) {
      const names = headings(table);
      if (!names) continue;
      prepare(table, names);
      tables.push(table);
    }
    if (!tables.length) return;
    fit();
    // fonts and typeset maths change a table's width after the page is parsed
    window.addEventListener("load", refit);
    if (document.fonts) document.fonts.ready.then(refit);
    window.addEventListener("resize", refit);
  });
})();
