// Live refresh: fetch this page's live part every few seconds and put it in place.
// Paused while the tab is hidden or a control in the live part has the focus.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var every = parseInt(live.getAttribute("data-refresh-ms"), 10) || 2000;
  function refresh() {
    if (document.hidden || live.contains(document.activeElement)) { return; }
    fetch(window.location.href, {
      headers: { "X-Durably-Live": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (answer) {
      if (!answer.ok) { throw new Error(String(answer.status)); }
      return answer.text();
    }).then(function (html) {
      live.innerHTML = html;
      live.removeAttribute("data-stale");
    }).catch(function () {
      live.setAttribute("data-stale", "true");
    });
  }
  window.setInterval(refresh, every);
  // A form that destroys much (data-confirm) asks first; no inline script may.
  document.addEventListener("submit", function (event) {
    var asked = event.target.getAttribute("data-confirm");
    if (asked && !window.confirm(asked)) { event.preventDefault(); }
  });
})();
