// In-container relay (copy mode): the sandbox's way to the host without a shared filesystem.
//
// The host controller starts this script with an exec, as the sandbox uid, once the container runs.
// The exec's stdin and stdout are one HTTP/2 session to the controller (this side is the client:
// it opens every stream). It
// 1. listens on the in-container unix sockets the launcher already uses (the model gateway's, the
//    egress proxy's) and carries each connection as one stream (`POST /connect/<name>`); the
//    controller hands the bytes to its gateway or proxy, and holds them until the workspace is
//    copied in, which is also what keeps the launcher from starting Pi earlier;
// 2. holds a control stream (`POST /control`): the controller's commands arrive as JSON lines in
//    the response, replies go back as JSON lines in the request. The one command, `archive`,
//    runs `tar -c` over a writable root and sends the archive as its own stream
//    (`POST /archive/<id>`), so reading the workspace back costs no second exec;
// 3. exits when its stdin ends (the controller died, or the link to it was lost): the listening
//    sockets close with it, the launcher's liveness connection breaks and the sandbox stops.
//
// Everything here runs as the sandbox uid, next to code the sandbox controls: the controller treats
// every byte of this session as hostile input and never relies on this script being what it is.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { Duplex, PassThrough, Readable } from "node:stream";

const EXIT_SETUP_FAILED = 90;
const EXIT_CONTROLLER_GONE = 91;
const TAR = "/usr/bin/tar";
/** The longest command line the controller may send; anything longer is a broken session. */
const MAX_COMMAND_BYTES = 64 * 1024;
const STDERR_TAIL_BYTES = 4096;

function fail(code, message) {
  process.stderr.write(`sandbox-run relay: ${message}\n`);
  process.exit(code);
}

const raw = process.env.SANDBOX_RUN_RELAY;
delete process.env.SANDBOX_RUN_RELAY;
if (!raw) fail(EXIT_SETUP_FAILED, "SANDBOX_RUN_RELAY is not set; the relay is started by sandbox-run");
const config = JSON.parse(raw);

// The controller going away ends stdin: nothing in here may outlive it.
process.stdin.on("end", () => fail(EXIT_CONTROLLER_GONE, "the host controller went away; stopping"));
process.stdin.on("close", () => fail(EXIT_CONTROLLER_GONE, "the host controller went away; stopping"));
process.stdout.on("error", () => fail(EXIT_CONTROLLER_GONE, "the link to the host controller broke"));

// Node's HTTP/2 over pipes pays per chunk: hand it whatever arrived meanwhile as one chunk (read()
// returns all that is buffered), with the 1 MiB buffer as the backpressure bound (see
// src/relay/coalesce.ts).
function coalesced(source) {
  return Readable.from(source.pipe(new PassThrough({ highWaterMark: 1024 * 1024 })), { objectMode: false });
}

const transport = Duplex.from({ readable: coalesced(process.stdin), writable: process.stdout });
const session = http2.connect("http://sandbox-run-relay", {
  createConnection: () => transport,
  // Large windows: a workspace archive is the bulk of this session's traffic.
  settings: { enablePush: false, initialWindowSize: config.windowBytes },
  maxSessionMemory: config.maxSessionMemoryMb,
});
session.on("error", (error) => fail(EXIT_CONTROLLER_GONE, `the session with the controller failed: ${error.message}`));
session.on("close", () => fail(EXIT_CONTROLLER_GONE, "the session with the controller closed"));
session.on("connect", () => session.setLocalWindowSize(config.windowBytes));

/** Listens under a temporary name, then renames: the socket appears only once it accepts. */
function listen(name, socketPath) {
  const temporary = `${socketPath}.${process.pid}`;
  fs.rmSync(socketPath, { force: true });
  fs.rmSync(temporary, { force: true });
  const server = net.createServer((client) => bridge(name, client));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(temporary, () => {
      fs.renameSync(temporary, socketPath);
      resolve();
    });
  });
}

/** One connection to an in-container socket becomes one stream to the controller. */
function bridge(name, client) {
  const stream = session.request({ ":method": "POST", ":path": `/connect/${name}` }, { endStream: false });
  const close = () => {
    client.destroy();
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
  };
  client.on("error", close);
  stream.on("error", close);
  client.on("close", close);
  stream.on("close", close);
  client.pipe(stream);
  stream.pipe(client);
}

/** `tar -c` of one root, streamed as `/archive/<id>`; the exit status follows on the control stream. */
function archive(control, command) {
  const stream = session.request({ ":method": "POST", ":path": `/archive/${command.id}` }, { endStream: false });
  const tar = spawn(TAR, ["-c", "-f", "-", "-C", command.root, "--hard-dereference", "--no-xattrs", "--no-acls", "."], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  tar.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
  });
  // The controller resets the stream when it has read enough (or too much): stop reading.
  stream.on("error", () => tar.kill("SIGKILL"));
  stream.on("close", () => tar.kill("SIGKILL"));
  coalesced(tar.stdout).pipe(stream);
  tar.on("error", (error) => reply(control, { op: "archived", id: command.id, code: null, error: error.message }));
  tar.on("close", (code, signal) => reply(control, { op: "archived", id: command.id, code, signal, stderr }));
}

function reply(control, message) {
  control.write(`${JSON.stringify(message)}\n`);
}

function openControl() {
  const control = session.request({ ":method": "POST", ":path": "/control" }, { endStream: false });
  control.on("error", (error) => fail(EXIT_CONTROLLER_GONE, `the control stream failed: ${error.message}`));
  control.on("close", () => fail(EXIT_CONTROLLER_GONE, "the control stream closed"));
  let pending = "";
  control.setEncoding("utf8");
  control.on("data", (text) => {
    pending += text;
    if (pending.length > MAX_COMMAND_BYTES && !pending.includes("\n")) fail(EXIT_SETUP_FAILED, "command too long");
    let newline = pending.indexOf("\n");
    while (newline >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      const command = JSON.parse(line);
      if (command.op === "archive") archive(control, command);
      newline = pending.indexOf("\n");
    }
  });
  return control;
}

try {
  fs.mkdirSync(config.socketDir, { recursive: true, mode: 0o700 });
  const control = openControl();
  await Promise.all(config.sockets.map((s) => listen(s.name, s.path)));
  reply(control, { op: "ready" });
} catch (error) {
  fail(EXIT_SETUP_FAILED, `could not start: ${error?.message ?? error}`);
}
