// Puts a host-side server (model gateway, egress proxy) on a run's unix socket: a stale socket
// file is replaced, anything else at the path is refused, and the socket is opened to the
// sandbox's uid (the run's private 0700 directory is what keeps other host users out). Closing
// it takes its connections and the socket file with it.
import fs from "node:fs/promises";
import type net from "node:net";
import { SandboxRunError, usageError } from "../errors.js";

/** sun_path holds 108 bytes with its NUL; Node listens on a longer path cut short, silently. */
const MAX_SOCKET_PATH_BYTES = 107;

export async function listenOnUnixSocket(server: net.Server, socketPath: string, what: string): Promise<void> {
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw usageError(
      `The ${what} socket path ${socketPath} is ${Buffer.byteLength(socketPath)} bytes: unix socket paths hold at most ${MAX_SOCKET_PATH_BYTES}.`,
      "Use a shorter temp directory: set TMPDIR to a short folder (e.g. /tmp).",
    );
  }
  const stat = await fs.lstat(socketPath).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (stat && !stat.isSocket()) {
    throw usageError(
      `The ${what} socket path ${socketPath} exists and is not a socket.`,
      "Pass a path inside a fresh private directory (fs.mkdtemp).",
    );
  }
  if (stat) await fs.rm(socketPath, { force: true });

  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.off("listening", onListening);
      reject(
        new SandboxRunError("usage", `The ${what} could not listen on ${socketPath}: ${error.message}`, {
          hint: "Check that the directory exists and is writable.",
          cause: error,
        }),
      );
    };
    const onListening = () => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen(socketPath);
  });
  await fs.chmod(socketPath, 0o666);
}

/**
 * An idempotent close for a server on a run's unix socket: stop listening, cut the connections
 * still open (the sandbox may hold one forever), then remove the socket file.
 */
export function unixSocketCloser(
  server: net.Server,
  connections: Set<net.Socket>,
  socketPath: string,
  beforeClose?: () => void,
): () => Promise<void> {
  let closed: Promise<void> | undefined;
  return () =>
    (closed ??= (async () => {
      beforeClose?.();
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of connections) socket.destroy();
      await serverClosed;
      await fs.rm(socketPath, { force: true });
    })());
}
