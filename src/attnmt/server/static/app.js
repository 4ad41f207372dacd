// The attention page: translate with POST /v1/translate and draw the attention grid.
// No framework and no build step; everything the page needs comes from this server.

const $ = (id) => document.getElementById(id);

const state = {
  model: null,       // GET /v1/model
  request: null,     // the last request sent (text, beam), for layer/head redraws
  translation: null, // the last /v1/translate translation shown
};

function show(id, text) {
  const el = $(id);
  el.textContent = text || "";
  el.hidden = !text;
}

function setBusy(busy, text) {
  $("translate-button").disabled = busy;
  $("status-message").textContent = busy ? text : "";
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, options);
  } catch (err) {
    throw new Error(`The server did not answer (${err.message}). Is attnmt serve still running?`);
  }
  let data = null;
  try {
    data = await response.json();
  } catch (err) {
    throw new Error(`The server answered ${response.status} without JSON.`);
  }
  if (!response.ok) {
    throw new Error(data && data.error ? data.error : `The server answered ${response.status}.`);
  }
  return data;
}

// ---- the model --------------------------------------------------------------------------

function describeModel(m) {
  const parts = [`${m.name}`, `${m.arch}`, `${m.source_lang} → ${m.target_lang}`,
                 `${(m.parameters / 1e6).toFixed(2)} M parameters`];
  if (m.best_valid_bleu !== null) parts.push(`best validation BLEU ${m.best_valid_bleu.toFixed(1)}`);
  for (const [name, report] of Object.entries(m.test_scores || {})) {
    if (typeof report.bleu === "number") parts.push(`${report.split || name} BLEU ${report.bleu.toFixed(1)}`);
  }
  return parts.join(" · ");
}

function fillSelect(select, count) {
  select.replaceChildren(new Option("average", ""));
  for (let i = 0; i < count; i++) select.append(new Option(String(i), String(i)));
}

async function loadModel() {
  try {
    const m = await api("/v1/model");
    state.model = m;
    $("model-info").textContent = describeModel(m);
    $("source-label").textContent = `Source text (${m.source_lang})`;
    $("output-text").lang = m.target_lang;
    $("beam-size").value = m.beam_size;
    $("beam-size").max = m.max_beam;
    if (m.arch === "transformer" && m.layers && m.heads) {
      fillSelect($("layer-select"), m.layers);
      fillSelect($("head-select"), m.heads);
      $("attention-view").hidden = false;
    }
    $("api-key-label").hidden = !m.api_key_required;
  } catch (err) {
    $("model-info").textContent = "model description unavailable";
    show("error-message", err.message);
  }
}

// ---- translating ------------------------------------------------------------------------

function optionalInt(value) {
  return value === "" ? null : Number.parseInt(value, 10);
}

function requestBody(text, beam) {
  const body = { texts: [text], beam_size: beam, n_best: Math.min(5, beam), attention: true,
                 layer: optionalInt($("layer-select").value), head: optionalInt($("head-select").value) };
  if (state.model && state.model.arch !== "transformer") { delete body.layer; delete body.head; }
  const key = $("api-key").value;
  if (key) body.api_key = key;
  return body;
}

async function translate() {
  show("error-message", "");
  const text = $("source-text").value;
  if (!text.trim()) {
    show("error-message", "Type a sentence to translate.");
    return;
  }
  const beam = Number.parseInt($("beam-size").value, 10);
  const maxBeam = state.model ? state.model.max_beam : 16;
  if (!Number.isInteger(beam) || beam < 1 || beam > maxBeam) {
    show("error-message", `Beam size must be a whole number from 1 to ${maxBeam}.`);
    return;
  }
  state.request = { text, beam };
  await runTranslation("Translating…");
}

async function runTranslation(busyText) {
  const { text, beam } = state.request;
  setBusy(true, busyText);
  try {
    const data = await api("/v1/translate", requestBody(text, beam));
    const translation = data.translations[0];
    state.translation = translation;
    render(translation);
    show("warning-message", translation.warnings.length ? "Note: " + translation.warnings.join("; ") : "");
    show("error-message", "");
  } catch (err) {
    show("error-message", err.message);
  } finally {
    setBusy(false);
  }
}

// ---- drawing ----------------------------------------------------------------------------

function render(t) {
  $("result").hidden = false;
  $("output-text").textContent = t.text;
  const list = $("alternatives");
  list.replaceChildren();
  for (const alt of t.alternatives) {
    const item = document.createElement("li");
    const text = document.createElement("span");
    text.className = "alternative-text";
    text.textContent = alt.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = alt.score.toFixed(3);
    item.append(text, score);
    list.append(item);
  }
  drawTokens(t);
  drawGrid(t);
}

// Word boundaries: sentencepiece marks a word's first piece with "▁"; BPE marks a piece that
// continues into the next with "@@". Otherwise (Moses words) every token starts a word.
function wordStarts(tokens) {
  const spm = tokens.some((tok) => tok.startsWith("▁"));
  return tokens.map((tok, i) => {
    if (spm) return tok.startsWith("▁") || i === 0;
    return i === 0 || !tokens[i - 1].endsWith("@@");
  });
}

function drawTokens(t) {
  const box = $("output-tokens");
  box.replaceChildren();
  const starts = wordStarts(t.tokens);
  t.tokens.forEach((tok, row) => {
    const chip = document.createElement("span");
    chip.className = "token" + (starts[row] ? " word-start" : " subword");
    chip.dataset.row = row;
    chip.textContent = tok;
    chip.addEventListener("mouseenter", () => highlightRow(row));
    chip.addEventListener("mouseleave", clearHighlight);
    box.append(chip);
  });
}

function drawGrid(t) {
  const grid = $("attention-grid");
  grid.replaceChildren();
  const src = t.source_tokens;
  const starts = wordStarts(src);
  grid.style.gridTemplateColumns = `max-content repeat(${src.length}, 22px)`;
  grid.dataset.rows = t.tokens.length;
  grid.dataset.cols = src.length;
  grid.append(document.createElement("div"));  // the corner
  src.forEach((tok, col) => {
    const head = document.createElement("div");
    head.className = "col-head" + (starts[col] ? " word-start" : "");
    head.dataset.col = col;
    head.textContent = tok;
    head.title = tok;
    head.addEventListener("mouseenter", () => highlightCol(col));
    head.addEventListener("mouseleave", clearHighlight);
    grid.append(head);
  });
  const attention = t.attention || [];
  t.tokens.forEach((tok, row) => {
    const head = document.createElement("div");
    head.className = "row-head";
    head.dataset.row = row;
    head.textContent = tok;
    head.addEventListener("mouseenter", () => highlightRow(row));
    head.addEventListener("mouseleave", clearHighlight);
    grid.append(head);
    const weights = attention[row] || [];
    src.forEach((srcTok, col) => {
      const w = weights[col] || 0;
      const cell = document.createElement("div");
      cell.className = "cell" + (starts[col] ? " word-start" : "");
      cell.dataset.row = row;
      cell.dataset.col = col;
      cell.dataset.weight = w;
      cell.style.backgroundColor = `rgba(31, 95, 191, ${Math.min(1, Math.max(0, w)).toFixed(4)})`;
      cell.title = `${tok} → ${srcTok}: ${w.toFixed(3)}`;
      cell.addEventListener("mouseenter", () => highlightRow(row));
      cell.addEventListener("mouseleave", clearHighlight);
      grid.append(cell);
    });
  });
}

function clearHighlight() {
  for (const cls of ["active-row", "active-col", "attended", "most-attended", "active"]) {
    for (const el of document.querySelectorAll("." + cls)) el.classList.remove(cls);
  }
  $("hover-info").textContent = "";
}

// An output token: its row, the source token it attends to most (the row's argmax), and the
// source tokens with at least half that weight.
function highlightRow(row) {
  clearHighlight();
  const t = state.translation;
  const weights = (t.attention || [])[row] || [];
  for (const el of document.querySelectorAll(`#attention-grid [data-row="${row}"], #output-tokens [data-row="${row}"]`)) {
    el.classList.add(el.classList.contains("token") ? "active" : "active-row");
  }
  if (!weights.length) return;
  let best = 0;
  weights.forEach((w, col) => { if (w > weights[best]) best = col; });
  weights.forEach((w, col) => {
    if (w >= weights[best] / 2) {
      document.querySelector(`#attention-grid .col-head[data-col="${col}"]`).classList.add("attended");
    }
  });
  document.querySelector(`#attention-grid .cell[data-row="${row}"][data-col="${best}"]`).classList.add("most-attended");
  $("hover-info").textContent = `"${t.tokens[row]}" attends most to "${t.source_tokens[best]}" ` +
    `(${weights[best].toFixed(3)})`;
}

function highlightCol(col) {
  clearHighlight();
  for (const el of document.querySelectorAll(`#attention-grid [data-col="${col}"]`)) el.classList.add("active-col");
  $("hover-info").textContent = `source token "${state.translation.source_tokens[col]}"`;
}

// ---- wiring -----------------------------------------------------------------------------

function redrawView() {
  if (state.request) runTranslation("Redrawing the attention…");
}

$("translate-form").addEventListener("submit", (event) => {
  event.preventDefault();
  translate();
});
$("source-text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    translate();
  }
});
$("layer-select").addEventListener("change", redrawView);
$("head-select").addEventListener("change", redrawView);

loadModel();
