// Drives Debian's chromium, headless, with the unpacked flycode extension against local copies of
// the chat sites' markup (tests/browser/sites), served over HTTPS under the sites' own host
// names (mapped to loopback with --host-resolver-rules, a certificate made for the run), and a
// real `flycode watch --browser`. Each check prints one line; the exit status is the count of
// failed checks. Run by tests/suite/browser_companion.rs:
//
//   FLYCODE=target/debug/flycode WORK=/tmp/x [SHOTS=dir] node tests/browser/run.mjs
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:https";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../..");
const extension = path.join(repo, "browser/extension");
const work = process.env.WORK;
const shots = process.env.SHOTS;
const SITES = {
  "chatgpt.com": { page: "chatgpt.html", path: "/c/6a1f0c2e-conversation-one" },
  "claude.ai": { page: "claude.html", path: "/chat/0b7d51aa-5c1e-4d2f-9a3b-conversation1" },
  "chat.deepseek.com": { page: "deepseek.html", path: "/a/chat/s/3f9e2d1c-conversation-one" },
  "gemini.google.com": { page: "gemini.html", path: "/app/8c2b7e4f1a9d" },
  "aistudio.google.com": { page: "aistudio.html", path: "/prompts/1AbCdEfGhIjKl" },
  "www.kimi.com": { page: "kimi.html", path: "/chat/cuq3h25m2citjh45prb0" },
  "chat.qwen.ai": { page: "qwen.html", path: "/c/5d7e9f1a-conversation-one" },
  "grok.com": { page: "grok.html", path: "/c/9e8d7c6b-conversation-one" },
};
const only = process.env.SITES ? process.env.SITES.split(",") : Object.keys(SITES);

let failures = 0;
function check(name, ok, detail = "") {
  console.log(`${ok ? "ok" : "FAILED"} - ${name}${ok || !detail ? "" : ": " + detail}`);
  if (!ok) failures++;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const value = await fn();
    if (value) return value;
    await sleep(50);
  }
  return null;
}

// The certificate the sites are served with, made for this run.
function certificate() {
  const key = path.join(work, "site.key");
  const cert = path.join(work, "site.crt");
  const names = Object.keys(SITES).map((h) => `DNS:${h}`).join(",");
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
    "-days", "1", "-subj", "/CN=flycode test sites", "-addext", `subjectAltName=${names}`], { stdio: "ignore" });
  return { key: fs.readFileSync(key), cert: fs.readFileSync(cert) };
}

function serveSites() {
  const server = createServer(certificate(), (req, res) => {
    const host = (req.headers.host || "").split(":")[0];
    const site = SITES[host];
    const file = req.url === "/chat.js" ? "chat.js" : req.url.startsWith("/c/changed-markup") ? "changed.html" : site && site.page;
    if (!file) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { "Content-Type": file.endsWith(".js") ? "text/javascript" : "text/html; charset=utf-8" });
    res.end(fs.readFileSync(path.join(here, "sites", file)));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// flycode runs on a terminal of its own (`script` gives it a pseudo-terminal), as a person runs
// it: its approval questions are asked there, and the test answers them by typing.
function startFlycode(root) {
  const command = [process.env.FLYCODE, "watch", "--browser", "0", "--root", root].map((a) => `'${a}'`).join(" ");
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    env: { ...process.env, FLYCODE_STATE_DIR: path.join(work, "state"), XDG_CONFIG_HOME: path.join(work, "config"), DISPLAY: "", NO_COLOR: "1", TERM: "dumb" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const link = new Promise((resolve, reject) => {
    child.stdout.on("data", (chunk) => {
      stderr += chunk;
      const match = stderr.match(/http:\/\/127\.0\.0\.1:(\d+)\/pair#([0-9a-f]{32})/);
      if (match) resolve(match[0]);
    });
    child.on("exit", () => reject(new Error("flycode watch ended: " + stderr)));
  });
  return {
    child,
    link,
    stderr: () => stderr,
    type: (text) => child.stdin.write(text),
  };
}

const call = (id, tool, args) => ({ lang: "flycode-call", code: JSON.stringify({ id, tool, args }, null, 2) });

async function main() {
  const root = path.join(work, "root");
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(path.join(root, "notes.txt"), "the first line of notes\nsecond\n");
  const sites = await serveSites();
  const port = sites.address().port;
  const flycode = startFlycode(root);
  const link = await flycode.link;
  const rules = Object.keys(SITES).map((h) => `MAP ${h} 127.0.0.1:${port}`).join(", ");
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    pipe: true,
    enableExtensions: [extension],
    args: ["--no-sandbox", `--host-resolver-rules=${rules}`, "--ignore-certificate-errors", "--window-size=1000,800"],
  });
  try {
    const workerTarget = await browser.waitForTarget((t) => t.type() === "service_worker" && t.url().startsWith("chrome-extension://"));
    const worker = await workerTarget.worker();

    // Pairing: the printed link, opened in the browser.
    const pairing = await browser.newPage();
    await pairing.goto(link);
    const paired = await until("paired", () => pairing.$eval("#state", (el) => el.getAttribute("data-flycode-paired")).catch(() => null));
    check("opening the printed link pairs the extension", paired === "yes", paired);
    if (shots) await pairing.screenshot({ path: path.join(shots, "pairing.png") });
    await pairing.close();

    for (const host of only) {
      const site = SITES[host];
      const url = `https://${host}${site.path}`;
      const page = await browser.newPage();
      await page.setViewport({ width: 1000, height: 800 });
      await page.goto(url);
      // History: a reply on the page when it loads never runs.
      const historyFile = path.join(root, `${host}-history.txt`);
      await page.evaluate((parts) => window.fake.history(parts), ["Earlier:", call("h1", "fs.write", { path: historyFile, content: "no\n", mode: "overwrite" })]);
      await page.reload();
      await page.evaluate((parts) => window.fake.history(parts), ["Earlier:", call("h1", "fs.write", { path: historyFile, content: "no\n", mode: "overwrite" })]);
      // The person's own message with a call in it.
      const personFile = path.join(root, `${host}-person.txt`);
      await page.evaluate((parts) => window.fake.user(parts), [call("p1", "fs.write", { path: personFile, content: "no\n", mode: "overwrite" })]);
      await sleep(2500);
      check(`${host}: a reply present at load does not run`, !fs.existsSync(historyFile));
      check(`${host}: the person's own message does not run`, !fs.existsSync(personFile));

      // A reply streamed over 2 s: nothing runs while it is written, then it runs once.
      const target = path.join(root, `${host}-made.txt`);
      const streamed = page.evaluate((parts) => window.fake.reply(parts, 2000), [call("w1", "fs.write", { path: target, content: "one\n", mode: "append" })]);
      await sleep(1000);
      check(`${host}: nothing runs while the reply streams`, !fs.existsSync(target) && (await page.evaluate(() => window.fake.streaming)));
      await streamed;
      const started = Date.now();
      const inserted = await until("inserted", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("```flycode-result") && t));
      check(`${host}: the call runs and its result lands in the message box`, Boolean(inserted) && fs.existsSync(target), inserted || "nothing inserted");
      check(`${host}: the result is the whole block of that call`, Boolean(inserted) && inserted.includes("[id] w1") && inserted.includes("[ok] true"), inserted);
      console.log(`# ${host}: reply finished to result in the box: ${Date.now() - started} ms (polled every 50 ms)`);
      const card = await page.$eval("[data-flycode-card]", (el) => el.textContent).catch(() => "");
      check(`${host}: a card by the block says ok`, card.startsWith("flycode · ok"), card);
      check(`${host}: auto-submit is off by default`, (await page.evaluate(() => window.fake.sent.length)) === 0);
      if (shots) await page.screenshot({ path: path.join(shots, `${host}.png`) });

      // Re-render and reload: the same reply is not run again.
      await page.evaluate(() => window.fake.rerender());
      await sleep(1500);
      await page.reload();
      await page.evaluate((parts) => window.fake.history(parts), [call("w1", "fs.write", { path: target, content: "one\n", mode: "append" })]);
      await sleep(2000);
      check(`${host}: a re-render or a reload runs nothing twice`, fs.readFileSync(target, "utf8") === "one\n", fs.readFileSync(target, "utf8"));

      // A refused call: its error on the card, the error result in the box.
      await page.evaluate(() => { window.SITE.clearComposer(); });
      await page.evaluate((parts) => window.fake.reply(parts, 300), [call("o1", "fs.read", { path: "/etc/passwd" })]);
      const refused = await until("refused", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("outside_roots") && t));
      check(`${host}: a refused call answers its error`, Boolean(refused), "no outside_roots result");

      // Auto-submit on for this site: the result is sent.
      await worker.evaluate((h) => chrome.storage.local.get("sites").then(({ sites = {} }) => chrome.storage.local.set({ sites: { ...sites, [h]: { autoInsert: true, autoSubmit: true } } })), host);
      await page.evaluate(() => { window.SITE.clearComposer(); });
      await page.evaluate((parts) => window.fake.reply(parts, 300), [call("r1", "fs.read", { path: path.join(root, "notes.txt") })]);
      const sent = await until("sent", () => page.evaluate(() => window.fake.sent.slice()).then((s) => s.length && s));
      check(`${host}: with auto-submit on, the result is sent`, Boolean(sent) && sent[0].includes("the first line of notes"), JSON.stringify(sent));
      await page.close();
    }
    if (only.includes("chatgpt.com")) {
      // Approvals stay the person's: an asked call waits for the answer typed at flycode's
      // terminal (its card says running meanwhile); a call on a person-only file is refused.
      await worker.evaluate(() => chrome.storage.local.set({ sites: {} }));
      const page = await browser.newPage();
      await page.goto("https://chatgpt.com/c/6a1f0c2e-asked");
      await sleep(1500);
      const asked = path.join(root, "asked.txt");
      const questions = () => (flycode.stderr().match(/Run it\? \[y\/N/g) || []).length;
      const before = questions();
      await page.evaluate((parts) => window.fake.reply(parts, 300), [call("a1", "shell.exec", { command: `echo asked > '${asked}'` })]);
      const shown = await until("question", () => questions() > before, 15000);
      const waiting = await until("card", () => page.$eval("[data-flycode-card]", (el) => el.getAttribute("data-flycode-state")).then((state) => state === "waiting for approval" && state).catch(() => null), 5000);
      check("an asked call is asked at flycode's terminal, waits, and its card says so", Boolean(shown) && Boolean(waiting) && !fs.existsSync(asked), `${waiting} ${flycode.stderr().slice(-300)}`);
      if (shots) await page.screenshot({ path: path.join(shots, "waiting-for-approval.png") });
      flycode.type("y\r");
      const yes = await until("answered", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("[id] a1") && t));
      check("answered yes at the terminal, it runs and its result lands in the box", Boolean(yes) && yes.includes("[ok] true") && fs.existsSync(asked), yes || "");
      await page.evaluate(() => window.SITE.clearComposer());
      const refusedFile = path.join(root, "refused.txt");
      const before2 = questions();
      await page.evaluate((parts) => window.fake.reply(parts, 300), [call("a2", "shell.exec", { command: `echo no > '${refusedFile}'` })]);
      await until("question", () => questions() > before2, 15000);
      flycode.type("n\r");
      const no = await until("answered", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("[id] a2") && t));
      check("answered no, it does not run and the model hears it was refused", Boolean(no) && no.includes("denied_by_policy") && !fs.existsSync(refusedFile), no || "");
      await page.evaluate(() => window.SITE.clearComposer());
      const before3 = questions();
      await page.evaluate((parts) => window.fake.reply(parts, 300), [call("k1", "fs.write", { path: path.join(root, "flycode.toml"), content: "[policy]\napproval = \"auto\"\n", mode: "overwrite" })]);
      const personOnly = await until("refused", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("[id] k1") && t));
      check("a change to flycode's settings stays the person's: refused, nothing asked", Boolean(personOnly) && personOnly.includes("denied_by_policy") && questions() === before3 && !fs.existsSync(path.join(root, "flycode.toml")), personOnly || "");
      await page.close();
    }
    if (only.includes("chatgpt.com")) {
      // A served site whose markup changed past its adapter: the generic adapter takes over,
      // and the extension says so (the badge reads "gen" on that tab).
      const page = await browser.newPage();
      await page.goto("https://chatgpt.com/c/changed-markup");
      await sleep(1500);
      const target = path.join(root, "fallback.txt");
      await page.evaluate((parts) => window.fake.reply(parts, 600), [call("g1", "fs.write", { path: target, content: "generic\n", mode: "overwrite" })]);
      const inserted = await until("inserted", () => page.evaluate(() => window.fake.composerText()).then((t) => t.includes("```flycode-result") && t));
      check("a site whose markup changed falls back to the generic adapter", Boolean(inserted) && fs.existsSync(target), inserted || "nothing inserted");
      const tabs = await worker.evaluate(() => chrome.tabs.query({}).then((tabs) => Promise.all(tabs.map((t) => chrome.action.getBadgeText({ tabId: t.id }).then((text) => ({ url: t.url, text }))))));
      const badge = tabs.find((t) => (t.url || "").includes("changed-markup"));
      check("the extension says it fell back", Boolean(badge) && badge.text === "gen", JSON.stringify(tabs));
      await page.close();
    }
  } finally {
    await browser.close();
    flycode.child.kill();
    sites.close();
  }
  console.log(`# flycode said:\n${flycode.stderr().replace(/\r/g, "").replace(/^/gm, "#   ")}`);
}

main().then(
  () => process.exit(failures),
  (error) => {
    console.log(`FAILED - the run: ${error.stack || error}`);
    process.exit(100);
  }
);
