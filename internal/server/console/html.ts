/**
 * HTML built by a tagged template that escapes every interpolated value unless it is
 * already {@link Html}. Markup therefore only ever comes from the literal parts of
 * templates in this folder: a supplier's or the database's text (a reject's raw
 * payload may carry `<script>`) can only ever become text. Attribute values in the
 * templates are always double-quoted, and `"` and `'` are escaped too, so a value
 * cannot leave its attribute either.
 */

/** A fragment of trusted markup. Only {@link html} makes one. */
export class Html {
  /** @internal use {@link html}; the constructor is not for untrusted text. */
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (value === null || value === undefined || value === false) return "";
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return value.map(render).join("");
  return escapeHtml(String(value));
}

/** `html\`<td>${name}</td>\`` with `name` escaped; arrays are joined; null, undefined and false render nothing. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  // One join rather than repeated `+=`: a page of 1,000 rows is megabytes, and ropes of
  // many small pieces cost more to flatten than one array of them.
  const parts: string[] = [strings[0] ?? ""];
  for (let i = 0; i < values.length; i++) parts.push(render(values[i]), strings[i + 1] ?? "");
  return new Html(parts.join(""));
}
