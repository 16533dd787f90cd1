import t from "tap";
import type { IngestionError } from "../../platform/errors.js";
import { SecretRegistry } from "../../platform/redact.js";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { nextPageUrl, ProgressGuard } from "../walk/pagination.js";
import { applyErrorRules, conditionStatuses, matchesCondition } from "./error-rules.js";
import { displayUrl } from "./http-client.js";
import { OriginPolicy } from "./origin.js";

const body = { status: { code: 403, message: "session expired" }, data: { rows: [] } };

t.test("conditions: matchers, status lists, 2xx by default", async (t) => {
  t.ok(matchesCondition({ path: "status.code", in: [403] }, 200, body));
  t.ok(matchesCondition({ path: "status.code", in: ["403"] }, 200, body), "a number equals its digit string");
  t.notOk(matchesCondition({ path: "status.code", in: [403] }, 500, body), "without status: 2xx only");
  t.ok(matchesCondition({ path: "status.code", notIn: [200] }, 200, body));
  t.notOk(
    matchesCondition({ path: "status.missing", notIn: [200] }, 200, body),
    "absent never matches notIn",
  );
  t.ok(matchesCondition({ path: "status.missing", exists: false }, 200, body));
  t.notOk(matchesCondition({ path: "status.code", exists: false }, 200, body));
  t.ok(matchesCondition({ path: "status.message", equals: "session expired" }, 200, body));
  t.notOk(matchesCondition({ path: "status.code", equals: true }, 200, body));
  t.ok(matchesCondition({ status: [401] }, 401, undefined));
  t.notOk(matchesCondition({ status: [401] }, 403, undefined));
  t.ok(matchesCondition({ status: [404], path: "status.code", equals: 403 }, 404, body), "both hold");
  t.notOk(matchesCondition({ status: [404], path: "status.code", equals: 200 }, 404, body), "only one holds");
  t.notOk(
    matchesCondition({ path: "status.code", in: [403] }, 200, undefined),
    "not JSON: no path test holds",
  );
  t.same(
    [...conditionStatuses([{ status: [200, 401] }, { status: [404] }, { path: "a", exists: true }])],
    [401, 404],
  );
});

t.test("errors rules: the first match decides; retry, fail, code, message", async (t) => {
  const rules = connectorDefinitionSchema.parse({
    baseUrl: "https://x.example",
    fields: { sku: "a", price: "b" },
    errors: [
      { path: "status.code", in: [500, 503], then: "retry" },
      { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
      { path: "status.code", notIn: [200], then: "fail" },
    ],
  }).errors;
  const secrets = new SecretRegistry();
  t.doesNotThrow(() => applyErrorRules(rules, 200, { status: { code: 200 } }, secrets));
  const retry = t.throws(() =>
    applyErrorRules(rules, 200, { status: { code: 503 } }, secrets),
  ) as IngestionError;
  t.equal(retry.code, "SUPPLIER");
  t.equal(retry.retryable, true);
  const fail = t.throws(() => applyErrorRules(rules, 200, body, secrets)) as IngestionError;
  t.equal(fail.code, "SUPPLIER");
  t.equal(fail.retryable, false);
  t.match(fail.message, /\(status\.code = 403\): session expired/);
  const bare = t.throws(() => applyErrorRules(rules.slice(2), 200, body, secrets)) as IngestionError;
  t.equal(bare.code, "CONTRACT", "default code");
  const long = { status: { code: 1, message: "x".repeat(1000) } };
  const cut = t.throws(() => applyErrorRules(rules.slice(1), 200, long, secrets)) as IngestionError;
  t.ok(cut.message.length < 400, "the supplier's message is cut");
  secrets.add("tok-echoed-1234");
  const echoed = { status: { code: 401, message: "bad token tok-echoed-1234" } };
  const scrubbed = t.throws(() => applyErrorRules(rules, 200, echoed, secrets)) as IngestionError;
  t.match(scrubbed.message, /bad token \[REDACTED\]/, "a registered secret the supplier echoes is redacted");
});

t.test("displayUrl: secret query parameters and URL passwords are replaced", async (t) => {
  const url = new URL("https://u:pw@api.example/v1/offers?session-id=abc123&page=2&accessCode=k%20ey");
  const shown = displayUrl(url, ["session-id", "accessCode", "absent"]);
  t.equal(
    shown,
    "https://u:[REDACTED]@api.example/v1/offers?session-id=[REDACTED]&page=2&accessCode=[REDACTED]",
  );
});

t.test("pagination: totalPagesPath with start 0, hasMorePath, lastRecordPath", async (t) => {
  const def = (pagination: Record<string, unknown>) =>
    connectorDefinitionSchema.parse({
      baseUrl: "https://x.example",
      fields: { sku: "a", price: "b" },
      pagination,
    });
  const origins = new OriginPolicy("https://x.example");
  const page = (url: string, b: unknown, recordCount = 1, lastRecord?: unknown) => ({
    url: new URL(url),
    headers: {},
    body: b,
    recordCount,
    lastRecord,
  });
  const zero = def({ type: "page", param: "p", start: 0, totalPagesPath: "pages" });
  t.equal(
    nextPageUrl(zero, origins, page("https://x.example/?p=1", { pages: 3 }))?.searchParams.get("p"),
    "2",
  );
  t.equal(nextPageUrl(zero, origins, page("https://x.example/?p=2", { pages: 3 })), null);
  t.equal(
    nextPageUrl(zero, origins, page("https://x.example/?p=0", { pages: "1" })),
    null,
    "digit strings count",
  );
  t.throws(
    () => nextPageUrl(zero, origins, page("https://x.example/?p=0", { pages: "many" })),
    /not a count/,
  );
  const more = def({ type: "offset", limit: 2, hasMorePath: "more" });
  t.equal(nextPageUrl(more, origins, page("https://x.example/?offset=0&limit=2", { more: false }, 2)), null);
  t.throws(
    () => nextPageUrl(more, origins, page("https://x.example/?offset=0", { more: "perhaps" }, 2)),
    /not a boolean/,
  );
  const last = def({ type: "cursor", param: "starting_after", lastRecordPath: "id" });
  t.equal(
    nextPageUrl(last, origins, page("https://x.example/", {}, 2, { id: "https://evil.example/x" }))?.href,
    "https://x.example/?starting_after=https%3A%2F%2Fevil.example%2Fx",
    "a last-record id is a value, never a URL to follow",
  );
  t.equal(nextPageUrl(last, origins, page("https://x.example/", {}, 0)), null, "an empty page ends the walk");
  const guard = new ProgressGuard();
  guard.visit(new URL("https://x.example/?c=1"));
  guard.visit(new URL("https://x.example/?c=2"));
  t.throws(() => guard.visit(new URL("https://x.example/?c=1")), /does not advance/);
});
