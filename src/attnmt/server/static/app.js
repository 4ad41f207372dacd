// The attention page: translate with POST /v1/translate and draw the attention grid.
// No framework and no build step; everything the page needs comes from this server.

const $ = (id) => document.getElementById(id);

const state = {
  models: [],        // GET /v1/models: every model the server holds, one per language pair
  model: null,       // the one chosen in the pair selector (the first: the server's default)
  request: null,     // the last request sent (text, beam, prefix), for layer/head/view redraws
  translation: null, // the last /v1/translate translation shown
  scores: [],        // /v1/score of each n-best alternative (null where scoring failed)
  view: null,        // what the tokens and the grid show: {label, tokens, source_tokens, attention, blocks, probs, alignment}
  selected: 0,       // the alternative shown (-1: the user's own translation)
};

function show(id, text) {
  const el = $(id);
  el.textContent = text || "";
  el.hidden = !text;
}

function setBusy(busy, text) {
  for (const id of ["translate-button", "complete-button", "own-button"]) $(id).disabled = busy;
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

// The models and the pair selector: shown only when the server holds more than one pair.
async function loadModels() {
  try {
    state.models = await api("/v1/models");
    const select = $("pair-select");
    select.replaceChildren(...state.models.map((m, i) => new Option(`${m.source_lang} → ${m.target_lang}`, String(i))));
    $("pair-label").hidden = state.models.length < 2;
    useModel(state.models[0]);
  } catch (err) {
    $("model-info").textContent = "model description unavailable";
    show("error-message", err.message);
  }
}

function useModel(m) {
  state.model = m;
  $("model-info").textContent = describeModel(m);
  $("source-label").textContent = `Source text (${m.source_lang})`;
  $("output-text").lang = m.target_lang;
  $("beam-size").value = m.beam_size;
  $("beam-size").max = m.max_beam;
  const layered = m.arch === "transformer" && m.layers && m.heads;
  fillSelect($("layer-select"), layered ? m.layers : 0);
  fillSelect($("head-select"), layered ? m.heads : 0);
  $("attention-view").hidden = !layered;
  $("api-key-label").hidden = !m.api_key_required;
}

// Another pair: its model's settings, and the translation shown (of the other pair) put away.
function switchPair() {
  useModel(state.models[Number($("pair-select").value)]);
  state.request = null;
  state.translation = null;
  $("result").hidden = true;
  show("warning-message", "");
  show("error-message", "");
}

// ---- translating ------------------------------------------------------------------------

function optionalInt(value) {
  return value === "" ? null : Number.parseInt(value, 10);
}

// Every request names the chosen pair (when the server has several) and carries the API key.
function routed(body) {
  const key = $("api-key").value;
  if (key) body.api_key = key;
  if (state.models.length > 1 && state.model) {
    body.source = state.model.source_lang;
    body.target = state.model.target_lang;
  }
  return body;
}

function linksShown() {
  return $("view-links").checked;
}

// The glossary box: "source phrase = target phrase" lines -> [[source, target], ...]; a line
// without " = " or with an empty side is reported, not guessed at.
function glossaryEntries() {
  const entries = [];
  for (const line of $("glossary-text").value.split("\n")) {
    if (!line.trim()) continue;
    const at = line.indexOf("=");
    const source = at < 0 ? "" : line.slice(0, at).trim();
    const target = at < 0 ? "" : line.slice(at + 1).trim();
    if (!source || !target) throw new Error(`Glossary line "${line.trim()}": write it as source phrase = target phrase.`);
    entries.push([source, target]);
  }
  return entries;
}

function requestBody(text, beam, prefix) {
  const body = { texts: [text], beam_size: beam, n_best: Math.min(5, beam), attention: true,
                 layer: optionalInt($("layer-select").value), head: optionalInt($("head-select").value) };
  if (state.model && state.model.arch !== "transformer") { delete body.layer; delete body.head; }
  if (prefix) body.target_prefix = [prefix];
  const glossary = glossaryEntries();
  if (glossary.length) body.glossary = glossary;
  if (linksShown()) body.alignments = true;
  return routed(body);
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
  state.request = { text, beam, prefix: null };
  await runTranslation("Translating…");
}

// "Complete from here": the same source, the output forced to start with the prefix.
async function complete() {
  const prefix = $("prefix-text").value;
  if (!state.request) return;
  if (!prefix.trim()) {
    show("error-message", "Type (or click an output word to keep) the start of the translation.");
    return;
  }
  state.request = { ...state.request, prefix };
  await runTranslation("Completing…");
}

async function runTranslation(busyText) {
  const { text, beam, prefix } = state.request;
  setBusy(true, busyText);
  try {
    const data = await api("/v1/translate", requestBody(text, beam, prefix));
    const translation = data.translations[0];
    state.translation = translation;
    state.scores = await scoreAlternatives(text, translation);
    render(translation);
    show("prefix-note", prefix ? `Completed from "${prefix}".` : "");
    show("warning-message", translation.warnings.length ? "Note: " + translation.warnings.join("; ") : "");
    show("error-message", "");
  } catch (err) {
    show("error-message", err.message);
  } finally {
    setBusy(false);
  }
}

// ---- scoring (forced decoding, POST /v1/score) ---------------------------------------------

// Each alternative's per-token probabilities (and its log-probability, to compare with the
// user's own translation). A failure here leaves the translation shown, without confidences.
async function scoreAlternatives(text, t) {
  if (!t.alternatives.length) return [];
  try {
    const data = await api("/v1/score", routed({ texts: t.alternatives.map(() => text),
                                                  translations: t.alternatives.map((a) => a.text),
                                                  attention: false }));
    return data.scores;
  } catch (err) {
    show("warning-message", `Word confidences unavailable: ${err.message}`);
    return t.alternatives.map(() => null);
  }
}

function sameTokens(a, b) {
  return a.length === b.length && a.every((tok, i) => tok === b[i]);
}

// Probabilities for the view's tokens when the scored tokens are the same tokens (a replaced
// <unk> or a different tokenization of the text would shift them: then none are shown).
// A translation's word probabilities: its own (/v1/translate's token_probs, the model's reading of
// the text as trained: a typed "hund" read as "Hund"), else its /v1/score where the tokens agree.
function probsFor(hyp, score) {
  if (hyp.token_probs) return hyp.token_probs.slice(0, hyp.tokens.length);
  const tokens = hyp.tokens;
  if (!score || !sameTokens(score.tokens, tokens)) return null;
  return score.token_probs.slice(0, tokens.length);
}

function fmt(x) {
  return x === null || x === undefined ? "–" : x.toFixed(3);
}

async function scoreOwn() {
  const own = $("own-text").value;
  if (!state.request || !state.translation) return;
  if (!own.trim()) {
    show("error-message", "Type your translation to score it.");
    return;
  }
  setBusy(true, "Scoring your translation…");
  try {
    const best = state.translation.alternatives[0] || state.translation;
    const data = await api("/v1/score", routed({ texts: [state.request.text, state.request.text],
                                                  translations: [own, best.text], attention: true }));
    const [mine, theirs] = data.scores;
    showOwn(own, mine, theirs, best.text);
    show("error-message", "");
  } catch (err) {
    show("error-message", err.message);
  } finally {
    setBusy(false);
  }
}

function showOwn(own, mine, best, bestText) {
  $("own-result").hidden = false;
  for (const [prefix, s] of [["own", mine], ["best", best]]) {
    $(`${prefix}-logprob`).textContent = fmt(s.log_prob);
    $(`${prefix}-logprob`).dataset.value = s.log_prob;
    $(`${prefix}-normalized`).textContent = fmt(s.normalized);
    $(`${prefix}-count`).textContent = s.num_tokens;
  }
  let verdict;
  if (mine.log_prob === null || best.log_prob === null) {
    verdict = "The source is empty: there is nothing to compare.";
  } else if (sameTokens(mine.tokens, best.tokens)) {
    verdict = "This is the model's own best translation.";
  } else if (mine.log_prob > best.log_prob) {
    verdict = `The model prefers your translation (log-probability ${fmt(mine.log_prob)} against ` +
      `${fmt(best.log_prob)} for its own): the beam search missed it. That is a search error.`;
  } else {
    verdict = `The model prefers its own translation "${bestText}" (log-probability ${fmt(best.log_prob)} ` +
      `against ${fmt(mine.log_prob)} for yours). If yours is the better one, the model is wrong: a model error.`;
  }
  $("own-verdict").textContent = verdict;
  $("own-verdict").dataset.prefers = mine.log_prob !== null && best.log_prob !== null &&
    mine.log_prob > best.log_prob ? "own" : "model";
  // the grid: the user's tokens and <eos> (forced decoding scores it too), with their attention
  const tokens = [...mine.tokens, "</s>"];
  markSelected(-1);
  showView({ label: "your translation", tokens, source_tokens: mine.source_tokens,
             attention: mine.attention, probs: mine.token_probs, alignment: null, logProb: mine.log_prob });
}

// ---- drawing ----------------------------------------------------------------------------

function render(t) {
  $("result").hidden = false;
  $("own-result").hidden = true;  // it compared with the translation replaced now
  $("output-text").textContent = t.text;
  renderConfidence(t);
  renderCoverage(t);
  const list = $("alternatives");
  list.replaceChildren();
  t.alternatives.forEach((alt, i) => {
    const item = document.createElement("li");
    item.dataset.index = i;
    item.tabIndex = 0;
    const text = document.createElement("span");
    text.className = "alternative-text";
    text.textContent = alt.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = alt.score.toFixed(3);
    item.append(text, score);
    item.addEventListener("click", () => selectAlternative(i));
    item.addEventListener("keydown", (event) => { if (event.key === "Enter") selectAlternative(i); });
    list.append(item);
  });
  selectAlternative(0);
}

// How likely the translation is to be good (/v1/translate's confidence: calibrated on the model's
// validation set, or the mean token probability): the figure, and the output shaded when it is
// less likely good than not (UNSURE, as `attnmt translate --report`); the text as the model read it.
const UNSURE = 0.5;

function renderConfidence(t) {
  const out = $("output-text");
  const known = t.confidence !== null && t.confidence !== undefined;
  out.classList.toggle("unsure", known && t.confidence < UNSURE);
  out.dataset.confidence = known ? t.confidence : "";
  show("translation-confidence", !known ? "" : `Confidence ${t.confidence.toFixed(2)} (` +
    (t.confidence_calibrated ? "calibrated: the share of such translations that were good on held-out data" :
     "uncalibrated: the mean token probability; `attnmt calibrate` fits it") + ")" +
    (t.withheld ? ": below the minimum confidence, so the source is shown instead." : ""));
  show("read-as", t.read_as ? `Read as: "${t.read_as}"` : "");
}

// How much of the source the translation covered (/v1/translate's coverage, flagged, uncovered,
// sentences): the figure, a warning when a sentence is flagged, and the source words with the
// ones that got almost no attention marked.
function renderCoverage(t) {
  const sentences = t.sentences || [];
  const figure = t.coverage === null || t.coverage === undefined ? "–" : t.coverage.toFixed(2);
  const count = sentences.length === 1 ? "1 sentence" : `${sentences.length} sentences`;
  show("coverage-info", `Coverage ${figure} (${count}; lowest sentence)`);
  const uncovered = new Set(t.uncovered || []);
  const box = $("coverage-source");
  box.replaceChildren();
  mergeWords(t.source_tokens).forEach((word, i) => {
    const el = document.createElement(uncovered.has(i) ? "mark" : "span");
    el.className = uncovered.has(i) ? "word uncovered" : "word";
    el.dataset.src = i;
    el.textContent = word;
    box.append(el, " ");
  });
  box.hidden = !t.flagged;
  const flagged = sentences.filter((s) => s.flagged);
  show("coverage-warning", t.flagged ?
    `Part of the source may be missing from the translation: ${flagged.length} of ${count} flagged ` +
    `(lowest coverage ${figure})` + (uncovered.size ? "; the marked words got almost no attention." : ".") : "");
}

function markSelected(index) {
  state.selected = index;
  for (const li of $("alternatives").children) li.classList.toggle("selected", Number(li.dataset.index) === index);
}

// The best translation is alternatives[0]; a result without alternatives shows itself.
function selectAlternative(i) {
  const t = state.translation;
  const alt = t.alternatives[i];
  markSelected(alt ? i : 0);
  const hyp = alt && !(i === 0 && sameTokens(alt.tokens, t.tokens)) ? alt : t;
  const score = state.scores[i] || null;
  showView({ label: i === 0 ? "the best translation" : `alternative ${i + 1}: "${hyp.text}"`,
             tokens: hyp.tokens, source_tokens: t.source_tokens, attention: hyp.attention,
             blocks: hyp.attention_blocks,
             probs: probsFor(hyp, score), alignment: hyp.alignment, logProb: score ? score.log_prob : null });
}

function showView(view) {
  state.view = view;
  $("view-label").textContent = view.label;
  drawTokens(view);
  drawGrid(view);
  drawLinks(view);
  describeConfidence(view);
}

function describeConfidence(view) {
  const noAttention = view.attention || view.blocks ? "" :
    "No attention for this translation (the CTranslate2 engine gives none when it scores one).";
  if (!view.probs) {
    $("confidence-info").textContent = noAttention;
    return;
  }
  let least = 0;
  view.probs.forEach((p, i) => { if (p < view.probs[least]) least = i; });
  const total = view.logProb === null || view.logProb === undefined ? "" :
    `log-probability ${view.logProb.toFixed(3)}; `;
  $("confidence-info").textContent = (view.probs.length ?
    `${total}least sure of "${view.tokens[least]}" (p = ${view.probs[least].toFixed(3)}). ` : "") + noAttention;
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

// green (sure) to red (unsure): the token's probability as a hue
function confidenceColor(p) {
  return `hsl(${Math.round(120 * Math.min(1, Math.max(0, p)))}, 70%, 42%)`;
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
    if (t.probs && row < t.probs.length) {
      const p = t.probs[row];
      chip.dataset.prob = p;
      chip.dataset.probLabel = p.toFixed(2);
      chip.style.borderBottomColor = confidenceColor(p);
      chip.title = `p = ${p.toFixed(3)}: click to keep the translation up to here`;
    } else {
      chip.title = "click to keep the translation up to here";
    }
    chip.addEventListener("mouseenter", () => highlightRow(row));
    chip.addEventListener("mouseleave", clearHighlight);
    chip.addEventListener("click", () => keepUpTo(row));
    box.append(chip);
  });
}

// The start of the shown translation, up to and including token `row`, as text to complete.
function keepUpTo(row) {
  const tokens = state.view.tokens.slice(0, row + 1).filter((tok) => tok !== "</s>");
  let text;
  if (tokens.some((tok) => tok.startsWith("▁"))) text = tokens.join("").replaceAll("▁", " ").trim();
  else text = tokens.join(" ").replaceAll("@@ ", "").replace(/@@$/, "");
  $("prefix-text").value = text;
  $("prefix-text").focus();
}

// Tokens merged into words (sentencepiece "▁" and BPE "@@" marks dropped): the words that
// alignment indices count.
function mergeWords(tokens) {
  const starts = wordStarts(tokens);
  const words = [];
  tokens.forEach((tok, i) => {
    const piece = tok.replace(/^▁/, "").replace(/@@$/, "");
    if (starts[i] || !words.length) words.push(piece);
    else words[words.length - 1] += piece;
  });
  return words;
}

function drawLinks(view) {
  const source = $("links-source"), target = $("links-target"), svg = $("links-svg");
  source.replaceChildren();
  target.replaceChildren();
  svg.replaceChildren();
  if (!linksShown()) return;
  const words = (box, list, side) => list.forEach((w, i) => {
    const el = document.createElement("span");
    el.className = "word";
    el.dataset[side] = i;
    el.textContent = w;
    box.append(el);
  });
  words(source, mergeWords(view.source_tokens), "src");
  words(target, mergeWords(view.tokens.filter((tok) => tok !== "</s>")), "tgt");
  const links = view.alignment || [];
  $("links-view").dataset.links = links.map(([s, t]) => `${s}-${t}`).join(" ");
  if (!view.alignment) {
    $("links-box").querySelector(".hint").textContent = view.label === "your translation" ?
      "Alignments are shown for the model's translations." : "No alignment for this translation.";
    return;
  }
  $("links-box").querySelector(".hint").textContent =
    "Each output word linked to the source word its attention weighs most (pieces merged into words).";
  const box = svg.getBoundingClientRect();
  for (const [s, t] of links) {
    const a = source.querySelector(`[data-src="${s}"]`), b = target.querySelector(`[data-tgt="${t}"]`);
    if (!a || !b) continue;
    const ra = a.getBoundingClientRect(), rb = b.getBoundingClientRect();
    const line = document.createElementNS(svg.namespaceURI, "line");
    line.setAttribute("x1", ra.left + ra.width / 2 - box.left);
    line.setAttribute("y1", 0);
    line.setAttribute("x2", rb.left + rb.width / 2 - box.left);
    line.setAttribute("y2", box.height);
    line.dataset.link = `${s}-${t}`;
    svg.append(line);
  }
}

// The grid draws at most GRID_CELLS cells: a paragraph whose attention came as per-sentence blocks
// (/v1's attention_blocks: no dense matrix past 40,000 weights) shows its first sentences that fit.
const GRID_CELLS = 40000;

// Output token `row`'s weights over the source tokens: a row of the dense matrix, or of the
// sentence block that holds it (zeros outside it: a sentence attends only to its own source).
function attentionRow(view, row) {
  if (view.attention) return view.attention[row] || [];
  const out = new Array(view.source_tokens.length).fill(0);
  for (const block of view.blocks || []) {
    if (row >= block.row && row < block.row + block.weights.length) {
      block.weights[row - block.row].forEach((w, j) => { out[block.col + j] = w; });
    }
  }
  return view.blocks ? out : [];
}

// How many output and source tokens the grid shows: all, or the first sentences within GRID_CELLS.
function gridExtent(view) {
  const rows = view.tokens.length, cols = view.source_tokens.length;
  if (view.attention || !view.blocks || rows * cols <= GRID_CELLS) return { rows, cols, sentences: null };
  let shown = { rows: 0, cols: 0, sentences: 0 };
  for (const block of view.blocks) {
    const r = block.row + block.weights.length, c = block.col + (block.weights[0] || []).length;
    if (r * c > GRID_CELLS && shown.sentences) break;
    shown = { rows: r, cols: c, sentences: shown.sentences + 1 };
  }
  return shown;
}

function drawGrid(t) {
  const grid = $("attention-grid");
  grid.replaceChildren();
  const extent = gridExtent(t);
  const src = t.source_tokens.slice(0, extent.cols);
  const starts = wordStarts(src);
  show("grid-note", extent.sentences === null ? "" :
    `The grid shows the first ${extent.sentences} of ${t.blocks.length} sentences (${extent.rows} of ` +
    `${t.tokens.length} output tokens); a larger grid would not fit the page.`);
  grid.style.gridTemplateColumns = `max-content repeat(${src.length}, 22px)`;
  grid.dataset.rows = extent.rows;
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
  t.tokens.slice(0, extent.rows).forEach((tok, row) => {
    const head = document.createElement("div");
    head.className = "row-head";
    head.dataset.row = row;
    head.textContent = tok;
    head.addEventListener("mouseenter", () => highlightRow(row));
    head.addEventListener("mouseleave", clearHighlight);
    grid.append(head);
    const weights = attentionRow(t, row);
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
  const t = state.view;
  const extent = gridExtent(t);
  const weights = attentionRow(t, row).slice(0, extent.cols);
  for (const el of document.querySelectorAll(`#attention-grid [data-row="${row}"], #output-tokens [data-row="${row}"]`)) {
    el.classList.add(el.classList.contains("token") ? "active" : "active-row");
  }
  if (!weights.length || row >= extent.rows) return;  // a row the grid does not show
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
  $("hover-info").textContent = `source token "${state.view.source_tokens[col]}"`;
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
$("pair-select").addEventListener("change", switchPair);
$("layer-select").addEventListener("change", redrawView);
$("head-select").addEventListener("change", redrawView);
$("complete-button").addEventListener("click", complete);
$("own-button").addEventListener("click", scoreOwn);
// Switching to links asks for the alignment (a new request); back to the heatmap only redraws.
function switchView() {
  $("heatmap-box").hidden = linksShown();
  $("links-box").hidden = !linksShown();
  if (linksShown() && state.translation && !state.translation.alignment) redrawView();
  else if (state.view) drawLinks(state.view);
}
$("view-heatmap").addEventListener("change", switchView);
$("view-links").addEventListener("change", switchView);

// ---- files: POST /translate_file (LibreTranslate's), then a link to /download_file/<name> ----------

async function loadFileFormats() {
  try {
    const settings = await api("/frontend/settings");
    const formats = settings.supportedFilesFormat || [];
    $("file-formats").textContent = formats.join(", ");
    $("file-input").accept = formats.join(",");
  } catch (err) {
    $("file-formats").textContent = "unknown";
  }
}

async function translateFile() {
  const file = $("file-input").files[0];
  const link = $("file-download");
  link.hidden = true;
  if (!file) {
    show("file-message", "Choose a file first.");
    return;
  }
  const form = new FormData();
  form.append("file", file, file.name);
  form.append("source", state.model ? state.model.source_lang : "auto");
  form.append("target", state.model ? state.model.target_lang : "en");
  const key = $("api-key").value;
  if (key) form.append("api_key", key);
  $("file-button").disabled = true;
  show("file-message", `Translating ${file.name}…`);
  try {
    let response;
    try {
      response = await fetch("/translate_file", { method: "POST", body: form });
    } catch (err) {
      throw new Error(`The server did not answer (${err.message}).`);
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new Error(data && data.error ? data.error : `The server answered ${response.status}.`);
    link.href = new URL(data.translatedFileUrl, window.location.href).pathname;  // named by the server
    link.hidden = false;
    show("file-message", `${file.name} is translated.`);
  } catch (err) {
    show("file-message", err.message);
  } finally {
    $("file-button").disabled = false;
  }
}

$("file-form").addEventListener("submit", (event) => {
  event.preventDefault();
  translateFile();
});

loadModels();
loadFileFormats();
