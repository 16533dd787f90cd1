/**
 * `COPY … FROM STDIN` over the pg protocol without pg-copy-streams (not a
 * dependency): a minimal pg `Submittable` that answers the server's CopyInResponse
 * with CopyData messages and CopyDone, honouring socket back-pressure. Used by the
 * benchmark's ceiling case, so the ceiling goes through the same driver, process and
 * socket as every other case.
 */
import type pg from "pg";

/** The parts of pg's internal `Connection` the COPY sub-protocol needs (stable in pg 8). */
interface CopyConnection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
  sendCopyFail(message: string): void;
  stream: NodeJS.WritableStream & { writableNeedDrain?: boolean };
}

class CopyFromQuery {
  rowCount = 0;
  readonly done: Promise<number>;
  private resolve!: (rows: number) => void;
  private reject!: (err: Error) => void;
  private failure: Error | undefined;

  constructor(
    private readonly text: string,
    private readonly chunks: AsyncIterable<Buffer>,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  submit(connection: CopyConnection): void {
    connection.query(this.text);
  }

  handleCopyInResponse(connection: CopyConnection): void {
    this.pump(connection).catch((err: unknown) => {
      this.failure = err instanceof Error ? err : new Error(String(err));
      connection.sendCopyFail(this.failure.message);
    });
  }

  private async pump(connection: CopyConnection): Promise<void> {
    for await (const chunk of this.chunks) {
      connection.sendCopyFromChunk(chunk);
      if (connection.stream.writableNeedDrain) {
        await new Promise<void>((resolve) => connection.stream.once("drain", () => resolve()));
      }
    }
    connection.endCopyFrom();
  }

  handleCommandComplete(msg: { text?: string }): void {
    const match = /^COPY (\d+)/.exec(msg.text ?? "");
    this.rowCount = match ? Number(match[1]) : 0;
  }

  handleError(err: Error): void {
    this.failure ??= err;
  }

  handleReadyForQuery(): void {
    if (this.failure) this.reject(this.failure);
    else this.resolve(this.rowCount);
  }

  // Not expected during COPY FROM; present because pg may call them on any active query.
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * Runs `copySql` (a `COPY … FROM STDIN` statement) on `client`, streaming `chunks`
 * (text-format COPY data). Resolves with the number of rows copied.
 */
export async function copyFrom(
  client: pg.ClientBase,
  copySql: string,
  chunks: AsyncIterable<Buffer>,
): Promise<number> {
  const query = new CopyFromQuery(copySql, chunks);
  (client as unknown as { query(q: CopyFromQuery): unknown }).query(query);
  return query.done;
}

/** Escapes one value for COPY text format (`\N` for null). */
export function copyField(value: string | number | null): string {
  if (value === null) return "\\N";
  const text = String(value);
  return /[\\\t\n\r]/.test(text)
    ? text.replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r")
    : text;
}
