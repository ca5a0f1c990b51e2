// hermes-report explorer: filters and pages the rollout list, renders one rollout on demand.
// Every piece of record text goes through textContent (never innerHTML): model output is hostile.
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var ROWS = JSON.parse($("rows").textContent);
  var VOCAB = JSON.parse($("vocab").textContent);
  var PAGE = 100;
  var TURN_ENDS = { stop: "the model sampled an end token", length: "generation hit the token budget (truncated)" };
  var view = ROWS;
  var page = 0;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined) return "—";
    return typeof v === "number" && digits !== undefined ? v.toFixed(digits) : String(v);
  }
  function pretty(v) {
    if (typeof v === "string") {
      try { return JSON.stringify(JSON.parse(v), null, 2); } catch (e) { return v; }
    }
    return JSON.stringify(v, null, 2);
  }

  // ------------------------------------------------------------------ list
  function options(select, key, label) {
    var seen = {};
    ROWS.forEach(function (r) { if (r[key] !== null && r[key] !== undefined) seen[r[key]] = (seen[r[key]] || 0) + 1; });
    select.appendChild(el("option", null, "any " + label)).value = "";
    Object.keys(seen).sort().forEach(function (k) {
      var o = el("option", null, k + " (" + seen[k] + ")");
      o.value = k;
      select.appendChild(o);
    });
  }
  var SORTS = {
    "order": function (a, b) { return a.i - b.i; },
    "reward-desc": function (a, b) { return (b.r === null ? -1e9 : b.r) - (a.r === null ? -1e9 : a.r); },
    "reward-asc": function (a, b) { return (a.r === null ? 1e9 : a.r) - (b.r === null ? 1e9 : b.r); },
    "turns": function (a, b) { return (b.turns || 0) - (a.turns || 0); },
    "tokens": function (a, b) { return (b.ntok || 0) - (a.ntok || 0); },
    "tool-errors": function (a, b) { return b.te - a.te; },
    "drift": function (a, b) { return (b.drift || 0) - (a.drift || 0); }
  };
  function applyFilters() {
    var st = $("f-status").value, stop = $("f-stop").value, fam = $("f-family").value;
    var terr = $("f-toolerr").checked, drift = $("f-drift").checked;
    var q = $("f-search").value.toLowerCase();
    view = ROWS.filter(function (r) {
      return (!st || r.st === st) && (!stop || r.stop === stop) && (!fam || r.fam === fam) &&
        (!terr || r.te > 0) && (!drift || r.drift > 0) && (!q || r.id.toLowerCase().indexOf(q) >= 0);
    });
    view.sort(SORTS[$("f-sort").value] || SORTS.order);
    page = 0;
    renderList();
  }
  function renderList() {
    var body = $("list-body");
    var frag = document.createDocumentFragment();
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    page = Math.min(page, pages - 1);
    view.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) {
      var tr = el("tr", "row " + r.st);
      tr.dataset.index = r.i;
      var link = el("a", null, r.id);
      link.href = "#r=" + r.i;
      var idCell = el("td", "id");
      idCell.appendChild(link);
      tr.appendChild(idCell);
      [r.st + (r.why ? " (" + r.why + ")" : ""), fmt(r.r, 3), fmt(r.stop), fmt(r.fam), fmt(r.dif),
       fmt(r.turns), r.tc + " / " + fmt(r.te),
       r.ntok === null ? "—" : r.gen + " / " + r.ntok, fmt(r.drift)].forEach(function (t) {
        tr.appendChild(el("td", null, t));
      });
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    $("shown").textContent = view.length + " of " + ROWS.length + " rollouts · page " + (page + 1) + " / " + pages;
  }

  // ------------------------------------------------------------------ one rollout
  function facts(row, d) {
    var table = el("table", "facts");
    var item = d.item || {};
    [["outcome", row.st + (row.why ? " (" + row.why + ")" : "")], ["reward", fmt(row.r, 3)],
     ["stop reason", fmt(row.stop)], ["env", fmt(d.env)], ["item", fmt(item.id)],
     ["family / difficulty", fmt(row.fam) + " / " + fmt(row.dif)], ["model", fmt(d.model)],
     ["turns", fmt(row.turns)], ["tool calls by the model / failed", row.tc + " / " + fmt(row.te)],
     ["logprob mode", fmt(d.logprob_mode)]].forEach(function (kv) {
      var tr = el("tr");
      tr.appendChild(el("th", null, kv[0]));
      tr.appendChild(el("td", null, kv[1]));
      table.appendChild(tr);
    });
    return table;
  }
  function block(title, text, cls) {
    var div = el("div", cls || "block");
    div.appendChild(el("h4", null, title));
    div.appendChild(el("pre", null, text));
    return div;
  }
  function toolList(d) {
    var box = el("section", "tools");
    box.appendChild(el("h3", null, "Tools the model saw"));
    var used = d.toolsets_used || (d.metadata && (d.metadata.toolsets_used || d.metadata.toolsets));
    if (used) box.appendChild(el("p", null, "toolsets: " + (Array.isArray(used) ? used.join(", ") : pretty(used))));
    if (Array.isArray(d.tools) && d.tools.length) {
      d.tools.forEach(function (t) {
        var fn = t["function"] || t;
        var det = el("details", "tool");
        det.appendChild(el("summary", null, (fn.name || "?") + (fn.description ? " — " + fn.description : "")));
        det.appendChild(el("pre", null, pretty(fn.parameters || t)));
        box.appendChild(det);
      });
    } else if (!used) {
      box.appendChild(el("p", "note", "This record does not list the tools the model saw."));
    }
    if (d.tool_stats) box.appendChild(block("tool stats", pretty(d.tool_stats)));
    return box;
  }
  function message(m) {
    var role = String(m.role || "?");
    var div = el("div", "msg " + role);
    var head = el("div", "role", role);
    if (role === "tool") head.appendChild(el("i", null, " " + (m.name || "") + " (" + (m.tool_call_id || "") + ")"));
    div.appendChild(head);
    if (m.reasoning_content) div.appendChild(block("reasoning", m.reasoning_content, "reasoning"));
    if (m.content !== null && m.content !== undefined && m.content !== "") {
      div.appendChild(el("pre", "content", typeof m.content === "string" ? m.content : pretty(m.content)));
    }
    (m.tool_calls || []).forEach(function (c) {
      var fn = c["function"] || {};
      div.appendChild(block("tool call " + (fn.name || "?") + " (" + (c.id || "") + ")", pretty(fn.arguments), "call"));
    });
    return div;
  }
  function tokenText(id) {
    if (VOCAB === null) return "⟨" + id + "⟩";
    var t = VOCAB[id];
    return t === undefined ? "⟨" + id + "⟩" : t.replace(/\n/g, "↵\n");
  }
  function tokenView(d) {
    var box = el("section", "tokenview");
    box.appendChild(el("h3", null, "Tokens the trainer gets"));
    var tok = d.tok;
    if (!tok) {
      box.appendChild(el("p", "note notokens", "This rollout carries no sampler tokens: it was generated in " +
        "phase 1 (messages from an OpenAI-compatible server) or failed before any token was kept. Nothing here is training data for RL."));
      return box;
    }
    if (tok.src !== "sampler") {
      box.appendChild(el("p", "note notokens", "These tokens were re-tokenized from the messages (token source: " +
        fmt(tok.src) + "), not taken from the sampler: no sampler logprobs, and they may differ from what the model produced. Use them for SFT, not RL."));
    }
    // tok.lp holds the trainable positions' logprobs only: spread them over every position
    var lps = new Array(tok.ids.length), trainable = 0;
    for (var k = 0; k < tok.mask.length; k++) {
      lps[k] = tok.mask.charCodeAt(k) === 49 ? tok.lp[trainable++] : null;
    }
    var drifted = d.drift ? d.drift.mismatches + " drifted tokens" +
      (tok.drift.length ? " (regions start at #" + tok.drift.join(", #") + ")" : "") : "no drift check";
    var summary = el("p", null, tok.ids.length + " tokens · " + trainable + " trainable (sampled, mask 1) · " +
      (tok.ids.length - trainable) + " prompt/bridge · " + drifted +
      (VOCAB === null ? " · no tokenizer: ids shown" : ""));
    summary.id = "tok-summary";
    summary.dataset.total = tok.ids.length;
    summary.dataset.trainable = trainable;
    box.appendChild(summary);
    if (d.drift && $("drift-meaning")) box.appendChild(el("p", "note", $("drift-meaning").textContent));
    var legend = el("p", "legend");
    [["p", "prompt / bridge (mask 0)"], ["t", "trainable (mask 1)"], ["t low", "low logprob"],
     ["t end", "end of a sampled turn / special"], ["t dr", "start of a drift region"]].forEach(function (x) {
      legend.appendChild(el("span", "tk " + x[0], x[1]));
    });
    box.appendChild(legend);
    var info = el("p", "tokinfo", "hover a token for its position, id and logprob");
    box.appendChild(info);
    var ends = {}, drift = {};
    tok.ends.forEach(function (p) { ends[p] = true; });
    tok.drift.forEach(function (p) { drift[p] = true; });
    var wrap = el("div", "tokens");
    var frag = document.createDocumentFragment();
    for (var i = 0; i < tok.ids.length; i++) {
      var m = tok.mask.charCodeAt(i) === 49;
      var lp = lps[i];
      var cls = "tk " + (m ? "t" : "p") + (ends[i] ? " end" : "") + (drift[i] ? " dr" : "");
      var span = el("span", cls, tokenText(tok.ids[i]));
      if (m && lp !== null) {
        var a = Math.min(1, -lp / 6);
        if (a > 0.02) span.style.backgroundColor = "rgba(230,60,40," + a.toFixed(2) + ")";
        if (lp < -2.3) span.className += " low";
      }
      span.dataset.p = i;
      frag.appendChild(span);
    }
    wrap.appendChild(frag);
    wrap.addEventListener("mouseover", function (ev) {
      var t = ev.target;
      if (!t.dataset || t.dataset.p === undefined) return;
      var p = +t.dataset.p, lp2 = lps[p], mk = tok.mask.charCodeAt(p) === 49;
      info.textContent = "#" + p + " id " + tok.ids[p] + " · " + (mk ? "trainable" : "prompt/bridge") +
        " · logprob " + (lp2 === null ? (mk ? "none (sampler gave none)" : "— (masked)") : lp2.toFixed(3) + " (p=" + Math.exp(lp2).toFixed(3) + ")") +
        (ends[p] ? " · end token" : "") + (drift[p] ? " · drift region starts" : "") + " · text " + JSON.stringify(VOCAB ? VOCAB[tok.ids[p]] : null);
    });
    box.appendChild(wrap);
    return box;
  }
  function renderRollout(index) {
    var row = ROWS[index];
    var page2 = $("rollout");
    page2.textContent = "";
    if (!row) { page2.appendChild(el("p", null, "no rollout " + index)); return; }
    var d = JSON.parse($("d" + index).textContent);
    var back = el("a", "back", "← all rollouts");
    back.href = "#";
    page2.appendChild(back);
    page2.appendChild(el("h2", null, row.id));
    page2.appendChild(facts(row, d));
    if (d.failure) page2.appendChild(block("failure", pretty(d.failure), "block bad"));
    if (d.error) page2.appendChild(block("error", String(d.error), "block bad"));
    if (d.metrics && Object.keys(d.metrics).length) page2.appendChild(block("metrics", pretty(d.metrics)));
    if (d.drift) page2.appendChild(block("drift check", pretty(d.drift)));
    page2.appendChild(toolList(d));
    (d.tool_errors || []).forEach(function (e) {
      page2.appendChild(block("tool error: " + e.kind + " (" + e.tool + ", turn " + e.turn +
        (e.turn_end ? ", " + (TURN_ENDS[e.turn_end] || "generation ended: " + e.turn_end) : "") + ")",
        e.message + "\n" + e.arguments, "block bad"));
    });
    page2.appendChild(tokenView(d));
    var msgs = el("section", "messages");
    msgs.appendChild(el("h3", null, "Messages"));
    if (d.system_prompt) msgs.appendChild(block("exact system prompt", d.system_prompt));
    var demo = d.demo || [0, 0];
    if (demo[1] > demo[0]) msgs.appendChild(el("p", "note", "Messages " + (demo[0] + 1) + "–" + demo[1] +
      " are a prefilled demonstration (--prefill-messages): shown to the model, not made by it; their tool calls are not counted."));
    (d.messages || []).forEach(function (m, k) {
      if (!m || typeof m !== "object") return;
      var node = message(m);
      if (k >= demo[0] && k < demo[1]) {
        node.className += " demo";
        node.firstChild.appendChild(el("i", null, " · demonstration"));
      }
      msgs.appendChild(node);
    });
    page2.appendChild(msgs);
  }
  function route() {
    var m = /^#r=(\d+)$/.exec(location.hash);
    var showOne = !!m;
    $("explorer").hidden = showOne;
    $("overview").hidden = showOne;
    $("rollout").hidden = !showOne;
    if (showOne) { renderRollout(+m[1]); window.scrollTo(0, 0); }
  }

  options($("f-status"), "st", "outcome");
  options($("f-stop"), "stop", "stop reason");
  options($("f-family"), "fam", "family");
  ["f-status", "f-stop", "f-family", "f-toolerr", "f-drift", "f-sort"].forEach(function (id) {
    $(id).addEventListener("change", applyFilters);
  });
  $("f-search").addEventListener("input", applyFilters);
  $("prev").addEventListener("click", function () { if (page > 0) { page--; renderList(); } });
  $("next").addEventListener("click", function () { if ((page + 1) * PAGE < view.length) { page++; renderList(); } });
  window.addEventListener("hashchange", route);
  applyFilters();
  route();
  document.documentElement.dataset.rendered = performance.now().toFixed(1);
})();
