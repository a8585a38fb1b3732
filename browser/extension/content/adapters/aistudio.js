// Google AI Studio (aistudio.google.com): each turn is an ms-chat-turn, the model's marked
// .chat-turn-container.model (or data-turn-role="Model"); a code block is ms-code-block with its
// language in data-test-language; the message box is the prompt textarea; Run turns into Stop
// while a reply is written.
"use strict";

flycodeAdapters.push(
  Object.assign(Object.create(globalThis.flycodeGeneric), {
    name: "aistudio",
    // The page marks a reply being written.
    signalsStreaming: true,
    hosts: ["aistudio.google.com"],
    blockSelector: "ms-code-block",
    replies(doc) {
      return Array.from(doc.querySelectorAll('ms-chat-turn .chat-turn-container.model, ms-chat-turn [data-turn-role="Model"], ms-chat-turn .model-prompt-container'))
        .filter((el, i, all) => !all.some((other) => other !== el && other.contains(el)));
    },
    isCallBlock(block) {
      const language = block.getAttribute("data-test-language");
      if (language) return this.isCallLabel(language);
      return globalThis.flycodeGeneric.isCallBlock.call(this, block);
    },
    isStreaming(reply, doc) {
      const run = doc.querySelector("ms-run-button button, run-button button");
      return Boolean(doc.querySelector('rect[class*="stoppable-stop"]') || (run && /^\s*Stop\b/i.test(run.textContent)));
    },
    composer(doc) {
      return doc.querySelector('textarea[formcontrolname="promptText"], ms-prompt-box textarea, ms-chunk-input textarea, textarea[aria-label="Enter a prompt"], ms-prompt-input-wrapper textarea, textarea');
    },
    sendButton(doc) {
      return doc.querySelector('ms-run-button button, run-button button, button[aria-label="Run"]');
    },
    conversation(loc) {
      const match = loc.pathname.replace(/^\/u\/\d+/, "").match(/\/prompts\/([^/?#]+)/);
      return match ? match[1] : loc.pathname;
    },
  })
);
