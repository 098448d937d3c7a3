// robust-compression bench site: sortable, filterable tables, a compare view and the example browser.
// No request leaves the page. A table's examples are script files beside it (examples/<table>-<k>.js),
// added only when the browser is opened; each pushes its part onto window.BENCH_PARTS.
"use strict";

function sortBy(table, col, th) {
  const body = table.tBodies[0];
  const asc = th.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  const key = (tr) => {
    const td = tr.cells[col];
    const v = td && td.dataset.v;
    return v !== undefined && v !== "" ? parseFloat(v) : (td && td.dataset.v === undefined ? td.textContent.trim().toLowerCase() : "");
  };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    const xe = x === "" || Number.isNaN(x), ye = y === "" || Number.isNaN(y);
    if (xe || ye) return xe - ye; // empty cells last either way
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return asc ? c : -c;
  });
  rows.forEach((r) => body.appendChild(r));
}

function filterRows(section) {
  const m = section.querySelector(".f-method").value.toLowerCase();
  const s = section.querySelector(".f-sparsity").value;
  const u = section.querySelector(".f-suite").value;
  const rows = Array.from(section.querySelector("table.board").tBodies[0].rows).filter((tr) => tr.dataset.method !== undefined);
  let shown = 0;
  rows.forEach((tr) => {
    const ok = (!m || tr.dataset.method.toLowerCase().includes(m)) && (!s || tr.dataset.sparsity === s) &&
      (!u || tr.dataset.suites.split(" ").includes(u));
    tr.hidden = !ok;
    shown += ok;
  });
  section.querySelector(".count").textContent = `${shown} of ${rows.length} rows`;
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => (k === "text" ? (e.textContent = v) : e.setAttribute(k, v)));
  kids.forEach((k) => e.append(k));
  return e;
}

function data(name) {
  const node = document.querySelector(`script.data[data-for="${name}"]`);
  return node ? JSON.parse(node.textContent) : null;
}

function labelName(labels, set, id, task = true) {
  // a set's own label names, else (the test set, an attack's) the task's; an OOD set whose records
  // name none keeps its ids: its labels need not be the task's
  const names = (labels[set] && labels[set].length ? labels[set] : (task ? labels[""] : null)) || [];
  return names[id] !== undefined ? names[id] : `class ${id}`;
}

function marked(tokens, ops, replaced, tag) {
  // the text with the attack's edits marked: the original's replaced words, or the perturbed words
  const out = el("span", {});
  let i = 0;
  ops.forEach(([i1, i2, text]) => {
    out.append(tokens.slice(i, i1).join(" ") + (i1 > i ? " " : ""));
    const words = replaced ? tokens.slice(i1, i2).join(" ") : text;
    if (words) out.append(el(tag, {class: replaced ? "old" : "new", text: words}), " ");
    i = i2;
  });
  out.append(tokens.slice(i).join(" "));
  return out;
}

function optionList(select, values, all = true) {
  if (all) select.append(el("option", {value: "", text: "all"}));
  values.forEach((v, i) => select.append(el("option", {value: all ? String(v) : String(i), text: String(v)})));
}

function outcome(a, name) {
  // what happened to one attacked example, in words
  const before = name(a[5]), after = name(a[6]);
  if (a[7] === "skipped") return `skipped: the model already answered ${before}, not the gold label, so nothing was attacked`;
  const tried = a[11].reduce((n, [i1, i2, text]) => n + Math.max(i2 - i1, text.split(" ").filter(Boolean).length), 0);
  if (a[7] === "failed") return `failed: the answer stayed ${before} (${a[9]} queries); the perturbed text is the attack's last try, ${tried} words changed`;
  return `successful: the answer went from ${before} to ${after} with ${a[8]} words changed (${a[9]} queries)`;
}

function exampleNode(d, a) {
  const name = (id) => labelName(d.labels, a[2], id);
  const tokens = d.texts[a[3]].split(/\s+/).filter(Boolean);
  const conf = a[10] === null || a[10] === undefined ? "" : ` (confidence ${a[10].toFixed(2)} before the attack)`;
  const node = el("div", {class: "example " + a[7]},
    el("div", {class: "meta", text: `${d.candidates[a[0]]}, seed ${a[1]}, ${a[2]}, example ${a[3]}: gold ${name(a[4])}${conf}`}),
    el("div", {class: "meta", text: outcome(a, name)}),
    el("div", {class: "orig"}, "original: ", marked(tokens, a[11], true, "del")));
  if (a[7] !== "skipped") node.append(el("div", {class: "pert"}, "perturbed: ", marked(tokens, a[11], false, "mark")));
  return node;
}

function browser(div, d) {
  if (d.attacks.length) {
    const cand = el("select", {class: "x-cand"}), recipe = el("select", {class: "x-recipe"}), result = el("select", {class: "x-result"});
    const search = el("input", {type: "search", class: "x-search", placeholder: "search the texts"});
    optionList(cand, d.candidates);
    optionList(recipe, [...new Set(d.attacks.map((a) => a[2]))]);
    optionList(result, ["successful", "failed", "skipped"]);
    const list = el("div", {class: "x-list"}), more = el("button", {type: "button", text: "show more"});
    const count = el("span", {class: "x-count"});
    div.append(el("div", {class: "filters"}, el("label", {}, "candidate ", cand), el("label", {}, "attack ", recipe),
      el("label", {}, "result ", result), search, count), list, more);
    let limit = 50;
    const render = () => {
      const q = search.value.toLowerCase();
      const rows = d.attacks.filter((a) => (!cand.value || d.candidates[a[0]] === cand.value) &&
        (!recipe.value || a[2] === recipe.value) && (!result.value || a[7] === result.value) &&
        (!q || d.texts[a[3]].toLowerCase().includes(q) || a[11].some((o) => o[2].toLowerCase().includes(q))));
      count.textContent = `${rows.length} attacked examples`;
      list.replaceChildren(...rows.slice(0, limit).map((a) => exampleNode(d, a)));
      more.hidden = rows.length <= limit;
    };
    [cand, recipe, result].forEach((s) => s.addEventListener("change", () => { limit = 50; render(); }));
    search.addEventListener("input", () => { limit = 50; render(); });
    more.addEventListener("click", () => { limit += 50; render(); });
    render();
  }
  if (d.ood.length) {
    const rows = d.ood.map(([c, set, group, gold, n, wrong]) => el("tr", {},
      el("td", {text: d.candidates[c]}), el("td", {text: set}), el("td", {text: group}), el("td", {text: labelName(d.labels, set, gold, set === "test")}),
      el("td", {text: String(n), "data-v": String(n)}), el("td", {text: (100 * wrong / n).toFixed(1), "data-v": String(wrong / n)})));
    const table = el("table", {class: "board ood"},
      el("thead", {}, el("tr", {}, ...["candidate", "set", "group (heuristic)", "gold", "examples (all seeds)", "error %"].map((h) => el("th", {text: h})))),
      el("tbody", {}, ...rows));
    const search = el("input", {type: "search", class: "x-search", placeholder: "filter candidate, set or group"});
    search.addEventListener("input", () => rows.forEach((tr) => (tr.hidden = !tr.textContent.toLowerCase().includes(search.value.toLowerCase()))));
    div.append(el("p", {text: "OOD errors by set, group and gold label, over the seeds (the texts are the data's, not kept here):"}),
      search, el("div", {class: "scroll"}, table));
    wire(table);
  }
  if (d.certified && d.certified.length) certifiedList(div, d);
  if (!d.attacks.length && !d.ood.length && !(d.certified && d.certified.length)) {
    div.append(el("p", {text: "No kept predictions to browse for this table."}));
  }
}

function certifiedNode(d, c) {
  // one smoothed example: its text, the votes of both draws, the bound and the verdict
  const [, seed, set, uid, gold, pred, select, votes, samples, pLower, certified, reach] = c;
  const name = (id) => labelName(d.labels, set, id);
  const picked = select.map((n, k) => `${name(k)} ${n}`).join(", ");
  const verdict = !certified ? (pLower <= 0.5 ? "abstains: the bound is not above 1/2" : "not certified")
    : set === "ranmask" ? `certified against ${reach} substituted words` : `certified (Delta ${reach})`;
  return el("div", {class: "example " + (certified && pred === gold ? "certified" : "uncertified")},
    el("div", {class: "meta", text: `${d.candidates[c[0]]}, seed ${seed}, ${set}, example ${uid}: gold ${name(gold)}; ` +
      `smoothed answer ${name(pred)}: selection votes ${picked}; ${votes} of ${samples} fresh samples, lower bound ` +
      `${pLower === null ? "?" : pLower.toFixed(3)}; ${verdict}`}),
    el("div", {class: "orig", text: d.texts[uid] || ""}));
}

function certifiedList(div, d) {
  const cand = el("select", {class: "c-cand"}), verdict = el("select", {class: "c-verdict"});
  optionList(cand, d.candidates);
  optionList(verdict, ["certified", "not certified"]);
  const list = el("div", {class: "c-list"});
  const render = () => {
    const rows = d.certified.filter((c) => (!cand.value || d.candidates[c[0]] === cand.value) &&
      (!verdict.value || (verdict.value === "certified") === c[10]));
    list.replaceChildren(el("p", {text: `${rows.length} smoothed examples (the first 50)`}), ...rows.slice(0, 50).map((c) => certifiedNode(d, c)));
  };
  [cand, verdict].forEach((s) => s.addEventListener("change", render));
  div.append(el("h4", {text: "Certified by randomized smoothing"}),
    el("div", {class: "filters"}, el("label", {}, "candidate ", cand), el("label", {}, "verdict ", verdict)), list);
  render();
}

const loaded = {}; // table -> merged examples, once all its parts are in

function load(table, files, done) {
  if (loaded[table]) return done(loaded[table]);
  let left = files.length;
  files.forEach((f) => {
    const s = el("script", {src: `examples/${f}`});
    s.addEventListener("load", () => {
      if (--left) return;
      const d = {candidates: [], labels: {}, texts: {}, attacks: [], ood: [], certified: []};
      // the parts in their order, whichever loaded first
      (window.BENCH_PARTS || []).filter((p) => p.table === table).sort((x, y) => x.part - y.part).forEach((p) => {
        ["candidates", "ood", "attacks", "certified"].forEach((k) => p[k] && d[k].push(...p[k]));
        Object.assign(d.texts, p.texts || {});
        Object.assign(d.labels, p.labels || {});
      });
      loaded[table] = d;
      done(d);
    });
    document.head.append(s);
  });
}

function compare(div) {
  // two candidates side by side: every cell of the main table, the paired difference on the ranking
  // column (the rank groups' and the claims' test) and the examples where they disagree
  const d = data(`compare:${div.dataset.table}`);
  const section = div.closest("section.study");
  const table = section.querySelector("table.board");
  const heads = Array.from(table.tHead.rows[0].cells).map((th) => th.firstChild.textContent);
  const a = el("select", {class: "c-a"}), b = el("select", {class: "c-b"});
  optionList(a, d.rows, false);
  optionList(b, d.rows, false);
  if (d.rows.length > 1) b.value = "1";
  const out = el("div", {class: "c-out"});
  div.append(el("div", {class: "filters"}, el("label", {}, "A ", a), el("label", {}, "B ", b)), out);
  const rowOf = (i) => table.querySelector(`tr[data-row="${i}"]`);
  const text = (td) => Array.from(td.childNodes).filter((n) => n.nodeName !== "DETAILS").map((n) => n.textContent).join("").trim();
  const render = () => {
    const i = +a.value, j = +b.value, ra = rowOf(i), rb = rowOf(j);
    const cells = heads.map((h, k) => el("tr", {}, el("th", {text: h}),
      el("td", {text: ra ? text(ra.cells[k]) : ""}), el("td", {text: rb ? text(rb.cells[k]) : ""})));
    const side = el("table", {class: "board side"}, el("thead", {}, el("tr", {}, el("th", {text: "column"}),
      el("th", {text: "A"}), el("th", {text: "B"}))), el("tbody", {}, ...cells));
    let p = d.pairs[`${i}-${j}`], sign = 1;
    if (!p && d.pairs[`${j}-${i}`]) { p = d.pairs[`${j}-${i}`]; sign = -1; }
    let words;
    if (i === j) words = "Pick two different candidates.";
    else if (!p) words = `No paired test of these two on ${d.column}: both must be ranked (not degenerate, collapsed or timed under load) and share seeds.`;
    else {
      const [delta, lo, hi, pHolm, k, right, wrong, n] = p;
      const [low, high] = sign > 0 ? [lo, hi] : [-hi, -lo];
      const unit = d.unit ? ` ${d.unit}` : "";
      words = `A − B on ${d.column}: ${(sign * delta).toFixed(2)}${unit}, 95 % interval [${low.toFixed(2)}, ${high.toFixed(2)}] ` +
        `(paired by seed and example over ${k} seeds; Holm-adjusted p ${pHolm === null ? "n/a below 3 seeds" : pHolm}). ` +
        `They disagree on ${sign > 0 ? right + wrong : wrong + right} of ${n} example pairs: A right and B wrong on ${sign > 0 ? right : wrong}, ` +
        `A wrong and B right on ${sign > 0 ? wrong : right}.`;
    }
    out.replaceChildren(el("div", {class: "scroll"}, side), el("p", {class: "diff", text: words}));
    const ex = section.querySelector("details.examples");
    if (ex && i !== j && ex.dataset.attacks === "1") {
      const list = el("div", {class: "c-examples"});
      const go = el("button", {type: "button", class: "c-load", text: "show the attacked examples where they differ (loads the examples)"});
      list.append(go);
      out.append(list);
      go.addEventListener("click", () => load(div.dataset.table, ex.dataset.parts.split(" "), (x) => {
        const key = (r) => `${r[1]}|${r[2]}|${r[3]}`; // seed, attack, example; the browser numbers candidates as the rows
        const other = new Map(x.attacks.filter((r) => r[0] === j).map((r) => [key(r), r]));
        const differ = x.attacks.filter((r) => r[0] === i && other.has(key(r)) && other.get(key(r))[7] !== r[7]);
        list.replaceChildren(el("p", {text: `${differ.length} attacked examples where the attack's result differs (same seed, attack and example); the first 20, A then B:`}),
          ...differ.slice(0, 20).flatMap((r) => [exampleNode(x, r), exampleNode(x, other.get(key(r)))]));
      }));
    }
  };
  a.addEventListener("change", render);
  b.addEventListener("change", render);
  render();
}

function wire(table) {
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => th.addEventListener("click", () => sortBy(table, i, th)));
}

document.querySelectorAll("table.board").forEach(wire);
document.querySelectorAll("section.study").forEach((s) => {
  s.querySelectorAll(".filters select, .filters input").forEach((c) => c.addEventListener("input", () => filterRows(s)));
  filterRows(s);
});
document.querySelectorAll("div.compare").forEach(compare);
document.querySelectorAll("details.examples").forEach((det) => det.addEventListener("toggle", () => {
  const div = det.querySelector(".browser");
  if (!det.open || div.dataset.done) return;
  div.dataset.done = "1";
  load(det.dataset.table, det.dataset.parts.split(" "), (d) => browser(div, d));
}, {once: false}));
