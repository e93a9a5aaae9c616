// The two ends of a unix socket connection in `dir`: the controller's (what an exec's stdio is in a
// real run) and the relay's. The relay tests drive the host's relay session and a relay over it.
import net from "node:net";
import path from "node:path";

export async function socketPair(dir: string): Promise<{ hostEnd: net.Socket; relayEnd: net.Socket }> {
  const listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(path.join(dir, "bridge.sock"), resolve));
  const accepted = new Promise<net.Socket>((resolve) => listener.once("connection", resolve));
  const hostEnd = net.connect(path.join(dir, "bridge.sock"));
  await new Promise((resolve) => hostEnd.once("connect", resolve));
  const relayEnd = await accepted;
  listener.close();
  return { hostEnd, relayEnd };
}
