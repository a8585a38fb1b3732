// Kimi (kimi.com, kimi.moonshot.cn): the model's turns are .chat-content-item-assistant (or
// .segment-assistant), its answer the .markdown outside .thinking-container; a code block is
// .segment-code with its language in .segment-code-lang; the message box is a Lexical editor,
// which takes text typed or pasted, not written into it.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "kimi",
    // The page marks a reply being written.
    signalsStreaming: true,
    hosts: ["kimi.com", "www.kimi.com", "kimi.moonshot.cn"],
    blockSelector: ".segment-code",
    labelSelector: ".segment-code-lang",
    replies(doc) {
      return Array.from(doc.querySelectorAll(".chat-content-item-assistant, .segment-assistant"))
        .filter((el) => !el.parentElement.closest(".chat-content-item-assistant, .segment-assistant"));
    },
    isStreaming(reply, doc) {
      return Boolean(doc.querySelector('svg[name="stop"]'));
    },
    codeText(block) {
      const code = block.querySelector("pre code, pre") || block;
      return code.textContent;
    },
    composer(doc) {
      return doc.querySelector('.chat-input-editor[contenteditable="true"], div[data-lexical-editor="true"][contenteditable="true"]');
    },
    sendButton(doc) {
      return doc.querySelector(".send-button-container:not(.disabled) .send-button, .send-button");
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/chat\/([^/?#]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
