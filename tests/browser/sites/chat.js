// A stand-in for a chat site's page, built from the site's markup (SITE, set by the page that
// loads this script): the conversation so far, a message box, a send button, and a model that
// the test drives (window.fake). Nothing here talks to a network.
"use strict";

window.fake = (() => {
  const site = window.SITE;
  const thread = document.getElementById("thread");
  const sent = [];
  let streaming = false;

  // A rendered message: markdown-ish parts, each a paragraph or a code block with its language.
  function render(parts) {
    const body = document.createElement("div");
    body.className = site.bodyClass || "markdown";
    for (const part of parts) {
      if (typeof part === "string") {
        const p = document.createElement("p");
        p.textContent = part;
        body.appendChild(p);
      } else {
        body.appendChild(site.codeBlock(part.lang, part.code));
      }
    }
    return body;
  }

  function add(role, parts) {
    const el = site.message(role, render(parts));
    thread.appendChild(el);
    return el;
  }

  return {
    sent,
    get streaming() { return streaming; },
    // A message of the person's own.
    user(parts) { return add("user", parts); },
    // A finished reply, drawn at once (history).
    history(parts) { return add("assistant", parts); },
    // A reply written over `ms`, its text growing as a model streams it.
    async reply(parts, ms) {
      const whole = JSON.stringify(parts);
      const el = add("assistant", []);
      streaming = true;
      site.setStreaming(true);
      const steps = 8;
      for (let i = 1; i <= steps; i++) {
        // The parts so far: every code block cut in the middle until the last step.
        const cut = parts.map((part) =>
          typeof part === "string" ? part.slice(0, Math.ceil((part.length * i) / steps))
            : { lang: part.lang, code: part.code.slice(0, Math.ceil((part.code.length * i) / steps)) });
        site.replaceBody(el, render(cut));
        await new Promise((r) => setTimeout(r, ms / steps));
      }
      site.setStreaming(false);
      streaming = false;
      return whole;
    },
    // The page draws every message again as new elements (a framework's re-render).
    rerender() {
      for (const el of Array.from(thread.children)) el.replaceWith(el.cloneNode(true));
    },
    composerText() { return site.composerText(); },
  };
})();

document.getElementById("send").addEventListener("click", () => {
  const text = window.SITE.composerText();
  if (!text.trim()) return;
  window.fake.sent.push(text);
  window.fake.user([text]);
  window.SITE.clearComposer();
});
