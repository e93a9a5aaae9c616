// A relay as code in the sandbox could run it: it runs as the sandbox uid, beside everything the
// sandbox controls, so nothing stops it from answering the controller's `archive` command with
// any bytes at all. This one speaks the relay protocol (images/pi/relay.mjs) and answers each
// `archive` with the attack its root names (the last path component), e.g. "/attack/absolute".
// Plain JavaScript: it runs under the image's Node, copied into the container by the test.
import http2 from "node:http2";
import { Duplex } from "node:stream";

const config = JSON.parse(process.env.SANDBOX_RUN_RELAY);
process.stdin.on("end", () => process.exit(91));
const session = http2.connect("http://hostile-relay", {
  createConnection: () => Duplex.from({ readable: process.stdin, writable: process.stdout }),
  settings: { initialWindowSize: config.windowBytes },
});
session.on("error", () => process.exit(91));

function header(name, { size = 0, type = "0", mode = 0o644, linkname = "" } = {}) {
  const block = Buffer.alloc(512);
  block.write(name, 0, 100, "utf8");
  block.write(`${mode.toString(8).padStart(7, "0")}\0`, 100);
  block.write("0000000\0", 108);
  block.write("0000000\0", 116);
  if (size >= 8 * 1024 ** 3) {
    block[124] = 0x80;
    block.writeBigUInt64BE(BigInt(size), 128);
  } else block.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  block.write("00000000000\0", 136);
  block.write(type, 156);
  block.write(linkname, 157, 100, "utf8");
  block.write("ustar\0", 257);
  block.write("00", 263);
  block.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return block;
}

const file = (name, content, options = {}) => {
  const data = Buffer.from(content);
  const padding = Buffer.alloc((512 - (data.length % 512)) % 512);
  return [header(name, { ...options, size: data.length }), data, padding];
};
const ROOT = header("./", { type: "5", mode: 0o755 });
const END = Buffer.alloc(1024);

/** Each attack: a generator of archive chunks. */
const attacks = {
  *absolute() {
    yield ROOT;
    yield* file("/tmp/sandbox-run-pwned-absolute", "pwned");
    yield END;
  },
  *dotdot() {
    yield ROOT;
    yield* file("./../sandbox-run-pwned-dotdot", "pwned");
    yield END;
  },
  *"symlink-then-file"() {
    yield ROOT;
    yield header("./escape", { type: "2", linkname: "/tmp" });
    yield* file("./escape/sandbox-run-pwned-symlink", "pwned");
    yield END;
  },
  *"hard-link"() {
    yield ROOT;
    yield header("./passwd", { type: "1", linkname: "/etc/passwd" });
    yield END;
  },
  *"device-and-fifo"() {
    yield ROOT;
    yield header("./null", { type: "3" });
    yield header("./disk", { type: "4" });
    yield header("./fifo", { type: "6" });
    yield* file("./kept.txt", "an ordinary file\n");
    yield END;
  },
  *setuid() {
    yield ROOT;
    yield* file("./suid-sh", "#!/bin/sh\n", { mode: 0o6755 });
    yield END;
  },
  *"sparse-10g"() {
    yield ROOT;
    yield header("./sparse", { size: 10 * 1024 ** 3 });
    const zeros = Buffer.alloc(1024 * 1024);
    for (;;) yield zeros;
  },
  *million() {
    yield ROOT;
    const batch = [];
    for (let i = 0; i < 1_000_000; i++) {
      batch.push(header(`./f${i}`));
      if (batch.length === 512) yield Buffer.concat(batch.splice(0));
    }
    yield END;
  },
};

async function archive(control, command) {
  const name = command.root.slice(command.root.lastIndexOf("/") + 1);
  const stream = session.request({ ":method": "POST", ":path": `/archive/${command.id}` }, { endStream: false });
  let stopped = false;
  stream.on("error", () => (stopped = true));
  stream.on("close", () => (stopped = true));
  for (const chunk of attacks[name]()) {
    if (stopped) break;
    if (!stream.write(chunk)) await new Promise((resolve) => stream.once("drain", resolve).once("close", resolve));
  }
  if (!stopped) stream.end();
  control.write(`${JSON.stringify({ op: "archived", id: command.id, code: 0, signal: null, stderr: "" })}\n`);
}

const control = session.request({ ":method": "POST", ":path": "/control" }, { endStream: false });
control.setEncoding("utf8");
let pending = "";
control.on("data", (text) => {
  pending += text;
  for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
    const command = JSON.parse(pending.slice(0, nl));
    pending = pending.slice(nl + 1);
    if (command.op === "archive") void archive(control, command);
  }
});
control.write(`${JSON.stringify({ op: "ready" })}\n`);
