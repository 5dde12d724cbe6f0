// Courier console: keeps a page current by polling the JSON API behind it.
//
// Markup conventions (the server renders the first state with the same markup):
//   <main data-api="/api/..." data-refresh="2000">  what to poll, and how often
//   data-bind="path"       text of the element = value at path (dots for nesting)
//   data-format="int|count|age|time|rate|ratio|online|text"   how to print the value
//   data-list="path"       a tbody holding a <template> row, repeated per item
//   data-href="/x/{id}"    inside a row: a link built from the item's fields
//   data-action="/x/{id}"  the same for a form's action
//   data-show="path"       the element is hidden unless the value at path is set
// Text is always set with textContent, so nothing from the database becomes markup.
"use strict";

(function () {
  const DASH = "\u2014";

  // "a.b" walks into objects; "a|b" takes the first of a and b that is not null.
  function lookup(data, path) {
    for (const choice of path.split("|")) {
      const value = choice.split(".").reduce((v, key) => (v == null ? null : v[key]), data);
      if (value != null) return value;
    }
    return null;
  }

  function formatInt(value) {
    return Number(value).toLocaleString("en-US");
  }

  function formatAge(seconds) {
    if (seconds < 60) return seconds.toFixed(1) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.floor(seconds % 60) + " s";
    if (seconds < 86400) return Math.floor(seconds / 3600) + " h " + Math.floor((seconds % 3600) / 60) + " min";
    return Math.floor(seconds / 86400) + " d " + Math.floor((seconds % 86400) / 3600) + " h";
  }

  function formatTime(iso) {
    return iso.replace("T", " ").slice(0, 19) + " UTC";
  }

  const FORMATS = {
    int: (value) => formatInt(value),
    count: (value, data) => (data.count_cap != null && value > data.count_cap
      ? formatInt(data.count_cap) + "+" : formatInt(value)),
    age: (value) => formatAge(Number(value)),
    time: (value) => formatTime(String(value)),
    rate: (value) => Number(value).toFixed(1),
    ratio: (value) => Number(value).toFixed(2),
    online: (value) => (value ? "online" : "offline"),
    text: (value) => String(value),
  };

  function render(element, value, root) {
    const format = FORMATS[element.dataset.format || "text"] || FORMATS.text;
    element.textContent = value == null ? (element.dataset.null || DASH) : format(value, root);
    element.dataset.value = value == null ? "" : String(value);
  }

  // Sets an attribute (href, action) from a pattern such as "/x/{id}"; a pattern
  // naming a missing value removes the attribute.
  function fillPattern(element, attribute, pattern, item) {
    let missing = false;
    const url = pattern.replace(/\{([\w.]+)\}/g, (_, path) => {
      const value = lookup(item, path);
      if (value == null) missing = true;
      return encodeURIComponent(value == null ? "" : value);
    });
    if (missing) element.removeAttribute(attribute);
    else element.setAttribute(attribute, url);
  }

  const BINDERS = {
    bind: (element, item, root) => render(element, lookup(item, element.dataset.bind), root),
    href: (element, item) => fillPattern(element, "href", element.dataset.href, item),
    action: (element, item) => fillPattern(element, "action", element.dataset.action, item),
    show: (element, item) => {
      const value = lookup(item, element.dataset.show);
      element.hidden = value == null || value === false || value === "";
    },
  };

  function bindWithin(scope, item, root, skipLists) {
    Object.entries(BINDERS).forEach(([name, bind]) => {
      scope.querySelectorAll("[data-" + name + "]").forEach((element) => {
        if (skipLists && element.closest("[data-list]")) return;
        bind(element, item, root);
      });
    });
  }

  // The rows are built apart and put in only when they differ from those shown: an
  // unchanged table keeps its elements, so a refresh never swallows a click, a
  // selection or the focus of a row the reader is using.
  function renderList(container, items, root) {
    const template = container.querySelector(":scope > template");
    const built = document.createElement(container.tagName);
    if (!items || items.length === 0) {
      const row = document.createElement("tr");
      const cell = document.createElement("td");
      cell.colSpan = 99;
      cell.className = "empty";
      cell.textContent = container.dataset.empty || "Nothing here.";
      row.appendChild(cell);
      built.appendChild(row);
    } else {
      items.forEach((item) => {
        const fragment = template.content.cloneNode(true);
        bindWithin(fragment, item, root, false);
        built.appendChild(fragment);
      });
    }
    const shown = Array.from(container.children).filter((child) => child !== template);
    const markup = (rows) => rows.map((row) => row.outerHTML).join("");
    if (markup(shown) === markup(Array.from(built.children))) return;
    Array.from(container.childNodes).forEach((node) => {
      if (node !== template) node.remove();
    });
    container.append(...built.childNodes);
  }

  function apply(main, data) {
    bindWithin(main, data, data, true);
    main.querySelectorAll("[data-list]").forEach((container) => {
      renderList(container, lookup(data, container.dataset.list), data);
    });
    document.dispatchEvent(new CustomEvent("courier:data", { detail: data }));
  }

  function setStatus(text, ok) {
    const status = document.getElementById("live-status");
    if (!status) return;
    status.textContent = text;
    status.dataset.ok = ok ? "true" : "false";
  }

  async function refresh(main) {
    if (document.hidden) return; // a hidden tab costs the database nothing
    try {
      const response = await fetch(main.dataset.api, { headers: { Accept: "application/json" } });
      if (response.status === 404) throw new Error("gone: it is no longer stored");
      if (!response.ok) throw new Error("HTTP " + response.status);
      apply(main, await response.json());
      setStatus("live \u00b7 " + new Date().toLocaleTimeString("en-GB"), true);
    } catch (error) {
      setStatus("not updating: " + error.message, false);
    }
  }

  function start() {
    const main = document.querySelector("main[data-api]");
    if (!main) return;
    const every = Number(main.dataset.refresh || 2000);
    setInterval(() => refresh(main), every);
    document.addEventListener("visibilitychange", () => refresh(main));
  }

  window.courierFormat = FORMATS;
  document.addEventListener("DOMContentLoaded", start);
})();
