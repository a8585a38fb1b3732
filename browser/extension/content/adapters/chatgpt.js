// ChatGPT (chatgpt.com). Since its autumn 2026 layout a message is a
// [data-chatgpt-search-unit-key] ending in ":assistant" or ":user", a code block is
// div[data-markdown-copy="code-block"] with its language in the [data-markdown-copy="exclude"]
// bar; the earlier layout (data-message-author-role, pre > code.language-X) is still read. A reply
// being written shows the stop button; the message box is #prompt-textarea (ProseMirror).
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "chatgpt",
    hosts: ["chatgpt.com"],
    signalsStreaming: true,
    blockSelector: 'div[data-markdown-copy="code-block"], pre',
    replies(doc) {
      const units = doc.querySelectorAll('[data-chatgpt-search-unit-key$=":assistant"]');
      if (units.length) return Array.from(units);
      return Array.from(doc.querySelectorAll('[data-message-author-role="assistant"], li[data-message-role="assistant"]'));
    },
    isCallBlock(block) {
      const bar = block.querySelector('[data-markdown-copy="exclude"]');
      if (bar) {
        const label = bar.firstElementChild || bar;
        return this.isCallLabel(label.textContent) || this.isCallLabel(bar.textContent.replace(/Copy( code)?$/i, ""));
      }
      return globalThis.flycodeGeneric.isCallBlock.call(this, block);
    },
    isStreaming(reply, doc) {
      return Boolean(
        doc.querySelector('[data-testid="stop-button"], button[aria-label^="Stop stream" i], button[aria-label^="Stop generat" i], form button[aria-label="Stop" i]') ||
          reply.querySelector('[role="status"][aria-busy="true"], .result-streaming')
      );
    },
    composer(doc) {
      return doc.querySelector('#prompt-textarea, textarea[name="prompt"], form [contenteditable="true"].ProseMirror');
    },
    sendButton(doc) {
      return doc.querySelector('[data-testid="send-button"], [data-testid="composer-submit-button"]:not([aria-label*="top" i]), button[aria-label="Send prompt" i]');
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/c\/(?!local-)([\w-]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
