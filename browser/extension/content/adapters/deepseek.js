// DeepSeek (chat.deepseek.com): every message is a div.ds-message; the model's holds
// .ds-assistant-message-main-content, its answer the .ds-markdown outside .ds-think-content. A
// code block is .md-code-block, its language in the banner's .md-code-block-infostring (or its
// first label); the message box is textarea#chat-input.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "deepseek",
    // The page marks a reply being written.
    signalsStreaming: true,
    hosts: ["chat.deepseek.com"],
    blockSelector: ".md-code-block",
    labelSelector: ".md-code-block-infostring",
    replies(doc) {
      return Array.from(doc.querySelectorAll("div.ds-message"))
        .filter((m) => m.querySelector(".ds-assistant-message-main-content"))
        .map((m) => Array.from(m.querySelectorAll(".ds-markdown")).find((md) => !md.closest(".ds-think-content")) || m);
    },
    isStreaming(reply, doc) {
      return Boolean(doc.querySelector('.ds-loading, .ds-button--loading, [aria-label*="Stop"], [aria-label*="停止"]'));
    },
    composer(doc) {
      return doc.querySelector('textarea#chat-input, textarea[placeholder*="DeepSeek"], textarea');
    },
    sendButton(doc) {
      return doc.querySelector('div[role="button"].ds-button--primary[aria-disabled="false"]');
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/(?:a\/)?chat\/s\/([A-Za-z0-9_-]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
