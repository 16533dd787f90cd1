/**
 * CPU time of the three processes a pipeline walk runs on this machine: the PostgreSQL
 * server, the worker child, and the bench process (where the simulator answers). Read
 * from /proc (Linux), so only for a server on this machine; elsewhere `serverCpu`
 * returns undefined and the bench reports no CPU figures.
 *
 * What it is for: wall time can never be less than all the CPU a walk needs divided by
 * the cores that run it, so `rows / (cpu / cores)` bounds the walk's rows/s on this
 * machine at its measured CPU cost, however well fetching, parsing and writing overlap.
 */
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import type pg from "pg";

/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat on Linux. */
const CLOCK_TICKS_PER_SECOND = 100;

interface ProcStat {
  ppid: number;
  /** utime + stime, seconds: the process itself. */
  own: number;
  /** utime + stime + cutime + cstime, seconds: the process and the children it reaped. */
  seconds: number;
}

function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Fields after the command name (which may contain spaces) start after the last ')':
  // state ppid … utime(12) stime(13) cutime(14) cstime(15), counted from 1 after it.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]));
  const own = (utime ?? 0) + (stime ?? 0);
  return {
    ppid: Number(fields[1]),
    own: own / CLOCK_TICKS_PER_SECOND,
    seconds: (own + (cutime ?? 0) + (cstime ?? 0)) / CLOCK_TICKS_PER_SECOND,
  };
}

/** CPU seconds `pid` has used itself (user + system); throws, naming it, if it is gone. */
export function processCpuSeconds(pid: number): number {
  const stat = procStat(pid);
  if (!stat) throw new Error(`process ${pid}: no /proc/${pid}/stat (exited, or not Linux)`);
  return stat.own;
}

/**
 * The PostgreSQL server's CPU seconds so far: the postmaster, what it reaped from exited
 * backends, and every live child (backends, checkpointer, WAL writer, autovacuum).
 */
export type ServerCpu = () => number;

/** Finds the postmaster of `pool`'s server through a backend's parent; undefined if not local. */
export async function serverCpu(pool: pg.Pool): Promise<ServerCpu | undefined> {
  const { rows } = await pool.query<{ pid: number }>("select pg_backend_pid() as pid");
  const backend = rows[0] ? procStat(rows[0].pid) : undefined;
  if (!backend) return undefined;
  const postmaster = backend.ppid;
  const comm = (() => {
    try {
      return readFileSync(`/proc/${postmaster}/comm`, "utf8").trim();
    } catch {
      return "";
    }
  })();
  if (!comm.startsWith("postgres")) return undefined;
  return () => {
    // Children first, then the postmaster: a backend reaped in between is counted twice
    // (one backend), never lost; the bench reads it when no worker session is open.
    let seconds = 0;
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = procStat(Number(entry));
      if (stat?.ppid === postmaster) seconds += stat.seconds;
    }
    return seconds + (procStat(postmaster)?.seconds ?? 0);
  };
}

/** CPU seconds of one walk, by process. */
export interface WalkCpu {
  /** PostgreSQL, from just before the worker starts until its sessions have ended. */
  database: number;
  /** The worker child during its tick (`process.cpuUsage`). */
  worker: number;
  /** The bench process while the worker ran: the simulator answering it. */
  supplier: number;
}

/** Cores this process may run on (`os.availableParallelism`). */
export const cores = availableParallelism();

/**
 * The most rows/s `rows` can go at on `cores` cores at the measured CPU cost, with and
 * without the supplier's share (in production the supplier's CPU is elsewhere).
 */
export function cpuBounds(rows: number, cpu: WalkCpu): { all: number; withoutSupplier: number } {
  const perCore = (seconds: number) => (seconds > 0 ? (rows * cores) / seconds : Number.NaN);
  return {
    all: perCore(cpu.database + cpu.worker + cpu.supplier),
    withoutSupplier: perCore(cpu.database + cpu.worker),
  };
}
