// Origin pinning: a redirect, Link or cursor that leaves the allowed origins is refused
// before anything is sent there; credentials never leave the baseUrl origin.
import t from "tap";
import { startSimulator } from "../simulator/index.js";
import {
  buildConnector,
  collectPages,
  simDefinition,
  startServer,
  walkContext,
  walkError,
} from "./test-support.js";

interface Failure {
  code: string;
  message: string;
}

t.test("leaving the origin is refused and the foreign listener receives nothing", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const foreign = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"data":{"items":[]}}');
  });
  const target = `${foreign.url}/stolen/v1/offers?page=2`;

  await t.test("redirect", async (t) => {
    sim.configure("redir", { size: 50, pageSize: 10, pagination: "page", faults: { redirectTo: target } });
    const { connector, log } = buildConnector(t, simDefinition(sim.baseUrl("redir")));
    const err = (await walkError(connector, walkContext(log))) as Failure;
    t.equal(err.code, "CONTRACT");
    t.match(err.message, /redirect Location points to http:\/\/127\.0\.0\.1:\d+, outside/);
    t.equal(sim.stats("redir").requests, 1, "not retried");
  });

  await t.test("Link rel=next", async (t) => {
    sim.configure("lnk", { size: 50, pageSize: 10, pagination: "link", faults: { linkTo: target } });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("lnk"), { pagination: { type: "link" } }),
    );
    const seen: number[] = [];
    const err = await (async () => {
      try {
        for await (const page of connector.walk(walkContext(log))) seen.push(page.offers.length);
      } catch (e) {
        return e as Failure;
      }
      return undefined;
    })();
    t.same(seen, [10], "the page carrying the bad link is still yielded");
    t.equal(err?.code, "CONTRACT");
    t.match(err?.message, /Link rel=next URL points to/);
  });

  await t.test("cursor that is a URL", async (t) => {
    sim.configure("cur", { size: 50, pageSize: 10, pagination: "cursor", faults: { cursorValue: target } });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("cur"), {
        pagination: { type: "cursor", param: "cursor", cursorPath: "next_cursor" },
      }),
    );
    const err = (await walkError(connector, walkContext(log))) as Failure;
    t.equal(err.code, "CONTRACT");
    t.match(err.message, /cursor URL points to/);
  });

  await t.test("a relative-looking cursor stays a query parameter on the pinned origin", async (t) => {
    sim.configure("cur2", {
      size: 50,
      pageSize: 10,
      pagination: "cursor",
      faults: { cursorValue: "../../../etc" },
    });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("cur2"), {
        pagination: { type: "cursor", param: "cursor", cursorPath: "next_cursor" },
      }),
    );
    const err = (await walkError(connector, walkContext(log))) as Failure;
    // The simulator refuses the bogus cursor with 400: still the supplier's origin, never a path traversal.
    t.equal(err.code, "HTTP_400");
  });

  t.equal(foreign.requests.length, 0, "the foreign listener received nothing");
});

t.test("an allowed origin is followed without credentials or configured headers", async (t) => {
  const other = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"data":{"items":[{"article":"A","price":{"value":"1"}}]}}');
  });
  const home = await startServer(t, (_req, res) => {
    res.writeHead(302, { location: `${other.url}/v1/offers` });
    res.end();
  });
  const { connector, log } = buildConnector(
    t,
    simDefinition(home.url, {
      pagination: { type: "none" },
      allowedOrigins: [other.url],
      auth: { type: "bearer", tokenEnv: "TOKEN" },
      request: { path: "/v1/offers", headers: { "x-tenant": "acme" } },
    }),
    { readSecretEnv: () => "secret-token-value" },
  );
  const pages = await collectPages(connector, walkContext(log));
  t.equal(pages[0]?.offers.length, 1);
  t.equal(pages[0]?.httpAttempts, 2, "the redirect hop counts as a request");
  t.equal(home.requests[0]?.headers.authorization, "Bearer secret-token-value");
  t.equal(home.requests[0]?.headers["x-tenant"], "acme");
  t.equal(other.requests[0]?.headers.authorization, undefined, "no credentials to the other origin");
  t.equal(other.requests[0]?.headers["x-tenant"], undefined, "no configured headers to the other origin");
});

t.test("more than 3 redirects is CONTRACT", async (t) => {
  let n = 0;
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(302, { location: `/hop${++n}` });
    res.end();
  });
  const { connector, log } = buildConnector(t, simDefinition(srv.url, { pagination: { type: "none" } }));
  const err = (await walkError(connector, walkContext(log))) as Failure;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /more than 3 redirects/);
  t.equal(srv.requests.length, 4, "the first request and 3 redirects");
});
