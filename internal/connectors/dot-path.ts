/**
 * Dot paths into JSON values (`data.items`, `price.value`, `items.0.sku`).
 * The empty path is the value itself. Only own properties are read, so a path
 * such as `__proto__` or `constructor` never reaches the prototype chain.
 */

/** Splits a dot path into segments; `""` → `[]`. */
export function splitDotPath(path: string): string[] {
  return path === "" ? [] : path.split(".");
}

/** The value at `path`, or `undefined` when any segment is missing. Numeric segments index arrays. */
export function readDotPath(value: unknown, path: string | readonly string[]): unknown {
  const segments = typeof path === "string" ? splitDotPath(path) : path;
  let current: unknown = value;
  for (const segment of segments) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9]\d*)$/.test(segment)) return undefined;
      current = current[Number(segment)];
    } else if (current !== null && typeof current === "object") {
      if (!Object.hasOwn(current, segment)) return undefined;
      current = (current as Record<string, unknown>)[segment];
    } else {
      return undefined;
    }
  }
  return current;
}
