// The table console in the browser: sign in, draw the table from server-sent events, and send the
// signed-in person's actions. Everything shown is text (textContent), never markup.
//
// Connection truth: the server sends an event at least every second. Two seconds without one, or
// the stream failing, and the page covers itself with "connection lost" (nothing it shows is
// current any more), then reconnects by itself with backoff; the cover goes only when a fresh
// display has arrived. A session the server no longer knows (401) is said plainly: signed out.
"use strict";
const page = document.body.dataset.page;
const STALE_MS = 2000;
const RETRY_MS = [500, 1000, 2000, 4000, 8000, 10000];
const SUITS = {S: "\u2660", H: "\u2665", D: "\u2666", C: "\u2663"};
let csrf = "";
let actions = [];
let me = null;            // who is signed in here: {user, role}
let last = null;
let source = null;
let lastBeat = 0;
let live = false;         // a stream is open and has spoken within STALE_MS
let attempt = 0;
let retryTimer = null;
let picked = new Set();   // boxes picked on the layout (the dealer's Start Game, a seat)
let pickedFor = null;     // the ask the pick belongs to (a new ask starts from the sensors)
let pickTouched = false;  // the dealer has picked by hand for this ask
let busy = false;         // a button of the moment was pressed; wait for the table's answer

const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
const words = (name) => name.replaceAll("_", " ");

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

// ------------------------------------------------------------------ connection
async function start() {
  clearTimeout(retryTimer);
  let r;
  try {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), 3000);
    r = await fetch("/api/session", {credentials: "same-origin", signal: ctl.signal});
    clearTimeout(t);
  } catch (e) {
    lost("the table does not answer");
    return;
  }
  if (r.status === 401) { signedOut(attempt > 0 || last !== null); return; }
  if (r.status !== 200) { lost("the table answered HTTP " + r.status); return; }
  const s = await r.json();
  csrf = s.csrf;
  actions = s.actions;
  me = {user: s.user, role: s.role};
  $("whoami").textContent = "signed in: " + s.user + " (" + s.role + ")";
  $("login").hidden = true; $("main").hidden = false; $("logout").hidden = false;
  drawActions();
  openStream();
}

function openStream() {
  if (source) source.close();
  source = new EventSource("/api/events");
  lastBeat = Date.now();
  source.addEventListener("display", (ev) => {
    lastBeat = Date.now();
    last = JSON.parse(ev.data);
    if (!live) recovered();
    draw(last);
  });
  source.addEventListener("alive", () => { lastBeat = Date.now(); });
  source.addEventListener("signed_out", () => { source.close(); source = null; signedOut(true); });
  source.onerror = () => { if (source) lost("the connection to the table is lost"); };
}

function recovered() {
  live = true; attempt = 0;
  $("conn").hidden = true;
  $("main").inert = false;
  document.body.classList.remove("stale");
  setLink("live", "live");
}

function setLink(text, cls) {
  const l = $("link");
  l.textContent = text;
  l.className = "link-state " + cls;
}

function lost(why) {
  if (source) { source.close(); source = null; }
  live = false;
  document.body.classList.add("stale");
  $("main").inert = true;
  const delay = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)];
  attempt += 1;
  $("conn").hidden = false;
  $("conn-text").textContent = "Connection to the table lost: do not deal from this screen";
  $("conn-detail").textContent = why + "; reconnecting in " + (delay / 1000) + " s (attempt " + attempt + ")";
  setLink("offline", "bad");
  clearTimeout(retryTimer);
  retryTimer = setTimeout(start, delay);
}

function signedOut(wasIn) {
  if (source) { source.close(); source = null; }
  live = false;
  clearTimeout(retryTimer);
  $("conn").hidden = true;
  $("main").hidden = true; $("main").inert = false;
  $("logout").hidden = true;
  $("whoami").textContent = "";
  $("login").hidden = false;
  $("login-why").textContent = wasIn ? "Signed out, sign in again (the table restarted or the session ended)." : "";
  setLink(wasIn ? "signed out" : "", "bad");
}

setInterval(() => {
  if (live && Date.now() - lastBeat > STALE_MS) lost("no word from the table for 2 s");
}, 250);

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  let status, doc;
  try {
    [status, doc] = await post("/api/login", {user: f.user.value, password: f.password.value});
  } catch (e) { status = 0; doc = {error: "the table does not answer"}; }
  f.password.value = "";
  if (status === 200) { $("login-error").textContent = ""; $("login-why").textContent = ""; attempt = 0; start(); }
  else $("login-error").textContent = doc.error || ("HTTP " + status);
});

$("logout").addEventListener("click", async () => {
  try { await post("/api/logout", {}); } catch (e) { /* signed out here either way */ }
  if (source) { source.close(); source = null; }
  live = false;
  signedOut(false);
});

// ------------------------------------------------------------------ drawing
function health(h) {
  if (h === null || h === undefined) return ["none at this table", ""];
  return [words(h), h === "online" ? "good" : (h === "out_of_order" || h === "fault" || h === "failed") ? "bad" : "warn"];
}

function line(target, text, cls) { target.replaceChildren(el("span", text, cls)); }

function card(text) {
  if (text === "hole") return el("span", "hole", "card hole");
  const suit = text.slice(-1);
  const c = el("span", text.slice(0, -1) + (SUITS[suit] || suit), "card" + (suit === "H" || suit === "D" ? " red" : ""));
  c.setAttribute("aria-label", text);
  return c;
}

function cards(list) {
  const span = el("span", undefined, "cards");
  for (const c of list) span.append(card(c));
  return span;
}

// A hand's cards; a Second Chance card (673a.7(l)) sideways after them, its value taken away
// from the total before it, as the regulation counts it.
function handCards(row, h) {
  if (!h.second_chance) { row.append(cards(h.cards)); return; }
  row.append(cards(h.cards.slice(0, -1)), el("span", String(h.before), "total before"));
  const sc = card(h.second_chance);
  sc.classList.add("sideways");
  const mark = el("span", undefined, "second-chance");
  mark.append(el("span", "\u2212 2nd chance", "note"), sc);
  mark.setAttribute("aria-label", "second chance card " + h.second_chance + ", subtracted");
  row.append(mark, el("span", "=", "note"));
}

function askText(t) {
  if (t.hand) return t.who + " hand " + t.hand + ": " + t.what;
  return t.who ? t.who + ": " + t.what : t.what;
}

const GAMES = {"double-back-jack": "Double Back Jack", "double-attack": "Double Attack", "down-under": "Down Under", "dj-wild": "DJ Wild"};

function draw(d) {
  // The header names the person signed in here (whoami); the table's dealer of record only when
  // it is someone else, so "dealer-1" is never shown as if it were the person at the screen.
  const who = d.signed_in || me || {};
  const record = d.dealer && d.dealer !== who.user ? "  (dealer on record: " + d.dealer + ")" : "";
  $("title").textContent = d.table + " · " + (GAMES[d.game] || d.game) + " · round " + d.round + record;
  const t = d.turn || {};
  $("turn").textContent = askText(t);
  $("turn-detail").textContent = (t.legal ? "may: " + t.legal.map(words).join(", ") : "") + (t.section ? "  " + t.section : "");
  $("turn-box").classList.toggle("stopped", d.dealing_stopped);
  drawAlarms(d);
  drawLayout(d);
  drawLastRound(d.last_round);
  if ($("now")) drawNow(d);
  const shoe = d.shoe;
  const wild = d.game === "dj-wild";
  if ($("shoe")) {  // the floor console's shoe box; the dealer display says it once, in its status line
    $("shoe-h").textContent = wild ? "Deck" : "Shoe";
    if (wild) line($("shoe"), shoe.batch ? shoe.batch + " deck, dealt by hand" : "no deck in play", "");
    else line($("shoe"), shoe.failed ? "shoe failed: dealing stopped" :
         shoe.batch ? shoe.batch + " batch, " + shoe.cards + " cards" + (shoe.cover_card_reached ? ", cover card out: reshuffle after this round" : "")
                    : "empty", shoe.failed ? "bad" : "");
  }
  $("batches").replaceChildren(...d.batches.map((b) => {
    const li = el("li");
    li.append(el("strong", b.back + ": "), el("span", b.state));
    return li;
  }));
  if ($("status")) drawStatus(d);
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
  drawActions();  // the menus follow the game and the moment
  refreshChoices(d);
}

// Each alarm with the buttons that deal with it (the display's `actions`: the one that clears a
// halting alarm, never an Acknowledge the table would refuse), for those the person may take.
// Their result is said under the alarms, where the person pressed.
// The devices in one line inside the ask's box, in view during every decision: the reader, the
// keypad and the shoe, each named with its state (a failed one in red).
function drawStatus(d) {
  const parts = [];
  const wild = d.game === "dj-wild";
  if (d.reader.health !== null || d.reader.failed) {
    const [h, cls] = health(d.reader.health);
    parts.push(["reader", d.reader.failed ? "failed: dealing stopped" : h, d.reader.failed ? "bad" : cls]);
  }
  // DJ Wild's Progressive is taken on the keypad's sensors; at a blackjack table the keypad
  // carries the decisions and the side wagers' sensors.
  const [kh, kcls] = health(d.progressive.health);
  parts.push(["keypad", d.progressive.open ? kh + (wild ? ", Progressive open" : "")
                                          : wild ? "failed: Progressive closed" : "failed: key the decisions here",
              d.progressive.open ? kcls : "bad"]);
  if (wild) parts.push(["deck", d.shoe.batch ? d.shoe.batch + ", dealt by hand" : "none in play", ""]);
  else {
    const [sh, scls] = health(d.shoe.health);
    const cards = d.shoe.cards === 1 ? "1 card" : d.shoe.cards + " cards";
    parts.push(["shoe", d.shoe.failed ? "failed: dealing stopped"
                        : d.shoe.batch ? sh + ", " + d.shoe.batch + " batch, " + cards
                                         + (d.shoe.cover_card_reached ? ", cover card out: reshuffle after this round" : "") : sh,
                d.shoe.failed ? "bad" : scls]);
  }
  $("status").replaceChildren(...parts.map(([name, text, cls]) => {
    const li = el("li");
    li.append(el("strong", name + ": "), el("span", text, cls));
    return li;
  }));
}

let alarmIds = new Set();
function drawAlarms(d) {
  const alarms = $("alarms");
  // A new alarm makes the result said under the alarms about an earlier one stale: it goes.
  const ids = new Set(d.alarms.map((a) => a.id));
  if ([...ids].some((id) => !alarmIds.has(id))) { const old = $("alarms-box").querySelector(":scope > .said"); if (old) old.remove(); }
  alarmIds = ids;
  alarms.replaceChildren();
  if (!d.alarms.length) alarms.append(el("li", "none"));
  const mine = new Map(actions.map((x) => [x.name, x]));
  for (const a of d.alarms) {
    const li = el("li", undefined, a.halts ? "alarm halting" : "alarm");
    li.dataset.alarm = a.id;
    li.append(el("span", "#" + a.id + " "), el("span", a.section, "section"), el("span", " " + a.message + " — "),
              el("span", "floor: " + a.floor_action, a.halts ? "halts" : ""));
    const row = el("span", undefined, "alarm-actions");
    for (const b of a.actions || []) {
      if (!mine.has(b.action)) continue;
      const button = el("button", b.label, b.destructive ? "danger" : "ack");
      button.dataset.action = b.action;
      let seat = null;
      if (b.pick === "seat") {
        seat = el("select");
        seat.setAttribute("aria-label", "box");
        for (const box of (d.layout ? d.layout.boxes : [])) { const o = el("option", "box " + box.seat); o.value = box.seat; seat.append(o); }
        row.append(seat);
      }
      button.addEventListener("click", () => {
        const args = {...b.args};
        if (seat) args.seat = Number(seat.value);
        if (b.destructive) confirmThen(mine.get(b.action), args, $("alarms-box"));
        else run(b.action, args, $("alarms-box"));
      });
      row.append(button);
    }
    if (row.childElementCount) li.append(" ", row);
    // An alarm no button clears (the journal that cannot be written) says how it ends instead.
    if (a.ends_by_itself) li.append(" ", el("span", a.ends_by_itself, "note"));
    alarms.append(li);
  }
}

// The layout as the players see it; on the dealer display each box is a button that picks it.
function drawLayout(d) {
  const lay = d.layout || {dealer: {cards: []}, boxes: []};
  const ask = d.turn || {};
  const dh = $("dealer-hand");
  dh.replaceChildren(el("span", "Dealer", "who"));
  if (lay.dealer.cards.length) dh.append(cards(lay.dealer.cards));
  if (lay.dealer.total !== null && lay.dealer.total !== undefined) dh.append(el("span", String(lay.dealer.total), "total"));
  if (lay.wild) {
    dh.append(el("span", lay.wild.dealt ? "hands dealt; the stub must hold " + lay.wild.stub + " cards"
                                        : lay.wild.locked ? "Start Game pressed: deal the hands" : "wagers open", "note"));
  }
  const sensed = lay.boxes.filter((b) => b.spots && b.spots[0]).map((b) => b.seat);
  const key = d.round + ":" + ask.what + ":" + ask.who;
  // A new ask starts from the chips the sensors see, and follows them till the dealer picks.
  if (pickedFor !== key) { pickedFor = key; pickTouched = false; }
  if (!pickTouched) picked = new Set(sensed);
  const boxes = $("boxes");
  boxes.replaceChildren();
  // The boxes are buttons only while an action of the moment takes them from the layout.
  const pick = page === "dealer" && (d.now || []).some((n) => n.pick);
  for (const b of lay.boxes) {
    const node = el(pick ? "button" : "div", undefined, "box");
    node.dataset.seat = b.seat;
    if (pick) {
      node.type = "button";
      node.setAttribute("aria-pressed", String(picked.has(b.seat)));
      node.addEventListener("click", () => {
        pickTouched = true;
        if (picked.has(b.seat)) picked.delete(b.seat); else picked.add(b.seat);
        node.setAttribute("aria-pressed", String(picked.has(b.seat)));
        drawNow(last);
      });
    }
    if (ask.who === "box " + b.seat || (ask.what && ask.what.includes("box " + b.seat + " "))) node.classList.add("their-turn");
    const head = el("span", undefined, "box-head");
    // Before Start Game the chips the sensors see, by the wager's name; once the round has taken
    // the wagers, the wagers and their amounts instead.
    const taken = b.wagers && Object.keys(b.wagers).length;
    head.append(el("span", "Box " + b.seat, "who"));
    if (!taken) head.append(el("span", b.chips && b.chips.length ? "chips: " + b.chips.join(", ") : "no chips", "spots"));
    node.append(head);
    if (taken) node.append(el("span", Object.entries(b.wagers).map(([k, v]) => k + " " + v).join(", "), "wagers"));
    if (b.dead) node.append(el("span", "dead hand: wagers returned", "result lose"));
    for (const [i, h] of (b.hands || []).entries()) {
      const row = el("span", undefined, "hand");
      if (b.hands.length > 1) row.append(el("span", "hand " + (i + 1), "which"));
      handCards(row, h);
      if (h.total !== null) row.append(el("span", (h.soft ? "soft " : "") + h.total, "total"));
      if (h.doubled) row.append(el("span", "doubled", "note"));
      if (h.result) row.append(el("span", h.result, "result " + h.result));
      node.append(row);
    }
    if (b.wild) node.append(el("span", (b.wild.dealt ? "hand dealt" : "in this round") + (b.wild.progressive ? ", Progressive" : ""), "note"));
    boxes.append(node);
  }
}

// The last round settled, kept in view while the dealer pays (the layout empties as it ends).
function drawLastRound(r) {
  $("last-box").hidden = !r;
  if (!r) return;
  const out = $("last-round");
  $("last-h").textContent = "Last round (" + r.round + ")";
  out.replaceChildren();
  if (r.wild) { out.append(el("p", "hands dealt by hand, settled at the table")); return; }
  const dealer = el("div", undefined, "hand");
  dealer.append(el("span", "Dealer", "who"), cards(r.dealer.cards), el("span", String(r.dealer.total), "total"));
  out.append(dealer);
  for (const b of r.boxes || []) {
    for (const [i, h] of (b.hands || []).entries()) {
      const row = el("div", undefined, "hand");
      row.append(el("span", "Box " + b.seat + (b.hands.length > 1 ? "." + (i + 1) : ""), "who"));
      handCards(row, h);
      row.append(el("span", String(h.total), "total"));
      if (h.result) row.append(el("span", h.result, "result " + h.result));
      out.append(row);
    }
  }
}

// The buttons of the moment, from the display's `now` (the table's ask decides them).
function drawNow(d) {
  const box = $("now");
  if (!box || !d) return;
  box.replaceChildren();
  const mine = new Set(actions.map((a) => a.name));
  for (const n of d.now || []) {
    if (!mine.has(n.action)) continue;
    const f = el("form", undefined, "do");
    f.dataset.action = n.action;
    if (n.args.key) f.dataset.key = n.args.key;
    for (const inp of n.inputs || []) {
      const label = el("label", inp.label + " ");
      const field = el("input");
      field.type = "number"; field.name = inp.name; field.min = inp.min; field.max = inp.max; field.required = true;
      field.inputMode = "numeric";
      label.append(field);
      f.append(label);
    }
    let text = n.label;
    const seats = [...picked].sort((x, y) => x - y);
    if (n.pick === "seats") text += seats.length ? (seats.length === 1 ? " (box " : " (boxes ") + seats.join(", ") + ")" : " (pick the boxes on the layout)";
    const b = el("button", text, "big");
    b.disabled = busy || (n.pick === "seats" && picked.size === 0);
    f.append(b);
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const args = {...n.args};
      for (const inp of n.inputs || []) args[inp.name] = Number(f.elements[inp.name].value);
      if (n.pick === "seats") args.boxes = [...picked].sort((x, y) => x - y);
      busy = true;
      for (const x of box.querySelectorAll("button")) x.disabled = true;
      run(n.action, args);
    });
    box.append(f);
  }
}

// The choices of a device, a back or a seat follow the table (its devices, batches and boxes).
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
  const seats = (d.layout ? d.layout.boxes : []).map((b) => String(b.seat));
  for (const group of document.querySelectorAll("[data-seats]")) {
    const have = Array.from(group.querySelectorAll("input")).map((i) => i.value);
    if (seats.join() === have.join()) continue;
    group.replaceChildren(el("legend", "box"));
    for (const s of seats) {
      const label = el("label", undefined, "seat");
      const r = el("input");
      r.type = "radio"; r.name = group.dataset.seats; r.value = s; r.required = true;
      label.append(r, el("span", "box " + s));
      group.append(label);
    }
  }
  for (const sect of document.querySelectorAll("input[name=section][data-default]")) {
    if (!sect.value && d.menu && d.menu.void_section) sect.value = d.menu.void_section;
  }
}

function visibleActions() {
  const menu = last ? last.menu : null;
  const hidden = new Set(menu ? menu.hidden : []);
  // (Alarms are acknowledged on the alarm itself.)
  if (page === "floor") return actions.filter((a) => a.roles.includes("floor") && !hidden.has(a.name) && a.name !== "alarm_acknowledged");
  // The dealer's secondary menu: the rare actions of this game, and the keypad's keys last.
  const rare = new Set(menu ? menu.rare : []);
  return actions.filter((a) => rare.has(a.name) || a.name === "key");
}

let drawnFor = "";
function drawActions() {
  const names = visibleActions().map((a) => a.name).join();
  if (names === drawnFor && $("actions").childElementCount) return;
  drawnFor = names;
  // The floor's everyday actions in view, the rarer ones of this game in its "More actions" menu
  // (the dealer's page has only that menu: its everyday actions are the buttons of the moment).
  const rare = new Set(last && last.menu ? last.menu.rare : []);
  const more = $("rare-actions");
  $("actions").replaceChildren();
  if (more) more.replaceChildren();
  const destructive = new Set(last && last.menu ? last.menu.destructive : []);
  for (const a of visibleActions()) {
    const box = more && rare.has(a.name) ? more : $("actions");
    const f = el("form", undefined, "action");
    f.dataset.action = a.name;
    f.append(el("strong", words(a.name)), el("small", a.section + " — " + a.doc));
    for (const [name, arg] of Object.entries(a.args)) {
      if (name === "reason") continue;  // asked for by the confirmation
      if (name === "ask") continue;  // the buttons of the moment send it; the menu's answer no ask
      if (name === "seat") {
        const group = el("fieldset", undefined, "seats");
        group.dataset.seats = a.name + "-seat";
        f.append(group);
        continue;
      }
      const label = el("label", arg.doc + " ");
      let input;
      if (arg.kind === "bool") {
        input = el("select");
        for (const v of ["false", "true"]) { const o = el("option", v === "true" ? "yes" : "no"); o.value = v; input.append(o); }
      } else if (arg.choices.length) {
        input = el("select");
        for (const v of arg.choices) { const o = el("option", words(v)); o.value = v; input.append(o); }
      } else if (name === "device" || name === "back") {
        input = el("select"); input.dataset.choices = name;
      } else {
        input = el("input");
        if (arg.kind === "int") { input.type = "number"; if (arg.min !== null) input.min = arg.min; if (arg.max !== null) input.max = arg.max; }
        if (arg.kind === "list") input.placeholder = "1,2,3";
        if (name === "section") input.dataset.default = "1";
      }
      input.name = name;
      input.required = arg.required && arg.kind !== "bool";
      input.title = arg.doc;
      label.append(input);
      f.append(label);
    }
    const danger = destructive.has(a.name);
    f.append(el("button", words(a.name) + (danger ? "…" : ""), danger ? "danger" : ""));
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const args = argsOf(a, f);
      if (danger) confirmThen(a, args, f); else run(a.name, args, f);
    });
    box.append(f);
  }
  if (last) refreshChoices(last);
}

function argsOf(a, f) {
  const out = {};
  for (const [name, arg] of Object.entries(a.args)) {
    if (name === "reason") continue;
    const field = name === "seat" ? f.querySelector("input[type=radio]:checked") : f.elements[name];
    const v = field ? field.value : "";
    if (v === "" && !arg.required) continue;
    if (arg.kind === "int") out[name] = Number(v);
    else if (arg.kind === "bool") out[name] = v === "true";
    else if (arg.kind === "list") out[name] = v.split(",").filter((x) => x.trim()).map(Number);
    else out[name] = v;
  }
  return out;
}

// A destructive action: confirm, with a reason the journal keeps with who did it, saying what the
// action does (the display's words for it: a void is for good, a device out of order comes back).
function confirmThen(a, args, near) {
  const dlg = $("confirm");
  const f = $("confirm-form");
  const said = last && last.menu && last.menu.consequences ? last.menu.consequences[a.name] : "";
  $("confirm-title").textContent = "Confirm: " + words(a.name) + Object.entries(args).map(([k, v]) => " " + words(k) + " " + v).join("");
  $("confirm-doc").textContent = a.section + " — " + a.doc + "." + (said ? " " + said : "");
  f.reason.value = "";
  dlg.returnValue = "";
  $("confirm-no").onclick = () => dlg.close("cancel");
  dlg.onclose = () => {
    const reason = f.reason.value.trim();
    if (dlg.returnValue === "confirm" && reason) run(a.name, {...args, reason}, near);
  };
  dlg.showModal();
}

// The result of an action, said where it was pressed (``near``: the form, the alarms) as well as
// in the status line at the top.
function sayNear(near, cls, text) {
  if (!near) return;
  let p = near.querySelector(":scope > .said");
  if (!p) { p = el("p", undefined); p.setAttribute("role", "status"); near.append(p); }
  p.className = "said " + cls;
  p.textContent = text;
}

async function run(name, args, near) {
  let status, doc;
  try {
    [status, doc] = await post("/api/actions/" + name, args);
  } catch (e) {
    busy = false;
    lost("the table does not answer");
    return;
  }
  busy = false;
  if (status === 401) { signedOut(true); return; }
  const r = $("result");
  r.dataset.action = name;
  r.className = doc.ok ? "good" : "error";
  const error = String(doc.error || "");
  const what = name === "key" ? "key " + words(String(args.key)) : words(name);
  r.textContent = doc.ok ? what + ": done" : error.startsWith(name + ":") ? error : name + ": " + error;
  sayNear(near, r.className, r.textContent);
  if (last && $("now")) drawNow(last);
}

// The menus follow the game and the moment: redraw them when the display says other ones.
const drawBase = draw;
draw = function (d) {
  drawBase(d);
  drawActions();
};

start();
