// `preview`'s report (issue 34): a failed step ends the walk (no "the walk would go on"),
// rejects are capped like offers, a step over maxRejectRatio carries a real CONTRACT
// error in --json, and a 4xx shows a bounded, redacted excerpt of the supplier's answer.
// The simulator (and one loopback server) over real HTTP.
import t from "tap";
import type { ConnectorDefinition } from "../connectors/schema/connector-schema.js";
import { captureLogger, simDefinition, startServer } from "../connectors/test-support.js";
import { ANSWER_EXCERPT_CHARS, redactSecretFields } from "../connectors/transport/http-client.js";
import { SecretRegistry } from "../platform/redact.js";
import { startSimulator } from "../simulator/server.js";
import { formatPreview, PREVIEW_TABLE_ROWS, previewConnector } from "./preview.js";

async function preview(
  definition: ConnectorDefinition,
  steps: number,
  readSecretEnv = (_: string) => undefined as string | undefined,
) {
  const secrets = new SecretRegistry();
  const { log } = captureLogger(secrets);
  const { report, ok } = await previewConnector({
    supplier: "acme",
    definition,
    connectorsDir: "/nonexistent",
    readSecretEnv,
    secrets,
    steps,
    log,
  });
  return {
    ok,
    report,
    text: formatPreview(report, false, secrets),
    json: JSON.parse(formatPreview(report, true, secrets)) as {
      complete: boolean;
      steps: {
        seq: number;
        error?: { code: string; message: string };
        rejects: unknown[];
        requests: { status: number; answer?: string }[];
      }[];
    },
  };
}

t.test("a failed step: the walk stopped there, it does not 'go on'", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("acme", {
    size: 50,
    pageSize: 10,
    pagination: "page",
    faults: { status: { code: 422, onPage: 2 } },
  });
  const r = await preview(simDefinition(sim.baseUrl("acme"), { retry: { maxAttempts: 1 } }), 3);
  t.equal(r.ok, false);
  t.same(
    r.json.steps.map((s) => [s.seq, s.error?.code ?? null]),
    [
      [1, null],
      [2, "HTTP_422"],
    ],
  );
  t.notMatch(r.text, /the walk would go on/);
  t.match(r.text, /the walk stopped: step 2 failed HTTP_422/);
  t.equal(r.json.complete, false);
  t.match(
    r.text,
    /-> 422, .*\n {4}the supplier answered: \{"error":"simulated status 422"\}/,
    "the 422's body",
  );
});

t.test("rejects are capped at 20 lines; over maxRejectRatio is a CONTRACT error in --json", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("acme", { size: 100, pageSize: 100, pagination: "page", invalidRate: 1 });
  const r = await preview(simDefinition(sim.baseUrl("acme"), { maxRejectRatio: 0.5 }), 2);
  t.equal(r.ok, false);
  const step = r.json.steps[0];
  t.equal(r.json.steps.length, 1, "a run stops at that step: so does the preview");
  t.equal(step?.rejects.length, 100, "--json keeps every reject");
  t.equal(step?.error?.code, "CONTRACT");
  t.match(step?.error?.message, /^100 of 100 records invalid on step 1 \(maxRejectRatio 0\.5\); first: /);
  t.equal((r.text.match(/^ {2}reject: /gm) ?? []).length, PREVIEW_TABLE_ROWS, "20 reject lines");
  t.match(r.text, /\n {2}… and 80 more rejects\n/);
  t.match(r.text, /a run would fail this step CONTRACT/);
  t.match(r.text, /the walk stopped: step 1 failed CONTRACT/);
  t.notMatch(r.text, /the walk would go on/);
});

t.test("a 401 shows the start of the supplier's answer, bounded and without secrets", async (t) => {
  const TOKEN = "bearer-token-3f9a1c77";
  const { url } = await startServer(t, (_req, res) => {
    res.writeHead(401, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        error: "invalid token",
        echo: `Bearer ${TOKEN}`,
        session_id: "sess-0042-aa",
        detail: "x".repeat(10_000),
      }),
    );
  });
  const r = await preview(
    simDefinition(url, { auth: { type: "bearer", tokenEnv: "ACME_TOKEN" }, retry: { maxAttempts: 1 } }),
    1,
    (name) => (name === "ACME_TOKEN" ? TOKEN : undefined),
  );
  t.equal(r.ok, false);
  const answer = r.json.steps[0]?.requests[0]?.answer ?? "";
  t.match(answer, /^\{"error":"invalid token"/);
  t.notMatch(answer, TOKEN, "the registered secret is redacted");
  t.notMatch(answer, "sess-0042-aa", "a field named like a secret is redacted");
  t.ok(answer.length <= ANSWER_EXCERPT_CHARS + 1, `bounded (${answer.length} chars)`);
  t.match(r.text, /-> 401, .*\n {4}the supplier answered: \{"error":"invalid token"/);
  t.notMatch(r.text, TOKEN);
});

t.test("redactSecretFields: JSON and form fields named like secrets", async (t) => {
  t.equal(
    redactSecretFields('{"access_token":"abc","user":"bob","Password": "p\\"w"}'),
    '{"access_token":"[redacted]","user":"bob","Password": "[redacted]"}',
  );
  t.equal(
    redactSecretFields("error=1&session-id=xyz&pwd=hunter2"),
    "error=1&session-id=[redacted]&pwd=[redacted]",
  );
  t.equal(redactSecretFields('{"error":"unauthorized"}'), '{"error":"unauthorized"}');
});
