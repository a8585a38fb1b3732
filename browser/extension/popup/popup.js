// The extension's menu: whether flycode runs and is paired, and this site's choices.
"use strict";

(async () => {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  const site = tab && tab.url ? new URL(tab.url).hostname : "";
  const status = await chrome.runtime.sendMessage({ type: "status" });
  document.getElementById("state").textContent =
    status.badge === "" ? "flycode is running and paired" :
    status.badge === "pair" ? "flycode runs but this browser is not paired: open the link flycode watch --browser printed" :
    "flycode is not running: start flycode watch --browser";
  document.getElementById("site").textContent = site ? "On " + site + ":" : "";
  const settings = await chrome.runtime.sendMessage({ type: "settings", site });
  for (const name of ["autoInsert", "autoSubmit"]) {
    const box = document.getElementById(name);
    box.checked = settings[name];
    box.addEventListener("change", () =>
      chrome.runtime.sendMessage({ type: "set", site, values: { [name]: box.checked } })
    );
  }
  const manifest = chrome.runtime.getManifest();
  const served = manifest.content_scripts.some((c) => c.matches.some((m) => m.includes("//" + site + "/")));
  const enable = document.getElementById("enable");
  if (site && tab.url.startsWith("https://") && !served) {
    enable.hidden = false;
    enable.addEventListener("click", async () => {
      const origin = new URL(tab.url).origin + "/*";
      if (!(await chrome.permissions.request({ origins: [origin] }))) return;
      await chrome.scripting.registerContentScripts([{
        id: "generic-" + site,
        matches: [origin],
        js: ["content/adapters/generic.js", "content/engine.js"],
        runAt: "document_idle",
      }]);
      await chrome.scripting.executeScript({ target: { tabId: tab.id }, files: ["content/adapters/generic.js", "content/engine.js"] });
      enable.textContent = "flycode is on for " + site;
      enable.disabled = true;
    });
  }
})();
