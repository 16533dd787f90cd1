/**
 * A TCP proxy on loopback in front of PostgreSQL that can go silent: `freeze()` stops
 * forwarding on every connection open at that moment (bytes wait in the socket
 * buffers, nothing is refused or reset: what a cut network looks like to both ends
 * while TCP still believes in it), and `heal()` delivers what waited, as TCP
 * retransmission would after the network returns. Connections made after a freeze
 * are forwarded normally: the cut concerns the connections that existed.
 */
import net from "node:net";

export interface TcpProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url(url: string): string;
  freeze(): void;
  heal(): void;
  /** Connections open now (client side). */
  readonly open: number;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  frozen: boolean;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    const pair: Pair = { client, upstream, frozen: false };
    pairs.add(pair);
    const forward = (from: net.Socket, to: net.Socket) => {
      from.on("data", (chunk) => to.write(chunk));
      from.on("end", () => to.end());
      from.on("error", () => to.destroy());
      from.on("close", () => {
        to.destroy();
        pairs.delete(pair);
      });
    };
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    freeze() {
      for (const p of pairs) {
        p.frozen = true;
        p.client.pause();
        p.upstream.pause();
      }
    },
    heal() {
      for (const p of pairs) {
        if (!p.frozen) continue;
        p.frozen = false;
        p.client.resume();
        p.upstream.resume();
      }
    },
    get open() {
      return pairs.size;
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
