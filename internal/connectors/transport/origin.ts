import { IngestionError } from "../../platform/errors.js";

/**
 * Origin pinning (docs/connectors.md, Common keys). Every request of a connector goes to the origin
 * (scheme, host, port) of its `baseUrl`, or of one of its `allowedOrigins`.
 * A redirect, `Link` URL or cursor-built URL that leaves them is refused
 * before anything is sent. Credentials and configured request headers are
 * only ever attached for the baseUrl origin itself.
 */
export class OriginPolicy {
  /** Origin of `baseUrl`, e.g. `https://api.example:8443`. */
  readonly primary: string;
  private readonly allowed: ReadonlySet<string>;

  constructor(baseUrl: string, allowedOrigins: readonly string[] = []) {
    this.primary = new URL(baseUrl).origin;
    this.allowed = new Set([this.primary, ...allowedOrigins.map((o) => new URL(o).origin)]);
  }

  /** True when credentials may be sent to `url`. */
  isPrimary(url: URL): boolean {
    return url.origin === this.primary;
  }

  isAllowed(url: URL): boolean {
    return (url.protocol === "http:" || url.protocol === "https:") && this.allowed.has(url.origin);
  }

  /**
   * Throws `CONTRACT` when `url` leaves the allowed origins.
   * @param what names the source of the URL for the message, e.g. `redirect Location`.
   */
  check(url: URL, what: string): void {
    if (!this.isAllowed(url)) {
      throw new IngestionError(
        "CONTRACT",
        `${what} points to ${url.origin}, outside the connector's allowed origins (${[...this.allowed].join(", ")}): refused`,
      );
    }
  }

  /** Resolves `ref` against `base` and checks it; unparseable references are `CONTRACT` too. */
  resolve(ref: string, base: URL, what: string): URL {
    let url: URL;
    try {
      url = new URL(ref, base);
    } catch (err) {
      throw new IngestionError("CONTRACT", `${what} ${JSON.stringify(ref.slice(0, 200))} is not a URL`, {
        cause: err,
      });
    }
    this.check(url, what);
    return url;
  }
}
