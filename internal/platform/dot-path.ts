/**
 * Dot paths into JSON values (`data.items`, `price.value`, `items.0.sku`).
 * The empty path is the value itself. Only own properties are read, so a path
 * such as `__proto__` or `constructor` never reaches the prototype chain.
 */

/**
 * Split paths, by path. Paths come from connector definitions, so there are few; the
 * cap only guards against a caller passing data as paths. Splitting on every read
 * was measurably slow (bench/README.md, Figures behind code choices).
 */
const splitCache = new Map<string, readonly string[]>();
const SPLIT_CACHE_MAX = 256;

/** Splits a dot path into segments; `""` → `[]`. The result is shared: do not mutate it. */
export function splitDotPath(path: string): readonly string[] {
  let segments = splitCache.get(path);
  if (segments === undefined) {
    segments = Object.freeze(path === "" ? [] : path.split("."));
    if (splitCache.size >= SPLIT_CACHE_MAX) splitCache.clear();
    splitCache.set(path, segments);
  }
  return segments;
}

/** The value at `path`, or `undefined` when any segment is missing. Numeric segments index arrays. */
export function readDotPath(value: unknown, path: string | readonly string[]): unknown {
  const segments = typeof path === "string" ? splitDotPath(path) : path;
  let current: unknown = value;
  // An indexed loop: `for … of` allocated an iterator result per segment where this was
  // not inlined (every field of every record: bench/README.md, Heap growth).
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
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
