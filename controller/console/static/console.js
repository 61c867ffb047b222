// The table console in the browser: sign in, then draw the display from server-sent events and
// send the signed-in person's actions. Everything shown is text (textContent), never markup.
"use strict";
const page = document.body.dataset.page;
let csrf = "";
let actions = [];
let last = null;
let source = null;

const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify(body),
  });
  let doc = {};
  try { doc = await r.json(); } catch (e) { doc = {ok: false, error: "HTTP " + r.status}; }
  return [r.status, doc];
}

async function start() {
  const r = await fetch("/api/session", {credentials: "same-origin"});
  if (r.status !== 200) { showLogin(); return; }
  const s = await r.json();
  csrf = s.csrf;
  actions = s.actions;
  $("whoami").textContent = s.user + " (" + s.role + ")";
  $("login").hidden = true; $("main").hidden = false; $("logout").hidden = false;
  drawActions();
  if (source) source.close();
  source = new EventSource("/api/events");
  source.addEventListener("display", (ev) => { last = JSON.parse(ev.data); draw(last); });
  source.addEventListener("signed_out", () => { source.close(); showLogin(); });
}

function showLogin() {
  $("login").hidden = false; $("main").hidden = true; $("logout").hidden = true;
  $("whoami").textContent = "";
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const [status, doc] = await post("/api/login", {user: f.user.value, password: f.password.value});
  f.password.value = "";
  if (status === 200) { $("login-error").textContent = ""; start(); }
  else $("login-error").textContent = doc.error || ("HTTP " + status);
});

$("logout").addEventListener("click", async () => {
  await post("/api/logout", {});
  if (source) source.close();
  showLogin();
});

function health(h) {
  if (h === null || h === undefined) return ["none at this table", ""];
  return [h, h === "online" ? "good" : (h === "out_of_order" || h === "fault" || h === "failed") ? "bad" : "warn"];
}

function line(target, text, cls) { target.replaceChildren(el("span", text, cls)); }

function draw(d) {
  $("title").textContent = (page === "floor" ? "Floor console" : "Dealer display") + " — " + d.table +
    " (" + d.game + ")  round " + d.round + (d.dealer ? "  dealer " + d.dealer : "");
  const t = d.turn || {};
  let text = t.who ? t.who + ": " + t.what : t.what;
  if (t.hand) text = t.who + " hand " + t.hand + ": " + t.what;
  $("turn").textContent = text;
  $("turn-detail").textContent = (t.legal ? "may: " + t.legal.join(", ") : "") + (t.section ? "  " + t.section : "");
  $("turn-box").classList.toggle("stopped", d.dealing_stopped);

  const alarms = $("alarms");
  alarms.replaceChildren();
  if (!d.alarms.length) alarms.append(el("li", "none"));
  for (const a of d.alarms) {
    const li = el("li");
    li.dataset.alarm = a.id;
    li.append(el("span", "#" + a.id + " "), el("span", a.section, "section"), el("span", " " + a.message + " — "),
              el("span", "floor: " + a.floor_action, a.halts ? "halts" : ""));
    if (page === "floor" && actions.some((x) => x.name === "alarm_acknowledged")) {
      const b = el("button", "Acknowledge", "ack");
      b.addEventListener("click", () => run("alarm_acknowledged", {alarm: a.id}));
      li.append(" ", b);
    }
    alarms.append(li);
  }
  const shoe = d.shoe;
  line($("shoe"), shoe.failed ? "shoe failed: dealing stopped" :
       shoe.batch ? shoe.batch + " batch, " + shoe.cards + " cards" + (shoe.cover_card_reached ? ", cover card out" : "")
                  : "empty", shoe.failed ? "bad" : "");
  const batches = $("batches");
  batches.replaceChildren(...d.batches.map((b) => el("li", b.back + ": " + b.location + ", " + b.shuffler)));
  if ($("reader")) {
    const [h, cls] = health(d.reader.health);
    line($("reader"), d.reader.failed ? "failed: dealing stopped" : h, d.reader.failed ? "bad" : cls);
  }
  if ($("progressive")) {
    line($("progressive"), d.progressive.open ? "open (" + health(d.progressive.health)[0] + ")" : "closed: keypad failed",
         d.progressive.open ? "good" : "bad");
  }
  if ($("devices")) {
    $("devices").replaceChildren(...d.devices.map((x) => {
      const [h, cls] = health(x.health);
      const li = el("li", x.name + " (" + x.kind + "): ");
      li.append(el("span", h, cls));
      return li;
    }));
  }
  if ($("people")) {
    $("people").replaceChildren(...(d.people || []).map((p) => el("li", p.user + " (" + p.role + ")")));
  }
  refreshChoices(d);
}

// The choices of a device or back argument follow the table (devices at it, its batches).
function refreshChoices(d) {
  for (const s of document.querySelectorAll("select[data-choices]")) {
    const want = s.dataset.choices === "device" ? d.devices.map((x) => x.name) : d.batches.map((b) => b.back);
    const have = Array.from(s.options).map((o) => o.value);
    if (want.join() !== have.join()) {
      const keep = s.value;
      s.replaceChildren(...want.map((v) => { const o = el("option", v); o.value = v; return o; }));
      if (want.includes(keep)) s.value = keep;
    }
  }
}

function drawActions() {
  const box = $("actions");
  box.replaceChildren();
  const mine = actions.filter((a) => page === "floor" ? a.roles.includes("floor") : a.roles.includes("dealer"));
  for (const a of mine) {
    const f = el("form", undefined, "action");
    f.dataset.action = a.name;
    f.append(el("strong", a.name.replaceAll("_", " ")), el("small", a.section + " — " + a.doc));
    for (const [name, arg] of Object.entries(a.args)) {
      const label = el("label", name + " ");
      let input;
      if (arg.kind === "bool") {
        input = el("select");
        for (const v of ["false", "true"]) { const o = el("option", v); o.value = v; input.append(o); }
      } else if (arg.choices.length) {
        input = el("select");
        for (const v of arg.choices) { const o = el("option", v.replaceAll("_", " ")); o.value = v; input.append(o); }
      } else if (name === "device" || name === "back") {
        input = el("select"); input.dataset.choices = name;
      } else {
        input = el("input");
        if (arg.kind === "int") { input.type = "number"; if (arg.min !== null) input.min = arg.min; if (arg.max !== null) input.max = arg.max; }
        if (arg.kind === "list") input.placeholder = "1,2,3";
      }
      input.name = name;
      input.required = arg.required && arg.kind !== "bool";
      input.title = arg.doc;
      label.append(input);
      f.append(label);
    }
    f.append(el("button", a.name.replaceAll("_", " ")));
    f.addEventListener("submit", (ev) => { ev.preventDefault(); run(a.name, argsOf(a, f)); });
    box.append(f);
  }
  if (last) refreshChoices(last);
}

function argsOf(a, f) {
  const out = {};
  for (const [name, arg] of Object.entries(a.args)) {
    const v = f.elements[name].value;
    if (v === "" && !arg.required) continue;
    if (arg.kind === "int") out[name] = Number(v);
    else if (arg.kind === "bool") out[name] = v === "true";
    else if (arg.kind === "list") out[name] = v.split(",").filter((x) => x.trim()).map(Number);
    else out[name] = v;
  }
  return out;
}

async function run(name, args) {
  const [status, doc] = await post("/api/actions/" + name, args);
  if (status === 401) { showLogin(); return; }
  const r = $("result");
  r.dataset.action = name;
  r.className = doc.ok ? "good" : "error";
  const error = String(doc.error || "");
  r.textContent = doc.ok ? name + ": done" : error.startsWith(name + ":") ? error : name + ": " + error;
}

start();
