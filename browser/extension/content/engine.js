// The engine every chat page runs: it finds the model's latest reply through the site's
// adapter, waits until the reply has finished (the page says it is no longer writing and its
// text has rested), sends it to flycode (through the extension's background, which alone talks
// to 127.0.0.1), shows a card by each call block, and puts the result into the message box.
//
// What it never does: run anything itself, judge a call (flycode does, as at every door), take
// a reply that was on the page before it looked (history, a reload, another tab of the chat),
// take the person's own messages, or send one reply twice in a page's life (and flycode's
// replay store answers a reply sent again without running it).
"use strict";

(() => {
  if (globalThis.flycodeEngineStarted) return;
  globalThis.flycodeEngineStarted = true;

  // A reply counts as finished once the page shows no sign of writing and its text has not
  // changed for a while: briefly where the site marks a reply being written (a stop button,
  // data-is-streaming), longer where only the text's rest can tell.
  const REST_MS = 600;
  const REST_AFTER_SIGNAL_MS = 150;
  // After a conversation opens, replies that appear until the page has been quiet this long are
  // its history.
  const HISTORY_QUIET_MS = 1200;

  const hostAdapter = flycodeAdapters.find((a) => a.hosts.includes(location.hostname));
  let adapter = hostAdapter || globalThis.flycodeGeneric;
  let fellBack = false;

  // Replies already judged or present as history, by element; and by text, for a page that
  // draws a reply again as a new element.
  const judged = new WeakSet();
  const sentTexts = new Set();
  let conversation = null;
  let historyUntil = 0;
  let lastText = null;
  let lastChange = 0;
  let timer = null;

  function startConversation() {
    conversation = adapter.conversation(location);
    historyUntil = Date.now() + HISTORY_QUIET_MS;
    markHistory();
  }

  function markHistory() {
    for (const reply of adapter.replies(document)) judged.add(reply);
  }

  function schedule(delay) {
    clearTimeout(timer);
    timer = setTimeout(look, delay);
  }

  function look() {
    if (adapter.conversation(location) !== conversation) startConversation();
    // While a conversation's history is still being drawn, everything drawn is history.
    if (Date.now() < historyUntil) {
      markHistory();
      return schedule(historyUntil - Date.now() + 50);
    }
    const replies = adapter.replies(document);
    if (!replies.length && hostAdapter && !fellBack && adapter.callBlocks(document).length) {
      // The site's markup no longer matches its adapter: the generic one takes over.
      fellBack = true;
      adapter = globalThis.flycodeGeneric;
      // The same conversation, named the generic way: what is on the page now is not history.
      conversation = adapter.conversation(location);
      chrome.runtime.sendMessage({ type: "fallback", site: location.hostname });
      return schedule(0);
    }
    const reply = replies[replies.length - 1];
    if (!reply || judged.has(reply)) return;
    const text = reply.textContent;
    if (text !== lastText) {
      lastText = text;
      lastChange = Date.now();
      return schedule(adapter.signalsStreaming ? REST_AFTER_SIGNAL_MS : REST_MS);
    }
    const rest = adapter.signalsStreaming ? REST_AFTER_SIGNAL_MS : REST_MS;
    if (adapter.isStreaming(reply, document)) return schedule(rest);
    if (Date.now() - lastChange < rest) return schedule(rest - (Date.now() - lastChange));
    judged.add(reply);
    const blocks = adapter.callBlocks(reply);
    if (!blocks.length && !adapter.hasTags(reply)) return;
    const replyText = adapter.replyText(reply);
    const key = conversation + "\n" + replyText;
    if (sentTexts.has(key)) return;
    sentTexts.add(key);
    send(reply, blocks, replyText);
  }

  function card(block, state, line) {
    const anchor = block;
    let el = anchor.nextElementSibling;
    if (!el || !el.hasAttribute("data-flycode-card")) {
      el = document.createElement("div");
      el.setAttribute("data-flycode-card", "");
      el.style.cssText =
        "font:12px/1.4 system-ui,sans-serif;margin:4px 0 8px;padding:4px 8px;border-radius:6px;border:1px solid #8884;max-width:100%;overflow:hidden;text-overflow:ellipsis;white-space:nowrap";
      anchor.after(el);
    }
    el.setAttribute("data-flycode-state", state);
    // Text only: a result's line is shown, never interpreted.
    el.textContent = "flycode · " + state + (line ? " · " + line : "");
    const colors = { running: "#888", "waiting for approval": "#c80", ok: "#2a7", error: "#c33", ignored: "#888", offline: "#c80" };
    el.style.color = colors[state] || "#888";
  }

  async function send(reply, blocks, text) {
    for (const block of blocks) card(block, "running", "");
    // While the answer is awaited, whether flycode is asking the person about it.
    let answered = false;
    const watchQuestion = async () => {
      while (!answered) {
        await new Promise((r) => setTimeout(r, 400));
        if (answered) return;
        const state = await chrome.runtime.sendMessage({ type: "state", site: location.hostname, conversation }).catch(() => null);
        if (answered) return;
        for (const block of blocks) {
          card(block, state && state.asking ? "waiting for approval" : "running", state && state.asking ? "answer at flycode's terminal" : "");
        }
      }
    };
    watchQuestion();
    let answer;
    try {
      answer = await chrome.runtime.sendMessage({
        type: "reply",
        site: location.hostname,
        conversation,
        text,
      });
    } catch (error) {
      answer = { error: String(error) };
    }
    answered = true;
    if (!answer || answer.error) {
      for (const block of blocks) card(block, "offline", (answer && answer.error) || "flycode is not reachable");
      return;
    }
    if (answer.handled !== "answered") {
      for (const block of blocks) card(block, "ignored", answer.advice || "");
      return;
    }
    for (const block of blocks) card(block, answer.ok ? "ok" : "error", answer.firstLine || answer.code || "");
    const settings = await chrome.runtime.sendMessage({ type: "settings", site: location.hostname });
    if (settings.autoInsert && insert(answer.result) && settings.autoSubmit) submit();
  }

  // Puts `text` into the message box so that the page's own code sees it typed.
  function insert(text) {
    const box = adapter.composer(document);
    if (!box) return false;
    box.focus();
    if (box instanceof HTMLTextAreaElement || box instanceof HTMLInputElement) {
      const proto = box instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
      Object.getOwnPropertyDescriptor(proto, "value").set.call(box, text);
      box.dispatchEvent(new Event("input", { bubbles: true }));
      return true;
    }
    const selection = window.getSelection();
    selection.selectAllChildren(box);
    if (adapter.insertsByLine) {
      // Quill drops line feeds given to insertText: a paragraph between lines instead.
      text.split("\n").forEach((line, i) => {
        if (i) document.execCommand("insertParagraph");
        if (line) document.execCommand("insertText", false, line);
      });
      return box.textContent.trim().length > 0;
    }
    if (!document.execCommand("insertText", false, text) || !box.textContent.trim()) {
      const data = new DataTransfer();
      data.setData("text/plain", text);
      box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    }
    return box.textContent.trim().length > 0;
  }

  function submit() {
    // The page enables its send button once it has seen the text.
    let tries = 0;
    const press = () => {
      const button = adapter.sendButton(document);
      if (button && !button.disabled) return button.click();
      if (++tries < 20) setTimeout(press, 100);
    };
    setTimeout(press, 100);
  }

  startConversation();
  new MutationObserver(() => schedule(50)).observe(document.documentElement, {
    subtree: true,
    childList: true,
    characterData: true,
    attributes: true,
    attributeFilter: ["data-is-streaming", "aria-busy", "data-testid", "disabled"],
  });
  schedule(HISTORY_QUIET_MS);
})();
