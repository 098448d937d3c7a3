// robust-compression bench site: sortable, filterable tables and the example browser.
// No request leaves the page: the data is window.BENCH_EXAMPLES, from examples.js beside it.
"use strict";

function sortBy(table, col, th) {
  const body = table.tBodies[0];
  const asc = th.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  const key = (tr) => {
    const td = tr.cells[col];
    const v = td && td.dataset.v;
    return v !== undefined && v !== "" ? parseFloat(v) : (td ? td.textContent.trim().toLowerCase() : "");
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
  const rows = Array.from(section.querySelector("table.board").tBodies[0].rows);
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

function optionList(select, values) {
  select.append(el("option", {value: "", text: "all"}));
  values.forEach((v) => select.append(el("option", {value: String(v), text: String(v)})));
}

function browser(div) {
  const data = (window.BENCH_EXAMPLES || {})[div.dataset.table];
  if (!data) return;
  if (data.attacks.length) {
    const cand = el("select", {class: "x-cand"}), recipe = el("select", {class: "x-recipe"}), result = el("select", {class: "x-result"});
    const search = el("input", {type: "search", class: "x-search", placeholder: "search the texts"});
    optionList(cand, data.candidates);
    optionList(recipe, [...new Set(data.attacks.map((a) => a[2]))]);
    optionList(result, ["successful", "failed", "skipped"]);
    const list = el("div", {class: "x-list"}), more = el("button", {type: "button", text: "show more"});
    const count = el("span", {class: "x-count"});
    div.append(el("div", {class: "filters"}, "candidate ", cand, " attack ", recipe, " result ", result, " ", search, " ", count), list, more);
    let limit = 50;
    const render = () => {
      const q = search.value.toLowerCase();
      const rows = data.attacks.filter((a) => (!cand.value || data.candidates[a[0]] === cand.value) &&
        (!recipe.value || a[2] === recipe.value) && (!result.value || a[7] === result.value) &&
        (!q || data.texts[a[3]].toLowerCase().includes(q) || a[11].some((o) => o[2].toLowerCase().includes(q))));
      count.textContent = `${rows.length} attacked examples`;
      list.replaceChildren(...rows.slice(0, limit).map((a) => {
        const tokens = data.texts[a[3]].split(/\s+/).filter(Boolean);
        const conf = a[10] === null || a[10] === undefined ? "" : ` (p ${a[10].toFixed(2)})`;
        return el("div", {class: "example " + a[7]},
          el("div", {class: "meta", text: `${data.candidates[a[0]]}, seed ${a[1]}, ${a[2]}, ${a[3]}: gold ${a[4]}; ` +
            `answer before ${a[5]}${conf}, after ${a[6]} (confidence after the attack is not kept); ${a[7]}; ` +
            `${a[8]} words changed; ${a[9]} queries`}),
          el("div", {class: "orig"}, "original: ", marked(tokens, a[11], true, "del")),
          el("div", {class: "pert"}, "perturbed: ", marked(tokens, a[11], false, "mark")));
      }));
      more.hidden = rows.length <= limit;
    };
    [cand, recipe, result].forEach((s) => s.addEventListener("change", () => { limit = 50; render(); }));
    search.addEventListener("input", () => { limit = 50; render(); });
    more.addEventListener("click", () => { limit += 50; render(); });
    render();
  }
  if (data.ood.length) {
    const rows = data.ood.map(([c, set, group, gold, n, wrong]) => el("tr", {},
      el("td", {text: data.candidates[c]}), el("td", {text: set}), el("td", {text: group}), el("td", {text: String(gold)}),
      el("td", {text: String(n), "data-v": String(n)}), el("td", {text: (100 * wrong / n).toFixed(1), "data-v": String(wrong / n)})));
    const table = el("table", {class: "board ood"},
      el("thead", {}, el("tr", {}, ...["candidate", "set", "group (heuristic)", "gold", "examples (all seeds)", "error %"].map((h) => el("th", {text: h})))),
      el("tbody", {}, ...rows));
    const search = el("input", {type: "search", class: "x-search", placeholder: "filter candidate, set or group"});
    search.addEventListener("input", () => rows.forEach((tr) => (tr.hidden = !tr.textContent.toLowerCase().includes(search.value.toLowerCase()))));
    div.append(el("p", {text: "OOD errors by set, group and gold label, over the seeds (the texts are the data's, not kept here):"}), search, table);
    wire(table);
  }
}

function wire(table) {
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => th.addEventListener("click", () => sortBy(table, i, th)));
}

document.querySelectorAll("table.board").forEach(wire);
document.querySelectorAll("section.study").forEach((s) => {
  s.querySelectorAll(".filters select, .filters input").forEach((c) => c.addEventListener("input", () => filterRows(s)));
  filterRows(s);
});
document.querySelectorAll("div.examples").forEach(browser);
