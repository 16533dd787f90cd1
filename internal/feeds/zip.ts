import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import picomatch from "picomatch";
import yauzl, { type Entry, type ZipFile } from "yauzl";
import { exceedsDecompressionRatio, MAX_DECOMPRESSION_RATIO } from "../platform/content-encoding.js";
import { errorMessage, IngestionError } from "../platform/errors.js";

/**
 * Zip archives. A zip's authoritative index is its central directory, at the
 * end of the file: a streaming reader that trusts the local headers instead
 * cannot read a stored entry written with a data descriptor and can be fooled
 * by headers the directory disowns. So the archive is spooled to a private temp
 * file (bounded by `maxResponseBytes`, removed afterwards whatever happens) and
 * read with yauzl, which seeks the directory and checks every entry's sizes
 * while inflating (`validateEntrySizes`). Memory stays at a few buffers.
 */

/** An entry to read and the cleanup of its temp file. */
export interface OpenedZipEntry {
  name: string;
  compressedSize: number;
  uncompressedSize: number;
  stream: AsyncIterable<Buffer>;
  /** Removes the temp file; idempotent, also run when `stream` ends. */
  close: () => Promise<void>;
}

const NAMES_SHOWN = 10;

export function openZip(path: string): Promise<ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(
      path,
      { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: false },
      (err, zip) => (err ? reject(err) : resolve(zip)),
    );
  });
}

/** Every file entry (directories skipped) of which `pick` approves, plus a few names for messages. */
function listEntries(
  zip: ZipFile,
  pick: (name: string) => boolean,
): Promise<{ matched: Entry[]; files: number; names: string[] }> {
  return new Promise((resolve, reject) => {
    const matched: Entry[] = [];
    const names: string[] = [];
    let files = 0;
    zip.on("entry", (entry: Entry) => {
      if (!entry.fileName.endsWith("/")) {
        files++;
        if (names.length < NAMES_SHOWN) names.push(entry.fileName);
        // Two matches are enough to know the choice is ambiguous.
        if (pick(entry.fileName) && matched.length < 2) matched.push(entry);
      }
      zip.readEntry();
    });
    zip.once("end", () => resolve({ matched, files, names }));
    zip.once("error", reject);
    zip.readEntry();
  });
}

/** The spool file cannot be written (a full or read-only temp dir): this host's fault, not the supplier's. */
function spoolError(dir: string, err: unknown): IngestionError {
  return new IngestionError(
    "INTERNAL",
    `cannot spool the zip archive to ${dir}: ${errorMessage(err)} (a zip feed needs room for the whole archive there)`,
    { cause: err },
  );
}

function describeNames(names: string[], files: number): string {
  const shown = names.map((n) => JSON.stringify(n)).join(", ");
  return files > names.length ? `${shown}, … (${files} files)` : shown;
}

/**
 * Refuses an entry that is encrypted, declares more than `maxBytes`, or (past 1 MiB)
 * more than 100:1; yauzl then checks while inflating that it keeps to what it declared.
 * @throws IngestionError `CONTRACT`
 */
export function checkEntry(entry: Entry, maxBytes: number): void {
  if ((entry.generalPurposeBitFlag & 0x1) !== 0) {
    throw new IngestionError("CONTRACT", `zip entry ${JSON.stringify(entry.fileName)} is encrypted`);
  }
  if (entry.uncompressedSize > maxBytes) {
    throw new IngestionError(
      "CONTRACT",
      `zip entry ${JSON.stringify(entry.fileName)} declares ${entry.uncompressedSize} bytes, more than maxResponseBytes (${maxBytes} bytes)`,
    );
  }
  if (exceedsDecompressionRatio(entry.uncompressedSize, entry.compressedSize)) {
    throw new IngestionError(
      "CONTRACT",
      `zip entry ${JSON.stringify(entry.fileName)} declares more than ${MAX_DECOMPRESSION_RATIO}:1 (${entry.uncompressedSize} bytes from ${entry.compressedSize}): refused as a decompression bomb`,
    );
  }
}

/** A spooled download: its temp file and the removal of its private directory. */
export interface SpooledFile {
  path: string;
  bytes: number;
  /** Idempotent. */
  remove: () => Promise<void>;
}

/**
 * Writes `source` (at most `maxBytes`, else `CONTRACT` naming `what`) to a file in a
 * private temp directory under `spoolDir`, readable by this user only.
 */
export async function spoolToFile(
  source: AsyncIterable<Buffer>,
  maxBytes: number,
  spoolDir: string = tmpdir(),
  what = "zip archive",
): Promise<SpooledFile> {
  const dir = await mkdtemp(join(spoolDir, "supplier-sync-feed-")).catch((err: unknown) => {
    throw spoolError(spoolDir, err);
  });
  const path = join(dir, "feed.zip");
  let removed: Promise<void> | undefined;
  const remove = () => {
    removed ??= rm(dir, { recursive: true, force: true });
    return removed;
  };
  try {
    let spooled = 0;
    const spooling = pipeline(
      source,
      async function* bound(chunks: AsyncIterable<Buffer>) {
        for await (const chunk of chunks) {
          spooled += chunk.length;
          if (spooled > maxBytes) {
            throw new IngestionError(
              "CONTRACT",
              `${what} is larger than maxResponseBytes (${maxBytes} bytes)`,
            );
          }
          yield chunk;
        }
      },
      createWriteStream(path, { mode: 0o600 }),
    );
    await spooling.catch((err: unknown) => {
      throw err instanceof IngestionError ? err : spoolError(spoolDir, err);
    });
    return { path, bytes: spooled, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

/**
 * Spools `source` (at most `maxBytes`) and opens the entry `zipEntry` names (a
 * name or glob; without a slash it also matches a base name), or the only file.
 * The returned stream removes the temp file when it ends, fails or is abandoned.
 * @throws IngestionError `CONTRACT` for an unreadable archive, no or several matching entries,
 * an encrypted entry, or an entry declaring more than 100:1.
 */
export async function openZipEntry(
  source: AsyncIterable<Buffer>,
  zipEntry: string | undefined,
  maxBytes: number,
  onSpooled: (bytes: number) => void,
  spoolDir: string = tmpdir(),
): Promise<OpenedZipEntry> {
  const spool = await spoolToFile(source, maxBytes, spoolDir, "zip archive");
  const path = spool.path;
  let zip: ZipFile | undefined;
  let cleaned: Promise<void> | undefined;
  const cleanup = () => {
    cleaned ??= (async () => {
      zip?.close();
      await spool.remove();
    })();
    return cleaned;
  };
  try {
    onSpooled(spool.bytes);
    try {
      zip = await openZip(path);
    } catch (err) {
      throw new IngestionError("CONTRACT", `feed is not a readable zip archive: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    const pick =
      zipEntry === undefined
        ? () => true
        : picomatch(zipEntry, { basename: !zipEntry.includes("/"), dot: true });
    const { matched, files, names } = await listEntries(zip, pick).catch((err: unknown) => {
      throw new IngestionError("CONTRACT", `zip archive's directory is corrupt: ${errorMessage(err)}`, {
        cause: err,
      });
    });
    if (matched.length === 0) {
      throw new IngestionError(
        "CONTRACT",
        zipEntry === undefined
          ? "zip archive holds no file"
          : `no entry of the zip archive matches format.zipEntry ${JSON.stringify(zipEntry)}; it holds ${describeNames(names, files)}`,
      );
    }
    if (matched.length > 1) {
      throw new IngestionError(
        "CONTRACT",
        zipEntry === undefined
          ? `zip archive holds ${files} files (${describeNames(names, files)}): set format.zipEntry to the one to read`
          : `format.zipEntry ${JSON.stringify(zipEntry)} matches more than one entry (${matched.map((e) => JSON.stringify(e.fileName)).join(", ")}, …)`,
      );
    }
    const entry = matched[0]!;
    checkEntry(entry, maxBytes);
    const opened = zip;
    const readable = await new Promise<NodeJS.ReadableStream>((resolve, reject) =>
      opened.openReadStream(entry, (err, stream) => (err ? reject(err) : resolve(stream))),
    ).catch((err: unknown) => {
      throw new IngestionError(
        "CONTRACT",
        `zip entry ${JSON.stringify(entry.fileName)} cannot be read: ${errorMessage(err)}`,
        { cause: err },
      );
    });
    async function* entryBytes(): AsyncGenerator<Buffer> {
      try {
        for await (const chunk of readable as AsyncIterable<Buffer>) yield chunk;
      } catch (err) {
        if (err instanceof IngestionError) throw err;
        throw new IngestionError(
          "CONTRACT",
          `zip entry ${JSON.stringify(entry.fileName)} is corrupt: ${errorMessage(err)}`,
          { cause: err },
        );
      } finally {
        await cleanup();
      }
    }
    return {
      name: entry.fileName,
      compressedSize: entry.compressedSize,
      uncompressedSize: entry.uncompressedSize,
      stream: entryBytes(),
      close: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
