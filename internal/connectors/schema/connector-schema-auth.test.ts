// The connector keys of issue 16: every malformed one is refused with its key path.
import t from "tap";
import { connectorDefinitionSchema } from "./connector-schema.js";
import { formatSchemaIssues } from "./json-text.js";
import { substitute, substituteJson } from "./placeholders.js";

const base = { baseUrl: "https://ipro.etm.ru", fields: { sku: "gdscode", price: "price" } };
const session = {
  type: "session",
  login: {
    method: "POST",
    path: "/api/v1/user/login",
    query: { log: { env: "ETM_LOGIN" }, pwd: { env: "ETM_PASSWORD" } },
  },
  token: { path: "data.session" },
  send: { query: "session-id" },
};

function issues(extra: Record<string, unknown>): string {
  const parsed = connectorDefinitionSchema.safeParse({ ...base, ...extra });
  return parsed.success ? "<valid>" : formatSchemaIssues(parsed.error.issues);
}

t.test("the examples of docs/connectors.md (Authentication) are valid, with defaults", async (t) => {
  const def = connectorDefinitionSchema.parse({
    ...base,
    auth: { ...session, ttlMs: 28_800_000, minLoginIntervalMs: 120_000 },
    errors: [
      { path: "status.code", in: [500, 503], then: "retry" },
      { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
    ],
    request: { method: "POST", path: "/api/v1/goods", form: { type: "cli" } },
    pagination: { type: "cursor", param: "starting_after", lastRecordPath: "id", hasMorePath: "has_more" },
  });
  t.equal(def.auth.type, "session");
  if (def.auth.type === "session") {
    t.same(def.auth.expiredWhen, [{ status: [401] }], "expiredWhen defaults to a 401");
    t.equal(def.auth.login.method, "POST");
  }
  t.equal(def.errors.length, 2);
  const defaults = connectorDefinitionSchema.parse({ ...base, auth: session });
  if (defaults.auth.type === "session") {
    t.equal(defaults.auth.ttlMs, 3_600_000, "ttlMs defaults to 1 h");
    t.equal(defaults.auth.minLoginIntervalMs, 0);
  }
  t.same(defaults.errors, []);
  t.equal(defaults.request.method, "GET");
  for (const auth of [
    { type: "query", param: "accessCode", valueEnv: "SYSTEME_ACCESS_CODE" },
    { type: "query", param: "accessCode", valueFile: "systeme.key" },
    {
      type: "oauth2",
      tokenPath: "/oauth/token",
      clientIdEnv: "ID",
      clientSecretFile: "secret",
      scope: "read",
    },
  ]) {
    t.equal(issues({ auth }), "<valid>", auth.type);
  }
  t.equal(
    issues({ pagination: { type: "page", sizeParam: "per_page", size: 50, totalPagesPath: "meta.pages" } }),
    "<valid>",
  );
  t.equal(
    issues({ pagination: { type: "offset", limit: 100, totalPath: "total", hasMorePath: "more" } }),
    "<valid>",
  );
  t.equal(issues({ pagination: { type: "cursor", cursorHeader: "X-Next" } }), "<valid>");
});

const rejections: [string, Record<string, unknown>, RegExp][] = [
  [
    "login path without /",
    { auth: { ...session, login: { ...session.login, path: "user/login" } } },
    /auth\.login\.path: must start with \//,
  ],
  [
    "login value neither string nor secret",
    { auth: { ...session, login: { ...session.login, query: { pwd: { envv: "X" } } } } },
    /auth\.login\.query\.pwd: must be a string, \{ "env": "NAME" \} or \{ "file": "path" \}/,
  ],
  [
    "login secret env not a name",
    { auth: { ...session, login: { ...session.login, query: { pwd: { env: "not a name" } } } } },
    /auth\.login\.query\.pwd/,
  ],
  [
    "login body and form",
    { auth: { ...session, login: { ...session.login, body: { a: 1 }, form: { b: "2" } } } },
    /auth\.login\.form: set either body or form, not both/,
  ],
  [
    "login form with GET",
    { auth: { ...session, login: { method: "GET", path: "/login", form: { a: "b" } } } },
    /auth\.login\.form: needs "method": "POST"/,
  ],
  [
    "token with two sources",
    { auth: { ...session, token: { path: "a", header: "X-T" } } },
    /auth\.token: set exactly one of path, header, cookie/,
  ],
  ["token with none", { auth: { ...session, token: {} } }, /auth\.token: set exactly one/],
  ["token unknown key", { auth: { ...session, token: { body: "a" } } }, /auth\.token: Unrecognized key/],
  [
    "send with none",
    { auth: { ...session, send: {} } },
    /auth\.send: set exactly one of query, header, cookie/,
  ],
  [
    "send prefix without header",
    { auth: { ...session, send: { query: "s", prefix: "X " } } },
    /auth\.send\.prefix: goes with header only/,
  ],
  [
    "send bad header name",
    { auth: { ...session, send: { header: "Bad Header" } } },
    /auth\.send\.header: must be an HTTP header name/,
  ],
  ["ttlMs zero", { auth: { ...session, ttlMs: 0 } }, /auth\.ttlMs/],
  [
    "minLoginIntervalMs negative",
    { auth: { ...session, minLoginIntervalMs: -1 } },
    /auth\.minLoginIntervalMs/,
  ],
  [
    "expiredWhen with two matchers",
    { auth: { ...session, expiredWhen: [{ path: "status.code", in: [403], equals: 403 }] } },
    /auth\.expiredWhen\.0\.path: needs exactly one of equals, in, notIn or exists/,
  ],
  [
    "expiredWhen empty condition",
    { auth: { ...session, expiredWhen: [{}] } },
    /auth\.expiredWhen\.0: needs a path or a status list/,
  ],
  [
    "expiredWhen bad status",
    { auth: { ...session, expiredWhen: [{ status: [99] }] } },
    /auth\.expiredWhen\.0\.status\.0/,
  ],
  [
    "query auth without value",
    { auth: { type: "query", param: "accessCode" } },
    /auth\.valueEnv: one of valueEnv or valueFile is required/,
  ],
  [
    "query auth with both forms",
    { auth: { type: "query", param: "accessCode", valueEnv: "A", valueFile: "b" } },
    /auth\.valueFile: set either valueEnv or valueFile, not both/,
  ],
  ["query auth without param", { auth: { type: "query", valueEnv: "A" } }, /auth\.param/],
  [
    "oauth2 without client secret",
    { auth: { type: "oauth2", tokenPath: "/oauth/token", clientIdEnv: "ID" } },
    /auth\.clientSecretEnv: one of clientSecretEnv or clientSecretFile is required/,
  ],
  [
    "oauth2 tokenPath without /",
    { auth: { type: "oauth2", tokenPath: "oauth/token", clientIdEnv: "ID", clientSecretEnv: "S" } },
    /auth\.tokenPath: must start with \//,
  ],
  [
    "request body with GET",
    { request: { path: "/x", body: { a: 1 } } },
    /request\.body: needs "method": "POST"/,
  ],
  [
    "request body and form",
    { request: { method: "POST", path: "/x", body: { a: 1 }, form: { b: "c" } } },
    /request\.form: set either body or form, not both/,
  ],
  ["request form value not a string", { request: { method: "POST", form: { a: 1 } } }, /request\.form\.a/],
  ["request method PUT", { request: { method: "PUT" } }, /request\.method/],
  [
    "undefined placeholder in path",
    { request: { path: "/goods/{skus}/price" } },
    /request\.path: placeholder \{skus\} is not defined by this walk/,
  ],
  [
    "unknown placeholder in query",
    { request: { query: { q: "{nope}" } } },
    /request\.query\.q: unknown placeholder \{nope\}/,
  ],
  [
    "placeholder in body",
    { request: { method: "POST", body: { ids: ["{partition}"] } } },
    /request\.body\.ids\.0: placeholder \{partition\}/,
  ],
  [
    "placeholder in login",
    { auth: { ...session, login: { ...session.login, path: "/login/{sku}" } } },
    /auth\.login\.path: placeholder \{sku\} is not defined in a login request/,
  ],
  [
    "placeholder in a login path without pathParams",
    { auth: { ...session, login: { ...session.login, path: "/token/{master_key}" } } },
    /auth\.login\.path: placeholder \{master_key\} is not defined in a login request \(a login path takes only auth\.login\.pathParams\)/,
  ],
  [
    "a pathParams key the login path does not use",
    {
      auth: {
        ...session,
        login: { ...session.login, path: "/token/{key}", pathParams: { key: "a", other: { env: "X" } } },
      },
    },
    /auth\.login\.pathParams\.other: is not used in auth\.login\.path \(write \{other\} there\)/,
  ],
  [
    "a pathParams value in the login query",
    {
      auth: {
        ...session,
        login: { ...session.login, path: "/token/{key}", query: { k: "{key}" }, pathParams: { key: "a" } },
      },
    },
    /auth\.login\.query\.k: placeholder \{key\} is not defined in a login request/,
  ],
  [
    "a pathParams name in upper case",
    { auth: { ...session, login: { ...session.login, pathParams: { masterKey: "a" } } } },
    /auth\.login\.pathParams\.masterKey: must be a lower-case placeholder name/,
  ],
  [
    "{sku_list} inside a longer body string",
    {
      skus: { from: "file", file: "s.txt", batch: 50 },
      request: { method: "POST", path: "/prices", body: { items: "codes: {sku_list}" } },
    },
    /request\.body\.items: placeholder \{sku_list\} is only a whole string of a JSON body/,
  ],
  [
    "{sku_list} in a query",
    {
      skus: { from: "file", file: "s.txt", batch: 50 },
      request: { path: "/prices", query: { ids: "{sku_list}" } },
    },
    /request\.query\.ids: placeholder \{sku_list\} is only a whole string of a JSON body/,
  ],
  [
    "{sku_list} without a SKU list",
    { request: { method: "POST", path: "/prices", body: { items: "{sku_list}" } } },
    /request\.body\.items: placeholder \{sku_list\} is not defined by this walk \(it needs skus\)/,
  ],
  ["errors rule without then", { errors: [{ path: "status.code", notIn: [200] }] }, /errors\.0\.then/],
  ["errors rule bad then", { errors: [{ path: "a", exists: true, then: "ignore" }] }, /errors\.0\.then/],
  [
    "errors rule bad code",
    { errors: [{ path: "a", exists: true, then: "fail", code: "OOPS" }] },
    /errors\.0\.code/,
  ],
  [
    "errors retry with code",
    { errors: [{ path: "a", exists: true, then: "retry", code: "SUPPLIER" }] },
    /errors\.0\.code: is only for "then": "fail"/,
  ],
  [
    "errors rule matcher without path",
    { errors: [{ in: [1], then: "fail" }] },
    /errors\.0\.in: needs a path/,
  ],
  [
    "errors rule bad messagePath",
    { errors: [{ path: "a", exists: true, then: "fail", messagePath: "a..b" }] },
    /errors\.0\.messagePath/,
  ],
  [
    "errors rule unknown key",
    { errors: [{ path: "a", exists: true, then: "fail", mesage: "x" }] },
    /errors\.0: Unrecognized key/,
  ],
  [
    "page sizeParam without size",
    { pagination: { type: "page", sizeParam: "per_page" } },
    /pagination\.size: sizeParam and size go together/,
  ],
  [
    "page size without sizeParam",
    { pagination: { type: "page", size: 10 } },
    /pagination\.sizeParam: sizeParam and size go together/,
  ],
  [
    "page bad totalPagesPath",
    { pagination: { type: "page", totalPagesPath: "" } },
    /pagination\.totalPagesPath/,
  ],
  [
    "offset bad totalPath",
    { pagination: { type: "offset", limit: 10, totalPath: ".x" } },
    /pagination\.totalPath/,
  ],
  [
    "cursor with two sources",
    { pagination: { type: "cursor", cursorPath: "next", lastRecordPath: "id" } },
    /pagination: set exactly one of cursorPath, cursorHeader, lastRecordPath/,
  ],
  ["cursor with none", { pagination: { type: "cursor" } }, /pagination: set exactly one of cursorPath/],
  ["cursor bad header", { pagination: { type: "cursor", cursorHeader: "a b" } }, /pagination\.cursorHeader/],
  [
    "link with hasMorePath",
    { pagination: { type: "link", hasMorePath: "more" } },
    /pagination: Unrecognized key/,
  ],
];

for (const [name, extra, pattern] of rejections) {
  t.test(`rejected: ${name}`, async (t) => {
    t.match(issues(extra), pattern);
  });
}

t.test("placeholders: percent-encoded in a path, as is in body and form", async (t) => {
  t.equal(substitute("/goods/{sku}/price", { sku: "A/1 x" }, "path"), "/goods/A%2F1%20x/price");
  t.equal(substitute("/goods/{skus}/price", { skus: "a b,c/d" }, "path", ","), "/goods/a%20b,c%2Fd/price");
  t.equal(substitute("{sku}", { sku: "a&b" }, "form"), "a&b");
  t.equal(substitute("{missing} {sku}", { sku: "x" }, "body"), "{missing} x");
  t.same(substituteJson({ ids: ["{partition}", 1], q: { p: "{partition}" } }, { partition: "cab les" }), {
    ids: ["cab les", 1],
    q: { p: "cab les" },
  });
});

t.test(
  "{sku_list}: a whole body string becomes the batch as a JSON array, in the main request and enrich",
  async (t) => {
    const def = connectorDefinitionSchema.parse({
      ...base,
      skus: { from: "file", file: "s.txt", batch: 50 },
      request: { method: "POST", path: "/prices", body: { items: "{sku_list}", note: "{skus}" } },
      enrich: [
        {
          request: { method: "POST", path: "/massprice", body: { items: "{sku_list}" } },
          batch: 50,
          key: "RSCode",
          fields: { price: "Price.Personal" },
        },
      ],
    });
    t.equal(def.enrich?.length, 1);
    t.same(
      substituteJson({ items: "{sku_list}", note: "{skus}" }, { skus: "A1,B 2", sku_list: '["A1","B 2"]' }),
      {
        items: ["A1", "B 2"],
        note: "A1,B 2",
      },
    );
    t.same(
      substituteJson({ items: "{sku_list}" }, {}),
      { items: "{sku_list}" },
      "left as written without a batch",
    );
  },
);

t.test("auth.login.pathParams: DKC's token URL with the master key in its path is valid", async (t) => {
  const def = connectorDefinitionSchema.parse({
    ...base,
    auth: {
      type: "session",
      login: {
        method: "GET",
        path: "/auth.access.token/{master_key}",
        pathParams: { master_key: { env: "DKC_MASTER_KEY" } },
      },
      token: { path: "access_token" },
      send: { header: "AccessToken" },
    },
  });
  t.equal(def.auth.type === "session" ? def.auth.login.path : "", "/auth.access.token/{master_key}");
});
