// What a hostile sandbox can send the host's model gateway at once (issue 17 part 6), as a shell
// command for a hostile step: Node code run inside the sandbox against the launcher's gateway port.
/**
 * Node code for inside the sandbox: 64 posts to the gateway, each declaring 32 MiB - 1 (just under
 * the body cap) and sending 30 MiB that never end; 3,000 idle connections; 200 liveness requests.
 * All held for a few seconds, then closed; prints what the gateway did with them.
 */
export function gatewayFloodCommand(): string {
  const script = `
import net from "node:net";
const at = { host: "127.0.0.1", port: 18080 };
const held = [];
const stats = { posts: 0, postsRefused: 0, mibSent: 0, idle: 0, idleClosedByGateway: 0, liveness: 0, livenessRefused: 0 };
const open = (onData) => new Promise((resolve) => {
  const socket = net.connect(at, () => resolve(socket));
  socket.on("error", () => resolve(socket));
  if (onData) socket.on("data", onData);
  held.push(socket);
});
const chunk = Buffer.alloc(1 << 20, 97);
const posts = Array.from({ length: 64 }, async () => {
  const socket = await open((d) => { if (/^HTTP\\/1.1 (503|413)/.test(d.toString())) stats.postsRefused++; });
  stats.posts++;
  socket.write("POST /scripted/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: " + (32 * 1024 * 1024 - 1) + "\\r\\n\\r\\n{\\"messages\\":\\"");
  for (let i = 0; i < 30 && !socket.destroyed; i++) {
    stats.mibSent++;
    if (!socket.write(chunk)) await new Promise((r) => { const done = () => { socket.off("drain", done); socket.off("close", done); r(); }; socket.on("drain", done); socket.on("close", done); });
  }
});
const idle = Array.from({ length: 3000 }, async () => {
  const socket = await open();
  stats.idle++;
  socket.on("close", () => { if (!socket.closedHere) stats.idleClosedByGateway++; });
});
const liveness = Array.from({ length: 200 }, async () => {
  const socket = await open((d) => { if (/^HTTP\\/1.1 429/.test(d.toString())) stats.livenessRefused++; });
  stats.liveness++;
  socket.write("GET /__sandbox-run/alive HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n");
});
await Promise.race([Promise.all([...posts, ...idle, ...liveness]), new Promise((r) => setTimeout(r, 40000))]);
await new Promise((r) => setTimeout(r, 5000));
console.log("flood=" + JSON.stringify(stats));
for (const socket of held) { socket.closedHere = true; socket.destroy(); }
process.exit(0);`;
  return `cat > /tmp/flood.mjs <<'FLOOD_EOF'\n${script}\nFLOOD_EOF\nnode /tmp/flood.mjs`;
}
