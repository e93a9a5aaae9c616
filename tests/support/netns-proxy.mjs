// Runs inside the second engine's network namespace (started by second-engine.ts through
// nsenter): accepts on a listening socket made in the host's namespace, handed over by IPC, and
// carries each connection to the engine's port on the namespace's own loopback. Half-closes are
// passed on as half-closes (stdin EOF of an attach or exec is one). Killing this process cuts
// every link through it at once. Both sockets send at once (no Nagle), as dockerd's own do: a
// proxy that batched small writes would add ~40 ms to each exchange a real engine does not.
import net from "node:net";

const [host, port] = process.argv.slice(2);
process.on("message", (message, server) => {
  if (message !== "listen" || !server) return;
  server.allowHalfOpen = true;
  server.on("connection", (client) => {
    client.setNoDelay(true);
    const upstream = net.connect({ host, port: Number(port), allowHalfOpen: true, noDelay: true });
    client.pipe(upstream);
    upstream.pipe(client);
    const destroy = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", destroy);
    upstream.on("error", destroy);
    // Both directions finished: nothing more can pass.
    let ended = 0;
    const onEnd = () => {
      if (++ended === 2) destroy();
    };
    client.on("end", onEnd);
    upstream.on("end", onEnd);
  });
  process.send?.("ready");
});
// The parent lets go of the IPC channel once set up; the listening socket keeps this process alive.
process.on("disconnect", () => {});
