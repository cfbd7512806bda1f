window.__nfstraceErrors = [];
window.addEventListener("error", function (e) {
  window.__nfstraceErrors.push(String(e.message || e));
});
window.addEventListener("unhandledrejection", function (e) {
  window.__nfstraceErrors.push("unhandled rejection: " + String(e.reason));
});
(function () {
  var original = console.error;
  console.error = function () {
    window.__nfstraceErrors.push(Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
})();
