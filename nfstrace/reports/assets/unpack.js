window.__nfstraceDrawn = (function () {
  function run(text) {
    var s = document.createElement("script");
    s.text = text;
    document.head.appendChild(s);  // an inline script runs as it is inserted
    s.remove();  // and has run: the page keeps only its own script elements
  }
  if (typeof DecompressionStream === "undefined") {
    window.__nfstraceErrors.push("this browser cannot unpack the report's plotting " +
      "library (it needs DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or " +
      "later); the tables and the diagnosis are complete");
    return Promise.resolve();
  }
  var text = atob(document.getElementById("PACKED_PLOTLY_ID").textContent.trim());
  var bytes = new Uint8Array(text.length);
  for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
  var js = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(js).text().then(function (plotly) {
    run(plotly);
    document.querySelectorAll('script[type="DEFERRED"]').forEach(function (s) {
      run(s.textContent);
    });
  }).catch(function (e) {
    window.__nfstraceErrors.push("plotting library not unpacked: " + String(e));
  });
})();
