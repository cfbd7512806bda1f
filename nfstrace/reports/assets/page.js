(function () {
  function key(td) {
    var v = td.getAttribute("data-v");  // raw numbers: no thousands separators
    var n = Number(v);
    return v !== "" && !isNaN(n) ? n : v.toLowerCase();
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var up = th.getAttribute("data-order") !== "asc";
        table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("data-order"); });
        th.setAttribute("data-order", up ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  function check() {
    var divs = document.querySelectorAll(".figure .plotly-graph-div");
    var drawn = 0, failed = [];
    divs.forEach(function (div) {
      var gl = (div.data || []).some(function (t) { return /gl$/.test(t.type || ""); });
      var ok = div._fullLayout && div.querySelector(".main-svg") &&
        (!gl || div.querySelector("canvas"));
      if (ok) { drawn++; } else { failed.push(div.parentNode.getAttribute("data-figure")); }
    });
    var errors = window.__nfstraceErrors;
    document.body.setAttribute("data-figures", String(divs.length));
    document.body.setAttribute("data-figures-drawn", String(drawn));
    document.body.setAttribute("data-errors", String(errors.length));
    if (errors.length || failed.length) {
      var box = document.getElementById("nfstrace-problems");
      box.textContent = "This browser could not draw everything: " +
        (failed.length ? "figures not drawn: " + failed.join(", ") + ". " : "") +
        (errors.length ? "script errors: " + errors.join(" | ") : "");
      box.style.display = "block";
    }
  }
  window.__nfstraceDrawn.then(function () {
    // plotly.js unpacked and run, every figure's script run: for the browser test
    document.body.setAttribute("data-load-ms", String(Math.round(performance.now())));
    setTimeout(check, 500);
  });
})();
