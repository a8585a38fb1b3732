// Gemini (gemini.google.com): a reply is a model-response with its message-content (the
// thoughts in model-thoughts are left out); a code block is a code-block element, its language
// in .code-block-decoration; the message box is a Quill editor, which drops line feeds given to
// insertText.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "gemini",
    hosts: ["gemini.google.com"],
    signalsStreaming: true,
    blockSelector: "code-block",
    labelSelector: ".code-block-decoration",
    insertsByLine: true,
    replies(doc) {
      return Array.from(doc.querySelectorAll("model-response message-content")).filter((el) => !el.closest("model-thoughts"));
    },
    isStreaming(reply, doc) {
      return Boolean(
        doc.querySelector('button[aria-label="Stop response"], button[aria-label="Stop generation"], mat-icon[fonticon="stop"]') ||
          reply.closest('[aria-busy="true"]')
      );
    },
    codeText(block) {
      const code = block.querySelector('code[role="text"], code') || block;
      return code.textContent;
    },
    composer(doc) {
      return doc.querySelector('rich-textarea .ql-editor[contenteditable="true"], rich-textarea [contenteditable="true"]');
    },
    sendButton(doc) {
      return doc.querySelector('button.send-button, button[aria-label="Send message"], [data-send-button]');
    },
    conversation(loc) {
      const path = loc.pathname.replace(/^\/u\/\d+/, "");
      const match = path.match(/^\/app\/([^/?#]+)/) || path.match(/^\/gem\/[^/]+\/([^/?#]+)/);
      return match ? match[1] : path;
    },
  })
);
