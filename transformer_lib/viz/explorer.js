// The static twin's script: swaps the picture when a control changes, and shows a heatmap
// cell's value under the pointer. transformer_lib/viz/static.py inlines it, once per figure,
// after the figure's markup: <div class="tl-explorer" id="__UID__"> holds the controls
// ([data-k] = the control's index), the <img>, a .tl-hover tip, and two JSON scripts,
// .tl-frames ({"i,j,...": {png, hover} or {ref, hover}}) and .tl-describe (alt-text parts and
// the word for a masked cell; static.to_html writes them in the edition's language).
// __UID__ is replaced by the figure's id. These // lines at the top are not shipped.
(function () {
  var me = document.currentScript, root = (me && me.parentNode) || document.getElementById("__UID__");
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var frames, info;
  try {
    frames = JSON.parse(root.querySelector("script.tl-frames").textContent);
    info = JSON.parse(root.querySelector("script.tl-describe").textContent);
  } catch (err) { return; }
  var img = root.querySelector(".tl-explorer-figure img"), tip = root.querySelector(".tl-hover");
  var ctls = root.querySelectorAll("[data-k]");
  function frame(key) {
    var f = frames[key];
    return f && f.ref !== undefined ? { png: frames[f.ref].png, hover: f.hover } : f;
  }
  function state() {
    var idx = [];
    ctls.forEach(function (c) {
      var k = +c.getAttribute("data-k");
      if (c.type === "checkbox") idx[k] = c.checked ? c.getAttribute("data-true") : c.getAttribute("data-false");
      else idx[k] = c.value;
      if (c.type === "range") {
        var text = info.texts[k][+c.value], out = c.parentNode.querySelector("output");
        if (out) out.textContent = text;
        c.setAttribute("aria-valuetext", text);
      }
    });
    return idx;
  }
  var current = frame(state().join(","));
  function show() {
    var idx = state(), f = frame(idx.join(","));
    if (!f) return;
    current = f;
    img.src = "data:image/png;base64," + f.png;
    img.alt = info.title + " (" + idx.map(function (i, k) { return info.labels[k] + ": " + info.texts[k][+i]; }).join("; ") + ")";
    tip.style.display = "none";
  }
  ctls.forEach(function (c) { c.addEventListener("input", show); c.addEventListener("change", show); });
  function hover(e) {
    var r = img.getBoundingClientRect(), fx = (e.clientX - r.left) / r.width, fy = (e.clientY - r.top) / r.height;
    var hit = null;
    ((current && current.hover) || []).forEach(function (g) {
      var x = (fx - g.box[0]) / g.box[2], y = (fy - g.box[1]) / g.box[3];
      if (x >= 0 && x < 1 && y >= 0 && y < 1) {
        var i = Math.floor(y * g.r.length), j = Math.floor(x * g.c.length), v = g.v[i][j];
        hit = g.rn + " " + g.r[i] + " \u2192 " + g.cn + " " + g.c[j] + ": " + (v === null ? info.masked : v);
      }
    });
    if (!hit) { tip.style.display = "none"; return; }
    tip.textContent = hit;
    tip.style.display = "block";
    var left = e.clientX - r.left + 12, top = e.clientY - r.top + 14;
    if (left + tip.offsetWidth > r.width) left = Math.max(0, e.clientX - r.left - tip.offsetWidth - 8);
    if (top + tip.offsetHeight > r.height) top = Math.max(0, e.clientY - r.top - tip.offsetHeight - 8);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  img.addEventListener("pointermove", hover);
  img.addEventListener("pointerdown", hover);
  img.addEventListener("pointerleave", function () { tip.style.display = "none"; });
})();
