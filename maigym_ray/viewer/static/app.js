// The viewer's front end: hash routes, JSON from /api, DOM built with createElement and textContent only
// (never innerHTML), so a model response or page text that holds markup is shown as text.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
let pollTimer = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

async function api(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

function fmt(v) {
  if (v === null || v === undefined) return "–";
  return typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : String(v);
}

function parseHash() {
  const [path, query] = location.hash.slice(1).split("?");
  return { parts: (path || "/").split("/").filter(Boolean), q: new URLSearchParams(query || "") };
}

function go(path, q) {
  location.hash = path + (q && [...q].length ? "?" + q.toString() : "");
}

// ---- Runs ---------------------------------------------------------------------------------------------------
async function pageRuns(main) {
  const runs = await api("/api/runs");
  main.append(el("h2", {}, "Runs"));
  const t = el("table", { id: "runs" }, el("tr", {}, el("th", {}, "run"), el("th", {}, "path"), el("th", {}, "")));
  for (const r of runs) {
    t.append(el("tr", {},
      el("td", {}, el("a", { href: `#/run/${r.id}` }, r.name)),
      el("td", { class: "muted" }, r.path),
      el("td", {}, el("a", { href: `#/episodes/${r.id}` }, "episodes"))));
  }
  main.append(t);
}

function chart(title, key, rounds) {
  const W = 260, H = 140, P = 28;
  const pts = rounds.filter((r) => typeof r[key] === "number").map((r) => [r.round, r[key]]);
  const box = el("div", { class: "card", "data-curve": key }, el("div", {}, title));
  const s = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  s.append(svg("rect", { x: P, y: 4, width: W - P - 4, height: H - P - 4, fill: "#fff", stroke: "#ccc" }));
  if (pts.length) {
    const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(0, ...ys), y1 = Math.max(...ys, y0 + 1e-9);
    const X = (x) => P + ((x - x0) / (x1 - x0 || 1)) * (W - P - 8) + 2;
    const Y = (y) => H - P - ((y - y0) / (y1 - y0)) * (H - P - 10);
    s.append(svg("polyline", { points: pts.map((p) => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none", stroke: "#36c", "stroke-width": 2 }));
    for (const p of pts) s.append(svg("circle", { cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: "#36c" }));
    const lab = (x, y, t, anchor) => { const e = svg("text", { x, y, "font-size": 10, "text-anchor": anchor || "start" }); e.textContent = t; s.append(e); };
    lab(2, 12, fmt(y1)); lab(2, H - P, fmt(y0)); lab(P, H - 10, `round ${x0}`); lab(W - 4, H - 10, `${x1}`, "end");
  } else {
    const e = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "font-size": 11, fill: "#777" });
    e.textContent = "no rounds yet";
    s.append(e);
  }
  box.append(s);
  return box;
}

async function pageRun(main, id) {
  const render = async () => {
    const r = await api(`/api/runs/${id}`);
    const box = el("div", { id: "run" });
    box.append(el("h2", {}, `Run ${r.name} `, el("span", { class: "muted", id: "run-state" }, r.done ? "(finished)" : "(running or partial: updates every 3 s)")));
    box.append(el("p", {}, el("a", { href: `#/episodes/${id}` }, "episodes →"), " ", el("span", { class: "muted" }, r.path)));
    const h = r.heldout;
    if (r.kind === "train") {
      box.append(el("h3", {}, "Held-out success"));
      box.append(el("table", { id: "heldout" },
        el("tr", {}, el("th", {}, "before"), el("th", {}, "after SFT"), el("th", {}, "after RL")),
        el("tr", {}, el("td", {}, fmt(h.before)), el("td", {}, fmt(h.sft)), el("td", {}, fmt(h.rl)))));
      box.append(el("h3", {}, `Curves (${r.rounds.length} rounds)`));
      const cards = el("div", { class: "cards", id: "curves" });
      for (const c of r.curves) cards.append(chart(c.title, c.key, r.rounds));
      box.append(cards);
      box.append(el("h3", {}, "Phases"));
      const pt = el("table", { id: "phases" }, el("tr", {}, el("th", {}, "phase"), el("th", {}, "values")));
      for (const p of r.phases) {
        const vals = Object.entries(p).filter(([k]) => k !== "phase").map(([k, v]) => `${k}=${fmt(v)}`).join("  ");
        pt.append(el("tr", {}, el("td", {}, p.phase), el("td", {}, vals)));
      }
      box.append(pt);
    }
    box.append(el("h3", {}, "Report"));
    const rep = Object.fromEntries(Object.entries(r.report).filter(([k]) => k !== "history"));
    box.append(el("pre", { id: "report" }, JSON.stringify(rep, null, 2)));
    box.append(el("h3", {}, "Config"));
    box.append(el("pre", { id: "config" }, r.config || "(no .hydra/config.yaml)"));
    main.replaceChildren(box);
    return r.done;
  };
  const done = await render();
  if (!done) pollTimer = setInterval(() => render().catch(() => {}), 3000);
}

// ---- Episodes -----------------------------------------------------------------------------------------------
async function pageEpisodes(main, id, q) {
  const page = await api(`/api/runs/${id}/episodes?${q.toString()}`);
  main.append(el("h2", {}, `Episodes of run ${id} (${page.total})`));
  const filters = el("div", { class: "filters", id: "filters" });
  const set = (k, v) => { const n = new URLSearchParams(q); if (v) n.set(k, v); else n.delete(k); n.delete("page"); go(`/episodes/${id}`, n); };
  for (const k of ["app", "task", "split", "outcome", "round"]) {
    const s = el("select", { name: k, onchange: (e) => set(k, e.target.value) }, el("option", { value: "" }, `${k}: all`));
    for (const v of page.facets[k]) {
      const o = el("option", { value: String(v) }, String(v));
      if (String(v) === (q.get(k) || "")) o.selected = true;
      s.append(o);
    }
    filters.append(s);
  }
  const sort = el("select", { name: "sort", onchange: (e) => set("sort", e.target.value) });
  for (const [v, t] of [["order", "sort: written order"], ["reward", "sort: return"], ["steps", "sort: length"]]) {
    const o = el("option", { value: v }, t);
    if (v === (q.get("sort") || "order")) o.selected = true;
    sort.append(o);
  }
  const desc = el("input", { type: "checkbox", name: "desc", onchange: (e) => set("desc", e.target.checked ? "1" : "") });
  desc.checked = q.get("desc") === "1";
  filters.append(sort, el("label", {}, desc, " descending"));
  main.append(filters);
  const t = el("table", { id: "episodes" }, el("tr", {}, ...["episode", "task", "app", "split", "round", "store", "outcome", "return", "steps", "parse errors"].map((h) => el("th", {}, h))));
  for (const e of page.episodes) {
    const link = new URLSearchParams({ store: e.store, part: e.part, row: e.row });
    t.append(el("tr", { class: e.outcome },
      el("td", {}, e.row >= 0 ? el("a", { href: `#/episode/${id}?${link}` }, e.episode_id) : e.episode_id),
      el("td", {}, e.task_id), el("td", {}, e.app), el("td", {}, e.split), el("td", {}, fmt(e.round)),
      el("td", {}, e.store || "trajectories"), el("td", { class: "outcome" }, e.outcome),
      el("td", {}, fmt(e.reward)), el("td", {}, e.num_steps), el("td", {}, e.parse_errors)));
  }
  main.append(t);
  const pages = Math.max(1, Math.ceil(page.total / page.size));
  const nav = el("p", { id: "pager" }, `page ${page.page + 1} of ${pages} `);
  const to = (p) => { const n = new URLSearchParams(q); n.set("page", p); go(`/episodes/${id}`, n); };
  if (page.page > 0) nav.append(el("button", { onclick: () => to(page.page - 1) }, "previous"));
  if (page.page + 1 < pages) nav.append(el("button", { onclick: () => to(page.page + 1) }, "next"));
  main.append(nav);
}

// ---- One episode --------------------------------------------------------------------------------------------
function drawOverlay(o) {
  // Positions in percent of the image (the grammar's 0..1000 over 10), sizes in pixels: a marker stays round
  // on any aspect ratio.
  const pc = (v) => `${v / 10}%`;
  const s = svg("svg", { id: "overlay", "data-kind": o.kind });
  if (o.kind === "point") {
    s.append(svg("circle", { cx: pc(o.x), cy: pc(o.y), r: 12, fill: "none", stroke: "#e22", "stroke-width": 3, class: "click-marker" }));
    s.append(svg("circle", { cx: pc(o.x), cy: pc(o.y), r: 3, fill: "#e22" }));
  } else if (o.kind === "arrow") {
    const defs = svg("defs");
    const m = svg("marker", { id: "head", markerWidth: 4, markerHeight: 4, refX: 3, refY: 2, orient: "auto" });
    m.append(svg("path", { d: "M0,0 L4,2 L0,4 z", fill: "#e22" }));
    defs.append(m);
    s.append(defs, svg("line", { x1: pc(o.from_x), y1: pc(o.from_y), x2: pc(o.to_x), y2: pc(o.to_y), stroke: "#e22", "stroke-width": 4, "marker-end": "url(#head)", class: "swipe-arrow" }));
  }
  return s;
}

async function pageEpisode(main, id, q) {
  const want = Math.max(0, Number(q.get("step") || 0));
  const ep = await api(`/api/runs/${id}/episode?${new URLSearchParams({ store: q.get("store") || "", part: q.get("part") || "", row: q.get("row") || "0", step: want })}`);
  const n = ep.turns.length;
  const step = Math.min(want, Math.max(0, n - 1));
  const shotUrl = (k, thumb) => `/api/runs/${id}/screenshot?${new URLSearchParams({ store: ep.store, part: ep.part, row: ep.row, step: k, thumb: thumb ? 1 : 0 })}`;
  const goStep = (k) => { const nq = new URLSearchParams(q); nq.set("step", k); go(`/episode/${id}`, nq); };
  main.append(el("h2", {}, `Episode ${ep.episode_id}`));
  main.append(el("table", { id: "episode-meta" },
    el("tr", {}, ...["task", "app", "platform", "split", "round", "outcome", "return", "verifier reason", "error"].map((h) => el("th", {}, h))),
    el("tr", {}, el("td", {}, ep.task_id), el("td", {}, ep.app), el("td", {}, ep.platform), el("td", {}, ep.split), el("td", {}, fmt(ep.round)),
      el("td", { id: "outcome" }, ep.outcome), el("td", { id: "reward" }, fmt(ep.reward)), el("td", { id: "reason" }, ep.reason), el("td", {}, ep.error))));
  if (!n) { main.append(el("p", {}, "no steps")); return; }
  const t = ep.turns[step];
  const nav = el("p", { id: "stepnav" }, `step ${step + 1} of ${n} `);
  if (step > 0) nav.append(el("button", { id: "prev", onclick: () => goStep(step - 1) }, "← previous"));
  if (step + 1 < n) nav.append(el("button", { id: "next", onclick: () => goStep(step + 1) }, "next →"));
  main.append(nav);
  const shot = el("div", { class: "shot", id: "shot" });
  const img = el("img", { src: shotUrl(step, false), alt: `screenshot of step ${step + 1}`, id: "screenshot" });
  img.addEventListener("error", () => shot.replaceChildren(el("p", { class: "muted" }, "no screenshot kept for this step")));
  shot.append(img, drawOverlay(t.overlay));
  if (t.overlay.text !== undefined) {
    const typed = el("span", { class: "typed", id: "typed" }, t.overlay.text);
    typed.style.left = `${(t.overlay.x ?? 20) / 10}%`;
    typed.style.top = `${(t.overlay.y ?? 20) / 10 + 3}%`;
    shot.append(typed);
  }
  // A text is undefined where the store predates its column, null where it could not be rebuilt, "" where
  // the policy had none (golden and random policies read no prompt).
  const text = (v, none) => (v === undefined || v === null ? null : v || none);
  const NOT_RECORDED = "not recorded (this run's store predates the column)";
  const d = el("div", { class: "details" });
  d.append(el("h3", {}, "Reward and verifier"), el("p", { id: "verdict" },
    el("b", {}, ep.outcome), ` · return ${fmt(ep.reward)} · `, el("span", {}, ep.reason || "(no reason given)"),
    ep.error ? el("span", { class: "perr" }, ` · ${ep.error}`) : null,
    step + 1 < n ? el("span", { class: "muted" }, " (scored after the last step)") : null));
  const reply = text(t.response_text, "");
  d.append(el("h3", {}, "Model response"), el("pre", { id: "response" }, reply || t.action_text));
  d.append(el("h3", {}, "Parsed action"), el("pre", { id: "action" }, t.action_text),
    el("p", {}, "drawn: ", el("b", { id: "overlay-label" }, t.overlay.label)));
  d.append(el("h3", {}, "Parse error"), t.parse_error
    ? el("pre", { class: "perr", id: "parse-error" }, t.parse_error)
    : el("p", { class: "muted", id: "parse-error-none" }, "none"));
  d.append(el("h3", {}, "Accessibility text"), el("pre", { id: "a11y" }, text(t.a11y, "(empty)") ?? NOT_RECORDED));
  const from = t.prompt_window_from;
  const began = from !== undefined && from < step ? `, a window that began at step ${from + 1}` : "";
  d.append(el("h3", {}, "Prompt window"), el("p", { class: "muted", id: "prompt-tokens" },
    `${t.prompt_tokens} prompt tokens (${t.cached_tokens} from the prefix cache)${began}; ${t.response_tokens} response tokens`));
  d.append(el("pre", { id: "prompt" }, text(t.prompt_text, "(none: this policy reads no prompt)") ?? NOT_RECORDED));
  d.append(el("p", { class: "muted" }, `policy ${fmt(t.policy_s)} s, env ${fmt(t.env_s)} s`));
  main.append(el("div", { class: "step" }, shot, d));
  const thumbs = el("div", { class: "thumbs", id: "thumbs" });
  ep.turns.forEach((_, k) => {
    const ti = el("img", { src: shotUrl(k, true), alt: `step ${k + 1}`, title: `step ${k + 1}`, onclick: () => goStep(k) });
    if (k === step) ti.classList.add("current");
    ti.addEventListener("error", () => ti.remove());
    thumbs.append(ti);
  });
  main.append(thumbs);
}

// ---- Compare ------------------------------------------------------------------------------------------------
async function pageCompare(main, q) {
  const runs = await api("/api/runs");
  main.append(el("h2", {}, "Compare two runs"));
  const a = q.get("a") || "0", b = q.get("b") || String(Math.min(1, runs.length - 1));
  const pick = (k, cur) => {
    const s = el("select", { name: k, onchange: (e) => { const n = new URLSearchParams(q); n.set(k, e.target.value); go("/compare", n); } });
    for (const r of runs) { const o = el("option", { value: String(r.id) }, r.name); if (String(r.id) === cur) o.selected = true; s.append(o); }
    return s;
  };
  main.append(el("div", { class: "filters" }, "A ", pick("a", a), " B ", pick("b", b)));
  const c = await api(`/api/compare?a=${a}&b=${b}`);
  const t = el("table", { id: "compare" }, el("tr", {}, el("th", {}, "task"), el("th", {}, `A: ${c.a}`), el("th", {}, `B: ${c.b}`), el("th", {}, "B − A")));
  const cell = (v, nn) => el("td", {}, el("span", { class: "bar" }), ` ${fmt(v)} (n=${nn})`);
  for (const r of c.tasks) {
    const ca = cell(r.a, r.a_n), cb = cell(r.b, r.b_n);
    ca.firstChild.style.width = `${(r.a || 0) * 60}px`;
    cb.firstChild.style.width = `${(r.b || 0) * 60}px`;
    const diff = r.a !== null && r.b !== null ? r.b - r.a : null;
    t.append(el("tr", {}, el("td", {}, r.task_id), ca, cb, el("td", {}, diff === null ? "–" : (diff > 0 ? "+" : "") + diff.toFixed(2))));
  }
  t.append(el("tr", {}, el("th", {}, "all tasks"), el("th", {}, fmt(c.overall[0])), el("th", {}, fmt(c.overall[1])), el("th", {}, "")));
  main.append(t);
}

// ---- Router -------------------------------------------------------------------------------------------------
async function route() {
  clearInterval(pollTimer);
  const main = document.getElementById("main");
  main.replaceChildren();
  const { parts, q } = parseHash();
  try {
    if (parts[0] === "run") await pageRun(main, parts[1]);
    else if (parts[0] === "episodes") await pageEpisodes(main, parts[1], q);
    else if (parts[0] === "episode") await pageEpisode(main, parts[1], q);
    else if (parts[0] === "compare") await pageCompare(main, q);
    else await pageRuns(main);
  } catch (e) {
    main.append(el("pre", { class: "perr" }, String(e)));
  }
  document.body.dataset.ready = location.hash;
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
