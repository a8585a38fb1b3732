// Grok (grok.com): each message is a .message-bubble, Grok's in a row aligned to the start
// (.items-start), the person's to the end; a code block is [data-testid="code-block"] with its
// language in .font-mono.text-xs; the message box is a tiptap (ProseMirror) editor, or a
// textarea in the earlier layout.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "grok",
    // The page marks a reply being written.
    signalsStreaming: true,
    hosts: ["grok.com"],
    blockSelector: '[data-testid="code-block"]',
    labelSelector: ".font-mono.text-xs",
    replies(doc) {
      return Array.from(doc.querySelectorAll(".items-start .message-bubble"));
    },
    isStreaming(reply, doc) {
      return Boolean(doc.querySelector('button[aria-label="Stop model response"], button[aria-label="Stop generating"]'));
    },
    codeText(block) {
      const code = block.querySelector("pre code, pre") || block;
      return code.textContent;
    },
    composer(doc) {
      return doc.querySelector('.tiptap.ProseMirror[contenteditable="true"], textarea[aria-label="Ask Grok anything"], form textarea');
    },
    sendButton(doc) {
      return doc.querySelector('button[type="submit"][aria-label="Submit"], form button[type="submit"]');
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/(?:c|chat)\/([^/?#]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
