// An example connector module (DESIGN §3.13). A connector file of this folder uses it with
//
//   { "module": "./example-module.mjs", "baseUrl": "https://api.supplier.example",
//     "auth": { "type": "bearer", "tokenEnv": "ACME_API_TOKEN" },
//     "settings": { "path": "/v1/offers", "pageParam": "page", "recordsPath": "data.items",
//                   "fields": { "sku": "article", "price": "price.value", "currency": "price.currency" } } }
//
// It is only ever loaded by such a file: suppliers are found by name (`<name>.json`),
// never by listing this folder. It walks `?page=1, 2, …` until an empty page, one step per
// page. Every request goes through `transport.fetchPage`: the supplier's rate limit,
// retries, deadlines, credentials, origin pinning and metrics apply as to any connector.

/**
 * The default export: called once per supplier when the connectors are loaded.
 * @param {object} transport the supplier's shared transport (docs/connector-modules.md)
 * @param {Record<string, unknown>} settings the connector file's `settings`, unvalidated
 * @param {object} lib decoding and validation helpers (docs/connector-modules.md)
 * @returns {{ walk(ctx: object): AsyncIterable<object>, close(): Promise<void> }}
 */
export default function createPagedJsonConnector(transport, settings, lib) {
  const { path = "/", pageParam = "page", recordsPath = "", fields } = settings;
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new lib.ConfigError("settings.path: must start with / (module ./example-module.mjs)");
  }
  if (typeof pageParam !== "string" || pageParam === "") {
    throw new lib.ConfigError("settings.pageParam: must be a parameter name (module ./example-module.mjs)");
  }
  if (typeof recordsPath !== "string") {
    throw new lib.ConfigError("settings.recordsPath: must be a dot path (module ./example-module.mjs)");
  }
  if (typeof fields !== "object" || fields === null) {
    throw new lib.ConfigError(
      "settings.fields: is required, e.g. { sku, price } (module ./example-module.mjs)",
    );
  }
  const def = transport.options.definition;
  const base = new URL(def.baseUrl);

  return {
    async *walk(ctx) {
      // Re-reads rotated secrets; a missing one fails the walk AUTH before any request.
      transport.beginWalk();
      for (let seq = 1; ; seq++) {
        const url = new URL(`${base.origin}${base.pathname.replace(/\/+$/, "")}${path}`);
        for (const [name, value] of Object.entries(def.request.query)) url.searchParams.set(name, value);
        url.searchParams.set(pageParam, String(seq));
        const { value: records, attempts } = await transport.fetchPage({
          url,
          seq,
          ctx,
          signal: ctx.signal,
          headers: { ...def.request.headers },
          // Runs inside each attempt: a CONTRACT error here fails the step without a retry.
          decode: (response) => lib.jsonRecords(response, recordsPath),
        });
        // An empty catalog is still one (empty) step, so the run can succeed and delist.
        if (records.length === 0 && seq > 1) return;
        // `coverage`: per mapped field, how many records had a value (the vanished-field guard reads it).
        const { offers, rejects, coverage } = lib.normalizeRecords(records, fields);
        yield { seq, offers, rejects, httpAttempts: attempts, coverage };
        if (records.length === 0) return;
      }
    },
    close: () => transport.close(),
  };
}
