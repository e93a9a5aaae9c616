// A real OpenSSH server for the ssh:// engine tests, on this host's loopback, with its own host key
// and one authorized client key, both made with ssh-keygen when it starts. Only stream-local
// forwarding is allowed (what sandbox-run uses to reach an engine's socket). A counting forwarder
// in front of it tells how many TCP connections a client opened.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export interface SshServer {
  /** The counting forwarder's port: connect here. */
  port: number;
  user: string;
  /** "ssh-ed25519 AAAA..." of the server. */
  hostKey: string;
  clientKeyFile: string;
  dir: string;
  /** TCP connections clients opened so far. */
  connections(): number;
  stop(): Promise<void>;
}

export function sshServerAvailable(): boolean {
  return process.getuid?.() === 0 && fs.existsSync("/usr/sbin/sshd") && fs.existsSync("/usr/bin/ssh-keygen");
}

export async function startSshServer(): Promise<SshServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-sshd-"));
  const keygen = (file: string) =>
    execFileSync("ssh-keygen", [
      "-q",
      "-t",
      "ed25519",
      "-N",
      "",
      "-C",
      "sandbox-run-tests",
      "-f",
      path.join(dir, file),
    ]);
  keygen("host_ed25519");
  keygen("client_ed25519");
  fs.copyFileSync(path.join(dir, "client_ed25519.pub"), path.join(dir, "authorized_keys"));
  const sshdPort = await freePort();
  fs.writeFileSync(
    path.join(dir, "sshd_config"),
    [
      `Port ${sshdPort}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${dir}/host_ed25519`,
      `PidFile ${dir}/sshd.pid`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UsePAM no",
      "PermitRootLogin prohibit-password",
      "AllowStreamLocalForwarding yes",
      // OpenSSH 9.2 refuses stream-local forwards when TCP forwarding is off altogether.
      "AllowTcpForwarding local",
      "X11Forwarding no",
      "StrictModes no",
      "",
    ].join("\n"),
  );
  fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const sshd: ChildProcess = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", path.join(dir, "sshd_config")], {
    stdio: ["ignore", "ignore", fs.openSync(path.join(dir, "sshd.log"), "a")],
  });
  await waitForPort(sshdPort);
  let connections = 0;
  const forwarder = net.createServer({ allowHalfOpen: true }, (client) => {
    connections++;
    // Sends at once (no Nagle), as sshd's own socket does: a forwarder that batched small writes
    // would add ~40 ms to exchanges a real link does not.
    client.setNoDelay(true);
    const upstream = net.connect({ port: sshdPort, host: "127.0.0.1", allowHalfOpen: true, noDelay: true });
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve) => forwarder.listen(0, "127.0.0.1", resolve));
  const hostKey = fs.readFileSync(path.join(dir, "host_ed25519.pub"), "utf8").trim();
  return {
    port: (forwarder.address() as net.AddressInfo).port,
    user: os.userInfo().username,
    hostKey,
    clientKeyFile: path.join(dir, "client_ed25519"),
    dir,
    connections: () => connections,
    stop: async () => {
      await new Promise<void>((resolve) => forwarder.close(() => resolve()));
      sshd.kill("SIGTERM");
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sshd did not listen on ${port}`);
}
