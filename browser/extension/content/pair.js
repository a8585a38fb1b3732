// On flycode's pairing page (http://127.0.0.1:PORT/pair#CODE, the link `flycode watch
// --browser` prints): hands the code in the address to the extension's background, which pairs
// with that flycode, and says on the page how it went.
"use strict";

(async () => {
  const code = location.hash.slice(1);
  const state = document.getElementById("state");
  if (!/^[0-9a-f]{32}$/.test(code) || !state) return;
  const answer = await chrome.runtime.sendMessage({ type: "pair", port: Number(location.port) || 80, code });
  state.textContent = answer && answer.paired
    ? "Paired: this browser's flycode companion now answers calls through this flycode."
    : "Not paired: " + ((answer && answer.error) || "no answer from the extension");
  state.setAttribute("data-flycode-paired", answer && answer.paired ? "yes" : "no");
})();
