"""The page template of ``formats.html``: CSS and JavaScript inline, data in a JSON block."""

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<link rel="icon" href="data:,">
<title>__TITLE__</title>
<style>
html, body { margin: 0; height: 100%; font: 13px system-ui, sans-serif; overflow: hidden; }
#bar { position: absolute; top: 0; left: 0; right: 0; height: 36px; display: flex; gap: 8px;
       align-items: center; padding: 0 10px; background: #f4f4f4; border-bottom: 1px solid #ccc; }
#bar b { margin-right: 8px; }
#found { color: #666; }
#canvas { position: absolute; top: 37px; left: 0; right: 0; bottom: 0; cursor: grab; }
#canvas.panning { cursor: grabbing; }
#side { position: absolute; top: 37px; right: 0; bottom: 0; width: 420px; overflow: auto;
        background: #fff; border-left: 1px solid #ccc; padding: 10px; box-sizing: border-box;
        display: none; }
#side pre { background: #f6f6f6; padding: 6px; overflow: auto; font-size: 11px; }
#side table { border-collapse: collapse; } #side td { padding: 1px 6px 1px 0; vertical-align: top; }
#side .close { float: right; cursor: pointer; }
svg text { font: 12px monospace; pointer-events: none; }
g.node rect { stroke: #555; } g.node:hover rect { stroke: #000; stroke-width: 2; }
g.node.match rect { stroke: #e00; stroke-width: 3; }
g.node.selected rect { stroke: #06c; stroke-width: 3; }
path.edge { fill: none; stroke: #999; } path.edge.lit { stroke: #06c; stroke-width: 2; }
</style></head>
<body>
<div id="bar"><b>__TITLE__</b>
<select id="view" title="view"></select>
<input id="search" placeholder="search ops or kernel (Enter: next)" size="24">
<span id="found"></span>
<button id="fit">fit</button>
<span id="help" style="color:#888">wheel: zoom, drag: pan, click: details, #search=op in the
address opens at an op</span></div>
<div id="canvas"><svg id="svg" width="100%" height="100%"><g id="edges"></g><g id="nodes"></g></svg></div>
<div id="side"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const svg = document.getElementById("svg");
const side = document.getElementById("side");
let view = null, box = null, matches = [], matchAt = -1, selected = null;

function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
                  .replace(/"/g, "&quot;");
}

function edgePath(a, b) {
  const y0 = a.y + a.h, y1 = b.y, mid = y1 > y0 ? (y0 + y1) / 2 : y0 + 20;
  return "M" + a.x + "," + y0 + " C" + a.x + "," + mid + " " + b.x + "," + mid + " " + b.x + "," + y1;
}

function draw(k) {
  view = DATA.views[k];
  const e = [], n = [];
  view.edges.forEach(function (ed, i) {
    e.push('<path class="edge" data-i="' + i + '" d="' + edgePath(view.nodes[ed[0]], view.nodes[ed[1]]) +
           '"><title>' + esc(ed[2]) + '</title></path>');
  });
  view.nodes.forEach(function (nd, i) {
    let s = '<g class="node" data-i="' + i + '"><title>' +
            esc([nd.label].concat(nd.types, nd.source ? [nd.source] : []).join("\n")) + '</title>' +
            '<rect x="' + (nd.x - nd.w / 2) + '" y="' + nd.y + '" width="' + nd.w + '" height="' + nd.h +
            '" rx="4" fill="' + nd.fill + '"></rect>';
    nd.lines.forEach(function (line, j) {
      s += '<text x="' + nd.x + '" y="' + (nd.y + 4 + 15 * (j + 0.75)) + '" text-anchor="middle">' +
           esc(line) + '</text>';
    });
    n.push(s + '</g>');
  });
  document.getElementById("edges").innerHTML = e.join("");
  document.getElementById("nodes").innerHTML = n.join("");
  side.style.display = "none";
  selected = null;
  search(document.getElementById("search").value);
  start();
}

// a graph too big to read when fitted opens at its top, at a readable size; "fit" shows all
function start() {
  const r = svg.getBoundingClientRect();
  const s = Math.max(view.width / Math.max(r.width, 1), view.height / Math.max(r.height, 1));
  if (s <= 2.5) { fit(); return; }
  const w = Math.max(r.width, 1) * 1.3, h = Math.max(r.height, 1) * 1.3;
  const first = view.nodes.find(function (nd) { return nd.kind === "op" || nd.kind === "fused" ||
                                                       nd.kind === "grad" || nd.kind === "source"; });
  const x = first ? first.x : w / 2, y = first ? Math.max(0, first.y - h / 3) : 0;
  setBox([x - w / 2, y, w, h]);
}

function setBox(b) { box = b; svg.setAttribute("viewBox", b.join(" ")); }

function fit() {
  const r = svg.getBoundingClientRect();
  const w = Math.max(view.width, 100), h = Math.max(view.height, 100);
  const s = Math.max(w / Math.max(r.width, 1), h / Math.max(r.height, 1));
  setBox([0, 0, Math.max(r.width, 1) * s, Math.max(r.height, 1) * s]);
}

function zoomTo(nd) {
  const r = svg.getBoundingClientRect(), s = 1.5;
  setBox([nd.x - r.width * s / 2, nd.y - r.height * s / 2, r.width * s, r.height * s]);
}

svg.addEventListener("wheel", function (ev) {
  ev.preventDefault();
  const r = svg.getBoundingClientRect(), f = ev.deltaY > 0 ? 1.2 : 1 / 1.2;
  const px = box[0] + (ev.clientX - r.left) / r.width * box[2];
  const py = box[1] + (ev.clientY - r.top) / r.height * box[3];
  setBox([px - (px - box[0]) * f, py - (py - box[1]) * f, box[2] * f, box[3] * f]);
}, {passive: false});

let drag = null;
svg.addEventListener("mousedown", function (ev) {
  drag = {x: ev.clientX, y: ev.clientY, box: box.slice(), moved: false};
  document.getElementById("canvas").classList.add("panning");
});
window.addEventListener("mousemove", function (ev) {
  if (!drag) return;
  const r = svg.getBoundingClientRect();
  const dx = (ev.clientX - drag.x) / r.width * box[2], dy = (ev.clientY - drag.y) / r.height * box[3];
  if (Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 3) drag.moved = true;
  setBox([drag.box[0] - dx, drag.box[1] - dy, box[2], box[3]]);
});
window.addEventListener("mouseup", function (ev) {
  const d = drag;
  drag = null;
  document.getElementById("canvas").classList.remove("panning");
  if (d && !d.moved) {
    const g = ev.target.closest ? ev.target.closest("g.node") : null;
    if (g) show(+g.dataset.i);
  }
});

function row(k, v) { return v ? "<tr><td><b>" + esc(k) + "</b></td><td>" + esc(v) + "</td></tr>" : ""; }

function show(i) {
  const nd = view.nodes[i];
  document.querySelectorAll("g.node.selected").forEach(function (g) { g.classList.remove("selected"); });
  document.querySelectorAll("path.edge.lit").forEach(function (p) { p.classList.remove("lit"); });
  document.querySelector('g.node[data-i="' + i + '"]').classList.add("selected");
  view.edges.forEach(function (ed, k) {
    if (ed[0] === i || ed[1] === i)
      document.querySelector('path.edge[data-i="' + k + '"]').classList.add("lit");
  });
  let h = '<span class="close" id="close">close</span><h3>' + esc(nd.label) + "</h3><table>" +
          row("kind", nd.kind) + row("types", nd.types.join(", ")) + row("source", nd.source) +
          row("kernel", nd.group);
  Object.keys(nd.attrs).forEach(function (k) { h += row(k, nd.attrs[k]); });
  h += "</table>";
  if (nd.detail) h += "<h4>" + (nd.kind === "fused" ? "subgraph" : "detail") + "</h4><pre>" +
                      esc(nd.detail) + "</pre>";
  if (nd.code) h += "<h4>generated code</h4><pre>" + esc(nd.code) + "</pre>";
  side.innerHTML = h;
  side.style.display = "block";
  document.getElementById("close").onclick = function () { side.style.display = "none"; };
}

function search(text) {
  text = text.trim().toLowerCase();
  document.querySelectorAll("g.node.match").forEach(function (g) { g.classList.remove("match"); });
  matches = [];
  matchAt = -1;
  if (text) {
    view.nodes.forEach(function (nd, i) {
      if (nd.label.toLowerCase().indexOf(text) >= 0 || nd.group.toLowerCase() === text) {
        matches.push(i);
        document.querySelector('g.node[data-i="' + i + '"]').classList.add("match");
      }
    });
  }
  document.getElementById("found").textContent = text ? matches.length + " found" : "";
}

const input = document.getElementById("search");
input.addEventListener("input", function () { search(input.value); });
input.addEventListener("keydown", function (ev) {
  if (ev.key === "Enter" && matches.length) {
    matchAt = (matchAt + 1) % matches.length;
    zoomTo(view.nodes[matches[matchAt]]);
    show(matches[matchAt]);
  }
});
document.getElementById("fit").onclick = fit;
const select = document.getElementById("view");
DATA.views.forEach(function (v, k) {
  const o = document.createElement("option");
  o.value = k;
  o.textContent = v.name + " (" + v.nodes.length + " nodes)";
  select.appendChild(o);
});
select.onchange = function () { draw(+select.value); };
draw(0);
// page.html#search=mm opens with the ops matching "mm" marked and the first one's details shown
const wanted = new URLSearchParams(location.hash.slice(1)).get("search");
if (wanted) {
  input.value = wanted;
  search(wanted);
  if (matches.length) { matchAt = 0; zoomTo(view.nodes[matches[0]]); show(matches[0]); }
}
</script></body></html>
"""
