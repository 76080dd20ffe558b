// Flaketally pages: a click anywhere on a heatmap row opens its test's detail (the row's link alone does it
// without script, by #detail-<key>), and the row of the detail shown is marked.
(() => {
  "use strict";
  const mark = () => {
    for (const row of document.querySelectorAll("tr[data-detail]")) {
      row.classList.toggle("selected", location.hash === "#detail-" + row.dataset.detail);
    }
  };
  document.addEventListener("click", (event) => {
    const target = event.target;
    if (!(target instanceof Element) || target.closest("a")) return;
    const row = target.closest("tr[data-detail]");
    if (row) location.hash = "detail-" + row.dataset.detail;
  });
  window.addEventListener("hashchange", mark);
  mark();
})();
