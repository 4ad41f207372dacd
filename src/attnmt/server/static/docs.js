// An offline API reference drawn from /openapi.json (FastAPI's /docs would load Swagger UI from a CDN).

const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

function resolve(spec, schema) {
  while (schema && schema.$ref) schema = spec.components.schemas[schema.$ref.split("/").pop()];
  return schema || {};
}

function typeOf(spec, schema) {
  schema = resolve(spec, schema);
  if (schema.anyOf) return schema.anyOf.map((s) => typeOf(spec, s)).join(" | ");
  if (schema.type === "array") return `list[${typeOf(spec, schema.items)}]`;
  if (schema.title && schema.properties) return schema.title;
  return schema.type || "any";
}

function fieldsTable(spec, schema) {
  schema = resolve(spec, schema);
  const table = el("table", "fields");
  const head = table.insertRow();
  for (const name of ["field", "type", "required", "default", "description"]) head.append(el("th", null, name));
  const required = new Set(schema.required || []);
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    const row = table.insertRow();
    const p = resolve(spec, prop);
    const limits = [];
    if (p.minimum !== undefined) limits.push(`>= ${p.minimum}`);
    if (p.maximum !== undefined) limits.push(`<= ${p.maximum}`);
    row.append(el("td", "name", name), el("td", null, typeOf(spec, prop) + (limits.length ? ` (${limits.join(", ")})` : "")),
               el("td", null, required.has(name) ? "yes" : ""),
               el("td", null, prop.default === undefined ? "" : JSON.stringify(prop.default)),
               el("td", null, prop.description || p.description || ""));
  }
  return table;
}

function render(spec) {
  document.getElementById("api-info").textContent = `${spec.info.title} ${spec.info.version}: ${spec.info.description || ""}`;
  const box = document.getElementById("endpoints");
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const section = el("section", "endpoint");
      section.append(el("h2", null, `${method.toUpperCase()} ${path}`));
      if (op.summary) section.append(el("p", null, op.summary));
      if (op.description) section.append(el("p", "hint", op.description));
      const body = op.requestBody && op.requestBody.content;
      if (body) {
        const types = Object.keys(body);
        section.append(el("h3", null, `Request body (${types.join(", ")})`));
        section.append(fieldsTable(spec, body[types[0]].schema));
      }
      section.append(el("h3", null, "Responses"));
      const list = el("ul");
      for (const [status, response] of Object.entries(op.responses || {})) {
        const content = response.content && response.content["application/json"];
        const shape = content && content.schema ? typeOf(spec, content.schema) : "";
        list.append(el("li", null, `${status}: ${response.description}${shape ? ` (${shape})` : ""}`));
      }
      section.append(list);
      box.append(section);
    }
  }
}

fetch("/openapi.json")
  .then((r) => { if (!r.ok) throw new Error(`/openapi.json answered ${r.status}`); return r.json(); })
  .then(render)
  .catch((err) => {
    const box = document.getElementById("error-message");
    box.textContent = `Could not read the API schema: ${err.message}`;
    box.hidden = false;
  });
