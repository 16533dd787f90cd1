import t from "tap";
import { createLogger } from "./logger.js";
import { formatLogLine, prettyDestination } from "./pretty-log.js";
import { SecretRegistry } from "./redact.js";

t.test("a JSON line in human form", async (t) => {
  const line = JSON.stringify({
    level: 40,
    time: Date.parse("2026-03-01T12:00:01.234Z"),
    msg: "retrying",
    supplier: "etm",
    run_id: 12,
    reason: "HTTP 503",
    delay_ms: 500,
  });
  t.equal(
    formatLogLine(line, { color: false }),
    '12:00:01.234 WARN  retrying supplier=etm run_id=12 reason="HTTP 503" delay_ms=500\n',
  );
  t.match(formatLogLine(line, { color: true }), "\u001b[33mWARN \u001b[0m");
  t.equal(formatLogLine("not json", { color: false }), "not json\n");
});

t.test("the pretty logger still redacts and scrubs", async (t) => {
  const secrets = new SecretRegistry();
  secrets.add("pretty-secret-value-123");
  const out: string[] = [];
  const log = createLogger({
    level: "info",
    secrets,
    destination: prettyDestination({ write: (s) => out.push(s) }, false),
  });
  log.info({ authorization: "Bearer abc", url: "https://u:pw@h/x", note: "pretty-secret-value-123" }, "call");
  t.equal(out.length, 1);
  t.match(out[0], " INFO  call ");
  t.notMatch(out[0], /Bearer abc|pw@|pretty-secret-value-123/);
  t.match(out[0], "authorization=[REDACTED]");
});
