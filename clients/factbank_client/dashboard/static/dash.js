// factbank dashboard: the little JavaScript it has. Live views stream server-rendered HTML
// over server-sent events; destructive forms ask first. No other script runs.
(function () {
  "use strict";
  function live(el) {
    var src = el.getAttribute("data-stream");
    if (!src || !window.EventSource) return;
    var es = new EventSource(src);
    var badge = document.getElementById("live");
    es.addEventListener("rows", function (ev) {
      var empty = el.querySelector("tr.none");
      if (empty) empty.remove();
      var tmp = document.createElement("tbody");
      tmp.innerHTML = ev.data;
      var rows = Array.prototype.slice.call(tmp.children);
      for (var i = rows.length - 1; i >= 0; i--) {
        rows[i].classList.add("fresh");
        el.insertBefore(rows[i], el.firstChild);
      }
    });
    es.addEventListener("line", function (ev) {
      el.textContent += ev.data + "\n";
      el.scrollTop = el.scrollHeight;
    });
    es.addEventListener("done", function (ev) {
      var state = document.getElementById(el.getAttribute("data-state"));
      if (state) { state.textContent = ev.data; state.className = "chip " + (ev.data === "exit code 0" ? "t-high" : "t-low"); }
      es.close();
    });
    es.addEventListener("status", function (ev) {
      if (badge) { badge.textContent = "● " + ev.data; badge.classList.add("off"); }
    });
    es.onopen = function () { if (badge) { badge.textContent = "● live"; badge.classList.remove("off"); } };
    es.onerror = function () { if (badge) { badge.textContent = "● reconnecting"; badge.classList.add("off"); } };
  }
  // A log that grows at the bottom (dispatch): rows appended, the view kept at the end.
  function tail(el) {
    var es = new EventSource(el.getAttribute("data-append"));
    es.addEventListener("append", function (ev) {
      el.insertAdjacentHTML("beforeend", ev.data);
      el.scrollTop = el.scrollHeight;
    });
    es.addEventListener("done", function (ev) {
      var state = document.getElementById(el.getAttribute("data-state"));
      if (state) { state.textContent = ev.data; state.className = "chip " + (ev.data.indexOf("done") === 0 ? "t-high" : "t-low"); }
      es.close();
      // the finished run's actions (hand off) come with the page
      setTimeout(function () { window.location.reload(); }, 600);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-stream]").forEach(live);
    document.querySelectorAll("[data-append]").forEach(tail);
    var log = document.getElementById("run-log");
    if (log) log.scrollTop = log.scrollHeight;
    document.querySelectorAll("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (ev) {
        if (!window.confirm(f.getAttribute("data-confirm"))) ev.preventDefault();
      });
    });
  });
})();
