// Claude (claude.ai): a reply is .font-claude-response (earlier: [data-testid="assistant-message"],
// .font-claude-message) inside an element whose data-is-streaming says whether it is being
// written; the person's are [data-testid="user-message"]; the message box is a ProseMirror
// editor.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "claude",
    hosts: ["claude.ai"],
    signalsStreaming: true,
    replies(doc) {
      return Array.from(doc.querySelectorAll('.font-claude-response, [data-testid="assistant-message"], .font-claude-message'))
        .filter((el) => !el.parentElement.closest('.font-claude-response, [data-testid="assistant-message"], .font-claude-message'));
    },
    isStreaming(reply, doc) {
      return Boolean(
        reply.closest('[data-is-streaming="true"]') ||
          doc.querySelector('[data-is-streaming="true"], button[aria-label="Stop response"]')
      );
    },
    composer(doc) {
      return doc.querySelector('div.ProseMirror[contenteditable="true"], [data-testid="chat-input"], div[contenteditable="true"][role="textbox"]');
    },
    sendButton(doc) {
      return doc.querySelector('button[aria-label="Send message"], button[aria-label="Send Message"], button[aria-label^="Send"]');
    },
    conversation(loc) {
      const match = loc.pathname.match(/\/chat\/([^/]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
