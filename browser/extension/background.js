// The extension's background: the one part that talks to flycode, on 127.0.0.1 only. It keeps
// the pairing token and the person's choices (auto-insert, auto-submit per site), answers the
// pages' content scripts, and keeps the badge saying whether flycode runs and is paired.
"use strict";

const DEFAULT_PORT = 4681;

async function stored() {
  const values = await chrome.storage.local.get(["port", "token", "sites"]);
  return {
    port: values.port || DEFAULT_PORT,
    token: values.token || "",
    sites: values.sites || {},
  };
}

async function call(path, body) {
  const { port, token } = await stored();
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: body ? "POST" : "GET",
    headers: Object.assign(
      body ? { "Content-Type": "application/json" } : {},
      token ? { Authorization: `Bearer ${token}` } : {}
    ),
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    value = { error: text.trim() };
  }
  return { status: response.status, value };
}

async function badge() {
  let text = "off";
  let color = "#888";
  try {
    const { status: code } = await status();
    if (code === 200) {
      text = "";
      color = "#2a7";
    } else {
      text = "pair";
      color = "#c80";
    }
  } catch {
    // flycode is not running.
  }
  await chrome.action.setBadgeText({ text });
  await chrome.action.setBadgeBackgroundColor({ color });
  return text;
}

// A site's choices: the person's own for this site (the menu), else flycode's `[browser]`
// settings as the last status reported them, else insert and do not send.
async function siteSettings(site) {
  const { sites } = await stored();
  const { defaults = {} } = await chrome.storage.local.get("defaults");
  const own = sites[site] || {};
  const pick = (name, fallback) =>
    typeof own[name] === "boolean" ? own[name] : typeof defaults[name] === "boolean" ? defaults[name] : fallback;
  return { autoInsert: pick("autoInsert", true), autoSubmit: pick("autoSubmit", false) };
}

// The status, with flycode's settings kept as the sites' defaults.
async function status() {
  const answer = await call("/v1/status");
  if (answer.status === 200 && answer.value.settings) {
    await chrome.storage.local.set({ defaults: answer.value.settings });
  }
  return answer;
}

async function handle(message, sender) {
  switch (message.type) {
    case "pair": {
      // Only the pairing page of flycode on this machine may pair.
      const page = sender.url ? new URL(sender.url) : null;
      if (!page || !["127.0.0.1", "localhost"].includes(page.hostname) || page.pathname !== "/pair") {
        return { paired: false, error: "pairing is done from flycode's own pairing page" };
      }
      await chrome.storage.local.set({ port: message.port });
      const { status, value } = await call("/v1/pair", { code: message.code });
      if (status !== 200 || !value.token) return { paired: false, error: value.error || `flycode answered ${status}` };
      await chrome.storage.local.set({ token: value.token });
      await badge();
      return { paired: true };
    }
    case "reply": {
      const { status, value } = await call("/v1/replies", {
        site: message.site,
        conversation: String(message.conversation),
        text: message.text,
      });
      if (status !== 200) {
        await badge();
        return { error: value.error || `flycode answered ${status}` };
      }
      return value;
    }
    case "settings":
      try {
        await status();
      } catch {
        // flycode is not running: the last settings it reported stand.
      }
      return siteSettings(message.site);
    case "set": {
      const { sites } = await stored();
      sites[message.site] = Object.assign(sites[message.site] || {}, message.values);
      await chrome.storage.local.set({ sites });
      return siteSettings(message.site);
    }
    case "state": {
      // Whether a question about this conversation's call waits at flycode's terminal.
      const { status: code, value } = await status();
      const asking = code === 200 && value.asking;
      return { asking: Boolean(asking && asking.site === message.site && asking.conversation === String(message.conversation)) };
    }
    case "status":
      return { badge: await badge(), ...(await stored()), token: undefined };
    case "fallback":
      await chrome.action.setBadgeText({ text: "gen", tabId: sender.tab && sender.tab.id });
      return {};
    default:
      return { error: "unknown message" };
  }
}

chrome.runtime.onMessage.addListener((message, sender, reply) => {
  // Only this extension's own pages and content scripts reach here (no externally_connectable).
  handle(message, sender).then(reply, (error) => reply({ error: String(error) }));
  return true;
});

chrome.runtime.onStartup.addListener(badge);
chrome.runtime.onInstalled.addListener(badge);
