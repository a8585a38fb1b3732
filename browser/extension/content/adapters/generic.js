// The generic adapter: any page whose latest model reply shows a code block labelled
// `flycode-call`, and a message box that is a textarea or a contenteditable editor. The site
// adapters in this folder start from it and name their own markup; when a site's markup has
// changed so that its adapter finds nothing, the engine falls back to this one and says so.
"use strict";

var flycodeAdapters = globalThis.flycodeAdapters || (globalThis.flycodeAdapters = []);

globalThis.flycodeGeneric = {
  name: "generic",
  // The hosts this adapter is for; the generic one serves any page it is enabled on.
  hosts: [],
  // Whether the page marks a reply being written (then a short rest of its text suffices).
  signalsStreaming: false,
  // The element that is one rendered code block, label and code (replaced by its fenced text
  // when the reply is read, and followed by flycode's card).
  blockSelector: "pre",
  // The element, inside a block, that names its language.
  labelSelector: "",
  // Model replies, oldest first. Generic: elements the page marks as the assistant's, else the
  // elements holding a flycode-call block.
  replies(doc) {
    const marked = doc.querySelectorAll(
      '[data-message-author-role="assistant"], [data-role="assistant"], .assistant-message, [data-author="assistant"]'
    );
    if (marked.length) return Array.from(marked);
    const seen = new Set();
    for (const block of this.callBlocks(doc)) {
      const holder = block.closest("article, li, section, [class*='message']") || block.parentElement;
      if (holder) seen.add(holder);
    }
    return Array.from(seen);
  },
  // Whether the page is still writing `reply` (the engine also waits for its text to rest).
  isStreaming(reply, doc) {
    return Boolean(
      doc.querySelector('button[aria-label*="Stop" i], button[data-testid*="stop" i]') ||
        reply.closest('[data-is-streaming="true"], [aria-busy="true"]')
    );
  },
  // Whether `text` is the label of a flycode-call block (some sites capitalise labels).
  isCallLabel(text) {
    return /^\s*flycode-call\s*$/i.test(text || "");
  },
  // Whether the rendered `block` is labelled flycode-call: its code's language class, its label
  // element, or, generically, an element of its header (or just before it) that says so.
  isCallBlock(block) {
    if (block.querySelector('code[class*="language-flycode-call"], code[data-language="flycode-call"]') ||
        (block.matches && block.matches('code[class*="language-flycode-call"]'))) {
      return true;
    }
    if (this.labelSelector) {
      const label = block.querySelector(this.labelSelector);
      if (label) return this.isCallLabel(label.textContent);
    }
    const code = block.querySelector("code");
    const candidates = [block.previousElementSibling];
    for (const child of block.children) if (!child.contains(code) && child !== code) candidates.push(child);
    return candidates.some((el) => el && [el, ...el.querySelectorAll("*")].some((n) => this.isCallLabel(n.textContent)));
  },
  // The rendered flycode-call blocks of `root`, in document order.
  callBlocks(root) {
    const found = [];
    for (const block of root.querySelectorAll(this.blockSelector)) {
      if (found.some((outer) => outer.contains(block))) continue;
      if (this.isCallBlock(block)) found.push(block);
    }
    if (!found.length && this.blockSelector !== "pre") {
      // The site's block markup changed, but the code may still say its language.
      for (const code of root.querySelectorAll('code[class*="language-flycode-call"]')) found.push(code.closest("pre") || code);
    }
    return found;
  },
  // The code a block shows, as its text.
  codeText(block) {
    const code = block.matches("code") ? block : block.querySelector("code") || block.querySelector("pre") || block;
    return code.textContent;
  },
  // The reply as the model wrote it: its text, with each flycode-call block fenced again (a
  // rendered page shows the block without its fence, and with labels and buttons around it).
  replyText(reply) {
    const blocks = this.callBlocks(reply);
    if (!blocks.length) return reply.innerText;
    const clone = reply.cloneNode(true);
    for (const extra of clone.querySelectorAll("[data-flycode-card]")) extra.remove();
    const cloned = this.callBlocks(clone);
    cloned.forEach((block, i) => {
      const fenced = clone.ownerDocument.createElement("pre");
      fenced.textContent = "\n```flycode-call\n" + this.codeText(blocks[i]).replace(/\n$/, "") + "\n```\n";
      block.replaceWith(fenced);
    });
    for (const extra of clone.querySelectorAll("button, [role='button']")) extra.remove();
    const holder = clone.ownerDocument.createElement("div");
    holder.style.cssText = "position:fixed;left:-99999px;top:0;white-space:pre-wrap";
    holder.appendChild(clone);
    clone.ownerDocument.body.appendChild(holder);
    const text = holder.innerText;
    holder.remove();
    // A label left just before a block (drawn outside it).
    return text.replace(/^flycode-call\s*\n(?=\s*```flycode-call)/gim, "");
  },
  // Whether the reply holds a call of seed 000's tag dialect.
  hasTags(reply) {
    return /<(bash_call|builtin|create_agent|return)\b/.test(reply.textContent);
  },
  composer(doc) {
    return (
      doc.querySelector('div[contenteditable="true"].ProseMirror') ||
      doc.querySelector('[contenteditable="true"][role="textbox"]') ||
      doc.querySelector("textarea:not([disabled])") ||
      doc.querySelector('[contenteditable="true"]')
    );
  },
  // Whether the editor drops line feeds given to insertText (Quill): then lines are inserted
  // one by one with paragraphs between.
  insertsByLine: false,
  sendButton(doc) {
    return doc.querySelector(
      'button[data-testid="send-button"], button[aria-label*="Send" i], button[type="submit"]'
    );
  },
  // The conversation's id: the page's path.
  conversation(loc) {
    return loc.pathname;
  },
};
