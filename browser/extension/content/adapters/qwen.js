// Qwen (chat.qwen.ai): a reply is .response-message-content; a code block is
// pre.qwen-markdown-code with its language in .qwen-markdown-code-header, and its code an editor
// whose lines are read one by one (.view-line or .cm-line); the message box is a textarea.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "qwen",
    // The page marks a reply being written.
    signalsStreaming: true,
    hosts: ["chat.qwen.ai"],
    blockSelector: "pre.qwen-markdown-code, pre",
    labelSelector: ".qwen-markdown-code-header div, .qwen-markdown-code-header",
    replies(doc) {
      return Array.from(doc.querySelectorAll(".response-message-content, .qwen-chat-message-assistant"))
        .filter((el) => !el.parentElement.closest(".response-message-content, .qwen-chat-message-assistant"));
    },
    isStreaming(reply, doc) {
      return Boolean(doc.querySelector('.stop-button[aria-label="Stop"], [aria-label="停止"], .qwen-markdown-code-body-streaming'));
    },
    codeText(block) {
      const lines = block.querySelectorAll(".view-lines .view-line, .cm-line");
      if (lines.length) return Array.from(lines, (line) => line.textContent).join("\n");
      const code = block.querySelector("code") || block;
      return code.textContent;
    },
    composer(doc) {
      return doc.querySelector("textarea.message-input-textarea, .qwen-chat-v2-input-textarea, textarea#chat-input");
    },
    sendButton(doc) {
      return doc.querySelector('.chat-prompt-send-button .send-button[aria-label="Send"], button.send-button, [aria-label="发送"], #send-message-button');
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/c\/([0-9a-zA-Z-]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
