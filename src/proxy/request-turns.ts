// One request at a time per HTTP/1.1 client connection. Node's HTTP/1.1 server emits 'request'
// for every pipelined request it parses, at once, while the answers before it are still
// pending, and pausing the socket does not stop it (the parser reads the socket's handle
// itself). Handling each as it came let one connection hold an upstream socket, or a request
// queued in an agent, per request it pipelined: 20,000 of them from one connection. Here a
// connection's requests start in order, each once the one before it is done; a connection with
// more than `maxWaiting` parsed requests waiting is closed (apt pipelines 10 deep, other clients
// not at all), so what one connection holds is bounded by that and by one read of its socket.
import type net from "node:net";

/** Starts a request's handling; `done` says the connection may start its next request. */
export type RequestStart = (done: () => void) => void;

export const MAX_WAITING_REQUESTS = 16;

export function createRequestTurns(maxWaiting = MAX_WAITING_REQUESTS) {
  const connections = new WeakMap<net.Socket, { waiting: RequestStart[] }>();

  const startNext = (socket: net.Socket, turns: { waiting: RequestStart[] }) => {
    const start = turns.waiting[0];
    // An answer that ends the connection (a refusal's `connection: close`) ends the socket's
    // writing before it is destroyed: a request parsed behind it must not start then, or its
    // upstream socket would answer into a response with no socket, open until the run ends.
    if (!start || socket.destroyed || socket.writableEnded) return;
    let finished = false;
    start(() => {
      if (finished) return;
      finished = true;
      turns.waiting.shift();
      startNext(socket, turns);
    });
  };

  return (socket: net.Socket, start: RequestStart): void => {
    // The rest of a read the parser goes on with after a close below: nothing of it starts.
    if (socket.destroyed) return;
    let turns = connections.get(socket);
    if (!turns) {
      const created = { waiting: [] as RequestStart[] };
      connections.set(socket, created);
      // Whatever still waits is dropped with the connection.
      socket.once("close", () => {
        created.waiting.length = 0;
      });
      turns = created;
    }
    // `waiting` holds the running request first, then the ones parsed behind it.
    if (turns.waiting.length > maxWaiting) return void socket.destroy();
    turns.waiting.push(start);
    if (turns.waiting.length === 1) startNext(socket, turns);
  };
}
