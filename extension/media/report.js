// The report panel's page script (loaded with the page's CSP nonce). It only forwards clicks on
// `[data-action]` elements to the extension and keeps the view state (the report, scroll position, open
// <details>) with getState/setState so a reloaded or restored panel looks the same.
(function () {
  "use strict";
  const vscode = acquireVsCodeApi();
  const previous = vscode.getState() || {};
  const dataBlock = document.getElementById("distcheck-state");
  let message = null;
  try {
    message = dataBlock ? JSON.parse(dataBlock.textContent || "null") : null;
  } catch {
    message = null;
  }
  const sameTarget = Boolean(message && previous.message && previous.message.target === message.target);
  const state = {
    message: message || previous.message || null,
    scrollY: sameTarget ? previous.scrollY || 0 : 0,
    open: sameTarget && Array.isArray(previous.open) ? previous.open : [],
  };

  function save() {
    vscode.setState(state);
  }

  for (const details of document.querySelectorAll("details[data-key]")) {
    if (state.open.includes(details.dataset.key)) {
      details.open = true;
    }
    details.addEventListener("toggle", () => {
      const key = details.dataset.key;
      state.open = state.open.filter((k) => k !== key);
      if (details.open) {
        state.open.push(key);
      }
      save();
    });
  }

  if (state.scrollY) {
    window.scrollTo(0, state.scrollY);
  }
  let pending = false;
  window.addEventListener("scroll", () => {
    if (pending) {
      return;
    }
    pending = true;
    setTimeout(() => {
      pending = false;
      state.scrollY = window.scrollY;
      save();
    }, 200);
  });

  document.addEventListener("click", (event) => {
    const origin = event.target instanceof Element ? event.target : null;
    const el = origin ? origin.closest("[data-action]") : null;
    if (!el || el.hasAttribute("disabled")) {
      return;
    }
    event.preventDefault();
    let args = {};
    try {
      args = JSON.parse(el.getAttribute("data-args") || "{}");
    } catch {
      args = {};
    }
    vscode.postMessage({ type: el.getAttribute("data-action"), args });
  });

  save();
  document.body.setAttribute("data-ready", "1"); // for UI tests: the click handler is in place
  vscode.postMessage({ type: "ready", args: { target: state.message ? state.message.target : null } });
})();
