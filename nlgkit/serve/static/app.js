// The page of `nlgkit serve`: a text box for /translate and an image drop zone for /caption.
// Plain JavaScript, no build step; every text from the server is shown with textContent (never as HTML).
"use strict";

const $ = (id) => document.getElementById(id);

function showError(message) {
  const box = $("error");
  box.textContent = message ? `error: ${message}` : "";
  box.hidden = !message;
}

async function call(path, options) {
  const response = await fetch(path, options);
  let body;
  try {
    body = await response.json();
  } catch (_) {
    throw new Error(`${path}: HTTP ${response.status}`);
  }
  if (!response.ok) throw new Error(body.error || `${path}: HTTP ${response.status}`);
  return body;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// An n-best list: each hypothesis with its score.
function nbestList(hypotheses) {
  const list = element("ol", "nbest");
  for (const h of hypotheses) {
    const item = element("li", "hypothesis");
    item.append(element("span", "text", h.text));
    if (h.score !== undefined && h.score !== null) item.append(element("span", "score", h.score.toFixed(3)));
    list.append(item);
  }
  return list;
}

// The best translation's tokens, under the source's when aligned: pointing at a token lights up the token(s) it is
// aligned to (the source token each output token's step attended to most); with token scores each output token
// is shaded by how unlikely the model found it (its probability on hover), the end of sentence last.
function tokenView(t, align, scores) {
  const view = element("div", "alignment");
  const row = (tokens, className) => {
    const line = element("div", className);
    const spans = tokens.map((token) => element("span", "token", token));
    spans.forEach((span, k) => line.append(...(k ? [" ", span] : [span])));
    return [line, spans];
  };
  const [sourceLine, sourceSpans] = row(align ? t.source_tokens : [], "source-tokens");
  const ended = scores && t.token_scores.length > t.tokens.length;
  const [outputLine, outputSpans] = row(ended ? [...t.tokens, "</s>"] : t.tokens, "output-tokens");
  if (align) {
    for (const [s, o] of t.alignment) {
      const pair = [sourceSpans[s], outputSpans[o]];
      if (!pair[0] || !pair[1]) continue;
      pair[1].dataset.source = String(s);
      for (const span of pair) {
        span.addEventListener("mouseenter", () => pair.forEach((p) => p.classList.add("linked")));
        span.addEventListener("mouseleave", () => pair.forEach((p) => p.classList.remove("linked")));
      }
    }
    view.append(sourceLine);
  }
  if (scores) {
    t.token_scores.forEach((score, k) => {
      const p = Math.exp(score);
      outputSpans[k].title = `p = ${p.toFixed(3)}`;
      outputSpans[k].style.boxShadow = `inset 0 -0.35em rgba(220, 40, 40, ${(0.8 * (1 - p)).toFixed(3)})`;
    });
  }
  view.append(outputLine);
  return view;
}

function numberField(id) {
  const value = $(id).value.trim();
  return value === "" ? undefined : Number(value);
}

let models = [];

// The n-best to ask for: no more than the beam searched, the one typed or else the model's own (GET /models), which
// the server would refuse.
function fewest(nbest, beam, select) {
  const model = models.find((m) => m.name === $(select).value);
  const widest = beam !== undefined ? beam : model && model.beam;
  return widest ? Math.min(nbest, widest) : nbest;
}

async function loadModels() {
  const { models: served } = await call("/models");
  models = served;
  for (const [endpoint, select, section] of [["/translate", "translate-model", "translate-section"],
                                             ["/caption", "caption-model", "caption-section"]]) {
    const mine = served.filter((m) => m.endpoint === endpoint);
    $(section).hidden = mine.length === 0;
    for (const m of mine) {
      const option = element("option", "", `${m.name} (${m.model}, ${m.head} head)`);
      option.value = m.name;
      $(select).append(option);
    }
  }
  $("served").textContent = `Serving ${served.map((m) => `${m.name} (${m.task})`).join(", ")}.`;
  updateAttention();
  updateConstraints();
}

// Constrained search is nlgkit's own: a CTranslate2 export answers 422, so its field is hidden for those.
function updateConstraints() {
  const model = models.find((m) => m.name === $("translate-model").value);
  $("must-contain-label").hidden = !model || model.engine !== "torch";
}

function updateAttention() {
  const model = models.find((m) => m.name === $("caption-model").value);
  $("attention-label").hidden = !(model && model.attention);
}

// The server's notes on a request it still answered (a phrase it left out, a prefix word it forced as <unk>: why).
function showWarnings(id, warnings) {
  const list = $(id);
  list.replaceChildren(...(warnings || []).map((text) => element("li", "warning", text)));
  list.hidden = list.children.length === 0;
}

async function translate() {
  showError("");
  showWarnings("translate-warnings", []);
  const lines = $("source").value.split("\n").filter((line) => line.trim() !== "");
  if (lines.length === 0) return showError("type a sentence first");
  const beam = numberField("translate-beam");
  const nbest = fewest(numberField("translate-nbest") || 1, beam, "translate-model");
  const align = $("align").checked;
  const scores = $("word-scores").checked;
  const request = { lines, model: $("translate-model").value, nbest, scores: true, align, token_scores: scores };
  if (beam !== undefined) request.beam = beam;
  const phrases = $("must-contain-label").hidden ? [] :
    $("must-contain").value.split(";").map((p) => p.trim()).filter((p) => p !== "");
  if (phrases.length) request.constraints = lines.map(() => phrases);
  const start = $("starts-with").value.trim();  // both engines: the API's "target_prefix", the same for every line
  if (start) request.target_prefix = lines.map(() => start);
  $("translations").classList.add("busy");
  try {
    const answer = await call("/translate", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(request),
    });
    showWarnings("translate-warnings", answer.warnings);
    const out = $("translations");
    out.replaceChildren();
    answer.translations.forEach((t, i) => {
      const item = element("li", "translation");
      item.append(element("div", "source", lines[i]));
      item.append(nbestList(t.nbest || [{ text: t.text, score: t.score }]));
      if ((align || scores) && t.tokens && t.tokens.length) item.append(tokenView(t, align, scores));
      out.append(item);
    });
  } catch (error) {
    showError(error.message);
  } finally {
    $("translations").classList.remove("busy");
  }
}

async function caption(files) {
  showError("");
  showWarnings("caption-warnings", []);
  const images = [...files].filter((f) => f.type === "" || f.type.startsWith("image/"));
  if (images.length === 0) return showError("drop image files (JPEG, PNG, …)");
  const form = new FormData();
  for (const file of images) form.append("image", file, file.name);
  form.append("model", $("caption-model").value);
  const beam = numberField("caption-beam");
  if (beam !== undefined) form.append("beam", String(beam));
  form.append("nbest", String(fewest(numberField("caption-nbest") || 1, beam, "caption-model")));
  const start = $("caption-starts-with").value.trim();
  if (start) form.append("target_prefix", start);
  const attention = !$("attention-label").hidden && $("attention").checked;
  form.append("attention", attention ? "true" : "false");
  $("captions").classList.add("busy");
  try {
    const answer = await call("/caption", { method: "POST", body: form });
    showWarnings("caption-warnings", answer.warnings);
    const out = $("captions");
    out.replaceChildren();
    answer.results.forEach((result, i) => {
      const row = element("div", "result");
      const thumb = element("img", "thumb");
      thumb.src = URL.createObjectURL(images[i]);
      thumb.alt = result.image;
      const text = element("div", "captions");
      text.append(element("div", "image-name", result.image), nbestList(result.captions));
      if (result.attention_png) {
        const map = element("img", "attention");
        map.src = `data:image/png;base64,${result.attention_png}`;
        map.alt = `attention of each word of "${result.captions[0].text}" over the image`;
        text.append(map);
      }
      row.append(thumb, text);
      out.append(row);
    });
  } catch (error) {
    showError(error.message);
  } finally {
    $("captions").classList.remove("busy");
  }
}

function setUp() {
  $("translate-button").addEventListener("click", translate);
  $("caption-model").addEventListener("change", updateAttention);
  $("translate-model").addEventListener("change", updateConstraints);
  const zone = $("dropzone");
  zone.addEventListener("click", () => $("files").click());
  zone.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") $("files").click(); });
  $("files").addEventListener("change", () => caption($("files").files));
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    caption(e.dataTransfer.files);
  });
  loadModels().catch((error) => showError(error.message));
}

document.addEventListener("DOMContentLoaded", setUp);
