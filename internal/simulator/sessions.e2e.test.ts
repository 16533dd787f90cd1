// The simulator's session, OAuth2 and query-key modes, spoken to over raw HTTP (issue 16).
import { gunzipSync } from "node:zlib";
import t from "tap";
import { startSimulator } from "./server.js";
import { httpRequest } from "./test-support.js";

t.test(
  "ETM session: login in the query, token at data.session, body 403 after expiry, login spacing",
  async (t) => {
    const sim = await startSimulator();
    t.teardown(() => sim.close());
    const admin = await httpRequest(`${sim.url}/_admin/suppliers/etm`, {
      method: "PUT",
      body: JSON.stringify({
        size: 30,
        pageSize: 10,
        envelope: true,
        auth: {
          type: "session",
          loginPath: "/api/v1/user/login",
          credentials: { log: "u", pwd: "p" },
          expiredAs: "body403",
          expireAfterRequests: 2,
          minLoginIntervalMs: 60_000,
        },
      }),
    });
    t.equal(admin.status, 200, admin.body);
    const base = sim.baseUrl("etm");
    const bad = await httpRequest(`${base}/api/v1/user/login?log=u&pwd=x`, { method: "POST" });
    t.equal(bad.status, 401);
    const login = await httpRequest(`${base}/api/v1/user/login?log=u&pwd=p`, { method: "POST" });
    t.equal(login.status, 429, "a second login within minLoginIntervalMs is refused");
    t.equal(sim.stats("etm").loginViolations, 1);

    sim.configure("etm", {
      size: 30,
      pageSize: 10,
      envelope: true,
      auth: {
        type: "session",
        loginPath: "/api/v1/user/login",
        credentials: { log: "u", pwd: "p" },
        expiredAs: "body403",
        expireAfterRequests: 2,
      },
    });
    const ok = await httpRequest(`${base}/api/v1/user/login?log=u&pwd=p`, { method: "POST" });
    t.equal(ok.status, 200);
    const token = JSON.parse(ok.body).data.session as string;
    t.same(sim.stats("etm").issuedTokens, [token]);
    const page = (n: number) => httpRequest(`${base}/v1/offers?page=${n}&session-id=${token}`);
    const first = JSON.parse((await page(1)).body);
    t.same(first.status, { code: 200, message: "OK" });
    t.equal(first.data.items.length, 10);
    await page(2);
    const expired = await page(3);
    t.equal(expired.status, 200, "ETM reports an expired session inside a 200");
    t.equal(JSON.parse(expired.body).status.code, 403);
    t.equal(sim.stats("etm").expiredRequests, 1);
    t.equal((await httpRequest(`${base}/v1/offers`)).status, 200, "no token: the same body 403");
  },
);

t.test("form login with a cookie; header token; OAuth2; query key", async (t) => {
  const sim = await startSimulator({
    suppliers: {
      bp: {
        size: 5,
        auth: {
          type: "session",
          loginPath: "/oauth/login",
          credentialsIn: "form",
          credentials: { login: "u", password: "p" },
          tokenIn: { cookie: "BPSESSID" },
          sendAs: { cookie: "BPSESSID" },
        },
      },
      hdr: {
        size: 5,
        auth: {
          type: "session",
          loginPath: "/login",
          credentialsIn: "json",
          credentials: { user: "u" },
          tokenIn: { header: "X-Token" },
          sendAs: { header: "Authorization", prefix: "Session " },
        },
      },
      se: { size: 5, auth: { type: "oauth2", tokenPath: "/oauth/token", clientId: "id", clientSecret: "s" } },
      sys: { size: 5, auth: { type: "query", param: "accessCode", value: "k" }, compression: "gzip" },
    },
  });
  t.teardown(() => sim.close());
  const form = { "content-type": "application/x-www-form-urlencoded" };
  const bp = await httpRequest(`${sim.baseUrl("bp")}/oauth/login`, {
    method: "POST",
    headers: form,
    body: "login=u&password=p",
  });
  const cookie = [bp.headers["set-cookie"]].flat().find((c) => c?.startsWith("BPSESSID="));
  t.ok(cookie, "the session cookie is set");
  const value = cookie?.split(";")[0] ?? "";
  t.equal(
    (await httpRequest(`${sim.baseUrl("bp")}/v1/offers`, { headers: { cookie: `a=1; ${value}` } })).status,
    200,
  );
  t.equal((await httpRequest(`${sim.baseUrl("bp")}/v1/offers`)).status, 401);

  const hdr = await httpRequest(`${sim.baseUrl("hdr")}/login`, {
    method: "POST",
    body: JSON.stringify({ user: "u" }),
  });
  const token = hdr.headers["x-token"] as string;
  t.ok(token);
  t.equal(
    (await httpRequest(`${sim.baseUrl("hdr")}/v1/offers`, { headers: { authorization: `Session ${token}` } }))
      .status,
    200,
  );

  const basic = Buffer.from("id:s").toString("base64");
  const tok = await httpRequest(`${sim.baseUrl("se")}/oauth/token`, {
    method: "POST",
    headers: { ...form, authorization: `Basic ${basic}` },
    body: "grant_type=client_credentials",
  });
  const access = JSON.parse(tok.body);
  t.equal(access.token_type, "Bearer");
  t.equal(access.expires_in, 3600);
  t.equal(
    (
      await httpRequest(`${sim.baseUrl("se")}/v1/offers`, {
        headers: { authorization: `Bearer ${access.access_token}` },
      })
    ).status,
    200,
  );
  const wrong = await httpRequest(`${sim.baseUrl("se")}/oauth/token`, {
    method: "POST",
    headers: form,
    body: "grant_type=client_credentials&client_id=id&client_secret=nope",
  });
  t.equal(wrong.status, 401);
  t.equal(sim.stats("se").loginFailures, 1);

  t.equal((await httpRequest(`${sim.baseUrl("sys")}/v1/offers?accessCode=x`)).status, 401);
  const gz = await new Promise<Buffer>((resolve, reject) => {
    import("node:http").then(({ get }) =>
      get(
        `${sim.baseUrl("sys")}/v1/offers?accessCode=k`,
        { headers: { "accept-encoding": "gzip" } },
        (res) => {
          t.equal(res.headers["content-encoding"], "gzip");
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve(Buffer.concat(chunks)));
        },
      ).on("error", reject),
    );
  });
  t.equal(JSON.parse(gunzipSync(gz).toString()).data.items.length, 5);
});
