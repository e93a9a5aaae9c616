// The host side of a bind-mode run against a folder of hard links (issue 17 part 6, R12): the
// controller's peak RSS and the time to judge, trim and hand back N links with 250-byte names in
// one folder, made by two processes as the sandbox's uid while the host side watches.
//   node --import tsx bench/hard-links.ts [--links=1000000] [--max-entries=200000]
// Runs as root (lends the tree, mounts a tmpfs where links count against nr_inodes). The host side
// runs in a process of its own (tests/support/workspace-controller.ts), so its RSS is its own.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { SANDBOX_UID } from "../src/sandbox-contract.js";

const arg = (name: string, fallback: number) => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.slice(name.length + 3)) : fallback;
};
const links = arg("links", 1_000_000);
const maxEntries = arg("max-entries", 200_000);

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-bench-links-"));
fs.chmodSync(scratch, 0o755); // the sandbox's uid reaches the workspace below it
const ws = path.join(scratch, "ws");
fs.mkdirSync(ws);
const inodes = links + 100_000;
const mounted =
  spawnSync("mount", ["-t", "tmpfs", "-o", `size=1g,nr_inodes=${inodes},mode=0755`, "tmpfs", ws]).status === 0;
let host: ReturnType<typeof spawn> | undefined;
try {
  fs.writeFileSync(path.join(ws, "keep.txt"), "keep\n");
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;
  const script = fileURLToPath(new URL("../tests/support/workspace-controller.ts", import.meta.url));
  const spec = { root: ws, stateDir: path.join(scratch, "state"), maxEntries, diskMb: 4096 };
  const child = spawn(process.execPath, ["--import", tsx, script, JSON.stringify(spec)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  host = child;
  let out = "";
  const line = (kind: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const look = () => {
        for (const l of out.split("\n")) if (l.startsWith(`{"kind":"${kind}"`)) return resolve(JSON.parse(l));
      };
      child.stdout.on("data", (c: Buffer) => {
        out += c.toString();
        look();
      });
      child.on("close", (code, signal) => reject(new Error(`the host side ended (${code ?? signal})`)));
      look();
    });
  const ready = line("ready");
  const done = line("done");
  await ready;
  const made = Date.now();
  const linker = (from: number, to: number) =>
    `const fs=require("fs");const d=${JSON.stringify(path.join(ws, "big"))};fs.mkdirSync(d,{recursive:true});let t;` +
    `for(let i=${from};i<${to};i++){if((i-${from})%60000===0){t=${JSON.stringify(ws)}+"/target-"+i;fs.writeFileSync(t,"x")}` +
    `fs.linkSync(t,d+"/"+"l".repeat(240)+String(i).padStart(10,"0"))}`;
  const half = Math.floor(links / 2);
  const codes = await Promise.all(
    [
      [0, half],
      [half, links],
    ].map(
      ([from, to]) =>
        new Promise<number | null>((resolve) =>
          spawn(
            "setpriv",
            [
              `--reuid=${SANDBOX_UID}`,
              `--regid=${SANDBOX_UID}`,
              "--clear-groups",
              process.execPath,
              "-e",
              linker(from!, to!),
            ],
            {
              stdio: "ignore",
            },
          ).on("close", resolve),
        ),
    ),
  );
  if (codes.some((c) => c !== 0)) throw new Error(`making the links failed (exit codes ${codes.join(", ")})`);
  const makeMs = Date.now() - made;
  child.stdin.write("finish\n");
  const report = (await done) as {
    liveTrip?: { limit: string };
    overfull: unknown[];
    finishMs: number;
    maxRssMb: number;
    peaks: Record<string, number>;
  };
  console.log(
    JSON.stringify(
      {
        links,
        maxEntries,
        tmpfs: mounted,
        makeSeconds: Math.round(makeMs / 100) / 10,
        liveTrip: report.liveTrip?.limit ?? null,
        overfull: report.overfull,
        finishSeconds: Math.round(report.finishMs / 100) / 10,
        hostSideMaxRssMb: Math.round(report.maxRssMb),
        peaksMb: report.peaks,
      },
      null,
      2,
    ),
  );
} finally {
  if (host && host.exitCode === null) host.kill();
  if (mounted) spawnSync("umount", [ws]);
  spawnSync("rm", ["-rf", scratch]);
}
