/**
 * Secret redaction and log-safe text. Everything that may reach a log line, an
 * error column, `check-config` output or an HTTP response passes through here.
 */

const URL_CREDENTIALS = /([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*)(?::[^\s/@]*)?@/gi;
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
/** {@link CONTROL} without `g`: `test` keeps no `lastIndex` between calls. */
const HAS_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

/** Replaces `user:password@` in every URL inside `text` with `***@`. */
export function redactUrlCredentials(text: string): string {
  return text.replace(URL_CREDENTIALS, "$1***@");
}

/** Strips control characters (except tab and newline) so hostile values cannot forge log lines. */
export function stripControl(text: string): string {
  // Every offer's name passes here and almost none holds one: a test first skips the
  // global replace's machinery (5,000 names of 13 characters: 0.18 → 0.13 ms).
  return HAS_CONTROL.test(text) ? text.replace(CONTROL, "") : text;
}

/**
 * A registry of secret values that must never be printed. The app creates one
 * (`buildApp`, and each CLI command) and hands it to whatever resolves secrets
 * (connector credentials register what they read) and whatever prints (the
 * logger, error writers, `preview`, `check-config`, the console), which scrub them.
 */
export class SecretRegistry {
  private readonly values = new Set<string>();
  add(secret: string | undefined): void {
    // Very short secrets would scrub ordinary words; they are still sent, just not scrubbed by value.
    if (secret && secret.length >= 4) this.values.add(secret);
  }
  scrub(text: string): string {
    let out = redactUrlCredentials(text);
    // Longest first: a secret that contains another must be replaced whole.
    for (const secret of [...this.values].sort((a, b) => b.length - a.length)) {
      if (out.includes(secret)) out = out.split(secret).join("[REDACTED]");
      const b64 = Buffer.from(secret).toString("base64");
      if (out.includes(b64)) out = out.split(b64).join("[REDACTED]");
    }
    return out;
  }
  /** Log-safe form of any text: control characters stripped, secrets and URL credentials redacted. */
  safeText(text: string, maxLength = 2_000): string {
    const clean = this.scrub(stripControl(text));
    return clean.length > maxLength ? `${clean.slice(0, maxLength)}…` : clean;
  }
}
