// In-container relay (copy mode): the sandbox's way to the host without a shared filesystem.
//
// One HTTP/2 session to the host controller, over a byte stream the controller reaches with an
// exec: normally the launcher runs this module in its own process and the exec is a tiny bridge
// (bash and two cats) between its stdio and a loopback port the launcher listens on, so no second
// Node starts on the run's critical path; `node relay.mjs` also runs it on the exec's stdio. This
// side is the client: it opens every stream. It
// 1. listens on the in-container unix sockets the launcher already uses (the model gateway's, the
//    egress proxy's) and carries each connection as one stream (`POST /connect/<name>`, at most
//    MAX_OPEN_CONNECTIONS at once, the others waiting their turn); the
//    controller hands the bytes to its gateway or proxy, and holds them until the workspace is
//    copied in, which is also what keeps the launcher from starting Pi earlier;
// 2. holds a control stream (`POST /control`): the controller's commands arrive as JSON lines in
//    the response, replies go back as JSON lines in the request: `mark` (the copy-in is done) and
//    `archive` (the tree of a writable root, sent as its own stream, `POST /archive/<id>`);
// 3. ends when the session does (the controller died, or the link to it was lost): the listening
//    sockets close with it, the launcher's liveness connection breaks and the sandbox stops.
//
// Everything here runs as the sandbox uid, next to code the sandbox controls: the controller treats
// every byte of this session as hostile input and never relies on this script being what it is.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { Duplex, PassThrough, Readable } from "node:stream";
import { fileURLToPath } from "node:url";

const EXIT_SETUP_FAILED = 90;
const EXIT_CONTROLLER_GONE = 91;
/** The longest command line the controller may send (a claim carries the run's schema and env). */
const MAX_COMMAND_BYTES = 8 * 1024 * 1024;
const STDERR_TAIL_BYTES = 4096;
/** Free space under which a watched root counts as full (relay-protocol.ts FULL_FREE_BYTES). */
const FULL_FREE_BYTES = 1048576;
const TAR = "/usr/bin/tar";
/** How long a stream may stay open after its in-container connection closed (see bridge()). */
const BRIDGE_CLOSE_GRACE_MS = 5_000;
/**
 * The stream resets this side sends at once, then per second (see resetStream()): under nghttp2's
 * rapid-reset guard on the controller (1,000 at once, then 33 a second), which ends the whole
 * session past it.
 */
const RESET_BURST = 800;
const RESETS_PER_SECOND = 25;
/**
 * Connection streams open at once; more connections wait here, unread (see bridge()). Under the
 * controller's 128 (relay-protocol.ts maxConcurrentStreams), with room for the control, claim,
 * archive and extract streams.
 */
const MAX_OPEN_CONNECTIONS = 96;
/** Connections waiting for a stream; past this, a new one is closed at once. */
const MAX_WAITING_CONNECTIONS = 16_384;

let config;
let session;
/** The control stream, once the session is up (the controller's bridge may connect after the launcher asks). */
let resolveControl;
const controlStream = new Promise((resolve) => (resolveControl = resolve));
/** Called once when the relay must stop: (exit code, why). */
let fail;
/** A warm sandbox's launcher: called with the claimed run's configuration once its trees are in. */
let onClaim;
/** A warm sandbox's launcher: called with the claimed run's configuration as soon as the claim is read. */
let onClaimRead;

/**
 * Runs the relay over `transport` (a socket, or a Duplex of pipes). `onEnd(code, message)` is
 * called once the session is over or cannot start; the caller stops the process. `hooks.onClaim`
 * (a warm sandbox): called once with the run's configuration when a claim's trees are in;
 * `hooks.onClaimRead` before that, as soon as the claim itself is read (its trees may take long).
 */
export async function runRelay(relayConfig, transport, onEnd, hooks = {}) {
  config = relayConfig;
  onClaim = hooks.onClaim;
  onClaimRead = hooks.onClaimRead;
  let ended = false;
  fail = (code, message) => {
    if (ended) return;
    ended = true;
    onEnd(code, message);
  };
  session = http2.connect("http://sandbox-run-relay", {
    createConnection: () => transport,
    // Large windows: a workspace archive is the bulk of this session's traffic.
    settings: { enablePush: false, initialWindowSize: config.windowBytes },
    maxSessionMemory: config.maxSessionMemoryMb,
  });
  session.on("error", (error) =>
    fail(EXIT_CONTROLLER_GONE, `the session with the controller failed: ${error.message}`),
  );
  session.on("close", () => fail(EXIT_CONTROLLER_GONE, "the session with the controller closed"));
  session.on("connect", () => session.setLocalWindowSize(config.windowBytes));
  try {
    fs.mkdirSync(config.socketDir, { recursive: true, mode: 0o700 });
    const control = openControl();
    resolveControl(control);
    if (config.claim) void awaitClaim(control);
    await Promise.all(config.sockets.map((s) => listen(s.name, s.path)));
    reply(control, { op: "ready" });
  } catch (error) {
    fail(EXIT_SETUP_FAILED, `could not start: ${error?.message ?? error}`);
  }
}

// Node's HTTP/2 over pipes pays per chunk: hand it whatever arrived meanwhile as one chunk (read()
// returns all that is buffered), with the 1 MiB buffer as the backpressure bound (see
// src/relay/coalesce.ts).
function coalesced(source) {
  return Readable.from(source.pipe(new PassThrough({ highWaterMark: 1024 * 1024 })), { objectMode: false });
}

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

/**
 * One connection to an in-container socket becomes one stream to the controller. A connection that
 * closes normally ends its stream (END_STREAM), and the stream closes once the controller's side has
 * ended too; only an error, or a controller side still open after a grace period, resets it. Every
 * reset counts against nghttp2's rapid-reset guard on the controller (about 1,000 in a burst, then
 * 33 a second), which ends the whole session past it: a sandbox making many short connections (a
 * test suite, a package manager, a flood of refused requests) would lose its relay, and its run.
 * So resets are also paced below that guard (resetStream()).
 */
function bridge(name, client) {
  // The session is over (the relay is stopping): nothing can carry this connection.
  if (session.closed || session.destroyed) return void client.destroy();
  if (openConnections >= MAX_OPEN_CONNECTIONS) return void waitForStream(name, client);
  openConnections++;
  const stream = session.request({ ":method": "POST", ":path": `/connect/${name}` }, { endStream: false });
  const reset = () => {
    client.destroy();
    resetStream(stream);
  };
  client.on("error", reset);
  stream.on("error", reset);
  stream.on("close", () => {
    client.destroy();
    openConnections--;
    bridgeNextWaiting();
  });
  client.on("close", () => {
    if (stream.destroyed) return;
    // Whatever the controller still sends has nowhere to go: read and drop it until its END_STREAM.
    stream.resume();
    if (!stream.writableEnded) stream.end();
    setTimeout(reset, config.bridgeCloseGraceMs ?? BRIDGE_CLOSE_GRACE_MS).unref();
  });
  client.pipe(stream);
  stream.pipe(client);
}

// The relay never asks for more streams than the controller takes. Past the controller's limit,
// nghttp2 here would queue the requests itself, and the controller's Node, whose table of streams
// frees a closed stream later than this side counts it closed, refuses some of them: under a flood
// of connections (a hostile step, or a test suite's) the session then ended on a protocol error
// now and then, and the run with it. A connection waiting here is paused (its bytes wait, past a
// socket buffer's worth, in the kernel) and is bridged when a stream closes; one that closes while
// it waits is dropped.
let openConnections = 0;
/** Waiting connections in arrival order (a Set keeps it, and drops one that closes meanwhile). */
const waitingConnections = new Set();

function waitForStream(name, client) {
  if (waitingConnections.size >= MAX_WAITING_CONNECTIONS) return void client.destroy();
  client.pause();
  const waiting = { name, client, gone: () => waitingConnections.delete(waiting) };
  client.on("error", waiting.gone);
  client.on("close", waiting.gone);
  waitingConnections.add(waiting);
}

function bridgeNextWaiting() {
  for (const waiting of waitingConnections) {
    if (openConnections >= MAX_OPEN_CONNECTIONS) return;
    waitingConnections.delete(waiting);
    waiting.client.off("error", waiting.gone);
    waiting.client.off("close", waiting.gone);
    if (waiting.client.destroyed) continue;
    bridge(waiting.name, waiting.client);
  }
}

// Resets go out at most RESET_BURST at once and RESETS_PER_SECOND after that; the others wait their
// turn, their data read and dropped meanwhile, so however a flood of connections in the sandbox ends
// (errors, or controller sides that stay open past the grace under load), it never trips the
// controller's guard, which would end the session and the run. A stream the controller closes
// meanwhile needs no reset.
let resetTokens = RESET_BURST;
let tokensAt = performance.now();
const waitingResets = [];
let resetTimer;

function resetStream(stream) {
  if (stream.destroyed) return;
  if (waitingResets.length === 0 && takeResetToken()) return void stream.close(http2.constants.NGHTTP2_CANCEL);
  stream.resume();
  waitingResets.push(stream);
  resetTimer ??= setInterval(() => {
    while (waitingResets.length > 0 && (waitingResets[0].destroyed || takeResetToken())) {
      const waiting = waitingResets.shift();
      if (!waiting.destroyed) waiting.close(http2.constants.NGHTTP2_CANCEL);
    }
    if (waitingResets.length === 0) {
      clearInterval(resetTimer);
      resetTimer = undefined;
    }
  }, 1000 / RESETS_PER_SECOND);
  resetTimer.unref();
}

function takeResetToken() {
  const now = performance.now();
  resetTokens = Math.min(RESET_BURST, resetTokens + ((now - tokensAt) / 1000) * RESETS_PER_SECOND);
  tokensAt = now;
  if (resetTokens < 1) return false;
  resetTokens -= 1;
  return true;
}

// ---- archive: the tree of one root as a tar, written here (no GNU tar) so that a file whose
// status has not changed since the copy-in (ctime before the mark; user space cannot set a
// ctime back) goes as a header only, marked SANDBOXRUN.unchanged. Believing that claim can only
// make the host keep its own copy of a file, so it is safe to take from the sandbox.

let markCtimeMs = Number.POSITIVE_INFINITY;

/** Every root a copy-in was extracted into, and the files they held at the mark. */
const extractedRoots = new Set();
let filesAtMark = new Set();

function mark() {
  const file = `${config.socketDir}/.copied-in`;
  fs.writeFileSync(file, "");
  // File times come from a coarse clock (a tick of a few ms): files extracted in the mark's tick
  // shared its ctime, came back whole as "maybe changed", and the host compared them with the live
  // host files (a file the user deleted meanwhile refused the whole apply, 7 warm runs in 10;
  // review, session 29). So the mark is made again until its ctime is past the extraction's.
  const extracted = fs.statSync(file).ctimeMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 100 && fs.statSync(file).ctimeMs <= extracted; i++) {
    Atomics.wait(pause, 0, 0, 1);
    fs.rmSync(file);
    fs.writeFileSync(file, "");
  }
  // Nothing counts as unchanged until the mark exists.
  markCtimeMs = fs.statSync(file).ctimeMs;
  // A renamed directory keeps its files' ctimes: only a path that held a file at the mark may be
  // claimed unchanged (the host refuses a claim for a path it never sent).
  filesAtMark = filesUnder(extractedRoots);
}

/**
 * Copy mode's disk limit is the size of each writable tree's tmpfs: a root whose filesystem fills
 * up is reported once, so the host can stop the run over its disk limit (not just leave ENOSPC).
 */
function watchFull(control, roots) {
  const watched = new Set(roots);
  if (watched.size === 0) return;
  const timer = setInterval(() => {
    for (const root of watched) {
      let free;
      try {
        const s = fs.statfsSync(root);
        free = s.bavail * s.bsize;
      } catch {
        continue;
      }
      if (free < FULL_FREE_BYTES) {
        watched.delete(root);
        reply(control, { op: "full", root });
      }
    }
    if (watched.size === 0) clearInterval(timer);
  }, 250);
  timer.unref();
}

function filesUnder(roots) {
  const files = new Set();
  const stack = [...roots];
  while (stack.length > 0) {
    const dir = stack.pop();
    let entries;
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const full = `${dir}/${entry.name}`;
      if (entry.isDirectory()) stack.push(full);
      else if (entry.isFile()) files.add(full);
    }
  }
  return files;
}

function octal(value, digits) {
  return `${value.toString(8).padStart(digits, "0")}\0`;
}

function paxRecord(key, value) {
  const rest = ` ${key}=${value}\n`;
  const restBytes = Buffer.byteLength(rest);
  let length = restBytes + 1;
  while (String(length).length + restBytes !== length) length = String(length).length + restBytes;
  return `${length}${rest}`;
}

function ustar(name, type, mode, size, mtimeMs, linkname) {
  const block = Buffer.alloc(512);
  block.write(name, 0, 100, "ascii");
  block.write(octal(mode & 0o7777, 7), 100);
  block.write(octal(0, 7), 108);
  block.write(octal(0, 7), 116);
  block.write(octal(size, 11), 124);
  block.write(octal(Math.max(0, Math.floor(mtimeMs / 1000)), 11), 136);
  block.write(type, 156);
  block.write(linkname, 157, 100, "ascii");
  block.write("ustar\0", 257);
  block.write("00", 263);
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${octal(sum, 6)} `, 148);
  return block;
}

const fitsUstar = (text) => text.length <= 100 && /^[\x20-\x7e]*$/.test(text);
const padding = (size) => Buffer.alloc((512 - (size % 512)) % 512);

/** The header block(s) of one entry, with a pax header for what ustar cannot hold. */
function header(name, type, stat, { size = 0, linkname = "", pax = {} } = {}) {
  const records = { ...pax };
  if (!fitsUstar(name)) records.path = name;
  if (!fitsUstar(linkname)) records.linkpath = linkname;
  if (size >= 8 * 1024 ** 3) records.size = String(size);
  const plain = (text) => text.replace(/[^\x20-\x7e]/g, "_").slice(0, 100);
  const block = ustar(plain(name), type, stat.mode, size >= 8 * 1024 ** 3 ? 0 : size, stat.mtimeMs, plain(linkname));
  if (Object.keys(records).length === 0) return [block];
  const body = Buffer.from(
    Object.entries(records)
      .map(([k, v]) => paxRecord(k, v))
      .join(""),
    "utf8",
  );
  return [ustar("././@PaxHeader", "x", 0o644, body.length, stat.mtimeMs, ""), body, padding(body.length), block];
}

/** Writes buffers to `stream` in chunks of about 1 MiB, waiting when it is full. */
function archiveWriter(stream) {
  let parts = [];
  let size = 0;
  let closed = false;
  stream.on("close", () => (closed = true));
  const flush = async () => {
    if (size === 0 || closed) return;
    const chunk = Buffer.concat(parts, size);
    parts = [];
    size = 0;
    if (!stream.write(chunk)) await new Promise((resolve) => stream.once("drain", resolve).once("close", resolve));
  };
  return {
    get closed() {
      return closed;
    },
    async write(buffers) {
      for (const b of buffers) {
        parts.push(b);
        size += b.length;
      }
      if (size >= 1024 * 1024) await flush();
    },
    async end() {
      await flush();
      if (!closed) stream.end();
    },
  };
}

/** Depth first, pre-order, names sorted: what `tar -c -C root .` lists, minus sockets. */
async function writeTree(out, root, problems) {
  const stack = [""];
  while (stack.length > 0 && !out.closed) {
    const rel = stack.pop();
    const file = rel ? `${root}/${rel}` : root;
    const name = rel ? `./${rel}` : ".";
    let stat;
    try {
      stat = fs.lstatSync(file);
    } catch (error) {
      problems.errors.push(`${name}: ${error.code}`);
      continue;
    }
    if (stat.isDirectory()) {
      await out.write(header(`${name}/`, "5", stat));
      let raw;
      try {
        raw = fs.readdirSync(file, { encoding: "buffer" });
      } catch (error) {
        problems.errors.push(`${name}: Cannot open: ${error.code}`);
        continue;
      }
      const names = [];
      for (const bytes of raw) {
        const text = bytes.toString("utf8");
        if (Buffer.from(text, "utf8").equals(bytes)) names.push(text);
        else await writeUndecodable(out, file, name, bytes);
      }
      names.sort();
      for (let i = names.length - 1; i >= 0; i--) stack.push(rel ? `${rel}/${names[i]}` : names[i]);
    } else if (stat.isSymbolicLink()) {
      await out.write(header(name, "2", stat, { linkname: fs.readlinkSync(file) }));
    } else if (stat.isFile()) {
      if (stat.ctimeMs < markCtimeMs && filesAtMark.has(file))
        await out.write(header(name, "0", stat, { pax: { "SANDBOXRUN.unchanged": "1" } }));
      else await writeFile(out, file, name, stat, problems);
    } else if (stat.isFIFO()) await out.write(header(name, "6", stat));
    else if (stat.isCharacterDevice()) await out.write(header(name, "3", stat));
    else if (stat.isBlockDevice()) await out.write(header(name, "4", stat));
    // sockets: not carried, as GNU tar does
  }
}

/**
 * A name that is not UTF-8 (a tool's cache file, a test fixture): sent as its bytes, without content
 * and without what lies below it, for the host to leave out and name. As a string it would not
 * lstat (Node would ask for U+FFFD in its place) and would fail the whole copy-out (review, session 29).
 */
async function writeUndecodable(out, dir, dirName, bytes) {
  let stat;
  try {
    stat = fs.lstatSync(Buffer.concat([Buffer.from(`${dir}/`), bytes]));
  } catch {
    return;
  }
  const type = stat.isDirectory() ? "5" : stat.isSymbolicLink() ? "2" : "0";
  const path = Buffer.concat([Buffer.from(`${dirName}/`), bytes]);
  const rest = Buffer.concat([Buffer.from(" path="), path, Buffer.from("\n")]);
  let length = rest.length + 1;
  while (String(length).length + rest.length !== length) length = String(length).length + rest.length;
  const body = Buffer.concat([Buffer.from(String(length)), rest]);
  const plain = path
    .toString("latin1")
    .replace(/[^\x20-\x7e]/g, "_")
    .slice(0, 100);
  await out.write([
    ustar("././@PaxHeader", "x", 0o644, body.length, stat.mtimeMs, ""),
    body,
    padding(body.length),
    ustar(plain, type, stat.mode, 0, stat.mtimeMs, type === "2" ? "_" : ""),
  ]);
}

async function writeFile(out, file, name, stat, problems) {
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (error) {
    problems.errors.push(`${name}: Cannot open: ${error.code === "EACCES" ? "Permission denied" : error.code}`);
    return;
  }
  try {
    await out.write(header(name, "0", stat, { size: stat.size }));
    for (let offset = 0; offset < stat.size && !out.closed; ) {
      const chunk = Buffer.allocUnsafe(Math.min(1024 * 1024, stat.size - offset));
      let read = fs.readSync(fd, chunk, 0, chunk.length, offset);
      // It shrank while read: the header promised stat.size bytes, so zeros make up the rest.
      if (read === 0) {
        chunk.fill(0);
        read = chunk.length;
        problems.changed = true;
      }
      offset += read;
      await out.write([read === chunk.length ? chunk : chunk.subarray(0, read)]);
    }
    await out.write([padding(stat.size)]);
  } finally {
    fs.closeSync(fd);
  }
}

/** The archive of one root, streamed as `/archive/<id>`; its status follows on the control stream. */
async function archive(control, command) {
  const stream = session.request({ ":method": "POST", ":path": `/archive/${command.id}` }, { endStream: false });
  stream.on("error", () => {});
  const out = archiveWriter(stream);
  const problems = { errors: [], changed: false };
  try {
    await writeTree(out, command.root, problems);
    await out.write([Buffer.alloc(1024)]);
    await out.end();
    // As GNU tar's: 0 fine, 1 a file changed while read, 2 something could not be read.
    const code = problems.errors.length > 0 ? 2 : problems.changed ? 1 : 0;
    const stderr = problems.errors.join("\n").slice(-STDERR_TAIL_BYTES);
    reply(control, { op: "archived", id: command.id, code, stderr });
  } catch (error) {
    stream.destroy();
    reply(control, { op: "archived", id: command.id, code: 2, stderr: String(error?.message ?? error) });
  }
}

/**
 * `tar -x` into one root of what the controller sends as `/extract/<id>`; the status follows on the
 * control stream. Resolves with tar's exit code (null when it could not run).
 */
function extract(control, command) {
  extractedRoots.add(command.root);
  const stream = session.request({ ":method": "POST", ":path": `/extract/${command.id}` }, { endStream: true });
  const tar = spawn(TAR, ["-x", "-f", "-", "-C", command.root, "--no-same-owner", "-p"], {
    stdio: ["pipe", "ignore", "pipe"],
  });
  let stderr = "";
  tar.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
  });
  stream.on("error", () => tar.kill("SIGKILL"));
  tar.stdin.on("error", () => {});
  stream.pipe(tar.stdin);
  return new Promise((resolve) => {
    tar.on("error", (error) => {
      reply(control, { op: "extracted", id: command.id, code: null, stderr: error.message });
      resolve(null);
    });
    tar.on("close", (code) => {
      reply(control, { op: "extracted", id: command.id, code, stderr });
      resolve(code);
    });
  });
}

/**
 * One tree of a warm sandbox's claim, unpacked here rather than by a `tar` started from this
 * process (which holds a loaded Pi: starting a process from it costs tens of milliseconds, more
 * under gVisor). The archive is the controller's own (src/workspace-transfer/pack-tree.ts:
 * directories, files and symlinks, ustar with pax records for long names), and nothing of the
 * sandbox has run in here yet; names are still checked (no absolute path, no `..`) and files
 * opened exclusively, without following links. Directories get their modes and times last, as
 * `tar -p` does. write(chunk) returns the bytes after the archive's end once it ended.
 */
function tarSink(root) {
  const dirs = [];
  let pending = Buffer.alloc(0);
  /** The entry whose content is being read: a file (fd) or a pax header's body. */
  let entry;
  let skip = 0;
  let pax = {};
  let zeroBlocks = 0;
  const pathOf = (name) => {
    const rel = name.replace(/^\.\/?/, "").replace(/\/+$/, "");
    if (rel.startsWith("/") || rel.split("/").includes("..")) throw new Error(`${name}: refused path`);
    return rel === "" ? root : `${root}/${rel}`;
  };
  const text = (header, start, length) => {
    const raw = header.subarray(start, start + length);
    const nul = raw.indexOf(0);
    return (nul >= 0 ? raw.subarray(0, nul) : raw).toString("utf8");
  };
  const octal = (header, start, length) => Number.parseInt(text(header, start, length).trim() || "0", 8);
  const closeFile = () => {
    fs.fchmodSync(entry.fd, entry.mode & 0o7777);
    fs.futimesSync(entry.fd, entry.mtime, entry.mtime);
    fs.closeSync(entry.fd);
    entry = undefined;
  };
  const onHeader = (header) => {
    const type = String.fromCharCode(header[156]);
    let size = octal(header, 124, 12);
    if (type === "x") {
      skip = (512 - (size % 512)) % 512;
      entry = { body: [], remaining: size };
      return;
    }
    const name = pax.path ?? text(header, 0, 100);
    const linkname = pax.linkpath ?? text(header, 157, 100);
    if (pax.size) size = Number(pax.size);
    pax = {};
    skip = (512 - (size % 512)) % 512;
    const mode = octal(header, 100, 8);
    const mtime = octal(header, 136, 12);
    const target = pathOf(name);
    if (type === "5") {
      if (target !== root) fs.mkdirSync(target, { mode: 0o700 });
      dirs.push({ target, mode, mtime });
    } else if (type === "2") {
      fs.symlinkSync(linkname, target);
      fs.lutimesSync(target, mtime, mtime);
    } else if (type === "0") {
      const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
      const fd = fs.openSync(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      entry = { fd, mode, mtime, remaining: size };
      if (size === 0) closeFile();
    } else throw new Error(`${name}: entry type ${type} is not one the controller sends`);
  };
  return {
    write(chunk) {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        if (entry) {
          if (pending.length === 0) return undefined;
          const part = pending.subarray(0, Math.min(entry.remaining, pending.length));
          pending = pending.subarray(part.length);
          entry.remaining -= part.length;
          if (entry.body) entry.body.push(part);
          else fs.writeSync(entry.fd, part);
          if (entry.remaining > 0) continue;
          if (!entry.body) closeFile();
          else {
            for (const record of Buffer.concat(entry.body).toString("utf8").split("\n")) {
              const match = /^\d+ ([^=]+)=(.*)$/s.exec(record);
              if (match) pax[match[1]] = match[2];
            }
            entry = undefined;
          }
        } else if (skip > 0) {
          const dropped = Math.min(skip, pending.length);
          pending = pending.subarray(dropped);
          skip -= dropped;
          if (skip > 0) return undefined;
        } else {
          if (pending.length < 512) return undefined;
          const header = pending.subarray(0, 512);
          pending = pending.subarray(512);
          if (header.every((byte) => byte === 0)) {
            // The end of the archive: two zero blocks.
            if (++zeroBlocks === 2) return pending;
          } else onHeader(header);
        }
      }
    },
    finish() {
      for (const dir of dirs.reverse()) {
        fs.chmodSync(dir.target, dir.mode & 0o7777);
        fs.utimesSync(dir.target, dir.mtime, dir.mtime);
      }
    },
    abandon() {
      if (entry?.fd !== undefined) fs.closeSync(entry.fd);
    },
  };
}

/**
 * A warm sandbox waits for its claim on a stream it opens at once (`POST /claim`): the controller
 * answers it only when a call claims the sandbox, with everything in one message: the claim as
 * JSON (`<length>\n<json>`: the run's configuration, its sockets, its trees' roots, the roots whose
 * filling up to report) and then each tree's tar, one after the other. Before that this relay
 * listens on no socket and holds no tree. Then: listen on the run's sockets, unpack the trees,
 * mark, answer `claimed`, and only then hand the run to the launcher, which starts Pi; a tree that
 * cannot be unpacked leaves Pi unstarted (the controller stops the sandbox).
 */
async function awaitClaim(control) {
  const stream = session.request({ ":method": "POST", ":path": "/claim" }, { endStream: true });
  stream.on("error", () => {});
  const chunks = stream[Symbol.asyncIterator]();
  let rest = Buffer.alloc(0);
  const more = async () => {
    const { value, done } = await chunks.next();
    if (done) throw new Error("the claim ended early");
    rest = rest.length === 0 ? value : Buffer.concat([rest, value]);
  };
  let claim;
  try {
    while (rest.indexOf(10) < 0) await more();
    const newline = rest.indexOf(10);
    const length = Number(rest.subarray(0, newline).toString("ascii"));
    if (!Number.isSafeInteger(length) || length > MAX_COMMAND_BYTES) throw new Error("the claim is too long");
    rest = rest.subarray(newline + 1);
    while (rest.length < length) await more();
    claim = JSON.parse(rest.subarray(0, length).toString("utf8"));
    rest = rest.subarray(length);
  } catch (error) {
    // The controller went away before it claimed the sandbox: it ends with the session.
    return void stream.destroy(error);
  }
  // From here on the sandbox is the run's: the launcher trades its idle deadline for the run's.
  onClaimRead?.(claim.run);
  const started = performance.now();
  const ms = {};
  const lap = (name) => (ms[name] = Math.round((performance.now() - started) * 10) / 10);
  const listening = Promise.all(claim.sockets.map((s) => listen(s.name, s.path))).then(
    () => lap("listening"),
    (error) => error,
  );
  const trees = [];
  for (const root of claim.trees) {
    extractedRoots.add(root);
    const sink = tarSink(root);
    try {
      let left = rest.length > 0 ? sink.write(rest) : undefined;
      while (left === undefined) {
        rest = Buffer.alloc(0);
        await more();
        left = sink.write(rest);
      }
      rest = left;
      sink.finish();
      trees.push({ code: 0, stderr: "" });
    } catch (error) {
      sink.abandon();
      trees.push({ code: 2, stderr: String(error?.message ?? error).slice(-STDERR_TAIL_BYTES) });
      stream.destroy();
      break;
    }
  }
  lap("unpacked");
  const listenFailure = await listening;
  if (listenFailure instanceof Error)
    process.stderr.write(`sandbox-run relay: cannot listen for the claimed run: ${listenFailure.message}\n`);
  const ok =
    !(listenFailure instanceof Error) && trees.length === claim.trees.length && trees.every((t) => t.code === 0);
  if (!ok) return reply(control, { op: "claimed", ok: false, trees });
  mark();
  watchFull(control, claim.watchFull ?? []);
  lap("marked");
  // Pi's start runs for a while before it yields: the answer goes out first.
  reply(control, { op: "claimed", ok: true, trees, ms }, () => setImmediate(() => onClaim?.(claim.run)));
}

/** A warm sandbox's launcher has Pi loaded: the controller may now offer it to a call. */
export function announceLoaded(ms) {
  void controlStream.then((control) => reply(control, { op: "loaded", ms }));
}

function reply(control, message, written) {
  control.write(`${JSON.stringify(message)}\n`, written);
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
      if (command.op === "archive") void archive(control, command);
      else if (command.op === "extract") void extract(control, command);
      else if (command.op === "ping") reply(control, { op: "pong", id: command.id });
      else if (command.op === "mark") {
        mark();
        reply(control, { op: "marked" });
        watchFull(control, command.watchFull ?? []);
      }
      newline = pending.indexOf("\n");
    }
  });
  return control;
}

// `node relay.mjs`: the exec's own stdio is the transport.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stop = (code, message) => {
    process.stderr.write(`sandbox-run relay: ${message}\n`);
    process.exit(code);
  };
  const raw = process.env.SANDBOX_RUN_RELAY;
  delete process.env.SANDBOX_RUN_RELAY;
  if (!raw) stop(EXIT_SETUP_FAILED, "SANDBOX_RUN_RELAY is not set; the relay is started by sandbox-run");
  // The controller going away ends stdin: nothing in here may outlive it.
  process.stdin.on("end", () => stop(EXIT_CONTROLLER_GONE, "the host controller went away; stopping"));
  process.stdout.on("error", () => stop(EXIT_CONTROLLER_GONE, "the link to the host controller broke"));
  const transport = Duplex.from({ readable: coalesced(process.stdin), writable: process.stdout });
  await runRelay(JSON.parse(raw), transport, stop);
}
