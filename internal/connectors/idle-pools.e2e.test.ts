// An HTTP client drops a pool once it is idle (its last keep-alive connection closed,
// nothing queued), so a daemon's suppliers keep no pool between ticks; the next request
// opens a new one.
import t from "tap";
import { createMetrics } from "../observability/metrics.js";
import { systemClock } from "../platform/clock.js";
import { SecretRegistry } from "../platform/redact.js";
import { simDefinition, startServer, waitFor } from "./test-support.js";
import { HttpClient } from "./transport/http-client.js";

t.test("an idle pool is dropped when its connection closes, and reopened by the next request", async (t) => {
  let release: (() => void) | undefined;
  const { server, url } = await startServer(t, (req, res) => {
    const answer = () => res.writeHead(200, { "content-type": "application/json" }).end("{}");
    if (req.url === "/slow") release = answer;
    else answer();
  });
  server.keepAliveTimeout = 100;
  const http = new HttpClient({
    supplier: "idle",
    definition: simDefinition(url),
    metrics: createMetrics({ processMetrics: false }),
    clock: systemClock,
    secrets: new SecretRegistry(),
  });
  t.teardown(() => http.close());
  const signal = new AbortController().signal;

  t.equal((await http.send(new URL("/a", url), { signal, headers: {} })).status, 200);
  t.equal(http.openPools, 1, "kept while its connection is open");
  await waitFor(() => http.openPools === 0, "the pool dropped after the server closed the idle connection");

  t.equal(
    (await http.send(new URL("/b", url), { signal, headers: {} })).status,
    200,
    "a new pool for the next request",
  );
  t.equal(http.openPools, 1);

  // A connection of the pool closing while another request of it runs leaves the pool be.
  let closed = 0;
  server.on("connection", (socket) => socket.on("close", () => closed++));
  const slow = http.send(new URL("/slow", url), { signal, headers: {} });
  await waitFor(() => release !== undefined, "the slow request reached the server");
  const before = closed;
  t.equal(
    (await http.send(new URL("/c", url), { signal, headers: {} })).status,
    200,
    "on a second connection",
  );
  await waitFor(() => closed > before, "the second connection closed by the server (keep-alive over)");
  t.equal(http.openPools, 1, "not dropped while a request runs");
  release?.();
  t.equal((await slow).status, 200);
  await waitFor(() => http.openPools === 0, "dropped once idle again");
});
