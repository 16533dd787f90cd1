// check-config refuses every malformed connector key of issue 16 with exit 2, naming the key path.
import t from "tap";
import { type BrokenKeyCases, checkBrokenKeys } from "../helpers/check-config.js";

const base = { baseUrl: "https://ipro.etm.ru", fields: { sku: "gdscode", price: "price" } };
const login = { method: "POST", path: "/api/v1/user/login", query: { log: { env: "ETM_LOGIN" } } };
const session = { type: "session", login, token: { path: "data.session" }, send: { query: "session-id" } };

/** supplier name → its broken definition and what check-config must say about it. */
const cases: BrokenKeyCases = {
  loginpath: [
    { auth: { ...session, login: { ...login, path: "login" } } },
    /auth\.login\.path: must start with \//,
  ],
  loginsecret: [
    { auth: { ...session, login: { ...login, query: { pwd: { vault: "x" } } } } },
    /auth\.login\.query\.pwd: must be a string/,
  ],
  loginunset: [
    { auth: { ...session, login: { ...login, query: { pwd: { env: "UNSET_PASSWORD_VAR" } } } } },
    /auth\.login\.query\.pwd: environment variable UNSET_PASSWORD_VAR is unset or empty/,
  ],
  token: [
    { auth: { ...session, token: { path: "a", cookie: "b" } } },
    /auth\.token: set exactly one of path, header, cookie/,
  ],
  send: [
    { auth: { ...session, send: { query: "s", prefix: "x" } } },
    /auth\.send\.prefix: goes with header only/,
  ],
  ttl: [{ auth: { ...session, ttlMs: -5 } }, /auth\.ttlMs/],
  expired: [
    { auth: { ...session, expiredWhen: [{ path: "status.code" }] } },
    /auth\.expiredWhen\.0\.path: needs exactly one/,
  ],
  queryauth: [
    { auth: { type: "query", param: "accessCode" } },
    /auth\.valueEnv: one of valueEnv or valueFile is required/,
  ],
  oauth: [
    { auth: { type: "oauth2", tokenPath: "/t", clientIdEnv: "A", clientIdFile: "b", clientSecretEnv: "C" } },
    /auth\.clientIdFile: set either clientIdEnv or clientIdFile, not both/,
  ],
  body: [{ request: { body: { a: 1 } } }, /request\.body: needs "method": "POST"/],
  placeholder: [{ request: { path: "/goods/{skus}" } }, /request\.path: placeholder \{skus\} is not defined/],
  errors: [{ errors: [{ path: "status.code", in: [1], then: "maybe" }] }, /errors\.0\.then/],
  pagesize: [
    { pagination: { type: "page", size: 50 } },
    /pagination\.sizeParam: sizeParam and size go together/,
  ],
  cursor: [
    { pagination: { type: "cursor", cursorHeader: "X-N", cursorPath: "n" } },
    /pagination: set exactly one of/,
  ],
  total: [{ pagination: { type: "offset", limit: 10, totalPath: "a..b" } }, /pagination\.totalPath/],
  ratio: [{ guards: { maxDelistRatio: 1.5 } }, /guards\.maxDelistRatio: must be from 0 to 1/],
  mincount: [{ guards: { minDelistCount: 2.5 } }, /guards\.minDelistCount: must be a whole number/],
  factor: [{ guards: { priceJumpFactor: 1 } }, /guards\.priceJumpFactor: must be greater than 1/],
  currencyflag: [{ guards: { currencyChange: "yes" } }, /guards\.currencyChange: /],
  guardkey: [{ guards: { maxJump: 3 } }, /guards: Unrecognized key: "maxJump"/],
  guardson: [{ guards: true }, /guards: must be false or an object of guard settings/],
  nullwhen: [
    {
      fields: {
        sku: "art",
        price: { path: "price", nullWhen: { path: "extra", contains: "x", equals: "y" } },
      },
    },
    /fields\.price\.nullWhen: needs exactly one of equals, in, notIn, exists or contains/,
  ],
  sumname: [
    { fields: { sku: "art", price: "price", name: { path: "n", sum: true } } },
    /fields\.name: Unrecognized key: "sum"/,
  ],
  elsebad: [
    { fields: { sku: "art", price: "price", stock: { path: "s", else: { jmespath: "sum(" } } } },
    /fields\.stock\.else\.jmespath: is not a valid JMESPath expression/,
  ],
};

t.test("check-config: exit 2, each broken key named with its path", async (t) => {
  const stdout = await checkBrokenKeys(t, base, cases, { ETM_LOGIN: "someone" });
  t.match(stdout, new RegExp(`configuration has ${Object.keys(cases).length} problems`));
});
